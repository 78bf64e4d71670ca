// The state workers and slow clients (issue 18, part 5): one client holds at
// most its share of the state workers (half of --state-workers), its further
// initial states wait behind its own; and a client that takes none of its
// initial state for --initial-state-stall-timeout (or less than
// --initial-state-min-rate of it) gets 410 Expired, and its
// worker and snapshot are given back.
//
// Two clients, from one test process: walwatch tells clients apart by the
// Unix socket peer's pid (SO_PEERCRED) and, over TCP, by the peer's address
// without its port. So the slow client here speaks TCP (--tcp-listen: every
// connection of it is "tcp:127.0.0.1"), and the other client is this
// process on the Unix socket ("pid:<this test>"). The slow client is a raw
// socket that sends its request and reads no more than the response header,
// with a small receive buffer so that its stream's queue fills.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model.h"
#include "tests/integration/support/watch_client.h"
#include "tests/support/metric_value.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::MetricValue;

constexpr char kWatchListPods[] =
    "/api/v1/pods?watch=1&sendInitialEvents=true&"
    "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

// A watch over TCP that reads its response header and nothing more.
class SlowTcpWatch {
 public:
  SlowTcpWatch(int port, const std::string& target) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // Before connect: the window walwatch may fill stays small.
    int rcvbuf = 4096;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd_);
      fd_ = -1;
      return;
    }
    const std::string request = "GET " + target +
                                " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    send(fd_, request.data(), request.size(), MSG_NOSIGNAL);
  }
  ~SlowTcpWatch() {
    if (fd_ >= 0) close(fd_);
  }
  SlowTcpWatch(const SlowTcpWatch&) = delete;
  SlowTcpWatch& operator=(const SlowTcpWatch&) = delete;

  bool connected() const { return fd_ >= 0; }

  // The response's status once its header has come (0 until then). Reads
  // only what is there now, and nothing once the header is complete.
  int PollStatus() {
    if (status_ != 0 || fd_ < 0) return status_;
    char buf[512];
    for (;;) {
      ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) break;
      head_.append(buf, n);
      if (head_.find("\r\n\r\n") != std::string::npos) {
        if (head_.rfind("HTTP/1.1 ", 0) == 0) {
          status_ = std::atoi(head_.c_str() + 9);
        } else {
          status_ = -1;
        }
        break;
      }
    }
    return status_;
  }

  // Reads up to `max` bytes into *raw, waiting at most 1 s for them.
  // Returns false at the end of the stream (or on an error).
  bool ReadSome(size_t max, std::string* raw) {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) return true;  // nothing yet
    std::string buf(max, '\0');
    ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) return false;
    raw->append(buf.data(), static_cast<size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
  std::string head_;
  int status_ = 0;
};

class StateShareTest : public WalwatchTest {
 protected:
  // Watches deployments from RV 0 on the Unix socket: every one of `names`
  // must come as ADDED, then a deployment added now must follow live.
  ::testing::AssertionResult ListThenWatch(const WalwatchProcess& ww,
                                           const std::set<std::string>& names,
                                           Clock::time_point deadline) {
    WatchClient watch;
    auto opened =
        watch.OpenState(ww.socket_path(),
                        WatchTarget("/apis/apps/v1/deployments", 0), deadline);
    if (!opened) return opened;
    if (watch.status() != 200) {
      return ::testing::AssertionFailure()
             << "HTTP " << watch.status() << ": " << watch.body();
    }
    std::set<std::string> missing = names;
    while (!missing.empty()) {
      WatchEvent e;
      auto next = watch.NextEvent(&e, deadline);
      if (!next) {
        return ::testing::AssertionFailure()
               << next.message() << "; " << missing.size()
               << " deployment(s) of the state still missing";
      }
      if (e.type != "ADDED") {
        return ::testing::AssertionFailure() << "got " << e.raw.substr(0, 300);
      }
      missing.erase(e.name());
    }
    const std::string live = "live-" + std::to_string(++live_);
    InsertRow(db(), Deployment("c1", "share", live));
    for (;;) {
      WatchEvent e;
      auto next = watch.NextEvent(&e, deadline);
      if (!next) return next;
      if (e.type == "ADDED" && e.name() == live) break;
    }
    return ::testing::AssertionSuccess();
  }

  // An APIServer's own SQL list: its snapshot handed off.
  ::testing::AssertionResult Handoff(const WalwatchProcess& ww,
                                     Clock::time_point deadline) {
    PgConnection conn = Connect();
    const std::string snapshot =
        conn.QueryValue("SELECT pg_current_snapshot()::text");
    const std::string insert_lsn =
        conn.QueryValue("SELECT pg_current_wal_insert_lsn()::text");
    uint64_t rv = 0;
    int status = 0;
    std::string body;
    auto r = GetRvEndpoint(ww.socket_path(),
                           HandoffTarget(snapshot, insert_lsn), &rv, &status,
                           &body, deadline);
    if (!r) return r << " (HTTP " << status << " " << body << ")";
    if (rv == 0) return ::testing::AssertionFailure() << "handoff RV 0";
    return ::testing::AssertionSuccess();
  }

