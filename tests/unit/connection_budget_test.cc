// The connection buffer budget (HttpServerOptions::
// max_connection_buffer_bytes), from the clients' side: an HttpServer on a
// temporary Unix socket, an EventLog filled by the test, and raw socket
// clients that send headers slowly, stop reading their watches, or read
// them. What the server counts is read as the walwatch_connection_buffer_bytes
// gauge reads it (HttpServer::connection_buffer_bytes). No PostgreSQL.
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cdc/model/event.h"
#include "tests/unit/support/http_server_fixture.h"
#include "watchserver/event_log.h"
#include "watchserver/http_server.h"

namespace walwatch {
namespace {

using namespace std::chrono_literals;
using server_test::kFloorRv;
using server_test::Sample;

// Polls `condition` every 2 ms until it holds or `limit` passes.
template <class Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds limit = 10000ms) {
  return server_test::WaitFor(condition, limit, 2ms);
}

// A pod's watch event line (with its '\n'), padded to about `padding` bytes.
std::string PodLine(const std::string& name, uint64_t rv, size_t padding) {
  return "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":"
         "\"Pod\",\"metadata\":{\"name\":\"" +
         name + "\",\"namespace\":\"default\",\"resourceVersion\":\"" +
         std::to_string(rv) +
         "\",\"annotations\":{\"shadow.clusterpedia.io/cluster-name\":\"c1\","
         "\"walwatch.test/padding\":\"" +
         std::string(padding, 'x') + "\"}}}}\n";
}

// A connection made with plain system calls, so that the test decides when
// bytes are sent and read. Every wait has a deadline.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s",
                  path.c_str());
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address),
                           sizeof(address)) == 0;
    timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }

  // False once the server has closed its side (EPIPE, ECONNRESET).
  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n =
          ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Bytes sent that the server has not read yet.
  size_t Unsent() const {
    int n = 0;
    if (::ioctl(fd_, SIOCOUTQ, &n) != 0) return 0;
    return static_cast<size_t>(n);
  }

  // Whether the server sent something (or closed), without waiting.
  bool Readable() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }

  // Bytes the server sent that this client has not read yet.
  size_t Unread() const {
    int n = 0;
    if (::ioctl(fd_, FIONREAD, &n) != 0) return 0;
    return static_cast<size_t>(n);
  }

  // Whether the server closed the connection, read or not what it sent.
  bool PeerClosed() const {
    pollfd p{fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
  }

  // Reads what has arrived, waiting up to `timeout` for the first byte.
  // False at the end of the stream (EOF or a reset after the data).
  bool ReadSome(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) {
      return true;  // nothing yet
    }
    char scratch[65536];
    ssize_t n = ::recv(fd_, scratch, sizeof(scratch), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    received_.append(scratch, static_cast<size_t>(n));
    return true;
  }

  // Reads until the server closes; false if it does not within 10 s.
  bool ReadToEnd() {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!eof_) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      ReadSome(100ms);
    }
    return true;
  }

  const std::string& received() const { return received_; }
  bool eof() const { return eof_; }

  // The response's status line and header fields (up to the blank line),
  // and its body so far.
  std::string head() const {
    size_t end = received_.find("\r\n\r\n");
    return end == std::string::npos ? "" : received_.substr(0, end + 2);
  }
  std::string body() const {
    size_t end = received_.find("\r\n\r\n");
    return end == std::string::npos ? "" : received_.substr(end + 4);
  }

  // The lines of a chunked watch body received so far, in full chunks only;
  // `ended` is set if the final chunk came. False if the framing is broken.
  bool Lines(std::vector<std::string>* lines, bool* ended) const {
    lines->clear();
    *ended = false;
    const std::string all = body();
    std::string_view rest = all;
    while (true) {
      size_t eol = rest.find("\r\n");
      if (eol == std::string_view::npos) return true;
      size_t size = 0;
      for (char c : rest.substr(0, eol)) {
        int digit = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                           : -1;
        if (digit < 0) return false;
        size = size * 16 + static_cast<size_t>(digit);
      }
      if (size == 0) {
        *ended = true;
        return true;
      }
      if (rest.size() < eol + 2 + size + 2) return true;  // not all here
      std::string_view chunk = rest.substr(eol + 2, size);
      if (rest.substr(eol + 2 + size, 2) != "\r\n") return false;
      while (!chunk.empty()) {
        size_t newline = chunk.find('\n');
        if (newline == std::string_view::npos) return false;
        lines->emplace_back(chunk.substr(0, newline + 1));
        chunk.remove_prefix(newline + 1);
      }
      rest.remove_prefix(eol + 2 + size + 2);
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string received_;
};

// Records the highest value the gauge took while it runs, sampling it as
// fast as it can.
class GaugePeak {
 public:
  explicit GaugePeak(const HttpServer* server)
      : thread_([this, server] {
          while (!stop_.load()) {
            size_t now = server->connection_buffer_bytes();
            if (now > peak_.load()) peak_.store(now);
            std::this_thread::yield();
          }
        }) {}
  ~GaugePeak() { Stop(); }
  size_t Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return peak_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<size_t> peak_{0};
  std::thread thread_;
};

// The server fixture (tests/unit/support/http_server_fixture.h) with an
// event log of 64 MiB and metrics, and raw clients.
class ConnectionBudgetTest
    : public server_test::HttpServerTestWithLog<size_t{64} << 20> {
 protected:
  void SetUp() override {
    HttpServerTestWithLog::SetUp();
    options_.metrics = &metrics_;
  }

  std::unique_ptr<RawClient> Connect() {
    auto client = std::make_unique<RawClient>(options_.socket_path);
    EXPECT_TRUE(client->connected());
    return client;
  }

  // A watch of pods from the log's floor, its 200 header read.
  std::unique_ptr<RawClient> OpenWatch() {
    auto client = Connect();
    client->Send(
        "GET /api/v1/pods?watch=1&resourceVersion=100 HTTP/1.1\r\n"
        "Host: walwatch\r\n\r\n");
    EXPECT_TRUE(WaitFor([&] {
      client->ReadSome(10ms);
      return !client->head().empty() || client->eof();
    }));
    EXPECT_EQ(client->head().substr(0, 12), "HTTP/1.1 200") << client->head();
    return client;
  }

  // Appends `count` pods, one per transaction, from RV 101 + `first` on;
  // returns their lines.
  std::vector<std::string> AppendPods(int count, size_t padding,
                                      int first = 0) {
    std::vector<std::string> lines;
    for (int i = first; i < first + count; ++i) {
      const uint64_t rv = kFloorRv + 1 + static_cast<uint64_t>(i);
      const std::string name = "pod-" + std::to_string(i);
      std::string wire = PodLine(name, rv, padding);
      LabelList labels;
      Event::Strings strings;
      strings.version = "v1";
      strings.resource = "pods";
      strings.kind = "Pod";
      strings.cluster = "c1";
      strings.ns = "default";
      strings.name = name;
      strings.labels = &labels;
      MutableEventPtr event = Event::Make(strings, wire, "");
      event->rv = rv;
      event->commit_lsn = rv;
      event->last_in_txn = true;
      event->type = EventType::kAdded;
      EXPECT_EQ(log_.AppendTransaction(rv, {EventPtr(std::move(event))}),
                EventLog::AppendResult::kAppended);
      lines.push_back(std::move(wire));
    }
    return lines;
  }
};

// Forty clients each send 200 KiB of header, 8 KiB at a time, and never end
// it: 8 MiB in all, twice the budget. What the server holds of them never
// passes the budget; the clients it has no room for get a 429 Status they can
// read, with Retry-After; the others are still being read.
TEST_F(ConnectionBudgetTest, SlowHeaderSendersStayWithinTheBudget) {
  constexpr size_t kBudget = size_t{4} << 20;
  options_.max_connection_buffer_bytes = kBudget;
  StartServer();
  constexpr int kClients = 40;
  constexpr int kRounds = 25;
  const std::string field =
      "X-Padding: " + std::string(8 * 1024 - 13, 'p') + "\r\n";
  std::vector<std::unique_ptr<RawClient>> clients;
  std::vector<bool> open(kClients, true);
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Connect());
    ASSERT_TRUE(clients.back()->Send(
        "GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: walwatch\r\n"));
  }
  GaugePeak peak(server_.get());
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kClients; ++i) {
      // A refused client's sends fail once the server has closed.
      if (open[i] && !clients[i]->Send(field)) open[i] = false;
    }
  }
  // Everything sent was read, but by a connection the server closed.
  ASSERT_TRUE(WaitFor([&] {
    for (auto& client : clients) {
      if (client->Unsent() != 0 && !client->Readable()) return false;
    }
    return true;
  })) << "the server stopped reading clients it did not answer";
  const size_t held = server_->connection_buffer_bytes();
  EXPECT_LE(peak.Stop(), kBudget);
  EXPECT_LE(held, kBudget);
  // The budget was used, not left idle by a server reading too little.
  EXPECT_GE(held, kBudget / 2);

  size_t refused = 0;
  for (auto& client : clients) {
    if (!client->Readable()) continue;  // still being read
    ASSERT_TRUE(client->ReadToEnd());
    ++refused;
    EXPECT_EQ(client->head().substr(0, 12), "HTTP/1.1 429") << client->head();
    EXPECT_NE(client->head().find("Retry-After: 1\r\n"), std::string::npos)
        << client->head();
    nlohmann::json status =
        nlohmann::json::parse(client->body(), nullptr, false);
    EXPECT_EQ(status["kind"], "Status") << client->body();
    EXPECT_EQ(status["status"], "Failure");
    EXPECT_EQ(status["code"], 429);
    EXPECT_EQ(status["reason"], "TooManyRequests");
    EXPECT_EQ(status["details"]["retryAfterSeconds"], 1);
    EXPECT_EQ(status["message"],
              "walwatch's connection buffers are full "
              "(--max-connection-buffer-bytes 4194304); try again later");
  }
  EXPECT_GT(refused, 0u);
  EXPECT_LT(refused, static_cast<size_t>(kClients));
  EXPECT_EQ(server_->connection_buffer_refusals().request, refused);

  // The refused ones gave back what they held; so do the rest as they go.
  clients.clear();
  EXPECT_TRUE(WaitFor([&] { return server_->connection_buffer_bytes() == 0; }))
      << server_->connection_buffer_bytes();
}

