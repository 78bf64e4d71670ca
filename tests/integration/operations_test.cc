// What an SRE relies on, through the real binary against PostgreSQL: the
// Prometheus counters move by exactly the events produced, /readyz holds a
// replica out of service while it catches up on a backlog, bookmarks come as
// often as --bookmark-interval says, and the watch CLI prints what a watcher
// receives.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/replication_gate.h"
#include "tests/support/metric_value.h"

namespace walwatch::itest {
namespace {

// Runs a command and returns its standard output (stderr merged when asked).
std::string RunCommand(const std::string& command, int* exit_code) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// The value of one sample of a scrape ("name" or "name{labels}"), or -1:
// what these tests compare.
double Sample(const std::string& scrape, const std::string& series) {
  return test_support::MetricValue(scrape, series).value_or(-1);
}

class OperationsTest : public WalwatchTest {
 protected:
  // DefaultOptions with --metrics-address on a free loopback port, *port
  // (0 if none was free: the caller asserts).
  WalwatchOptions OptionsWithMetrics(int* port) {
    *port = FreeLoopbackPort();
    WalwatchOptions options = DefaultOptions();
    options.metrics_address = "127.0.0.1:" + std::to_string(*port);
    return options;
  }

  uint64_t WalLsn() {
    return ParseLsn(db().QueryValue("SELECT pg_current_wal_lsn()::text"));
  }
};

TEST_F(OperationsTest, MetricsCountExactlyTheEventsProduced) {
  int port = 0;
  auto options = OptionsWithMetrics(&port);
  ASSERT_NE(port, 0);
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  const std::string scrape_cmd =
      "curl -sf http://127.0.0.1:" + std::to_string(port) + "/metrics";
  int rc = 0;
  std::string before = RunCommand(scrape_cmd, &rc);
  ASSERT_EQ(rc, 0) << "GET /metrics failed";

  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  Resource a = Pod("c1", "default", "m-a"), b = Pod("c1", "default", "m-b"),
           c = Pod("c1", "default", "m-c");
  InsertRow(db(), a);
  InsertRow(db(), b);
  InsertRow(db(), c);
  a.spec["x"] = 1;
  UpdateRow(db(), a);
  b.spec["x"] = 2;
  UpdateRow(db(), b);
  DeleteRow(db(), c);
  for (int i = 0; i < 6; ++i) {
    WatchEvent e;
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait))) << "event " << i;
  }
  std::string after = RunCommand(scrape_cmd, &rc);
  ASSERT_EQ(rc, 0);
  const std::map<std::string, double> expected = {
      {"ADDED", 3}, {"MODIFIED", 2}, {"DELETED", 1}};
  for (const auto& [type, n] : expected) {
    SCOPED_TRACE(type);
    std::string decoded = "walwatch_events_decoded_total{type=\"" + type + "\"}";
    std::string sent = "walwatch_events_sent_total{type=\"" + type + "\"}";
    ASSERT_GE(Sample(before, decoded), 0) << before;
    EXPECT_EQ(Sample(after, decoded) - Sample(before, decoded), n);
    EXPECT_EQ(Sample(after, sent) - Sample(before, sent), n);
  }
  EXPECT_EQ(Sample(after, "walwatch_watchers{group=\"\",resource=\"pods\","
                          "version=\"v1\"}"),
            1)
      << after;
  EXPECT_EQ(Sample(after, "walwatch_replication_streaming"), 1);
  std::string ready = RunCommand("curl -s -o /dev/null -w '%{http_code}' "
                          "http://127.0.0.1:" + std::to_string(port) + "/readyz",
                          &rc);
  EXPECT_EQ(ready, "200");
}