  std::optional<double> Metric(int port, const std::string& name) {
    return MetricValue(ScrapeMetrics(port, In(seconds(10))), name);
  }

  int live_ = 0;
};

// Fails without the share: the slow client's two streams take both state
// workers, and the other client's initial state waits for one until a slow
// connection is dropped (30 s of undrained write) or for its 504 (60 s),
// past the 20 s deadline here.
TEST_F(StateShareTest, AClientWithSlowStatesLeavesOtherClientsTheirShare) {
  // ~26 MB of pods: more than a TCP connection's buffers (a 4 KB window,
  // walwatch's send buffer of up to 4 MB) and the 4 MiB queue hold.
  InsertBulkPods(db(), 12000);
  std::set<std::string> names;
  for (int i = 0; i < 3; ++i) {
    names.insert("d" + std::to_string(i));
    InsertRow(db(), Deployment("c1", "share", "d" + std::to_string(i)));
  }
  names.insert("seed-deploy");
  const int port = FreeLoopbackPort();
  const int metrics_port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  ASSERT_NE(metrics_port, 0);
  WalwatchOptions o = DefaultOptions();
  o.tcp_listen = "127.0.0.1:" + std::to_string(port);
  o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port);
  // No stall bound: this test is about the share alone.
  o.extra_args = {"--state-workers", "2", "--initial-state-stall-timeout",
                  "0"};
  WalwatchProcess* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);

  // The slow client asks for as many initial states as there are workers.
  auto first = std::make_unique<SlowTcpWatch>(port, kWatchListPods);
  auto second = std::make_unique<SlowTcpWatch>(port, kWatchListPods);
  ASSERT_TRUE(first->connected() && second->connected());
  // Both reached walwatch: one streams (200), and the other streams as
  // well (no share) or waits behind it (queued).
  auto deadline = In(seconds(60));
  std::optional<double> queued;
  for (;;) {
    int a = first->PollStatus(), b = second->PollStatus();
    queued = Metric(metrics_port, "walwatch_state_reads_queued");
    if ((a == 200 || b == 200) && ((a == 200 && b == 200) || queued >= 1.0)) {
      break;
    }
    ASSERT_TRUE(Clock::now() < deadline)
        << "slow streams: HTTP " << a << " and " << b << ", queued "
        << queued.value_or(-1);
    std::this_thread::sleep_for(milliseconds(50));
  }
  if (second->PollStatus() == 200) std::swap(first, second);

  // The other client: its list-then-watch and a handoff, promptly.
  EXPECT_TRUE(ListThenWatch(*ww, names, In(kEventWait)));
  EXPECT_TRUE(Handoff(*ww, In(kEventWait)));

  // The slow client's second state still waits for its first.
  EXPECT_EQ(second->PollStatus(), 0)
      << "the slow client holds more than half of the state workers";
  EXPECT_EQ(Metric(metrics_port, "walwatch_state_reads_queued"), 1.0);

  // Its first state gone, its second takes the worker.
  first.reset();
  deadline = In(kEventWait);
  while (second->PollStatus() == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(second->PollStatus(), 200);
}

// Fails without the stall bound: the stream's reader waits for the client
// (--initial-state-timeout, 5 min), the stall counter never moves, and the
// only worker is not free for the next initial state.
TEST_F(StateShareTest, AClientThatStopsReadingItsStateGets410AndFreesItsWorker) {
  // ~13 MB of pods: more than the Unix socket's buffers and the queue.
  InsertBulkPods(db(), 6000);
  std::set<std::string> names = {"seed-deploy"};
  for (int i = 0; i < 3; ++i) {
    names.insert("d" + std::to_string(i));
    InsertRow(db(), Deployment("c1", "share", "d" + std::to_string(i)));
  }
  const int metrics_port = FreeLoopbackPort();
  ASSERT_NE(metrics_port, 0);
  WalwatchOptions o = DefaultOptions();
  o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port);
  o.extra_args = {"--state-workers", "1", "--initial-state-stall-timeout",
                  "2s"};
  WalwatchProcess* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);
  ASSERT_EQ(Metric(metrics_port, "walwatch_initial_state_stalls_total"), 0.0);

  // The only worker streams this WatchList; its client reads the header,
  // then stops.
  WatchClient stalled;
  ASSERT_TRUE(
      stalled.OpenState(ww->socket_path(), kWatchListPods, In(kEventWait)));
  ASSERT_EQ(stalled.status(), 200);

  auto deadline = In(seconds(30));
  std::optional<double> stalls;
  while ((stalls = Metric(metrics_port,
                          "walwatch_initial_state_stalls_total")) < 1.0) {
    ASSERT_TRUE(Clock::now() < deadline)
        << "the unread state was not ended for stalling within 30 s; stalls "
        << stalls.value_or(-1);
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(stalls, 1.0);

  // The worker is free: the next initial state is served while the stalled
  // client still holds its connection.
  EXPECT_TRUE(ListThenWatch(*ww, names, In(kEventWait)));

  // Reading again, the stalled client gets what was sent, then the 410.
  size_t added = 0;
  WatchEvent e;
  deadline = In(seconds(60));
  for (;;) {
    ASSERT_TRUE(stalled.NextEvent(&e, deadline)) << "after " << added;
    if (e.type != "ADDED") break;
    ++added;
  }
  EXPECT_EQ(e.type, "ERROR") << e.raw.substr(0, 300);
  EXPECT_EQ(e.object.value("code", 0), 410) << e.raw;
  EXPECT_EQ(e.object.value("reason", ""), "Expired") << e.raw;
  EXPECT_NE(e.object.value("message", "").find(
                "--initial-state-stall-timeout"),
            std::string::npos)
      << e.raw;
  EXPECT_LT(added, 6000u);
  EXPECT_TRUE(stalled.ExpectEnd(In(kEventWait)));
}