// Twelve watchers stop reading their streams as 300 events of 4 KiB come:
// each one's socket fills, and what it could not take of its write (up to
// 1 MiB here) would be kept for it: some 9 MB against a 2 MiB budget. Those
// the budget has no room for are ended: events in order, then a closed
// connection. The held bytes never pass the budget. Then two watchers that
// read get every event in order, the 300 and 300 more appended live, though
// the stalled ones still hold most of the budget.
TEST_F(ConnectionBudgetTest, StalledWatchersPastTheBudgetAreEnded) {
  constexpr size_t kBudget = size_t{2} << 20;
  options_.max_connection_buffer_bytes = kBudget;
  // Writes larger than a Unix socket takes, so that each stalled watcher
  // has much left over.
  options_.max_write_bytes = size_t{1} << 20;
  StartServer();
  constexpr int kStalled = 12;
  constexpr int kReaders = 2;
  constexpr int kEvents = 300;
  std::vector<std::string> events = AppendPods(kEvents, 4000);
  GaugePeak peak(server_.get());
  std::vector<std::unique_ptr<RawClient>> stalled;
  for (int i = 0; i < kStalled; ++i) stalled.push_back(OpenWatch());
  ASSERT_FALSE(HasFailure());
  const auto ended_count = [&] {
    return Sample(metrics_.Scrape(),
                  "walwatch_watchers_terminated_total{reason=\"backlog\"}");
  };
  // Every stalled watcher has had its write: it is ended (its connection
  // closed), or holds the rest of its write. A Unix socket takes some
  // 200 KiB of it, so the rest is more than 11/16 of it; and the budget
  // holds two such rests, not three: this counts none still deciding.
  const size_t kMinRest = options_.max_write_bytes / 16 * 11;
  const auto closed = [&] {
    size_t n = 0;
    for (auto& client : stalled) n += client->PeerClosed() ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(WaitFor([&] {
    const size_t open = kStalled - closed();
    return open * kMinRest <= server_->connection_buffer_bytes();
  })) << "ended "
      << closed() << ", holding " << server_->connection_buffer_bytes()
      << ", unread by the first " << stalled[0]->Unread() << ", received "
      << stalled[0]->received().size();
  const size_t held = server_->connection_buffer_bytes();
  EXPECT_LE(held, kBudget);
  EXPECT_GE(held, kMinRest) << "no stalled watcher holds its write";

  std::vector<std::thread> reading;
  std::vector<std::unique_ptr<RawClient>> readers;
  for (int i = 0; i < kReaders; ++i) readers.push_back(OpenWatch());
  ASSERT_FALSE(HasFailure());
  std::vector<std::string> live = AppendPods(kEvents, 4000, kEvents);
  events.insert(events.end(), live.begin(), live.end());
  // Each event is a chunk of its own: the stream is read when it ends so.
  const std::string last_chunk_end = events.back() + "\r\n";
  for (auto& reader : readers) {
    reading.emplace_back([&, client = reader.get()] {
      auto deadline = std::chrono::steady_clock::now() + 20s;
      while (std::chrono::steady_clock::now() < deadline &&
             client->ReadSome(50ms)) {
        const std::string& r = client->received();
        if (r.size() >= last_chunk_end.size() &&
            r.compare(r.size() - last_chunk_end.size(), last_chunk_end.size(),
                      last_chunk_end) == 0) {
          break;
        }
      }
    });
  }
  for (std::thread& t : reading) t.join();
  for (auto& reader : readers) {
    std::vector<std::string> lines;
    bool final_chunk = false;
    ASSERT_TRUE(reader->Lines(&lines, &final_chunk));
    EXPECT_TRUE(lines == events)
        << "a reading watcher got " << lines.size() << " of " << events.size()
        << " events, or not in order";
    EXPECT_FALSE(reader->eof()) << "a reading watcher was ended";
  }
  EXPECT_LE(peak.Stop(), kBudget);

  // Read the stalled ones now. An ended one has events in order, none
  // skipped, then its connection closed without the final chunk: client-go
  // reports that and watches again. The others get every event.
  size_t ended = 0;
  for (auto& client : stalled) {
    std::vector<std::string> lines;
    bool final_chunk = false;
    const std::string& r = client->received();
    ASSERT_TRUE(WaitFor([&] {
      if (!client->ReadSome(10ms)) return true;  // closed
      return r.size() >= last_chunk_end.size() &&
             r.compare(r.size() - last_chunk_end.size(), last_chunk_end.size(),
                       last_chunk_end) == 0;
    }));
    ASSERT_TRUE(client->Lines(&lines, &final_chunk)) << "broken framing";
    EXPECT_FALSE(final_chunk);
    ASSERT_LE(lines.size(), events.size());
    EXPECT_TRUE(std::equal(lines.begin(), lines.end(), events.begin()))
        << "events out of order or skipped";
    if (client->eof()) {
      ++ended;
      EXPECT_LT(lines.size(), events.size());
    } else {
      EXPECT_EQ(lines.size(), events.size());
    }
  }
  EXPECT_GT(ended, 0u);
  EXPECT_LT(ended, static_cast<size_t>(kStalled));
  EXPECT_EQ(static_cast<double>(ended), ended_count());
  EXPECT_EQ(server_->connection_buffer_refusals().watch, ended);

  stalled.clear();
  readers.clear();
  EXPECT_TRUE(WaitFor([&] { return server_->connection_buffer_bytes() == 0; }))
      << server_->connection_buffer_bytes();
}

// What a connection holds is given back: by a request once it is read, by a
// stalled write once its client has read it, and all of it when the
// connection closes, whatever it was doing. A connection waiting for its
// next request holds the 512 bytes its read begins with.
TEST_F(ConnectionBudgetTest, TheGaugeReturnsToZeroAsConnectionsClose) {
  options_.max_connection_buffer_bytes = size_t{64} << 20;
  StartServer();
  constexpr size_t kWaitingForARequest = 512;
  // A client in the middle of a long header: ten fields of 10 KiB.
  std::string fields;
  for (int i = 0; i < 10; ++i) {
    fields += "X-Long-" + std::to_string(i) + ": " +
              std::string(10 * 1024, 'h') + "\r\n";
  }
  auto partial = Connect();
  ASSERT_TRUE(
      partial->Send("GET /healthz HTTP/1.1\r\nHost: walwatch\r\n" + fields));
  ASSERT_TRUE(WaitFor([&] { return partial->Unsent() == 0; }));
  EXPECT_GE(server_->connection_buffer_bytes(), fields.size());
  // Its request ends and is answered; the connection stays open.
  ASSERT_TRUE(partial->Send("\r\n"));
  ASSERT_TRUE(WaitFor([&] {
    partial->ReadSome(10ms);
    return partial->body() == "ok" || partial->eof();
  }));
  EXPECT_EQ(partial->head().substr(0, 12), "HTTP/1.1 200") << partial->head();
  EXPECT_TRUE(WaitFor([&] {
    return server_->connection_buffer_bytes() == kWaitingForARequest;
  })) << server_->connection_buffer_bytes();

  // A watcher that stops reading holds the rest of its write...
  auto stalled = OpenWatch();
  const std::vector<std::string> events = AppendPods(300, 4000);
  ASSERT_TRUE(WaitFor([&] {
    return server_->connection_buffer_bytes() > kWaitingForARequest;
  })) << "the stalled watcher's write was not counted";
  // ... until it reads again and catches up.
  const std::string last_chunk_end = events.back() + "\r\n";
  const std::string& r = stalled->received();
  ASSERT_TRUE(WaitFor([&] {
    stalled->ReadSome(10ms);
    return r.size() >= last_chunk_end.size() &&
           r.compare(r.size() - last_chunk_end.size(), last_chunk_end.size(),
                     last_chunk_end) == 0;
  }));
  EXPECT_TRUE(WaitFor([&] {
    return server_->connection_buffer_bytes() == kWaitingForARequest;
  })) << server_->connection_buffer_bytes();

  // Stalled again, and a third client mid-header: all of them close.
  AppendPods(300, 4000, 300);
  ASSERT_TRUE(WaitFor([&] {
    return server_->connection_buffer_bytes() > kWaitingForARequest;
  }));
  auto another = Connect();
  ASSERT_TRUE(another->Send("GET /healthz HTTP/1.1\r\n" + fields));
  partial.reset();
  stalled.reset();
  another.reset();
  EXPECT_TRUE(WaitFor([&] { return server_->connection_buffer_bytes() == 0; }))
      << server_->connection_buffer_bytes();
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

}  // namespace
}  // namespace walwatch