// --max-connections: a connection past it is answered 429 (Retry-After) and
// counted, the open ones go on. By default the limit follows the open-file
// limit, whose soft value walwatch raises to the hard one.
TEST_F(OperationsTest, ConnectionsPastTheLimitGet429) {
  int port = 0;
  auto options = OptionsWithMetrics(&port);
  ASSERT_NE(port, 0);
  options.extra_args = {"--max-connections=2"};
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  auto connections = [&] {
    return Sample(HttpGetTcp(port, "/metrics", In(kEventWait)).body, "walwatch_connections");
  };
  // The fresh-RV request's connection is gone before the watches open, so
  // that it cannot take one of their two places.
  const uint64_t rv = FreshRv(*ww);
  ASSERT_NE(rv, 0u);
  for (const auto deadline = In(kEventWait); connections() != 0;) {
    ASSERT_LT(Clock::now(), deadline) << "connections: " << connections();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  WatchClient one, two;
  ASSERT_TRUE(OpenWatch(one, *ww, "/api/v1/pods", rv));
  ASSERT_TRUE(OpenWatch(two, *ww, "/api/v1/pods", rv));
  HttpResponse refused = HttpGet(ww->socket_path(), "/healthz", In(kEventWait));
  ASSERT_TRUE(refused.ok) << refused.error;
  EXPECT_EQ(refused.status, 429) << refused.body;
  const auto status = nlohmann::json::parse(refused.body);
  EXPECT_EQ(status["reason"], "TooManyRequests");
  EXPECT_EQ(status["details"]["retryAfterSeconds"], 1);
  const std::string scrape = HttpGetTcp(port, "/metrics", In(kEventWait)).body;
  EXPECT_EQ(Sample(scrape, "walwatch_connections_limit"), 2) << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_connections"), 2) << scrape;
  EXPECT_EQ(Sample(scrape,
                   "walwatch_connections_refused_total{reason=\"limit\"}"),
            1)
      << scrape;
  // The connection buffer budget is gauged, and two streaming watches hold
  // none of it (the refused connection may still be closing).
  EXPECT_EQ(Sample(scrape, "walwatch_connection_buffer_limit_bytes"),
            128 << 20)
      << scrape;
  EXPECT_GE(Sample(scrape, "walwatch_connection_buffer_bytes"), 0) << scrape;
  EXPECT_LE(Sample(scrape, "walwatch_connection_buffer_bytes"), 64 * 1024)
      << scrape;
  EXPECT_EQ(Sample(scrape,
                   "walwatch_connection_buffer_refused_total{what=\"request\"}"),
            0)
      << scrape;
  // The watches go on.
  InsertRow(db(), Pod("c1", "default", "mc-a"));
  WatchEvent a, b;
  ASSERT_TRUE(one.NextEvent(&a, In(kEventWait)));
  ASSERT_TRUE(two.NextEvent(&b, In(kEventWait)));
  EXPECT_EQ(a.name(), "mc-a");
  EXPECT_EQ(b.name(), "mc-a");

  // auto: the hard open-file limit (walwatch raises its soft limit to it)
  // less 128 and the state workers (4).
  int auto_port = 0;
  auto auto_options = OptionsWithMetrics(&auto_port);
  ASSERT_NE(auto_port, 0);
  auto* by_limit = StartWalwatch(auto_options);
  ASSERT_NE(by_limit, nullptr);
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  const double hard = files.rlim_max == RLIM_INFINITY
                          ? double(uint64_t{1} << 20)
                          : double(files.rlim_max);
  const std::string auto_scrape = HttpGetTcp(auto_port, "/metrics", In(kEventWait)).body;
  EXPECT_EQ(Sample(auto_scrape, "walwatch_connections_limit"), hard - 132)
      << auto_scrape;
}

// Whether process `pid` maps the event arena's memfd.
bool MapsEventFile(pid_t pid) {
  FILE* maps = std::fopen(("/proc/" + std::to_string(pid) + "/maps").c_str(),
                          "r");
  if (maps == nullptr) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, maps) != nullptr) {
    found = std::strstr(line, "memfd:walwatch-events") != nullptr;
  }
  std::fclose(maps);
  return found;
}