// A client that keeps reading, but slowly (at most ~800 KB/s, on a 4 KB TCP
// window), holds the reader waiting on its full queue most of the time: the
// session takes the 4 MiB queue whole, about every 5 s, and sends it. With
// --initial-state-min-rate (4Mi here, against 8 KiB read per 10 ms) the
// worker is given back after about one --initial-state-stall-timeout (10 s)
// of waiting, and the client, reading on, gets 410 Expired. Fails without the
// rate on a machine where the reader keeps its pace: every wait then ends
// with a take well within 10 s, a stall bound that only asks for progress
// never comes due, the stall counter stays at 0, and the worker stays with
// the client for the whole ~26 MB state.
TEST_F(StateShareTest, AClientThatTricklesItsStateGets410AndFreesItsWorker) {
  InsertBulkPods(db(), 12000);
  std::set<std::string> names = {"seed-deploy"};
  for (int i = 0; i < 3; ++i) {
    names.insert("d" + std::to_string(i));
    InsertRow(db(), Deployment("c1", "share", "d" + std::to_string(i)));
  }
  const int port = FreeLoopbackPort();
  const int metrics_port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  ASSERT_NE(metrics_port, 0);
  WalwatchOptions o = DefaultOptions();
  o.tcp_listen = "127.0.0.1:" + std::to_string(port);
  o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port);
  o.extra_args = {"--state-workers", "1", "--initial-state-stall-timeout",
                  "10s", "--initial-state-min-rate", "4Mi"};
  WalwatchProcess* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);
  ASSERT_EQ(Metric(metrics_port, "walwatch_initial_state_stalls_total"), 0.0);

  SlowTcpWatch trickle(port, kWatchListPods);
  ASSERT_TRUE(trickle.connected());
  std::string raw;
  std::atomic<bool> fast{false};
  std::atomic<bool> ended{false};
  std::thread reader([&] {
    // An upper bound for a loaded machine, not a measure of speed.
    const auto bound = In(seconds(300));
    while (Clock::now() < bound) {
      if (!trickle.ReadSome(fast ? 65536 : 8192, &raw)) {
        ended = true;
        return;
      }
      if (!fast) std::this_thread::sleep_for(milliseconds(10));
    }
  });

  auto deadline = In(seconds(60));
  std::optional<double> stalls;
  while ((stalls = Metric(metrics_port,
                          "walwatch_initial_state_stalls_total")) < 1.0 &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(stalls, 1.0) << "the trickling state was not ended within 60 s";

  // The worker is free while the trickle still holds its connection.
  if (stalls == 1.0) {
    EXPECT_TRUE(ListThenWatch(*ww, names, In(kEventWait)));
  }

  // Reading on at full speed, the client gets the rest, then the 410.
  fast = true;
  reader.join();
  EXPECT_TRUE(ended) << "the trickling stream did not end";
  EXPECT_NE(raw.find("HTTP/1.1 200"), std::string::npos) << raw.substr(0, 200);
  const size_t error = raw.find("\"type\":\"ERROR\"");
  ASSERT_NE(error, std::string::npos)
      << "no ERROR event in " << raw.size() << " bytes";
  const std::string tail = raw.substr(error, 600);
  EXPECT_NE(tail.find("\"code\":410"), std::string::npos) << tail;
  // "read at less than 4 MiB/s (--initial-state-min-rate) for 10 s", or, on
  // a machine slow enough that the reader took nothing in a window, "not
  // read for 10 s": both are this rule.
  EXPECT_NE(tail.find("(--initial-state-stall-timeout)"), std::string::npos)
      << tail;
  std::printf("the trickle's 410: %s\n",
              tail.substr(0, tail.find("\"reason\"")).c_str());
  EXPECT_LT(raw.size(), size_t{24} << 20) << "the whole state was sent";
}

}  // namespace
}  // namespace walwatch::itest