// By default the log's events live in a memfd and go out with sendfile;
// --sendfile=false keeps them on the heap and copies them. Both serve the
// same bytes: small objects, and one of ~200 KB that spans many pages.
TEST_F(OperationsTest, SendfileAndCopyServeTheSameStream) {
  auto copy_options = DefaultOptions();
  copy_options.extra_args = {"--sendfile=false"};
  auto* copying = StartWalwatch(copy_options);
  ASSERT_NE(copying, nullptr);
  auto* sending = StartWalwatch();
  ASSERT_NE(sending, nullptr);

  WatchClient copied, sent;
  ASSERT_TRUE(OpenWatch(copied, *copying, "/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(sent, *sending, "/api/v1/pods"));
  Resource big = Pod("c1", "default", "sf-big");
  big.spec["blob"] = std::string(200000, 'b');
  std::vector<Resource> pods = {Pod("c1", "default", "sf-a"), big,
                                Pod("c1", "default", "sf-c")};
  for (const Resource& pod : pods) InsertRow(db(), pod);
  for (size_t i = 0; i < pods.size(); ++i) {
    WatchEvent a, b;
    ASSERT_TRUE(copied.NextEvent(&a, In(kEventWait))) << "event " << i;
    ASSERT_TRUE(sent.NextEvent(&b, In(kEventWait))) << "event " << i;
    EXPECT_EQ(a.name(), pods[i].name);
    EXPECT_EQ(a.type, "ADDED");
    EXPECT_EQ(a.raw, b.raw) << "event " << i;
  }
  EXPECT_TRUE(MapsEventFile(sending->pid()));
  EXPECT_FALSE(MapsEventFile(copying->pid()));
}

// --wake-interval holds a wake that comes sooner than the interval after
// the last one, and never loses it: a transaction committed right after
// another was delivered arrives, a whole interval after it, even though
// nothing else comes from the server to end the wait.
TEST_F(OperationsTest, WakeIntervalHoldsAWakeAndNeverLosesIt) {
  auto options = DefaultOptions();
  options.extra_args = {"--wake-interval=1s"};
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  const auto before_first = std::chrono::steady_clock::now();
  InsertRow(db(), Pod("c1", "default", "wi-a"));
  WatchEvent first, second;
  ASSERT_TRUE(watch.NextEvent(&first, In(kEventWait)));
  InsertRow(db(), Pod("c1", "default", "wi-b"));
  ASSERT_TRUE(watch.NextEvent(&second, In(kEventWait)));
  const auto gap = std::chrono::steady_clock::now() - before_first;
  EXPECT_EQ(first.name(), "wi-a");
  EXPECT_EQ(second.name(), "wi-b");
  // Woken at most once a second. The first event's wake W1 came after its
  // commit, which came after before_first; the second event, written once
  // the first had arrived, waits for a wake at W1 + 1 s or later. So
  // however slow the machine, a full second passed since before_first (a
  // bound that holds by construction, not a margin on a measured time).
  EXPECT_GE(gap, std::chrono::seconds(1));
}

TEST_F(OperationsTest, WatchCliPrintsTheTableAndReports410) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  uint64_t fresh = FreshRv(*ww);
  ASSERT_NE(fresh, 0u);
  InsertRow(db(), Pod("c1", "default", "cli-pod"));
  int rc = 0;
  std::string out = RunCommand(std::string(WALWATCH_BINARY) +
                            " watch '/api/v1/pods?timeoutSeconds=2' --rv " +
                            std::to_string(fresh) + " --socket " +
                            ww->socket_path() + " 2>&1",
                        &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("TYPE"), std::string::npos) << out;
  EXPECT_NE(out.find("NAMESPACE"), std::string::npos) << out;
  // The row: ADDED, the cluster annotation, namespace, name.
  size_t row = out.find("ADDED");
  ASSERT_NE(row, std::string::npos) << out;
  std::string line = out.substr(row, out.find('\n', row) - row);
  EXPECT_NE(line.find("c1"), std::string::npos) << line;
  EXPECT_NE(line.find("default"), std::string::npos) << line;
  EXPECT_NE(line.find("cli-pod"), std::string::npos) << line;

  // A resourceVersion older than walwatch keeps: a clear 410, exit 1.
  out = RunCommand(std::string(WALWATCH_BINARY) + " watch /api/v1/pods --rv 1 --socket " +
                ww->socket_path() + " 2>&1",
            &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("410"), std::string::npos) << out;
  EXPECT_NE(out.find("Expired"), std::string::npos) << out;
}

std::string BacklogName(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "backlog-%05d", i);
  return name;
}

// A pod whose object is about 3 KB of text that does not compress, like the
// larger objects Clusterpedia stores.
Resource BigPod(int i, std::mt19937* rng) {
  static const char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::uniform_int_distribution<int> pick(0, sizeof kAlphabet - 2);
  std::string filler(3000, ' ');
  for (char& c : filler) c = kAlphabet[pick(*rng)];
  Resource r = Pod("c1", "backlog", BacklogName(i));
  r.spec["filler"] = filler;
  return r;
}

// A replica restarted behind a backlog must stay out of service (/readyz 503,
// saying why) until it has streamed to within --ready-max-lag of the
// server's WAL. The backlog is committed while walwatch is not running, to
// the slot walwatch then streams from. A ReplicationGate between walwatch and
// PostgreSQL holds the stream at an LSN `mid` with more than --ready-max-lag
// of the backlog after it, so the not-ready state is a fact of what walwatch
// has received, not a race against a fast machine: while held, walwatch has
// seen no position at or past `mid`, and the server's WAL is past the
// backlog's end. Released, it must become ready and deliver the whole backlog.
TEST_F(OperationsTest, ReadyzWaitsUntilTheBacklogIsStreamed) {
  constexpr uint64_t kMaxLag = uint64_t{1} << 20;  // --ready-max-lag 1Mi
  WalwatchOptions options = DefaultOptions();
  // The slot first, as a restarted replica finds it: the backlog is WAL it
  // retains.
  db().Query("SELECT pg_create_logical_replication_slot($1, 'wal2json')",
             {options.slot});
  const uint64_t floor_rv =
      ParseLsn(db().QueryValue("SELECT confirmed_flush_lsn::text FROM "
                               "pg_replication_slots WHERE slot_name = $1",
                               {options.slot})) -
      1;
  CommitObserver observer(&db(), UniqueName("obs"));

  // The backlog: transactions of 50 big pods until at least 6 MiB of WAL,
  // the hold position `mid`, then at least 3 MiB more. WAL is cluster-wide
  // (other tests write too), but what is asserted below holds whatever else
  // the WAL carries.
  std::mt19937 rng(6);
  int rows = 0;
  uint64_t last_xid = 0;
  auto write_until = [&](uint64_t from, uint64_t bytes) {
    while (WalLsn() - from < bytes) {
      db().Exec("BEGIN");
      for (int i = 0; i < 50; ++i)
        last_xid = InsertRow(db(), BigPod(rows++, &rng));
      db().Exec("COMMIT");
    }
  };
  write_until(WalLsn(), uint64_t{6} << 20);
  const uint64_t mid = WalLsn();
  write_until(mid, uint64_t{3} << 20);
  const uint64_t end = WalLsn();

  // Kept until walwatch has stopped (cleanups run newest first).
  auto gate = std::make_shared<ReplicationGate>(
      server().host + "/.s.PGSQL." + server().port, mid);
  AddCleanup([gate] {});
  const int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  options.conninfo = "host=127.0.0.1 port=" + std::to_string(gate->port()) +
                     " dbname=" + dbname() +
                     " user=postgres sslmode=disable gssencmode=disable";
  options.metrics_address = "127.0.0.1:" + std::to_string(port);
  options.log_level = "info";
  options.extra_args = {"--ready-max-lag", "1Mi"};
  WalwatchProcess& ww = Launch(options);

  ASSERT_TRUE(gate->WaitHolding(std::chrono::seconds(60)))
      << "walwatch never streamed up to " << FormatLsn(mid) << "; stderr:\n"
      << ww.StderrText();
  ASSERT_LT(gate->forwarded_lsn(), mid);

  // Held: 503 with the reason. Before it, walwatch may still be starting
  // (no answer, "not streaming", "WAL position not read yet"); never 200.
  HttpResponse probe;
  const auto deadline = In(kEventWait);
  for (;;) {
    probe = HttpGetTcp(port, "/readyz", In(kEventWait));
    ASSERT_NE(probe.status, 200)
        << "ready while " << end - mid << " bytes of the backlog are held back";
    if (probe.status == 503 && probe.body.rfind("catching up: ", 0) == 0) break;
    ASSERT_LT(Clock::now(), deadline)
        << "no \"catching up\" 503 from /readyz; last: " << probe.status << " "
        << probe.body << "; stderr:\n"
        << ww.StderrText();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string suffix = " bytes of WAL behind\n";
  ASSERT_GT(probe.body.size(), 13 + suffix.size()) << probe.body;
  ASSERT_EQ(probe.body.substr(probe.body.size() - suffix.size()), suffix)
      << probe.body;
  // The server's WAL is at or past `end`, walwatch below `mid`.
  const uint64_t behind = std::stoull(probe.body.substr(13));
  EXPECT_GT(behind, end - mid) << probe.body;
  EXPECT_GT(behind, kMaxLag) << probe.body;
  // The watch socket's probe agrees, and the metrics show the lag.
  HttpResponse socket_probe =
      HttpGet(ww.socket_path(), "/readyz", In(kEventWait));
  EXPECT_EQ(socket_probe.status, 503)
      << socket_probe.error << socket_probe.body;
  EXPECT_EQ(socket_probe.body.rfind("catching up: ", 0), 0u)
      << socket_probe.body;
  const std::string scrape = HttpGetTcp(port, "/metrics", In(kEventWait)).body;
  EXPECT_EQ(Sample(scrape, "walwatch_replication_streaming"), 1) << scrape;
  EXPECT_GT(Sample(scrape, "walwatch_replication_lag_bytes"),
            static_cast<double>(end - mid))
      << scrape;
  ASSERT_LT(gate->forwarded_lsn(), mid) << "the gate leaked";

  // A watcher from before the backlog, open across the release.
  WatchClient watch;
  ASSERT_TRUE(
      OpenWatch(watch, ww, "/api/v1/namespaces/backlog/pods", floor_rv));
  gate->Release();

  int not_ready = 0;
  const auto ready_deadline = In(std::chrono::seconds(120));
  for (;;) {
    probe = HttpGetTcp(port, "/readyz", In(kEventWait));
    if (probe.status == 200) break;
    ASSERT_EQ(probe.status, 503) << probe.body;
    ++not_ready;
    ASSERT_LT(Clock::now(), ready_deadline)
        << "not ready after the release: " << probe.body << "; stderr:\n"
        << ww.StderrText();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(probe.body, "ok\n");
  EXPECT_GE(gate->forwarded_lsn(), end - kMaxLag)
      << "ready before receiving the backlog";

  // Everything the backlog committed, in order, the last at its commit LSN.
  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadUntilName(watch, BacklogName(rows - 1), &got,
                            In(std::chrono::seconds(60))));
  ASSERT_EQ(got.size(), static_cast<size_t>(rows)) << Describe(got);
  for (int i = 0; i < rows; ++i) {
    ASSERT_EQ(got[i].type, "ADDED") << got[i].raw.substr(0, 200);
    ASSERT_EQ(got[i].name(), BacklogName(i));
  }
  EXPECT_EQ(got.back().rv(), observer.CommitLsn(last_xid));
  std::cerr << "readiness: " << behind << " bytes behind while held at "
            << FormatLsn(mid) << "; " << rows << " rows, " << (end - floor_rv)
            << " bytes of WAL; " << not_ready
            << " more 503s after the release\n";
}

// --bookmark-interval reaches every watch that allows bookmarks: with 1s, an
// idle watch gets a BOOKMARK about every second (each interval shortened by
// at most 5%), not once a minute.
TEST_F(OperationsTest, BookmarksComeAsOftenAsBookmarkInterval) {
  WalwatchOptions options = DefaultOptions();
  options.extra_args = {"--bookmark-interval", "1s"};
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  const uint64_t fresh = FreshRv(*ww);
  ASSERT_NE(fresh, 0u);
  WatchClient watch;
  const auto opened = Clock::now();
  ASSERT_TRUE(watch.Open(ww->socket_path(),
                         "/api/v1/pods?watch=1&allowWatchBookmarks=true&"
                         "resourceVersion=" +
                             std::to_string(fresh),
                         In(kEventWait)));
  ASSERT_EQ(watch.status(), 200) << watch.body();
  std::vector<double> arrived;  // seconds after the request
  uint64_t last_rv = 0;
  while (arrived.size() < 3) {
    WatchEvent e;
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait))) << arrived.size();
    ASSERT_EQ(e.type, "BOOKMARK") << e.raw;
    EXPECT_GE(e.rv(), last_rv) << e.raw;
    last_rv = e.rv();
    arrived.push_back(
        std::chrono::duration<double>(Clock::now() - opened).count());
  }
  // Lower bounds are exact: each interval is timed from the request or the
  // previous bookmark's write, and shortened by at most 5%. The upper bound
  // allows a loaded machine its delays, yet is far below the 1m default.
  EXPECT_GE(arrived[0], 0.95);
  EXPECT_GE(arrived[2], 3 * 0.95);
  EXPECT_LT(arrived[2], 15.0);
}

}  // namespace
}  // namespace walwatch::itest
