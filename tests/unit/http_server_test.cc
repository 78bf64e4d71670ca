// In-process tests of HttpServer: a real EventLog filled with hand-made
// events, a fake StateSource driven by the test, the server on a temporary
// Unix socket, and a Beast client that reads the chunked stream line by
// line. No PostgreSQL.
#include "watchserver/http_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cdc/base/logging.h"
#include "cdc/model/event.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/model/state_source.h"
#include "cdc/model/wire_arena.h"
#include "watchserver/event_log.h"
#include "watchserver/metrics.h"
#include "watchserver/request_parser.h"

namespace {

// What the server's sendfile(2) calls did. This definition of sendfile takes
// the place of libc's in this binary (the server is linked in statically),
// makes the same system call and counts: the WireArena tests prove with it
// that the arena's bytes went out through sendfile, not through the copying
// fallback, which would serve the same streams.
struct SendfileCounts {
  std::atomic<uint64_t> bytes{0};         // sent
  std::atomic<uint64_t> calls{0};         // that sent something
  std::atomic<uint64_t> short_writes{0};  // calls that sent part of a piece
  std::atomic<uint64_t> would_block{0};   // calls refused with EAGAIN
  std::atomic<uint64_t> broken_pipe{0};   // calls failed with EPIPE
};
SendfileCounts sendfile_counts;

}  // namespace

extern "C" ssize_t sendfile(int out_fd, int in_fd, off_t* offset,
                            size_t count) noexcept {
  const long n = ::syscall(SYS_sendfile, out_fd, in_fd, offset, count);
  if (n > 0) {
    sendfile_counts.bytes += static_cast<uint64_t>(n);
    ++sendfile_counts.calls;
    if (static_cast<size_t>(n) < count) ++sendfile_counts.short_writes;
  } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    ++sendfile_counts.would_block;
  } else if (n < 0 && errno == EPIPE) {
    ++sendfile_counts.broken_pipe;
  }
  return n;
}

namespace walwatch {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using stream_protocol = net::local::stream_protocol;
using ErrorCode = boost::system::error_code;
using namespace std::chrono_literals;

constexpr uint64_t kFloorRv = 100;
constexpr auto kClientTimeout = 5s;

// Polls `condition` until it holds or `limit` passes.
template <class Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds limit = 5000ms) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

struct EventSpec {
  std::string name;
  std::string cluster = "c1";
  std::string ns = "default";
  std::string group = "";
  std::string version = "v1";
  std::string resource = "pods";
  std::string kind = "Pod";
  EventType type = EventType::kAdded;
  LabelList labels = {};
  // Bytes of an annotation that only makes the line longer.
  std::string padding = "";
};

// An Event with the wire bytes the EventBuilder would produce for a small
// object: {"type":T,"object":{...}}\n
// With `prev`, a MODIFIED whose labels changed: prev's labels and line are
// the event's previous state. With an `arena`, the event is built there if
// it fits, as the EventBuilder builds the log's events (the previous state
// stays on the heap).
EventPtr MakeEvent(const EventSpec& spec, uint64_t rv, uint64_t commit_lsn,
                   bool last_in_txn, const Event* prev = nullptr,
                   WireArena* arena = nullptr) {
  std::string api_version =
      spec.group.empty() ? spec.version : spec.group + "/" + spec.version;
  std::string w = "{\"type\":";
  AppendJsonString(&w, EventTypeName(spec.type));
  w += ",\"object\":{\"apiVersion\":";
  AppendJsonString(&w, api_version);
  w += ",\"kind\":";
  AppendJsonString(&w, spec.kind);
  w += ",\"metadata\":{\"name\":";
  AppendJsonString(&w, spec.name);
  if (!spec.ns.empty()) {
    w += ",\"namespace\":";
    AppendJsonString(&w, spec.ns);
  }
  w += ",\"resourceVersion\":\"" + std::to_string(rv) + "\"";
  w += ",\"annotations\":{\"shadow.clusterpedia.io/cluster-name\":";
  AppendJsonString(&w, spec.cluster);
  if (!spec.padding.empty()) {
    w += ",\"walwatch.test/padding\":";
    AppendJsonString(&w, spec.padding);
  }
  w += "}}}}\n";
  Event::Strings strings;
  strings.group = spec.group;
  strings.version = spec.version;
  strings.resource = spec.resource;
  strings.kind = spec.kind;
  strings.cluster = spec.cluster;
  strings.ns = spec.ns;
  strings.name = spec.name;
  strings.labels = &spec.labels;
  LabelList prev_labels;
  if (prev != nullptr) {
    prev_labels = prev->labels().ToList();
    strings.prev_labels = &prev_labels;
  }
  MutableEventPtr event;
  if (arena == nullptr) {
    event = Event::Make(strings, w, prev ? prev->wire() : "");
  } else {
    FilterFields::Values values{spec.group,   spec.version, spec.resource,
                                spec.kind,    spec.cluster, spec.ns,
                                &spec.labels};
    FilterFieldsPtr fields = FilterFields::Make(values);
    FilterFieldsPtr prev_fields;
    if (prev != nullptr) {
      values.labels = &prev_labels;
      prev_fields = FilterFields::Make(values);
    }
    const std::string_view prev_wire = prev ? prev->wire() : "";
    event = Event::Allocate(std::move(fields), std::move(prev_fields),
                            spec.name, w.size(), prev_wire.size(), arena);
    std::memcpy(event->mutable_wire(), w.data(), w.size());
    if (!prev_wire.empty()) {
      std::memcpy(event->mutable_prev_wire(), prev_wire.data(),
                  prev_wire.size());
    }
  }
  event->rv = rv;
  event->commit_lsn = commit_lsn;
  event->last_in_txn = last_in_txn;
  event->type = spec.type;
  event->commit_time_us =
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  return event;
}

std::string Line(const EventPtr& event) {
  std::string_view wire = event->wire();
  return std::string(wire.substr(0, wire.size() - 1));
}

// An initial-state event as the StateSource makes it: ADDED, carrying the
// state's RV, of no transaction.
EventPtr StateEvent(EventSpec spec, uint64_t state_rv) {
  spec.type = EventType::kAdded;
  return MakeEvent(spec, state_rv, state_rv, /*last_in_txn=*/true);
}

EventPtr StatePod(const std::string& name, uint64_t state_rv) {
  EventSpec spec;
  spec.name = name;
  return StateEvent(spec, state_rv);
}

// The line a bookmark is sent as.
std::string BookmarkLine(uint64_t rv, const std::string& kind = "Pod",
                         const std::string& api_version = "v1",
                         bool initial_events_end = false) {
  std::string line = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"" + kind +
                     "\",\"apiVersion\":\"" + api_version +
                     "\",\"metadata\":{\"resourceVersion\":\"" +
                     std::to_string(rv) + "\"";
  if (initial_events_end) {
    line += ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}";
  }
  return line + "}}}";
}

// The type and resourceVersion of a watch event line.
struct Parsed {
  std::string type;
  std::string name;
  uint64_t rv = 0;
  nlohmann::json object;
};
Parsed ParseLine(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  Parsed p;
  if (j.is_discarded()) return p;
  p.type = j.value("type", "");
  p.object = j["object"];
  const nlohmann::json& metadata = p.object["metadata"];
  if (metadata.contains("name")) p.name = metadata["name"];
  if (metadata.contains("resourceVersion")) {
    p.rv = std::stoull(metadata["resourceVersion"].get<std::string>());
  }
  return p;
}

// The chunks of a chunked body (RFC 9112 7.1), strictly: each a size in hex
// without extensions, CRLF, the data, CRLF; then the last chunk, "0" CRLF,
// no trailer fields, the final CRLF and nothing after. nullopt if the body
// breaks any of that.
std::optional<std::vector<std::string>> DecodeChunks(std::string_view body) {
  std::vector<std::string> chunks;
  while (true) {
    const size_t eol = body.find("\r\n");
    if (eol == std::string_view::npos || eol == 0 || eol > 15) {
      return std::nullopt;
    }
    size_t size = 0;
    for (char c : body.substr(0, eol)) {
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) return std::nullopt;
      size = size * 16 + static_cast<size_t>(digit);
    }
    body.remove_prefix(eol + 2);
    if (size == 0) {
      if (body != "\r\n") return std::nullopt;
      return chunks;
    }
    if (body.size() < size + 2 || body.substr(size, 2) != "\r\n") {
      return std::nullopt;
    }
    chunks.emplace_back(body.substr(0, size));
    body.remove_prefix(size + 2);
  }
}

// A StateSource the test drives. ReadState either answers by itself (an
// empty state at the log's current RV, like a table with no such rows) or
// hands the stream to the test (manual). HandoffRv and FreshRv answer with
// `answer` from a thread of their own, as a worker would, or (held) keep
// the request unanswered for the test to look at.
class FakeStateSource : public StateSource {
 public:
  explicit FakeStateSource(EventLog* log) : log_(log) {}
  ~FakeStateSource() override { JoinAll(); }

  struct Answer {
    uint64_t rv = 0;
    std::optional<StateError> error;
  };

  void set_manual(bool manual) {
    std::lock_guard<std::mutex> lock(mu_);
    manual_ = manual;
  }
  void set_answer(Answer answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(answer);
  }
  void set_hold(bool hold) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = hold;
  }
  // Held requests: whether each is still wanted.
  std::vector<bool> held_wanted() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<bool> out;
    for (const Held& h : held_) out.push_back(h.wanted());
    return out;
  }
  // Answers every held request with `answer`, as a worker would, and stops
  // holding.
  void ReleaseHeld(Answer answer) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = false;
    for (Held& h : held_) {
      threads_.emplace_back([done = std::move(h.done), answer] {
        done(answer.rv, answer.error ? &*answer.error : nullptr);
      });
    }
    held_.clear();
  }

  void ReadState(const StateQuery& query,
                 std::shared_ptr<InitialStateStream> stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    queries_.push_back(query);
    ++read_states_;
    if (manual_) {
      streams_.push_back(stream);
      cv_.notify_all();
      return;
    }
    uint64_t rv = log_->current_rv();
    threads_.emplace_back([stream, rv] {
      stream->Ready(rv);
      stream->Finish();
    });
  }

  void HandoffRv(const std::string& snapshot, uint64_t insert_lsn,
                 RvCallback done, Wanted wanted) override {
    std::lock_guard<std::mutex> lock(mu_);
    handoffs_.push_back({snapshot, insert_lsn});
    Reply(std::move(done), std::move(wanted));
  }

  void FreshRv(RvCallback done, Wanted wanted) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++fresh_rvs_;
    Reply(std::move(done), std::move(wanted));
  }

  // Manual mode: the next stream a watch asked for.
  std::shared_ptr<InitialStateStream> WaitForStream() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, 5s, [&] { return !streams_.empty(); })) {
      return nullptr;
    }
    auto stream = streams_.front();
    streams_.pop_front();
    return stream;
  }

  int read_states() const {
    std::lock_guard<std::mutex> lock(mu_);
    return read_states_;
  }
  int fresh_rvs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fresh_rvs_;
  }
  std::vector<StateQuery> queries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queries_;
  }
  std::vector<std::pair<std::string, uint64_t>> handoffs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return handoffs_;
  }

  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  void Reply(RvCallback done, Wanted wanted) {  // mu_ held
    if (hold_) {
      held_.push_back({std::move(done), std::move(wanted)});
      return;
    }
    Answer answer = answer_;
    threads_.emplace_back([done = std::move(done), answer] {
      done(answer.rv, answer.error ? &*answer.error : nullptr);
    });
  }

  EventLog* const log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool manual_ = false;
  bool hold_ = false;
  struct Held {
    RvCallback done;
    Wanted wanted;
  };
  std::vector<Held> held_;
  Answer answer_;
  int read_states_ = 0;
  int fresh_rvs_ = 0;
  std::vector<StateQuery> queries_;
  std::deque<std::shared_ptr<InitialStateStream>> streams_;
  std::vector<std::pair<std::string, uint64_t>> handoffs_;
  std::vector<std::thread> threads_;
};

// The value of one sample in a Prometheus text scrape, or -1 if absent.
double Sample(const std::string& scrape, const std::string& name_and_labels) {
  std::string prefix = name_and_labels + " ";
  size_t at = 0;
  while ((at = scrape.find(prefix, at)) != std::string::npos) {
    if (at == 0 || scrape[at - 1] == '\n') {
      return std::stod(scrape.substr(at + prefix.size()));
    }
    at += prefix.size();
  }
  return -1;
}

// A client on its own io_context, over a Unix or a TCP socket; every read
// has a deadline, so a broken server fails the test instead of hanging it.
template <class Protocol>
class BasicTestClient {
 public:
  explicit BasicTestClient(const typename Protocol::endpoint& endpoint)
      : socket_(io_) {
    socket_.connect(endpoint, connect_error_);
  }

  bool connected() const { return !connect_error_; }

  void SendRaw(const std::string& bytes) {
    ErrorCode ec;
    net::write(socket_, net::buffer(bytes), ec);
  }

  void Get(const std::string& target) {
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, "walwatch");
    ErrorCode ec;
    http::write(socket_, request, ec);
  }

  // Reads the status line and header fields of the next response.
  bool ReadHeader() {
    parser_.emplace();
    // Not boost::none: Beast 1.74 compares the length with the optional and
    // then rejects every body.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    line_start_ = 0;
    last_error_ = Run([this](auto handler) {
      http::async_read_header(socket_, buffer_, *parser_, std::move(handler));
    });
    return !last_error_;
  }

  // Reads a whole (non-streamed) response.
  bool ReadResponse() {
    if (!ReadHeader()) return false;
    last_error_ = Run([this](auto handler) {
      http::async_read(socket_, buffer_, *parser_, std::move(handler));
    });
    return !last_error_;
  }

  const http::response<http::string_body>& response() const {
    return parser_->get();
  }
  unsigned status() const { return parser_->get().result_int(); }
  std::string header(http::field field) const {
    return std::string(parser_->get()[field]);
  }
  nlohmann::json BodyJson() const {
    return nlohmann::json::parse(parser_->get().body(), nullptr, false);
  }

  // The next line of a streamed body, without its '\n'. nullopt once the
  // body has ended (final chunk), or on an error or timeout.
  std::optional<std::string> ReadLine() {
    while (true) {
      const std::string& body = parser_->get().body();
      size_t newline = body.find('\n', line_start_);
      if (newline != std::string::npos) {
        std::string line = body.substr(line_start_, newline - line_start_);
        line_start_ = newline + 1;
        return line;
      }
      if (parser_->is_done()) return std::nullopt;
      last_error_ = Run([this](auto handler) {
        http::async_read_some(socket_, buffer_, *parser_, std::move(handler));
      });
      if (last_error_) return std::nullopt;
    }
  }

  // Bytes the server sent that this client has not read yet.
  size_t Unread() {
    int n = 0;
    if (::ioctl(socket_.native_handle(), FIONREAD, &n) != 0) return 0;
    return static_cast<size_t>(n);
  }

  // True once the final chunk has been read.
  bool body_done() const { return parser_ && parser_->is_done(); }
  bool body_empty_after_lines() const {
    return line_start_ == parser_->get().body().size();
  }
  ErrorCode last_error() const { return last_error_; }

  // True if the server closes the connection with nothing more to read.
  bool ReadEof() {
    if (buffer_.size() != 0) return false;
    std::array<char, 64> scratch;
    ErrorCode ec = Run([&](auto handler) {
      socket_.async_read_some(net::buffer(scratch), std::move(handler));
    });
    return ec == net::error::eof;
  }

  // Every byte until the server closes; nullopt on timeout.
  std::optional<std::string> ReadAllRaw() {
    std::string all;
    std::array<char, 4096> scratch;
    while (true) {
      ErrorCode ec = Run([&](auto handler) {
        socket_.async_read_some(net::buffer(scratch), std::move(handler));
      });
      if (ec == net::error::eof) return all;
      if (ec) return std::nullopt;
      all.append(scratch.data(), last_bytes_);
    }
  }

  void Close() {
    ErrorCode ignored;
    socket_.shutdown(Protocol::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // Stops receiving (shutdown SHUT_RD) but stays connected: the server sees
  // no end of its reads, and its next write fails with EPIPE.
  void ShutdownReceive() {
    ErrorCode ignored;
    socket_.shutdown(Protocol::socket::shutdown_receive, ignored);
  }

 private:
  template <class Initiate>
  ErrorCode Run(Initiate&& initiate) {
    std::optional<ErrorCode> result;
    initiate([this, &result](ErrorCode ec, std::size_t bytes) {
      result = ec;
      last_bytes_ = bytes;
    });
    io_.restart();
    io_.run_for(kClientTimeout);
    if (!result) {
      ErrorCode ignored;
      socket_.cancel(ignored);
      io_.restart();
      io_.run();
      return net::error::timed_out;
    }
    return *result;
  }

  net::io_context io_;
  typename Protocol::socket socket_;
  ErrorCode connect_error_;
  boost::beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  size_t line_start_ = 0;
  size_t last_bytes_ = 0;
  ErrorCode last_error_;
};

using TestClient = BasicTestClient<stream_protocol>;

// GETs `target` and reads the whole (non-streamed) answer, which must have
// status `code`.
::testing::AssertionResult Answers(TestClient* client,
                                   const std::string& target, unsigned code) {
  client->Get(target);
  if (!client->ReadResponse()) {
    return ::testing::AssertionFailure()
           << "GET " << target << ": no response ("
           << client->last_error().message() << ")";
  }
  if (client->status() != code) {
    return ::testing::AssertionFailure()
           << "GET " << target << ": HTTP " << client->status() << ", want "
           << code << ": " << client->response().body();
  }
  return ::testing::AssertionSuccess();
}

// walwatch_watchers_terminated_total{reason=...} in a scrape, or -1.
double Terminated(const std::string& scrape, const std::string& reason) {
  return Sample(
      scrape, "walwatch_watchers_terminated_total{reason=\"" + reason + "\"}");
}

enum class Match { kExact, kContains };

// The last answer `client` read is a Kubernetes Status as the apiserver
// writes it: HTTP `code`, JSON, kind Status, status Failure, `reason`, `code`,
// and a message equal to `message` (containing it, with Match::kContains).
// A 504 carries the ResourceVersionTooLarge cause and retryAfterSeconds 1
// (what client-go retries on); any other code neither a cause nor a retry.
::testing::AssertionResult IsStatus(const TestClient& client, unsigned code,
                                    const std::string& reason,
                                    const std::string& message,
                                    Match match = Match::kExact) {
  const std::string& body = client.response().body();
  auto fail = [&]() {
    return ::testing::AssertionFailure()
           << "HTTP " << client.status() << " " << body << ": ";
  };
  if (client.status() != code) return fail() << "want HTTP " << code;
  if (client.header(http::field::content_type) != "application/json") {
    return fail() << "Content-Type "
                  << client.header(http::field::content_type);
  }
  nlohmann::json status = client.BodyJson();
  if (!status.is_object() || status.value("kind", "") != "Status" ||
      status.value("status", "") != "Failure") {
    return fail() << "not a Failure Status";
  }
  if (status.value("reason", "") != reason) return fail() << "want " << reason;
  if (status.value("code", 0u) != code) return fail() << "want code " << code;
  const std::string got = status.value("message", "");
  if (match == Match::kExact ? got != message
                             : got.find(message) == std::string::npos) {
    return fail() << "want message "
                  << (match == Match::kExact ? "" : "containing ") << "\""
                  << message << "\"";
  }
  const nlohmann::json details =
      status.value("details", nlohmann::json::object());
  if (code == 504) {
    const nlohmann::json too_large = {
        {"causes",
         {{{"reason", "ResourceVersionTooLarge"},
           {"message", "Too large resource version"}}}},
        {"retryAfterSeconds", 1}};
    if (details != too_large) return fail() << "want details " << too_large;
  } else if (details.contains("causes") ||
             details.contains("retryAfterSeconds")) {
    return fail() << "want no causes and no retry";
  }
  return ::testing::AssertionSuccess();
}

class HttpServerTest : public ::testing::Test {
 protected:
  HttpServerTest() = default;
  // With an event log bounded to `log_bytes` rather than 8 MiB.
  explicit HttpServerTest(size_t log_bytes) : log_(log_bytes, kFloorRv) {}

  void SetUp() override {
    char dir_template[] = "/tmp/walwatch-http-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    options_.socket_path = dir_ + "/walwatch.sock";
    options_.too_large_rv_wait = 300ms;
    options_.state = &state_;
    catalog_.Add({"", "v1", "pods"}, "Pod");
    catalog_.Add({"", "v1", "configmaps"}, "ConfigMap");
    catalog_.Add({"apps", "v1", "deployments"}, "Deployment");
  }

  void TearDown() override {
    if (server_) {
      server_->Stop();
      EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
    }
    work_.reset();
    io_.stop();
    for (std::thread& t : threads_) t.join();
    server_.reset();
    state_.JoinAll();
    std::remove(options_.socket_path.c_str());
    rmdir(dir_.c_str());
  }

  void StartServer() {
    server_ = std::make_unique<HttpServer>(io_, log_, catalog_, options_,
                                           [this]() -> std::string {
                                             return ready_ ? "" : "not yet";
                                           });
    ASSERT_EQ(server_->Start(), "");
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
  }

  // Appends one transaction; events before the last carry the previous
  // commit as their rv (DESIGN.md). With an `arena`, every event is built
  // there (the test fails if one is not).
  std::vector<EventPtr> AppendTxn(uint64_t commit_lsn,
                                  const std::vector<EventSpec>& specs,
                                  WireArena* arena = nullptr) {
    std::vector<Built> built;
    for (const EventSpec& spec : specs) built.push_back({spec, arena});
    return AppendBuilt(commit_lsn, built);
  }

  // How AppendBuilt makes one event: from `spec`, in `arena` (null: on the
  // heap); given `old_labels`, as a MODIFIED whose labels changed from them,
  // its previous state the object with those labels as a DELETED line at
  // the event's RV (what the EventBuilder makes of such an update).
  struct Built {
    Built(EventSpec spec, WireArena* arena = nullptr,
          std::optional<LabelList> old_labels = std::nullopt)
        : spec(std::move(spec)),
          arena(arena),
          old_labels(std::move(old_labels)) {}
    EventSpec spec;
    WireArena* arena;
    std::optional<LabelList> old_labels;
  };
  // Appends one transaction of events made as `built` says. Before the
  // append, each must be in its arena (GetFrame, the line framed as one
  // chunk) or on the heap, as asked.
  std::vector<EventPtr> AppendBuilt(uint64_t commit_lsn,
                                    const std::vector<Built>& built) {
    std::vector<EventPtr> events;
    for (size_t i = 0; i < built.size(); ++i) {
      const Built& b = built[i];
      const bool last = i + 1 == built.size();
      const uint64_t rv = last ? commit_lsn : last_commit_;
      EventSpec spec = b.spec;
      EventPtr old;
      if (b.old_labels) {
        EventSpec old_spec = spec;
        old_spec.labels = *b.old_labels;
        old_spec.type = EventType::kDeleted;
        old = MakeEvent(old_spec, rv, commit_lsn, last);
        spec.type = EventType::kModified;
      }
      EventPtr event =
          MakeEvent(spec, rv, commit_lsn, last, old.get(), b.arena);
      Event::Frame frame;
      const bool in_arena = event->GetFrame(&frame);
      EXPECT_EQ(in_arena, b.arena != nullptr) << spec.name;
      if (in_arena) {
        char size[32];
        std::snprintf(size, sizeof size, "%zx\r\n", event->wire().size());
        EXPECT_EQ(std::string_view(frame.data, frame.size),
                  size + std::string(event->wire()) + "\r\n")
            << spec.name;
        EXPECT_GE(frame.fd, 0);
      }
      events.push_back(std::move(event));
    }
    last_commit_ = commit_lsn;
    EXPECT_EQ(log_.AppendTransaction(commit_lsn, events),
              EventLog::AppendResult::kAppended);
    return events;
  }

  // The arena the WireArena tests build events in, made on first use.
  WireArena* Arena() {
    if (!arena_) {
      std::string error;
      arena_ = WireArena::Create(&error);
      EXPECT_TRUE(arena_) << error;
    }
    return arena_.get();
  }

  // A pod built in Arena(), its line longer by `padding` bytes, appended
  // alone in a transaction.
  EventPtr AppendArenaPod(uint64_t commit_lsn, const std::string& name,
                          size_t padding = 0) {
    EventSpec spec;
    spec.name = name;
    spec.padding = std::string(padding, 'x');
    return AppendTxn(commit_lsn, {spec}, Arena()).front();
  }

  // Waits until the bytes `client` has not read stop growing past 64 KiB:
  // its socket is full and the server's write waits. Returns them, or 0 if
  // that did not happen within 5 s.
  static size_t WaitUntilFull(TestClient* client) {
    size_t unread = 0;
    bool full = WaitFor([&] {
      size_t now = client->Unread();
      bool stable = now == unread && now > 64 * 1024;
      unread = now;
      return stable;
    });
    return full ? unread : 0;
  }

  EventPtr AppendPod(uint64_t commit_lsn, const std::string& name,
                     const std::string& ns = "default",
                     const std::string& cluster = "c1") {
    EventSpec spec;
    spec.name = name;
    spec.ns = ns;
    spec.cluster = cluster;
    return AppendTxn(commit_lsn, {spec}).front();
  }

  // Pods of kLargePodBytes each, one transaction each from RV 101: 400 of
  // them are far more than a Unix socket holds.
  static constexpr size_t kLargePodBytes = 4000;
  std::vector<EventPtr> AppendLargePods(int count) {
    const std::string padding(kLargePodBytes, 'x');
    std::vector<EventPtr> events;
    for (int i = 0; i < count; ++i) {
      events.push_back(
          AppendPod(101 + i, "pod-" + std::to_string(i) + padding));
    }
    return events;
  }

  // Reads the next line, which must be a bookmark; returns its RV.
  std::optional<uint64_t> ReadBookmark(TestClient* client) {
    std::optional<std::string> line = client->ReadLine();
    if (!line) return std::nullopt;
    Parsed p = ParseLine(*line);
    EXPECT_EQ(p.type, "BOOKMARK") << *line;
    if (p.type != "BOOKMARK") return std::nullopt;
    EXPECT_EQ(*line, BookmarkLine(p.rv));
    return p.rv;
  }

  std::unique_ptr<TestClient> Connect() {
    auto client = std::make_unique<TestClient>(
        stream_protocol::endpoint(options_.socket_path));
    EXPECT_TRUE(client->connected());
    return client;
  }

  // Sends `request` on a new connection: the answer is a Status with
  // `code` and `reason`, and the connection closes after it.
  void ExpectRefusedAndClosed(const std::string& request, unsigned code,
                              const std::string& reason) {
    auto client = Connect();
    client->SendRaw(request);
    ASSERT_TRUE(client->ReadResponse());
    EXPECT_EQ(client->status(), code);
    EXPECT_EQ(client->BodyJson()["reason"], reason);
    EXPECT_TRUE(client->ReadEof());
  }

  // Connects and GETs `target`, whose answer must begin as a 200 stream.
  // Null (and a test failure) otherwise.
  std::unique_ptr<TestClient> OpenWatch(const std::string& target) {
    auto client = Connect();
    client->Get(target);
    if (!client->ReadHeader()) {
      ADD_FAILURE() << "GET " << target << ": no header ("
                    << client->last_error().message() << ")";
      return nullptr;
    }
    if (client->status() != 200) {
      ADD_FAILURE() << "GET " << target << ": HTTP " << client->status();
      return nullptr;
    }
    return client;
  }

  std::string dir_;
  HttpServerOptions options_;
  EventLog log_{8 << 20, kFloorRv};
  ResourceCatalog catalog_;
  uint64_t last_commit_ = kFloorRv;
  std::atomic<bool> ready_{true};
  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_{
      io_.get_executor()};
  std::vector<std::thread> threads_;
  // After io_: its threads post to the io_context until joined.
  FakeStateSource state_{&log_};
  // Outlives the server: sessions still closing report to it.
  Metrics metrics_;
  std::unique_ptr<HttpServer> server_;
  // Gone before the log (events may outlive their arena).
  std::unique_ptr<WireArena> arena_;
};

// HttpServerTest with an event log of kLogBytes.
template <size_t kLogBytes>
class HttpServerTestWithLog : public HttpServerTest {
 protected:
  HttpServerTestWithLog() : HttpServerTest(kLogBytes) {}
};
// Keeps 2,000 events of 8 KiB and more.
using LargeLogHttpServerTest = HttpServerTestWithLog<size_t{64} << 20>;
// Keeps about 120 events of 8 KiB.
using SmallLogHttpServerTest = HttpServerTestWithLog<size_t{1} << 20>;

TEST_F(HttpServerTest, StreamsAppendedEventsInOrderWithWatchHeaders) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(client);
  EXPECT_EQ(client->header(http::field::content_type), "application/json");
  EXPECT_EQ(client->header(http::field::cache_control), "no-cache, private");
  EXPECT_TRUE(client->response().chunked());

  // The stream started "from now", when the header was written.
  EventPtr a = AppendPod(110, "a");
  EventPtr b = AppendPod(120, "b");
  EventPtr c = AppendPod(130, "c");
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_EQ(client->ReadLine(), Line(b));
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_EQ(server_->active_sessions(), 1u);
}

TEST_F(HttpServerTest, OneTransactionIsOneChunkWithExactFraming) {
  std::vector<EventPtr> events = AppendTxn(110, {{"a"}, {"b"}, {"c"}});
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=true&resourceVersion=100&timeoutSeconds=1");
  std::optional<std::string> raw = client->ReadAllRaw();
  ASSERT_TRUE(raw);
  size_t body_start = raw->find("\r\n\r\n");
  ASSERT_NE(body_start, std::string::npos);
  std::string head = raw->substr(0, body_start + 2);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(head.find("Cache-Control: no-cache, private\r\n"),
            std::string::npos);

  std::string lines = std::string(events[0]->wire()) +
                      std::string(events[1]->wire()) +
                      std::string(events[2]->wire());
  char size[32];
  std::snprintf(size, sizeof size, "%zx", lines.size());
  std::string expected_body =
      std::string(size) + "\r\n" + lines + "\r\n0\r\n\r\n";
  EXPECT_EQ(raw->substr(body_start + 4), expected_body);
}

TEST_F(HttpServerTest, FiltersByClusterNamespaceAndResource) {
  EventPtr want1 = AppendPod(110, "p1", "ns1", "c1");
  AppendPod(120, "p2", "ns2", "c1");
  AppendPod(130, "p3", "ns1", "c2");
  EventSpec deployment{"d1", "c1",          "ns1",       "apps",
                       "v1", "deployments", "Deployment"};
  EventPtr deploy = AppendTxn(140, {deployment}).front();
  EventSpec configmap{"cm", "c1", "ns1", "", "v1", "configmaps", "ConfigMap"};
  AppendTxn(150, {configmap});
  EventPtr want2 = AppendPod(160, "p4", "ns1", "c1");
  StartServer();

  auto scoped = OpenWatch(
      "/clusters/c1/api/v1/namespaces/ns1/"
      "pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(scoped);
  EXPECT_EQ(scoped->ReadLine(), Line(want1));
  EXPECT_EQ(scoped->ReadLine(), Line(want2));
  EXPECT_EQ(scoped->ReadLine(), std::nullopt);
  EXPECT_TRUE(scoped->body_done());

  auto all_pods =
      OpenWatch("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(all_pods);
  std::vector<std::string> names;
  while (std::optional<std::string> line = all_pods->ReadLine()) {
    names.push_back(nlohmann::json::parse(*line)["object"]["metadata"]["name"]);
  }
  EXPECT_TRUE(all_pods->body_done());
  EXPECT_EQ(names, (std::vector<std::string>{"p1", "p2", "p3", "p4"}));

  auto deployments = OpenWatch(
      "/clusters/c1/apis/apps/v1/"
      "deployments?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(deployments);
  EXPECT_EQ(deployments->ReadLine(), Line(deploy));
  EXPECT_EQ(deployments->ReadLine(), std::nullopt);
  EXPECT_TRUE(deployments->body_done());
}

TEST_F(HttpServerTest, ResumesAfterTheGivenResourceVersion) {
  AppendPod(110, "a");
  AppendPod(120, "b");
  EventPtr c = AppendPod(130, "c");
  // A two-event transaction: resuming from its first event's rv (130) must
  // deliver it whole.
  std::vector<EventPtr> txn = AppendTxn(140, {{"d"}, {"e"}});
  StartServer();

  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=120");
  ASSERT_TRUE(client);
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_EQ(client->ReadLine(), Line(txn[0]));
  EXPECT_EQ(client->ReadLine(), Line(txn[1]));
  EventPtr f = AppendPod(150, "f");
  EXPECT_EQ(client->ReadLine(), Line(f));
}

TEST_F(HttpServerTest, ManySmallWritesStayInOrder) {
  options_.max_write_bytes = 300;  // about two events per chunk
  std::vector<EventPtr> events;
  for (int i = 0; i < 600; ++i) {
    events.push_back(AppendPod(101 + i, "pod-" + std::to_string(i)));
  }
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  for (const EventPtr& event : events) {
    ASSERT_EQ(client->ReadLine(), Line(event));
  }
}

TEST_F(HttpServerTest, TooOldResourceVersionGetsOneExpiredEvent) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=50");
  ASSERT_TRUE(client);
  EXPECT_EQ(
      client->ReadLine(),
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"
      "\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too "
      "old resource version: 50 (100)\",\"reason\":\"Expired\","
      "\"code\":410}}");
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(client->ReadEof());
}

TEST_F(HttpServerTest, FallingOutOfTheLogEndsWithExpired) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(client);
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  log_.AppendBarrier(200);
  std::optional<std::string> line = client->ReadLine();
  ASSERT_TRUE(line);
  nlohmann::json error = nlohmann::json::parse(*line);
  EXPECT_EQ(error["type"], "ERROR");
  EXPECT_EQ(error["object"]["code"], 410);
  EXPECT_EQ(error["object"]["message"], "too old resource version: 110 (200)");
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(client->ReadEof());
}

TEST_F(HttpServerTest, FutureResourceVersionTimesOutWith504) {
  StartServer();
  auto client = Connect();
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      Answers(client.get(), "/api/v1/pods?watch=1&resourceVersion=500", 504));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_TRUE(IsStatus(*client, 504, "Timeout",
                       "Timeout: Too large resource version: 500, current: "
                       "100"));
  // client-go retries a 5xx only when Retry-After says when.
  EXPECT_EQ(client->header(http::field::retry_after),
            std::to_string(client->BodyJson()["details"]["retryAfterSeconds"]
                               .get<int>()));
}

TEST_F(HttpServerTest, FutureResourceVersionIsServedOnceReached) {
  options_.too_large_rv_wait = 5000ms;
  StartServer();
  auto appended = Connect();
  appended->Get("/api/v1/pods?watch=1&resourceVersion=110");
  auto advanced = Connect();  // reached by a transaction without events
  advanced->Get("/api/v1/pods?watch=1&resourceVersion=115");
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 2; }));
  AppendPod(110, "a");
  log_.AdvanceCurrentRv(115);
  EventPtr b = AppendPod(120, "b");
  ASSERT_TRUE(appended->ReadHeader());
  EXPECT_EQ(appended->status(), 200u);
  EXPECT_EQ(appended->ReadLine(), Line(b));
  ASSERT_TRUE(advanced->ReadHeader());
  EXPECT_EQ(advanced->status(), 200u);
  EXPECT_EQ(advanced->ReadLine(), Line(b));
}

// Issue 18 §1: every well-formed resource path streams, whether or not the
// table ever held a row of it; its bookmarks carry the best kind known.
TEST_F(HttpServerTest, UnseenResourcesStreamWithTheirKinds) {
  catalog_.Declare({"example.com", "v1", "gadgets"}, "GadgetThing");
  StartServer();
  struct Case {
    std::string path, kind, api_version;
  } cases[] = {
      // Built in, never seen.
      {"/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice",
       "discovery.k8s.io/v1"},
      {"/api/v1/namespaces/ns1/persistentvolumeclaims",
       "PersistentVolumeClaim", "v1"},
      // Declared (--kinds).
      {"/apis/example.com/v1/gadgets", "GadgetThing", "example.com/v1"},
      // Another version of a seen resource.
      {"/apis/apps/v1beta2/deployments", "Deployment", "apps/v1beta2"},
      // Nothing knows it: guessed from the plural.
      {"/clusters/c1/apis/example.com/v1/widgets", "Widget",
       "example.com/v1"},
      {"/apis/example.com/v1/policies", "Policy", "example.com/v1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    auto client = Connect();
    client->Get(c.path +
                "?watch=1&sendInitialEvents=true&resourceVersionMatch="
                "NotOlderThan");
    ASSERT_TRUE(client->ReadHeader());
    EXPECT_EQ(client->status(), 200u);
    EXPECT_EQ(client->ReadLine(),
              BookmarkLine(kFloorRv, c.kind, c.api_version, true));
  }
}

TEST_F(HttpServerTest, ABookmarkTakesTheKindOfTheFirstRowSeen) {
  StartServer();
  auto client = Connect();
  client->Get(
      "/apis/example.com/v1/foobars?watch=1&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&"
      "timeoutSeconds=3");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  // Guessed: a lower-case plural cannot say where the words of a kind
  // begin.
  EXPECT_EQ(client->ReadLine(),
            BookmarkLine(kFloorRv, "Foobar", "example.com/v1", true));
  // The resource's first row arrives; the next bookmark (the final one, at
  // timeoutSeconds) carries the table's kind.
  catalog_.Add({"example.com", "v1", "foobars"}, "FooBar");
  EXPECT_EQ(client->ReadLine(), BookmarkLine(kFloorRv, "FooBar",
                                             "example.com/v1"));
}

TEST_F(HttpServerTest, BadPathsAndValuesGetStatusBodies) {
  StartServer();
  auto client = Connect();
  struct Case {
    std::string target;
    unsigned code;
    std::string reason;
    std::string in_message;
  };
  for (const Case& c : std::vector<Case>{
           {"/nonsense", 404, "NotFound", "could not find"},
           {"/api/v1/namespaces/../pods?watch=1", 400, "BadRequest", ".."},
           {"/api/v1/pods?watch=1&resourceVersion=-1", 400, "BadRequest",
            "\"-1\""},
           {"/api/v1/pods?watch=1&resourceVersion=abc", 400, "BadRequest",
            "\"abc\""},
           {"/api/v1/pods?watch=1&resourceVersion=%FF", 400, "BadRequest",
            "resourceVersion"},
           {"/api/v1/pods?watch=1&timeoutSeconds=-5", 400, "BadRequest",
            "timeoutSeconds"},
           {"/api/v1/pods", 400, "BadRequest", "serves only watches"}}) {
    ASSERT_TRUE(Answers(client.get(), c.target, c.code));
    EXPECT_TRUE(
        IsStatus(*client, c.code, c.reason, c.in_message, Match::kContains))
        << c.target;
  }
  client->SendRaw(
      "POST /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\nContent-Length: "
      "0\r\n\r\n");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 405u);
  EXPECT_EQ(client->header(http::field::allow), "GET");
  EXPECT_EQ(client->BodyJson()["reason"], "MethodNotAllowed");
}

TEST_F(HttpServerTest, HeadIsAnsweredWithoutABodyAndTheConnectionGoesOn) {
  StartServer();
  auto client = Connect();
  client->SendRaw(
      "HEAD /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::optional<std::string> raw = client->ReadAllRaw();
  ASSERT_TRUE(raw.has_value());
  // The 405's header, with the length its body would have, and then at once
  // the next response.
  const size_t end = raw->find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << *raw;
  EXPECT_EQ(raw->rfind("HTTP/1.1 405 ", 0), 0u) << *raw;
  EXPECT_NE(raw->find("Content-Length: "), std::string::npos) << *raw;
  EXPECT_EQ(raw->find("Content-Length: 0\r\n"), std::string::npos) << *raw;
  EXPECT_EQ(raw->compare(end + 4, 15, "HTTP/1.1 200 OK"), 0) << *raw;
}

TEST_F(HttpServerTest, WatchOverHttp10IsRefused) {
  StartServer();
  auto client = Connect();
  client->SendRaw("GET /api/v1/pods?watch=1 HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 400u);
  EXPECT_TRUE(client->ReadEof());
}

TEST_F(HttpServerTest, MalformedHttpGets400AndTheServerSurvives) {
  StartServer();
  for (const std::string& garbage :
       {std::string("GARBAGE\r\n\r\n"),
        std::string("GET /healthz HTTP/9\r\n\r\n"),
        std::string("GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n"),
        std::string("\x01\x02\xff\xfe\r\n\r\n", 8)}) {
    ASSERT_NO_FATAL_FAILURE(ExpectRefusedAndClosed(garbage, 400, "BadRequest"));
  }
  auto big = Connect();
  big->SendRaw("GET /healthz HTTP/1.1\r\nX-Big: " +
               std::string((1 << 20) + 1, 'x') + "\r\n\r\n");
  ASSERT_TRUE(big->ReadResponse());
  EXPECT_EQ(big->status(), 431u);

  auto client = Connect();
  ASSERT_TRUE(Answers(client.get(), "/healthz", 200));
}

// Beast stores a header field's name and value lengths in 16 bits. One
// field past that, though the whole header is far below --max-header-bytes,
// used to throw out of the parser and end the process.
TEST_F(HttpServerTest, AHeaderFieldTooLongToStoreGets431AndTheServerSurvives) {
  StartServer();
  const std::string longest(kMaxHeaderFieldPartBytes, 'x');
  const std::string too_long(kMaxHeaderFieldPartBytes + 1, 'x');
  for (const std::string& request :
       {"GET /healthz HTTP/1.1\r\nX-Big: " + too_long + "\r\n\r\n",
        "GET /api/v1/pods?watch=1 HTTP/1.1\r\nX-Big: " +
            std::string(70000, 'x') + "\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nX-" + too_long + ": 1\r\n\r\n"}) {
    ASSERT_NO_FATAL_FAILURE(
        ExpectRefusedAndClosed(request, 431, "RequestEntityTooLarge"));
  }
  // The longest field Beast stores is still a request like any other.
  auto client = Connect();
  client->SendRaw("GET /healthz HTTP/1.1\r\nX-Big: " + longest + "\r\n\r\n");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 200u);
}

// Each field costs Beast memory beside its text: their number is bounded.
TEST_F(HttpServerTest, TooManyHeaderFieldsGet431) {
  StartServer();
  auto fields = [](size_t n) {
    std::string f;
    for (size_t i = 0; i < n; ++i) f += "X-" + std::to_string(i) + ": 1\r\n";
    return f;
  };
  // Host counts too.
  auto ok = Connect();
  ok->SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n" +
              fields(kMaxHeaderFields - 1) + "\r\n");
  ASSERT_TRUE(ok->ReadResponse());
  EXPECT_EQ(ok->status(), 200u);
  ExpectRefusedAndClosed("GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n" +
                             fields(kMaxHeaderFields) + "\r\n",
                         431, "RequestEntityTooLarge");
}

// A handler that throws takes itself down, not the process nor the
// handlers queued behind it.
TEST(RunHandlersTest, AnExceptionOutOfAHandlerEndsOnlyThatHandler) {
  boost::asio::io_context io;
  int ran_after = 0;
  boost::asio::post(io, [] { throw std::length_error("field value too large"); });
  boost::asio::post(io, [&] { ++ran_after; });
  boost::asio::post(io, [] { throw std::runtime_error("second"); });
  boost::asio::post(io, [&] { ++ran_after; });
  RunHandlers(io);  // returns once out of work
  EXPECT_EQ(ran_after, 2);
}

TEST_F(HttpServerTest, ReadyzFollowsReplication) {
  ready_ = false;
  StartServer();
  auto client = Connect();
  ASSERT_TRUE(Answers(client.get(), "/readyz", 503));
  EXPECT_EQ(client->response().body(), "not yet");  // the reason, verbatim
  ready_ = true;
  ASSERT_TRUE(Answers(client.get(), "/readyz", 200));
  ASSERT_TRUE(Answers(client.get(), "/livez", 200));
  EXPECT_EQ(client->response().body(), "ok");
}

TEST_F(HttpServerTest, TimeoutSecondsEndsTheStreamWithTheFinalChunk) {
  StartServer();
  auto client = Connect();
  auto start = std::chrono::steady_clock::now();
  client->Get("/api/v1/pods?watch=1&timeoutSeconds=1");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_FALSE(client->last_error()) << client->last_error().message();
  EXPECT_TRUE(client->body_done());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_TRUE(client->ReadEof());
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

TEST_F(HttpServerTest, StopEndsStreamsCleanlyAndRemovesTheSocket) {
  StartServer();
  auto watch1 = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(watch1);
  auto watch2 = OpenWatch("/apis/apps/v1/deployments?watch=1");
  ASSERT_TRUE(watch2);
  auto idle = Connect();
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 3; }));

  server_->Stop();
  for (TestClient* client : {watch1.get(), watch2.get()}) {
    EXPECT_EQ(client->ReadLine(), std::nullopt);
    EXPECT_TRUE(client->body_done());
    EXPECT_TRUE(client->ReadEof());
  }
  EXPECT_TRUE(idle->ReadEof());
  struct stat st;
  EXPECT_NE(lstat(options_.socket_path.c_str(), &st), 0);
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  EXPECT_FALSE(
      TestClient(stream_protocol::endpoint(options_.socket_path)).connected());
  server_->Stop();  // twice is fine
}

TEST_F(HttpServerTest, StopClosesAClientThatStoppedReading) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(client);
  // Far more than the socket buffers hold, never read by the client.
  std::string padding(60 * 1024, 'x');
  for (int i = 0; i < 14; ++i)
    AppendPod(110 + i, "pod-" + std::to_string(i) + padding);
  auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_TRUE(
      WaitFor([&] { return server_->active_sessions() == 0; }, 10000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 6s);
}

TEST_F(HttpServerTest, ServesLoopbackTcp) {
  uint16_t port = 0;
  {
    // Ask the kernel for a free port, then give it to the server.
    net::io_context io;
    net::ip::tcp::acceptor probe(io, {net::ip::make_address("127.0.0.1"), 0});
    port = probe.local_endpoint().port();
  }
  options_.tcp_listen = "127.0.0.1:" + std::to_string(port);
  StartServer();
  BasicTestClient<net::ip::tcp> client(
      {net::ip::make_address("127.0.0.1"), port});
  ASSERT_TRUE(client.connected());
  client.Get("/api/v1/pods?watch=1");
  ASSERT_TRUE(client.ReadHeader());
  EXPECT_EQ(client.status(), 200u);
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client.ReadLine(), Line(a));
  client.Get("/nonsense");  // mid-stream bytes are ignored
  EventPtr b = AppendPod(120, "b");
  EXPECT_EQ(client.ReadLine(), Line(b));
}

TEST_F(HttpServerTest, ClientDisconnectFreesItsSession) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(client);
  auto idle = Connect();  // between requests
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 2; }));
  client->Close();
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 1; }));
  // Appending afterwards wakes nobody and breaks nothing.
  AppendPod(110, "a");
  idle->Close();
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

// Past max_connections, a connection's request is answered 429 with
// Retry-After (what client-go retries), and the connection is closed; the
// open ones are untouched, and once one closes a new one is served.
TEST_F(HttpServerTest, ConnectionsPastTheLimitGet429AndAreClosed) {
  options_.max_connections = 2;
  StartServer();
  auto watch = OpenWatch("/api/v1/pods?watch=1");
  auto idle = Connect();
  ASSERT_TRUE(watch && idle);
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 2; }));

  auto refused = Connect();
  refused->Get("/api/v1/pods?watch=1");
  ASSERT_TRUE(refused->ReadResponse());
  EXPECT_EQ(refused->status(), 429u);
  EXPECT_EQ(refused->response()[http::field::retry_after], "1");
  const auto body = nlohmann::json::parse(refused->response().body());
  EXPECT_EQ(body["kind"], "Status");
  EXPECT_EQ(body["status"], "Failure");
  EXPECT_EQ(body["code"], 429);
  EXPECT_EQ(body["reason"], "TooManyRequests");
  EXPECT_EQ(body["message"],
            "too many connections to walwatch (--max-connections 2); try "
            "again later");
  EXPECT_EQ(body["details"]["retryAfterSeconds"], 1);
  EXPECT_TRUE(refused->ReadEof());
  EXPECT_EQ(server_->connections_refused().limit, 1u);
  EXPECT_EQ(server_->connections_refused().peer, 0u);

  // The open ones go on: the watch streams, the idle one is answered.
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(watch->ReadLine(), Line(a));
  ASSERT_TRUE(Answers(idle.get(), "/healthz", 200));
  idle->Close();
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 1; }));
  auto next = Connect();
  ASSERT_TRUE(Answers(next.get(), "/healthz", 200));
  EXPECT_EQ(server_->connections_refused().limit, 1u);
}

// Refusals hold few descriptors, briefly: at most 16 are answered at a
// time (further connections are closed at once), one that sends nothing is
// closed after 2 s, unanswered, and they never count against the limit.
TEST_F(HttpServerTest, RefusalsAreFewAndBriefAndTakeNoPlace) {
  options_.max_connections = 1;
  StartServer();
  auto watch = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(watch);
  std::vector<std::unique_ptr<TestClient>> silent;
  for (int i = 0; i < 16; ++i) {
    silent.push_back(Connect());
    ASSERT_TRUE(WaitFor(
        [&] { return server_->connections_refused().limit == size_t(i) + 1; }));
  }
  auto dropped = Connect();
  EXPECT_TRUE(dropped->ReadEof());  // closed at once, nothing written
  EXPECT_EQ(server_->connections_refused().limit, 17u);

  // With the watch gone, the place is free although 16 refusals are open.
  watch->Close();
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() <= 16; }));
  auto next = Connect();
  ASSERT_TRUE(Answers(next.get(), "/healthz", 200));
  EXPECT_EQ(server_->active_sessions(), 17u);  // the refusals were still open
  EXPECT_EQ(server_->connections_refused().limit, 17u);
  // The silent ones end unanswered within their 2 s.
  for (auto& client : silent) EXPECT_TRUE(client->ReadEof());
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 1; }));
}

// A watch counts in the log's watchers of its resource (what the wake hold
// grows with) from its header until it ends, whichever way it ends.
TEST_F(HttpServerTest, AWatchCountsInTheLogWhileItStreams) {
  StartServer();
  auto watchers = [&] { return log_.GetStats().watchers; };
  EXPECT_EQ(watchers(), 0u);
  auto one = OpenWatch("/api/v1/pods?watch=1");
  auto two = OpenWatch("/api/v1/pods?watch=1&timeoutSeconds=1");
  auto other = OpenWatch("/api/v1/configmaps?watch=1");
  ASSERT_TRUE(one && two && other);
  ASSERT_TRUE(WaitFor([&] { return watchers() == 3; }));
  log_.BeginBatch();
  AppendPod(110, "a");
  EXPECT_EQ(log_.EndBatch(), 2u);  // the pods watches, not the configmaps one
  // Ends by timeout, by the client leaving, and by 410.
  EXPECT_TRUE(WaitFor([&] { return watchers() == 2; }));
  one->Close();
  EXPECT_TRUE(WaitFor([&] { return watchers() == 1; }));
  log_.AppendBarrier(200);
  EXPECT_TRUE(WaitFor([&] { return watchers() == 0; }));
  EXPECT_EQ(server_->active_sessions(), 0u);
}

// ---------------------------------------------------------------------------
// Initial state (resourceVersion unset or 0) and its handoff to the log

TEST_F(HttpServerTest, InitialStateThenLiveLosesAndDoublesNothing) {
  state_.set_manual(true);
  AppendPod(110, "a");
  AppendPod(120, "b");
  StartServer();
  auto client = Connect();
  client->Get("/clusters/c1/api/v1/namespaces/default/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  std::vector<StateQuery> queries = state_.queries();
  ASSERT_EQ(queries.size(), 1u);
  EXPECT_EQ(queries[0].group, "");
  EXPECT_EQ(queries[0].version, "v1");
  EXPECT_EQ(queries[0].resource, "pods");
  EXPECT_EQ(queries[0].cluster, "c1");
  EXPECT_EQ(queries[0].ns, "default");

  // The state was read in a snapshot that saw a and b (handoff RV 120); c
  // commits after it, before the state is sent, and d while it is sent.
  EventPtr c = AppendPod(130, "c");
  stream->Ready(120);
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EventPtr a0 = StatePod("a", 120);
  EventPtr b0 = StatePod("b", 120);
  ASSERT_TRUE(stream->Push({a0}));
  EXPECT_EQ(client->ReadLine(), Line(a0));
  EventPtr d = AppendPod(140, "d");
  ASSERT_TRUE(stream->Push({b0}));
  stream->Finish();
  EXPECT_EQ(client->ReadLine(), Line(b0));
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_EQ(client->ReadLine(), Line(d));
  EventPtr e = AppendPod(150, "e");
  EXPECT_EQ(client->ReadLine(), Line(e));
}

// The log drops the events after the state's RV while the state is still
// being sent: the stream ends with the 410 at once, and the reader is
// cancelled; the rest of the state is not sent for nothing.
TEST_F(HttpServerTest, StateOutlivedByTheLogEndsWith410BeforeItsRest) {
  state_.set_manual(true);
  AppendPod(110, "a");
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(110);
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EventPtr a0 = StatePod("a", 110);
  ASSERT_TRUE(stream->Push({a0}));
  EXPECT_EQ(client->ReadLine(), Line(a0));
  log_.AppendBarrier(200);  // the events after 110 are gone
  ASSERT_TRUE(stream->Push({StatePod("b", 110)}));
  std::optional<std::string> line = client->ReadLine();
  ASSERT_TRUE(line);
  nlohmann::json error = nlohmann::json::parse(*line, nullptr, false);
  EXPECT_EQ(error.value("type", ""), "ERROR") << *line;
  EXPECT_EQ(error["object"].value("code", 0), 410) << *line;
  EXPECT_EQ(error["object"].value("message", ""),
            "too old resource version: 110 (200)");
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(stream->cancelled());
}

TEST_F(HttpServerTest, ResourceVersionZeroAlsoSendsTheState) {
  state_.set_manual(true);
  AppendPod(110, "a");
  // A transaction without events moved the stream past 110.
  log_.AdvanceCurrentRv(115);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&resourceVersion=0");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(115);
  EventPtr a0 = StatePod("a", 115);
  ASSERT_TRUE(stream->Push({a0}));
  stream->Finish();
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), Line(a0));
  EventPtr b = AppendPod(120, "b");
  EXPECT_EQ(client->ReadLine(), Line(b));
}

TEST_F(HttpServerTest, ManyStateEventsArriveInOrderThroughSmallWrites) {
  options_.max_write_bytes = 300;
  options_.max_initial_state_queue_bytes = 4096;  // Push blocks: flow control
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  std::vector<EventPtr> objects;
  for (int i = 0; i < 500; ++i) {
    objects.push_back(StatePod("pod-" + std::to_string(i), kFloorRv));
  }
  std::thread producer([&] {
    stream->Ready(kFloorRv);
    for (size_t i = 0; i < objects.size(); i += 7) {
      std::vector<EventPtr> batch(
          objects.begin() + i,
          objects.begin() + std::min(objects.size(), i + 7));
      if (!stream->Push(std::move(batch))) return;
    }
    stream->Finish();
  });
  ASSERT_TRUE(client->ReadHeader());
  for (const EventPtr& object : objects) {
    ASSERT_EQ(client->ReadLine(), Line(object));
  }
  producer.join();
  EventPtr live = AppendPod(110, "live");
  EXPECT_EQ(client->ReadLine(), Line(live));
}

// The state reader holds a snapshot open while it waits for the client:
// past --initial-state-timeout a client that slow gets 410 and relists.
TEST(InitialStateStreamTest, AConsumerTooSlowFailsTheStreamWith410) {
  InitialStateStream stream(/*max_queued_bytes=*/1,
                            std::chrono::milliseconds(200));
  stream.Ready(kFloorRv);
  ASSERT_TRUE(stream.Push({StatePod("a", kFloorRv)}));  // the queue was empty
  EXPECT_FALSE(stream.Push({StatePod("b", kFloorRv)}));  // nobody takes "a"
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t = stream.Take(&taken, [] {});
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.error.code, 410);
  EXPECT_EQ(t.error.reason, "Expired");
  EXPECT_EQ(t.error.message,
            "the initial state was not read within 200 ms "
            "(--initial-state-timeout): the client reads too slowly; relist");
}

// A client that takes nothing for the stall timeout gives the reader back
// long before the overall one; one that keeps taking does not.
TEST(InitialStateStreamTest, AConsumerThatTakesNothingStallsTheStream) {
  int stalls = 0;
  InitialStateStream stream(/*max_queued_bytes=*/1, std::chrono::minutes(5),
                            std::chrono::seconds(1),
                            [&stalls] { ++stalls; });
  stream.Ready(kFloorRv);
  ASSERT_TRUE(stream.Push({StatePod("a", kFloorRv)}));
  std::thread consumer([&] {
    std::vector<EventPtr> taken;
    // Takes "a" within the stall timeout, then nothing more.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stream.Take(&taken, [] {});
  });
  EXPECT_TRUE(stream.Push({StatePod("b", kFloorRv)}));
  consumer.join();
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(stream.Push({StatePod("c", kFloorRv)}));  // nobody takes "b"
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(stalls, 1);
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t = stream.Take(&taken, [] {});
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.error.code, 410);
  EXPECT_EQ(t.error.message,
            "the initial state was not read for 1 s "
            "(--initial-state-stall-timeout): the client reads too slowly; "
            "relist");
}

// A consumer that takes one event every 50 ms keeps the producer waiting on
// a full queue nearly all the time while taking a few KiB per second: with
// --initial-state-min-rate it gives the reader back after about one stall
// timeout of waiting; with a rate of 0 (any progress will do) it keeps it.
// Fails without the rate: every Push's own wait is short, so the stall bound
// never comes due and only the 5 minute bound would end the stream.
struct Trickle {
  uint64_t min_rate = 0;
  int stalls = 0;
  int pushed = 0;
  bool refused = false;
  std::string message;
};

void RunTrickle(Trickle* run, std::chrono::milliseconds consumer_for) {
  InitialStateStream stream(/*max_queued_bytes=*/1, std::chrono::minutes(5),
                            std::chrono::seconds(1),
                            [run] { ++run->stalls; }, run->min_rate);
  stream.Ready(kFloorRv);
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    const auto until = std::chrono::steady_clock::now() + consumer_for;
    while (!stop && std::chrono::steady_clock::now() < until) {
      std::vector<EventPtr> taken;
      stream.Take(&taken, [] {});
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // An upper bound for a loaded machine, not a measure of speed.
  const auto bound = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < bound) {
    if (!stream.Push({StatePod("p" + std::to_string(run->pushed), kFloorRv)})) {
      run->refused = true;
      break;
    }
    if (++run->pushed >= 60) break;  // the consumer took 60: enough to judge
  }
  stop = true;
  stream.Cancel();
  consumer.join();
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t = stream.Take(&taken, [] {});
  if (t.failed) run->message = t.error.message;
}

TEST(InitialStateStreamTest, AConsumerThatTricklesIsEndedByTheMinimumRate) {
  Trickle slow;
  slow.min_rate = 1 << 20;
  RunTrickle(&slow, std::chrono::seconds(60));
  EXPECT_TRUE(slow.refused) << "pushed " << slow.pushed;
  EXPECT_LT(slow.pushed, 60);
  EXPECT_EQ(slow.stalls, 1);
  EXPECT_EQ(slow.message,
            "the initial state was read at less than 1 MiB/s "
            "(--initial-state-min-rate) for 1 s "
            "(--initial-state-stall-timeout): the client reads too slowly; "
            "relist");

  // 60 events at one per 50 ms: three stall windows of waiting, each with
  // progress.
  Trickle any;
  any.min_rate = 0;
  RunTrickle(&any, std::chrono::seconds(60));
  EXPECT_FALSE(any.refused) << any.message;
  EXPECT_EQ(any.pushed, 60);
  EXPECT_EQ(any.stalls, 0);
}

TEST_F(HttpServerTest, AClientTooSlowForTheInitialStateGets410) {
  options_.max_initial_state_queue_bytes = 4096;
  options_.initial_state_timeout = std::chrono::milliseconds(300);
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  std::atomic<bool> gave_up{false};
  std::thread producer([&] {
    stream->Ready(kFloorRv);
    // Far more than the socket and the queue hold while nobody reads.
    for (int i = 0; i < 20000; ++i) {
      if (!stream->Push({StatePod("pod-" + std::to_string(i), kFloorRv)})) {
        gave_up = true;
        return;
      }
    }
    stream->Finish();
  });
  ASSERT_TRUE(client->ReadHeader());
  producer.join();  // the client has read nothing past the header yet
  EXPECT_TRUE(gave_up);
  std::optional<std::string> line, last;
  while ((line = client->ReadLine())) last = line;
  ASSERT_TRUE(last.has_value());
  Parsed end = ParseLine(*last);
  EXPECT_EQ(end.type, "ERROR") << *last;
  EXPECT_NE(last->find("\"code\":410"), std::string::npos) << *last;
  EXPECT_NE(last->find("--initial-state-timeout"), std::string::npos) << *last;
}

TEST_F(HttpServerTest, StateErrorBeforeReadyIsTheStatusAnswer) {
  state_.set_manual(true);
  StartServer();
  struct Case {
    StateError error;
    unsigned code;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {{409, "Conflict", "commit order and visibility disagree"},
            409,
            "Conflict"},
           {{410, "Expired", "snapshot older than the log"}, 410, "Expired"},
           {{504, "Timeout", "walwatch has not caught up"}, 504, "Timeout"},
           {{500, "InternalError", "cannot connect"}, 500, "InternalError"},
           {{500, "", "no reason given"}, 500, "InternalError"}}) {
    auto client = Connect();
    client->Get("/api/v1/pods?watch=1");
    std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
    ASSERT_TRUE(stream);
    stream->Fail(c.error);
    ASSERT_TRUE(client->ReadResponse()) << c.error.message;
    EXPECT_TRUE(IsStatus(*client, c.code, c.reason, c.error.message));
    EXPECT_EQ(client->BodyJson().contains("details"), c.code == 504);
    // The watch's connection ends with its answer.
    EXPECT_TRUE(client->ReadEof());
  }
}

TEST_F(HttpServerTest, StateErrorAfterReadyIsAnErrorEvent) {
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(kFloorRv);
  EventPtr a0 = StatePod("a", kFloorRv);
  ASSERT_TRUE(stream->Push({a0}));
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), Line(a0));
  stream->Fail({500, "InternalError", "connection lost"});
  std::optional<std::string> line = client->ReadLine();
  ASSERT_TRUE(line);
  EXPECT_EQ(*line,
            "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"
            "\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
            "\"reading the initial state failed: connection lost\",\"reason\":"
            "\"InternalError\",\"code\":500}}");
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(client->ReadEof());
}

TEST_F(HttpServerTest, StateCancelledWhenTheClientLeaves) {
  state_.set_manual(true);
  StartServer();
  auto waiting = Connect();  // before Ready
  waiting->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> before = state_.WaitForStream();
  ASSERT_TRUE(before);
  auto streaming = Connect();  // while the state is sent
  streaming->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> during = state_.WaitForStream();
  ASSERT_TRUE(during);
  during->Ready(kFloorRv);
  EventPtr a0 = StatePod("a", kFloorRv);
  ASSERT_TRUE(during->Push({a0}));
  ASSERT_TRUE(streaming->ReadHeader());
  EXPECT_EQ(streaming->ReadLine(), Line(a0));

  waiting->Close();
  streaming->Close();
  EXPECT_TRUE(WaitFor([&] { return before->cancelled(); }));
  EXPECT_TRUE(WaitFor([&] { return during->cancelled(); }));
  // A producer blocked on a full queue would return false; one that is not
  // is told at its next Push.
  EXPECT_FALSE(during->Push({StatePod("b", kFloorRv)}));
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

TEST_F(HttpServerTest, StopWhileTheStateIsReadAnswers503) {
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  server_->Stop();
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_TRUE(IsStatus(*client, 503, "ServiceUnavailable",
                       "walwatch is shutting down"));
  EXPECT_TRUE(WaitFor([&] { return stream->cancelled(); }));
}

TEST_F(HttpServerTest, WithoutAStateSourceInitialEventsAre503) {
  options_.state = nullptr;
  AppendPod(110, "a");
  StartServer();
  auto client = Connect();
  for (const char* target :
       {"/api/v1/pods?watch=1", "/api/v1/pods?watch=1&resourceVersion=0",
        "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch="
        "NotOlderThan",
        "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch="
        "NotOlderThan",
        "/walwatch/v1/freshrv", "/walwatch/v1/handoff?snapshot=1:2:"}) {
    ASSERT_TRUE(Answers(client.get(), target, 503));
    EXPECT_TRUE(IsStatus(*client, 503, "ServiceUnavailable",
                         "walwatch runs without a state source",
                         Match::kContains))
        << target;
  }
  // A watch from an RV needs no state.
  client->Get("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EXPECT_EQ(ParseLine(*client->ReadLine()).name, "a");
}

// ---------------------------------------------------------------------------
// sendInitialEvents (WatchList)

TEST_F(HttpServerTest, WatchListEndsItsStateWithAnAnnotatedBookmark) {
  state_.set_manual(true);
  AppendPod(110, "a");
  StartServer();
  auto client = Connect();
  client->Get(
      "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch="
      "NotOlderThan&allowWatchBookmarks=true");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  EventPtr b = AppendPod(120, "b");
  stream->Ready(110);
  EventPtr a0 = StatePod("a", 110);
  ASSERT_TRUE(stream->Push({a0}));
  stream->Finish();
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), Line(a0));
  EXPECT_EQ(client->ReadLine(), BookmarkLine(110, "Pod", "v1", true));
  EXPECT_EQ(client->ReadLine(), Line(b));
}

TEST_F(HttpServerTest, WatchListBookmarkNamesTheKindAndGroup) {
  StartServer();
  auto client = Connect();
  // The end bookmark is sent even without allowWatchBookmarks.
  client->Get(
      "/apis/apps/v1/deployments?watch=1&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(),
            BookmarkLine(kFloorRv, "Deployment", "apps/v1", true));
}

TEST_F(HttpServerTest, WatchListFromAFutureRvWaitsForItThenReadsTheState) {
  options_.too_large_rv_wait = 5000ms;
  AppendPod(110, "a");
  StartServer();
  auto client = Connect();
  client->Get(
      "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch="
      "NotOlderThan&resourceVersion=150");
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 1; }));
  EXPECT_EQ(state_.read_states(), 0);
  log_.AdvanceCurrentRv(150);
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EXPECT_EQ(state_.read_states(), 1);
  // The fake's state is empty, at the current RV.
  EXPECT_EQ(client->ReadLine(), BookmarkLine(150, "Pod", "v1", true));
}

TEST_F(HttpServerTest, WatchListFromAnRvNeverReachedIs504) {
  StartServer();
  auto client = Connect();
  ASSERT_TRUE(Answers(client.get(),
                      "/api/v1/pods?watch=1&sendInitialEvents=true&"
                      "resourceVersionMatch=NotOlderThan&resourceVersion=999",
                      504));
  EXPECT_TRUE(IsStatus(*client, 504, "Timeout",
                       "Timeout: Too large resource version: 999, current: "
                       "100"));
  EXPECT_EQ(state_.read_states(), 0);
}

TEST_F(HttpServerTest, SendInitialEventsFalseStartsWithoutState) {
  AppendPod(110, "a");
  state_.set_answer({110, std::nullopt});
  StartServer();
  // Unset RV: from the most recent RV, which the state source gives.
  auto recent = OpenWatch(
      "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch="
      "NotOlderThan");
  ASSERT_TRUE(recent);
  EXPECT_EQ(state_.fresh_rvs(), 1);
  // RV 0: from any RV, here the log's current one.
  auto any = OpenWatch(
      "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch="
      "NotOlderThan&resourceVersion=0");
  ASSERT_TRUE(any);
  // RV N: after N, as a plain watch.
  auto after = OpenWatch(
      "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch="
      "NotOlderThan&resourceVersion=100");
  ASSERT_TRUE(after);
  EXPECT_EQ(ParseLine(*after->ReadLine()).name, "a");

  EventPtr b = AppendPod(120, "b");
  EXPECT_EQ(recent->ReadLine(), Line(b));
  EXPECT_EQ(any->ReadLine(), Line(b));
  EXPECT_EQ(after->ReadLine(), Line(b));
  EXPECT_EQ(state_.read_states(), 0);
  EXPECT_EQ(state_.fresh_rvs(), 1);

  state_.set_answer({0, StateError{504, "Timeout", "not caught up"}});
  auto failing = Connect();
  ASSERT_TRUE(Answers(failing.get(),
                      "/api/v1/pods?watch=1&sendInitialEvents=false&"
                      "resourceVersionMatch=NotOlderThan",
                      504));
  EXPECT_TRUE(IsStatus(*failing, 504, "Timeout", "not caught up"));
}

// ---------------------------------------------------------------------------
// Bookmarks

TEST_F(HttpServerTest, IdleBookmarksFollowTheCurrentRv) {
  options_.bookmark_interval = 50ms;
  StartServer();
  auto client = OpenWatch(
      "/api/v1/pods?watch=1&resourceVersion=100&allowWatchBookmarks=1");
  ASSERT_TRUE(client);
  std::optional<uint64_t> rv = ReadBookmark(client.get());
  ASSERT_TRUE(rv);
  EXPECT_EQ(*rv, 100u);
  // Keepalives and other tables' transactions move the current RV.
  log_.AdvanceCurrentRv(200);
  uint64_t last = *rv;
  for (int i = 0; i < 200 && last < 200; ++i) {
    rv = ReadBookmark(client.get());
    ASSERT_TRUE(rv);
    EXPECT_GE(*rv, last);
    last = *rv;
  }
  EXPECT_EQ(last, 200u);
}

TEST_F(HttpServerTest, BookmarksWithoutAllowWatchBookmarksAreNotSent) {
  options_.bookmark_interval = 20ms;
  StartServer();
  auto client =
      OpenWatch("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(client);
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_EQ(client->ReadLine(), std::nullopt);  // timeout: no bookmark
  EXPECT_TRUE(client->body_done());
}

TEST_F(HttpServerTest, BookmarksNeverPassAnUnsentEventAndNeverGoBack) {
  // One event per write, and a bookmark due at nearly every turn: bookmarks
  // land between the writes of a long stream.
  options_.bookmark_interval = 1ms;
  options_.max_write_bytes = 200;
  // Events the watch filters out (another namespace) between its own.
  constexpr int kEvents = 3000;
  std::vector<uint64_t> own;
  for (int i = 0; i < kEvents; ++i) {
    uint64_t commit = 101 + i;
    if (i % 3 == 2) {
      AppendPod(commit, "other-" + std::to_string(i), "ns2");
    } else {
      AppendPod(commit, "own-" + std::to_string(i), "ns1");
      own.push_back(commit);
    }
  }
  StartServer();
  auto client = OpenWatch(
      "/api/v1/namespaces/ns1/"
      "pods?watch=1&resourceVersion=100&allowWatchBookmarks=true");
  ASSERT_TRUE(client);
  size_t next = 0;  // index in `own` of the next event expected
  uint64_t last_rv = 100;
  int bookmarks = 0;
  while (next < own.size()) {
    std::optional<std::string> line = client->ReadLine();
    ASSERT_TRUE(line);
    Parsed p = ParseLine(*line);
    ASSERT_GE(p.rv, last_rv) << *line;
    last_rv = p.rv;
    if (p.type == "BOOKMARK") {
      ++bookmarks;
      // Resuming from it delivers exactly the events not received yet.
      ASSERT_LT(p.rv, own[next]) << *line;
      EventLog::SeekResult seek = log_.Seek(p.rv);
      ASSERT_EQ(seek.status, EventLog::SeekStatus::kOk);
      std::vector<EventPtr> rest;
      log_.Read(seek.seq, 3, &rest);
      size_t k = 0;
      while (k < rest.size() && rest[k]->ns() != "ns1") ++k;
      ASSERT_LT(k, rest.size());
      ASSERT_EQ(rest[k]->rv, own[next]) << *line;
      continue;
    }
    ASSERT_EQ(p.type, "ADDED") << *line;
    ASSERT_EQ(p.rv, own[next]) << *line;
    ++next;
  }
  EXPECT_GT(bookmarks, 0);
  // Past its last event, the watch's bookmarks reach the current RV, past
  // the events it filtered out.
  const uint64_t current = 100 + kEvents;
  uint64_t rv = 0;
  for (int i = 0; i < 1000 && rv < current; ++i) {
    std::optional<uint64_t> b = ReadBookmark(client.get());
    ASSERT_TRUE(b);
    EXPECT_GE(*b, last_rv);
    rv = *b;
  }
  EXPECT_EQ(rv, current);
}

TEST_F(HttpServerTest, BookmarkJustBeforeTheTimeout) {
  options_.bookmark_interval = 60000ms;
  StartServer();
  auto client = OpenWatch(
      "/api/v1/pods?watch=1&resourceVersion=100&allowWatchBookmarks=true&"
      "timeoutSeconds=1");
  ASSERT_TRUE(client);
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  log_.AdvanceCurrentRv(115);
  EXPECT_EQ(client->ReadLine(), BookmarkLine(115));
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_FALSE(client->last_error()) << client->last_error().message();
  EXPECT_TRUE(client->body_done());
}

TEST_F(HttpServerTest, NoPeriodicBookmarkDuringTheInitialState) {
  options_.bookmark_interval = 1ms;
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&allowWatchBookmarks=true");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(kFloorRv);
  ASSERT_TRUE(client->ReadHeader());
  for (int i = 0; i < 20; ++i) {
    EventPtr object = StatePod("p" + std::to_string(i), kFloorRv);
    ASSERT_TRUE(stream->Push({object}));
    ASSERT_EQ(client->ReadLine(), Line(object));
  }
  stream->Finish();
  // No end bookmark for a plain watch; periodic ones from now on.
  std::optional<uint64_t> rv = ReadBookmark(client.get());
  ASSERT_TRUE(rv);
  EXPECT_EQ(*rv, kFloorRv);
}

// ---------------------------------------------------------------------------
// Selectors

TEST_F(HttpServerTest, SelectorsFilterInitialAndLiveEvents) {
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get(
      "/api/v1/pods?watch=1&labelSelector=app%3Dweb%2Ctier%20in%20(fe)"
      "&fieldSelector=metadata.name!%3Dweb-2");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  auto pod = [](const std::string& name, const std::string& app) {
    EventSpec spec;
    spec.name = name;
    spec.labels = {{"app", app}, {"tier", "fe"}};
    return spec;
  };
  stream->Ready(kFloorRv);
  EventPtr web1 = StateEvent(pod("web-1", "web"), kFloorRv);
  ASSERT_TRUE(stream->Push({StateEvent(pod("db-1", "db"), kFloorRv), web1,
                            StateEvent(pod("web-2", "web"), kFloorRv)}));
  stream->Finish();
  AppendTxn(110, {pod("db-2", "db")});
  EventPtr web3 = AppendTxn(120, {pod("web-3", "web")}).front();
  AppendTxn(130, {pod("web-2", "web")});
  EventSpec no_tier;
  no_tier.name = "web-4";
  no_tier.labels = {{"app", "web"}};
  AppendTxn(140, {no_tier});
  EventPtr web5 = AppendTxn(150, {pod("web-5", "web")}).front();
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), Line(web1));
  EXPECT_EQ(client->ReadLine(), Line(web3));
  EXPECT_EQ(client->ReadLine(), Line(web5));
}

TEST_F(HttpServerTest, LabelChangeEntersAndLeavesTheSelection) {
  StartServer();
  auto open = [&](const std::string& query) {
    auto client = Connect();
    client->Get("/api/v1/namespaces/default/pods?watch=1&resourceVersion=100" +
                query);
    EXPECT_TRUE(client->ReadHeader());
    return client;
  };
  auto web = open("&labelSelector=app%3Dweb");
  auto db = open("&labelSelector=app%3Ddb");
  auto both = open("&labelSelector=app%20in%20(web%2Cdb)");
  auto any = open("");
  auto other_name = open("&labelSelector=app%3Ddb&fieldSelector=metadata.name%3Dq");

  // p moves from app=db to app=web: the event carries its old labels and
  // its old object as a DELETED line at the event's RV.
  EventSpec old_spec{"p"};
  old_spec.labels = {{"app", "db"}};
  old_spec.type = EventType::kDeleted;
  EventPtr old = MakeEvent(old_spec, 110, 110, true);
  std::string prev_wire(old->wire());
  EventSpec new_spec{"p"};
  new_spec.labels = {{"app", "web"}};
  new_spec.type = EventType::kModified;
  EventPtr modified = MakeEvent(new_spec, 110, 110, true, old.get());
  ASSERT_EQ(log_.AppendTransaction(110, {modified}),
            EventLog::AppendResult::kAppended);
  last_commit_ = 110;
  EventPtr marker = AppendPod(120, "marker");

  std::string added = Line(modified);
  added.replace(0, std::string("{\"type\":\"MODIFIED\",").size(),
                "{\"type\":\"ADDED\",");
  EXPECT_EQ(web->ReadLine(), added) << "entering app=web";
  EXPECT_EQ(db->ReadLine(), prev_wire.substr(0, prev_wire.size() - 1))
      << "leaving app=db";
  EXPECT_EQ(both->ReadLine(), Line(modified)) << "staying in";
  EXPECT_EQ(any->ReadLine(), Line(modified)) << "no label selector";
  EXPECT_EQ(any->ReadLine(), Line(marker));
  // Never in it: its name is not q, before or after.
  auto marker_q = AppendTxn(130, {[] {
                              EventSpec q{"q"};
                              q.labels = {{"app", "db"}};
                              return q;
                            }()})
                      .front();
  EXPECT_EQ(other_name->ReadLine(), Line(marker_q));
}

TEST_F(HttpServerTest, InvalidSelectorsAre400) {
  StartServer();
  auto client = Connect();
  struct Case {
    std::string query;
    std::string in_message;
  };
  for (const Case& c : std::vector<Case>{
           {"labelSelector=app%20in%20(", "unable to parse requirement"},
           {"labelSelector=-bad-%3Dx", "-bad-"},
           {"fieldSelector=spec.nodeName%3Dn1",
            "field label not supported: spec.nodeName"}}) {
    ASSERT_TRUE(Answers(client.get(), "/api/v1/pods?watch=1&" + c.query, 400));
    EXPECT_TRUE(
        IsStatus(*client, 400, "BadRequest", c.in_message, Match::kContains))
        << c.query;
  }
  EXPECT_EQ(state_.read_states(), 0);
}

// ---------------------------------------------------------------------------
// /walwatch/v1/handoff and /walwatch/v1/freshrv

TEST_F(HttpServerTest, HandoffAndFreshRvAnswerTheResourceVersion) {
  StartServer();
  auto client = Connect();
  state_.set_answer({4242, std::nullopt});
  ASSERT_TRUE(Answers(client.get(),
                      "/walwatch/v1/handoff?snapshot=700%3A712%3A701%2C705&"
                      "insertLSN=0%2F16B3748",
                      200));
  EXPECT_EQ(client->header(http::field::content_type), "application/json");
  EXPECT_EQ(client->response().body(),
            "{\"kind\":\"ResourceVersion\",\"apiVersion\":"
            "\"walwatch.clusterpedia.io/v1\",\"resourceVersion\":\"4242\"}");
  auto handoffs = state_.handoffs();
  ASSERT_EQ(handoffs.size(), 1u);
  EXPECT_EQ(handoffs[0].first, "700:712:701,705");
  EXPECT_EQ(handoffs[0].second, 0x16B3748u);

  // Keep-alive: the same connection asks again, without insertLSN.
  ASSERT_TRUE(Answers(client.get(), "/walwatch/v1/handoff?snapshot=1:2:", 200));
  EXPECT_EQ(state_.handoffs().at(1).second, 0u);

  state_.set_answer({5000, std::nullopt});
  ASSERT_TRUE(Answers(client.get(), "/walwatch/v1/freshrv", 200));
  EXPECT_EQ(client->BodyJson()["resourceVersion"], "5000");
  EXPECT_EQ(state_.fresh_rvs(), 1);
}

// A worker must not spend itself on an answer nobody waits for any more:
// once a session gives up waiting (its 60 s deadline, or here shutdown,
// which take the same path), the request says so.
TEST_F(HttpServerTest, AStateRequestIsNoLongerWantedOnceTheSessionGivesUp) {
  state_.set_hold(true);
  StartServer();
  auto client = Connect();
  client->Get("/walwatch/v1/freshrv");
  auto other = Connect();
  other->Get("/walwatch/v1/handoff?snapshot=1:2:");
  ASSERT_TRUE(WaitFor([&] { return state_.held_wanted().size() == 2; }));
  EXPECT_EQ(state_.held_wanted(), (std::vector<bool>{true, true}));
  server_->Stop();
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 503u);
  ASSERT_TRUE(other->ReadResponse());
  EXPECT_EQ(other->status(), 503u);
  EXPECT_EQ(state_.held_wanted(), (std::vector<bool>{false, false}));
}

// A client that goes away while its request waits (a handoff, a freshrv,
// a watch waiting for its start RV) frees the worker at once, not at the
// session's 60 s deadline.
TEST_F(HttpServerTest, AClientThatLeavesWhileItsRequestWaitsIsNoLongerWanted) {
  state_.set_hold(true);
  StartServer();
  auto fresh = Connect();
  fresh->Get("/walwatch/v1/freshrv");
  auto handoff = Connect();
  handoff->Get("/walwatch/v1/handoff?snapshot=1:2:");
  auto watch = Connect();
  watch->Get(
      "/api/v1/pods?watch=1&sendInitialEvents=false&"
      "resourceVersionMatch=NotOlderThan");
  ASSERT_TRUE(WaitFor([&] { return state_.held_wanted().size() == 3; }));
  EXPECT_EQ(state_.held_wanted(), (std::vector<bool>{true, true, true}));
  fresh->Close();
  handoff->Close();
  watch->Close();
  EXPECT_TRUE(WaitFor([&] {
    return state_.held_wanted() == std::vector<bool>{false, false, false};
  })) << "still wanted after the clients left";
}

// While a request waits, the read that notices a client leaving takes any
// pipelined request that follows; it is answered after, in order, and the
// connection goes on.
TEST_F(HttpServerTest, ARequestPipelinedBehindAWaitingOneIsAnsweredAfterIt) {
  state_.set_hold(true);
  StartServer();
  auto client = Connect();
  client->SendRaw(
      "GET /walwatch/v1/freshrv HTTP/1.1\r\nHost: walwatch\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: walwatch\r\n\r\n");
  ASSERT_TRUE(WaitFor([&] { return state_.held_wanted().size() == 1; }));
  state_.ReleaseHeld({777, std::nullopt});
  ASSERT_TRUE(client->ReadResponse()) << client->last_error().message();
  EXPECT_EQ(client->status(), 200u);
  EXPECT_EQ(client->BodyJson()["resourceVersion"], "777");
  ASSERT_TRUE(client->ReadResponse()) << client->last_error().message();
  EXPECT_EQ(client->status(), 200u);
  EXPECT_EQ(client->response().body(), "ok");
  // A waiting request whose client stays: keep-alive holds after it too.
  state_.set_hold(true);
  client->Get("/walwatch/v1/handoff?snapshot=1:2:");
  ASSERT_TRUE(WaitFor([&] { return state_.held_wanted().size() == 1; }));
  state_.ReleaseHeld({778, std::nullopt});
  ASSERT_TRUE(client->ReadResponse()) << client->last_error().message();
  EXPECT_EQ(client->BodyJson()["resourceVersion"], "778");
  ASSERT_TRUE(Answers(client.get(), "/healthz", 200));
}

TEST_F(HttpServerTest, HandoffAndFreshRvErrorsAreStatuses) {
  StartServer();
  auto client = Connect();
  struct Case {
    StateError error;
    std::string reason;
  };
  for (const std::string& target :
       {std::string("/walwatch/v1/handoff?snapshot=1:2:"),
        std::string("/walwatch/v1/freshrv")}) {
    for (const Case& c : std::vector<Case>{
             {{400, "BadRequest", "bad snapshot"}, "BadRequest"},
             {{409, "Conflict", "list again in a new snapshot"}, "Conflict"},
             {{410, "Expired", "older than the log"}, "Expired"},
             {{504, "Timeout", "not caught up"}, "Timeout"},
             {{500, "InternalError", "cannot connect"}, "InternalError"}}) {
      state_.set_answer({0, c.error});
      const unsigned code = static_cast<unsigned>(c.error.code);
      ASSERT_TRUE(Answers(client.get(), target, code));
      EXPECT_TRUE(IsStatus(*client, code, c.reason, c.error.message)) << target;
    }
  }
  // Refused before the state source is asked.
  size_t asked = state_.handoffs().size();
  for (const char* target :
       {"/walwatch/v1/handoff", "/walwatch/v1/handoff?snapshot=9:1:",
        "/walwatch/v1/handoff?snapshot=1:2:&insertLSN=16B3748"}) {
    ASSERT_TRUE(Answers(client.get(), target, 400));
  }
  EXPECT_EQ(state_.handoffs().size(), asked);
}

// ---------------------------------------------------------------------------
// Slow watchers and metrics

// A client that stops reading fills its socket mid-chunk. When it reads
// again, the session continues the chunk exactly where the socket filled:
// every line arrives whole and in order.
TEST_F(HttpServerTest, AClientThatStopsReadingGetsEveryByteWhenItReadsAgain) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  std::vector<EventPtr> events = AppendLargePods(400);  // ~1.6 MB
  // Full: the unread bytes stop growing, with most of the events unsent.
  size_t unread = 0;
  ASSERT_TRUE(WaitFor([&] {
    size_t now = client->Unread();
    bool full = now == unread && now > 64 * 1024;
    unread = now;
    return full;
  }));
  ASSERT_LT(unread, 400u * kLargePodBytes / 2);
  for (const EventPtr& event : events) {
    ASSERT_EQ(client->ReadLine(), Line(event));
  }
}

TEST_F(HttpServerTest, ABacklogPastTheBoundEndsWith410AndSkipsNothing) {
  options_.max_backlog_bytes = 64 * 1024;
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  // Far more than the socket buffers and the bound, while the client does
  // not read; the log (8 MiB) keeps all of it.
  std::vector<EventPtr> events = AppendLargePods(400);
  size_t received = 0;
  std::optional<std::string> line;
  while ((line = client->ReadLine())) {
    if (ParseLine(*line).type == "ERROR") break;
    ASSERT_LT(received, events.size());
    ASSERT_EQ(*line, Line(events[received])) << "event skipped";
    ++received;
  }
  ASSERT_TRUE(line);
  EXPECT_LT(received, events.size());
  nlohmann::json error = nlohmann::json::parse(*line);
  EXPECT_EQ(error["type"], "ERROR");
  EXPECT_EQ(error["object"]["code"], 410);
  EXPECT_EQ(error["object"]["reason"], "Expired");
  std::string message = error["object"]["message"];
  EXPECT_NE(message.find("fell too far behind"), std::string::npos) << message;
  EXPECT_NE(message.find("(limit 65536); relist"), std::string::npos)
      << message;
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(
      WaitFor([&] { return Terminated(metrics.Scrape(), "backlog") == 1; }));
}

// A watch resumed from an old RV catches up with events committed before
// it started, minutes ago maybe: that is not walwatch's latency, and an
// APIServer restart that resumes every watch would otherwise fire
// WalwatchCommitToWriteLatency.
TEST_F(HttpServerTest, CommitToWriteObservesOnlyEventsCommittedDuringTheWatch) {
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  EventPtr a = AppendPod(110, "a");
  EventPtr b = AppendPod(120, "b");
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_EQ(client->ReadLine(), Line(b));
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(),
                  "walwatch_events_sent_total{type=\"ADDED\"}") == 2;
  }));
  EXPECT_EQ(Sample(metrics.Scrape(), "walwatch_commit_to_write_seconds_count"),
            0);
  EventPtr c = AppendPod(130, "c");
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(),
                  "walwatch_commit_to_write_seconds_count") == 1;
  }));
}

// An event that commits while a watch's initial state is sent waits for
// the state: its commit-to-write counts, as the client's latency. (It was
// once measured only from the end of the state, so under load a watch
// whose state was short lost the observation.)
TEST_F(HttpServerTest, CommitToWriteCountsEventsThatWaitedForTheState) {
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(log_.current_rv());
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EventPtr a = AppendPod(110, "a");  // during the state
  stream->Finish();
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(),
                  "walwatch_commit_to_write_seconds_count") == 1;
  })) << metrics.Scrape();
}

TEST_F(HttpServerTest, MetricsCountWatchesEventsAndBookmarks) {
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  auto client = OpenWatch(
      "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1");
  ASSERT_TRUE(client);
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(),
                  "walwatch_watchers{group=\"\",resource=\"pods\",version="
                  "\"v1\"}") == 1;
  }));
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  EventSpec modified{"a"};
  modified.type = EventType::kModified;
  EventPtr a2 = AppendTxn(120, {modified}).front();
  EXPECT_EQ(client->ReadLine(), Line(a2));
  EXPECT_EQ(ParseLine(*client->ReadLine()).type, "BOOKMARK");
  EXPECT_EQ(client->ReadLine(), std::nullopt);

  auto closing = OpenWatch("/api/v1/pods?watch=1&resourceVersion=120");
  ASSERT_TRUE(closing);
  auto expiring = OpenWatch("/api/v1/pods?watch=1&resourceVersion=120");
  ASSERT_TRUE(expiring);
  closing->Close();
  // Noticed before the barrier, or the barrier would end it first.
  EXPECT_TRUE(WaitFor(
      [&] { return Terminated(metrics.Scrape(), "client_closed") == 1; }));
  log_.AppendBarrier(200);
  EXPECT_EQ(ParseLine(*expiring->ReadLine()).type, "ERROR");
  auto too_old = OpenWatch("/api/v1/pods?watch=1&resourceVersion=150");
  ASSERT_TRUE(too_old);
  EXPECT_EQ(ParseLine(*too_old->ReadLine()).type, "ERROR");

  // Every watch has ended and been counted (WatchEnded moves the gauge
  // before the reason's counter, so wait for the counters).
  std::string scrape;
  EXPECT_TRUE(WaitFor([&] {
    scrape = metrics.Scrape();
    return Terminated(scrape, "expired") == 1 &&
           Terminated(scrape, "barrier") == 1;
  })) << scrape;
  // A resource with no open watch has no series: any resource path may be
  // watched, and series kept at 0 would grow with every path ever tried.
  EXPECT_EQ(Sample(scrape, "walwatch_watchers{group=\"\",resource=\"pods\","
                           "version=\"v1\"}"),
            -1)
      << scrape;
  EXPECT_EQ(Terminated(scrape, "timeout"), 1) << scrape;
  EXPECT_EQ(Terminated(scrape, "client_closed"), 1) << scrape;
  EXPECT_EQ(Terminated(scrape, "barrier"), 1) << scrape;
  EXPECT_EQ(Terminated(scrape, "expired"), 1) << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"ADDED\"}"), 1);
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"MODIFIED\"}"),
            1);
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"BOOKMARK\"}"),
            1);
  EXPECT_EQ(Sample(scrape, "walwatch_commit_to_write_seconds_count"), 2);
}

// ---------------------------------------------------------------------------
// Peer allow-list

TEST_F(HttpServerTest, PeerAllowListAdmitsAListedGroup) {
  options_.peers.uids = {getuid() + 1};  // not us
  options_.peers.gids = {getgid()};      // but our group
  StartServer();
  auto client = Connect();
  ASSERT_TRUE(Answers(client.get(), "/healthz", 200));
}

TEST_F(HttpServerTest, PeerAllowListRefusesOthers) {
  options_.peers.uids = {getuid() + 1};
  options_.peers.gids = {getgid() + 1};
  StartServer();
  auto client = Connect();  // accepted by the kernel, closed at once
  client->Get("/healthz");
  EXPECT_FALSE(client->ReadResponse());
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

TEST_F(HttpServerTest, PeerAllowListRefusesTcp) {
  options_.peers.uids = {getuid()};
  options_.tcp_listen = "127.0.0.1:0";
  HttpServer server(io_, log_, catalog_, options_, nullptr);
  EXPECT_NE(server.Start().find("peer allow-list"), std::string::npos);
}

TEST_F(HttpServerTest, StartReplacesAStaleSocketAndSetsItsMode) {
  {
    // A socket file left behind by a process that is gone.
    net::io_context io;
    stream_protocol::acceptor stale(
        io, stream_protocol::endpoint(options_.socket_path));
  }
  struct stat st;
  ASSERT_EQ(lstat(options_.socket_path.c_str(), &st), 0);
  options_.socket_mode = 0600;
  StartServer();
  ASSERT_EQ(lstat(options_.socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto client = Connect();
  ASSERT_TRUE(Answers(client.get(), "/healthz", 200));
}

TEST_F(HttpServerTest, StartRefusesBadListenConfigurations) {
  { std::ofstream not_a_socket(options_.socket_path); }
  HttpServer over_file(io_, log_, catalog_, options_, nullptr);
  EXPECT_NE(over_file.Start(), "");
  std::remove(options_.socket_path.c_str());

  for (const char* address : {"0.0.0.0:8080", "10.1.2.3:80", "[::]:80",
                              "localhost:80", "127.0.0.1", "127.0.0.1:99999"}) {
    HttpServerOptions options = options_;
    options.tcp_listen = address;
    HttpServer server(io_, log_, catalog_, options, nullptr);
    EXPECT_NE(server.Start(), "") << address;
  }
  HttpServerOptions loopback = options_;
  loopback.tcp_listen = "127.0.0.1:0";
  HttpServer server(io_, log_, catalog_, loopback, nullptr);
  EXPECT_EQ(server.Start(), "");
  server.Stop();
}

// ---------------------------------------------------------------------------
// Events in a WireArena, sent with sendfile(2)

// Bytes of an arena event's frame (its line as one chunk); 0 on the heap.
size_t FrameBytes(const EventPtr& event) {
  Event::Frame frame;
  return event->GetFrame(&frame) ? frame.size : 0;
}

// ChunkWriter::kMinSendfileBytes: in a write of several pieces, a run of
// the arena's file shorter than this goes from memory, gathered with the
// other pieces into sendmsg; a write of one piece always goes with
// sendfile, however short.
constexpr size_t kMinSendfileBytes = 4096;

// The segment of the arena's file that holds `event`: its offset in the
// file over the segment size (the arena here never frees a segment before
// the test has made all of its events, so none is used again).
uint64_t SegmentOf(const EventPtr& event) {
  Event::Frame frame;
  EXPECT_TRUE(event->GetFrame(&frame)) << "on the heap";
  return frame.offset / WireArena::kSegmentBytes;
}

// Whether `b`'s frame follows `a`'s in the arena's file and mapping: written
// one after the other, they are one run of the file, one piece.
bool Adjacent(const EventPtr& a, const EventPtr& b) {
  Event::Frame fa, fb;
  return a->GetFrame(&fa) && b->GetFrame(&fb) && fa.fd == fb.fd &&
         fa.offset + fa.size == fb.offset && fa.data + fa.size == fb.data;
}

// The body of a raw HTTP response (after its header), decoded strictly.
std::optional<std::vector<std::string>> BodyChunks(const std::string& raw) {
  const size_t body_start = raw.find("\r\n\r\n");
  if (body_start == std::string::npos) return std::nullopt;
  return DecodeChunks(std::string_view(raw).substr(body_start + 4));
}

// The log's events go out as the arena framed them, through sendfile: one
// chunk per event holding its wire line byte for byte, whatever the length
// of its size line, across segments, and the body decodes strictly up to
// its last chunk. Another resource's events (configmaps) fill the first
// segment between the pods, so that the watch's write is two runs of the
// file, in two segments, each longer than kMinSendfileBytes, and under
// 100 KB in all (far less than the socket holds, so the write never waits
// and nothing is copied out): every byte goes with sendfile, once.
TEST_F(HttpServerTest, ArenaEventsGoOutAsTheirOwnChunksByteForByte) {
  std::vector<EventPtr> events;
  uint64_t lsn = 101;
  // Lines whose sizes take 2, 3 and 5 hex digits, in the first segment.
  for (size_t padding : {0, 1000, 65536}) {
    events.push_back(
        AppendArenaPod(lsn++, "pod-" + std::to_string(padding), padding));
  }
  ASSERT_GE(events.back()->wire().size(), size_t{0x10000});
  // Configmaps fill the rest of the first segment, and start the second.
  EventSpec filler;
  filler.resource = "configmaps";
  filler.kind = "ConfigMap";
  filler.padding = std::string(64 << 10, 'f');
  for (int i = 0; Arena()->segments_made() < 2; ++i) {
    ASSERT_LT(i, 100);
    filler.name = "cm-" + std::to_string(i);
    AppendTxn(lsn++, {filler}, Arena());
  }
  // Then a line whose size takes 4 hex digits, and a transaction of three:
  // consecutive chunks, one run with it, in the second segment.
  events.push_back(AppendArenaPod(lsn++, "pod-20000", 20000));
  for (EventPtr& event : AppendTxn(lsn++, {{"t1"}, {"t2"}, {"t3"}}, Arena())) {
    events.push_back(std::move(event));
  }
  size_t runs[2] = {0, 0};
  for (size_t i = 0; i < events.size(); ++i) {
    const uint64_t segment = i < 3 ? 0 : 1;
    ASSERT_EQ(SegmentOf(events[i]), segment) << i;
    if (i != 0 && i != 3) {
      ASSERT_TRUE(Adjacent(events[i - 1], events[i])) << i;
    }
    runs[segment] += FrameBytes(events[i]);
  }
  ASSERT_FALSE(Adjacent(events[2], events[3]));
  ASSERT_GE(runs[0], kMinSendfileBytes);
  ASSERT_GE(runs[1], kMinSendfileBytes);
  const size_t frame_bytes = runs[0] + runs[1];
  ASSERT_LT(frame_bytes, size_t{100} << 10);

  StartServer();
  const uint64_t sent_before = sendfile_counts.bytes;
  const uint64_t blocked_before = sendfile_counts.would_block;
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  std::optional<std::string> raw = client->ReadAllRaw();
  ASSERT_TRUE(raw);
  const size_t body_start = raw->find("\r\n\r\n");
  ASSERT_NE(body_start, std::string::npos);
  const std::string head = raw->substr(0, body_start + 2);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  std::optional<std::vector<std::string>> chunks = BodyChunks(*raw);
  ASSERT_TRUE(chunks) << "the body is not cleanly chunked";
  ASSERT_EQ(chunks->size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string& got = (*chunks)[i];
    ASSERT_TRUE(got == events[i]->wire())
        << "event " << i << ": " << got.size() << " bytes, want "
        << events[i]->wire().size();
  }
  // Every byte of those chunks went through sendfile, once; the write never
  // waited.
  EXPECT_EQ(sendfile_counts.would_block - blocked_before, 0u);
  EXPECT_EQ(sendfile_counts.bytes - sent_before, frame_bytes);
}

// One stream mixing the arena's events, events on the heap, and the
// variants a label selector makes of a MODIFIED whose labels changed (an
// ADDED or a DELETED line, made on the heap for the watch): writes
// interleave sendfile'd runs of the file with chunks gathered from memory,
// and each watch gets every line it should, in order, in a cleanly chunked
// body. Every write here is of several pieces, so a run of the file goes
// with sendfile only if it is kMinSendfileBytes or longer: a1 alone, and a4
// with s (adjacent, each too short alone); every other run is short and
// goes from memory with its neighbours.
TEST_F(HttpServerTest, ArenaHeapAndSelectorVariantEventsInterleaveInOneStream) {
  WireArena* arena = Arena();
  ASSERT_TRUE(arena);
  const LabelList web = {{"app", "web"}};
  const LabelList db = {{"app", "db"}};
  auto pod = [](const std::string& name, const LabelList& labels,
                size_t padding = 0) {
    EventSpec spec;
    spec.name = name;
    spec.labels = labels;
    spec.padding = std::string(padding, 'x');
    return spec;
  };
  // The line of a MODIFIED that enters the selection: it, as ADDED.
  auto added = [](const EventPtr& event) {
    std::string line = Line(event);
    const std::string modified = "{\"type\":\"MODIFIED\",";
    EXPECT_EQ(line.rfind(modified, 0), 0u) << line;
    return line.replace(0, modified.size(), "{\"type\":\"ADDED\",");
  };
  // One that leaves it: the previous object, as DELETED.
  auto deleted = [](const EventPtr& event) {
    std::string_view wire = event->prev_wire();
    EXPECT_FALSE(wire.empty());
    return std::string(wire.substr(0, wire.size() - 1));
  };

  // Appended before the watches start: read and written as one batch.
  EventPtr a1 = AppendBuilt(110, {{pod("a1", web, 5000), arena}})[0];
  std::vector<EventPtr> t120 = AppendBuilt(
      120, {{pod("h1", web)}, {pod("a2", web), arena}, {pod("h2", web)}});
  EventPtr p = AppendBuilt(130, {{pod("p", web), arena, db}})[0];  // enters
  std::vector<EventPtr> t140 =
      AppendBuilt(140, {{pod("a3", web), arena},
                        {pod("q", db), arena, web},  // leaves
                        {pod("h3", web)}});
  std::vector<EventPtr> t150 =
      AppendBuilt(150, {{pod("x", db), arena},  // never in
                        {pod("r", web), nullptr, db}});  // enters, on the heap
  const LabelList tier_a = {{"app", "web"}, {"tier", "a"}};
  const LabelList tier_b = {{"app", "web"}, {"tier", "b"}};
  std::vector<EventPtr> t160 =
      AppendBuilt(160, {{pod("a4", web, 2200), arena},
                        {pod("s", tier_b, 2200), arena, tier_a}});
  const std::vector<std::string> web_before = {
      Line(a1),          Line(t120[0]), Line(t120[1]), Line(t120[2]),
      added(p),          Line(t140[0]), deleted(t140[1]), Line(t140[2]),
      added(t150[1]),    Line(t160[0]), Line(t160[1])};
  const std::vector<std::string> all_before = {
      Line(a1),      Line(t120[0]), Line(t120[1]), Line(t120[2]),
      Line(p),       Line(t140[0]), Line(t140[1]), Line(t140[2]),
      Line(t150[0]), Line(t150[1]), Line(t160[0]), Line(t160[1])};

  StartServer();
  const uint64_t sent_before = sendfile_counts.bytes;
  auto web_watch = OpenWatch(
      "/api/v1/pods?watch=1&resourceVersion=100&labelSelector=app%3Dweb");
  ASSERT_TRUE(web_watch);
  auto all_watch = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(all_watch);
  for (const std::string& line : web_before) {
    ASSERT_EQ(web_watch->ReadLine(), line);
  }
  for (const std::string& line : all_before) {
    ASSERT_EQ(all_watch->ReadLine(), line);
  }

  // Appended while they watch: each transaction has an event on the heap,
  // so that whichever of them a write holds, it is of several pieces.
  std::vector<EventPtr> t170 =
      AppendBuilt(170, {{pod("h4", web)},
                        {pod("p", db), arena, web},  // p leaves
                        {pod("a5", web), arena}});
  std::vector<EventPtr> t180 =
      AppendBuilt(180, {{pod("q", web), arena, db},  // q enters
                        {pod("a6", web), arena},
                        {pod("h5", web)}});
  const std::vector<std::string> web_after = {
      Line(t170[0]), deleted(t170[1]), Line(t170[2]), added(t180[0]),
      Line(t180[1]), Line(t180[2])};
  const std::vector<std::string> all_after = {
      Line(t170[0]), Line(t170[1]), Line(t170[2]), Line(t180[0]),
      Line(t180[1]), Line(t180[2])};
  for (const std::string& line : web_after) {
    ASSERT_EQ(web_watch->ReadLine(), line);
  }
  for (const std::string& line : all_after) {
    ASSERT_EQ(all_watch->ReadLine(), line);
  }

  // The whole selection again, to its last chunk, decoded strictly.
  auto raw_watch = Connect();
  raw_watch->Get(
      "/api/v1/pods?watch=1&resourceVersion=100&labelSelector=app%3Dweb"
      "&timeoutSeconds=1");
  std::optional<std::string> raw = raw_watch->ReadAllRaw();
  ASSERT_TRUE(raw);
  std::optional<std::vector<std::string>> chunks = BodyChunks(*raw);
  ASSERT_TRUE(chunks) << "the body is not cleanly chunked";
  std::string body;
  for (const std::string& chunk : *chunks) body += chunk;
  std::string want;
  for (const std::vector<std::string>* lines : {&web_before, &web_after}) {
    for (const std::string& line : *lines) want += line + "\n";
  }
  EXPECT_EQ(body, want);

  // What went through sendfile: the runs of kMinSendfileBytes or more, in
  // each of the three watches (a1 alone, a4 with s). The short runs (a2; p,
  // a3 and q for all_watch; x; and every event appended later, runs of at
  // most four short lines) went from memory.
  EXPECT_GE(FrameBytes(a1), kMinSendfileBytes);
  EXPECT_TRUE(Adjacent(t160[0], t160[1]));
  EXPECT_LT(FrameBytes(t160[0]), kMinSendfileBytes);
  EXPECT_LT(FrameBytes(t160[1]), kMinSendfileBytes);
  EXPECT_GE(FrameBytes(t160[0]) + FrameBytes(t160[1]), kMinSendfileBytes);
  EXPECT_LT(FrameBytes(t170[1]) + FrameBytes(t170[2]) + FrameBytes(t180[0]) +
                FrameBytes(t180[1]),
            kMinSendfileBytes);
  EXPECT_LT(FrameBytes(p) + FrameBytes(t140[0]) + FrameBytes(t140[1]),
            kMinSendfileBytes);
  const uint64_t want_sent =
      3 * (FrameBytes(a1) + FrameBytes(t160[0]) + FrameBytes(t160[1]));
  EXPECT_TRUE(
      WaitFor([&] { return sendfile_counts.bytes - sent_before == want_sent; }))
      << sendfile_counts.bytes - sent_before << " bytes, want " << want_sent;
}

// A watch whose label selector takes every other event of the arena gets
// frames of which no two are adjacent: each is a run of its own, far
// shorter than kMinSendfileBytes. They go from memory, gathered into
// sendmsg (64 to a call), not one sendfile each; a watch of all of them gets
// the same stretch of the file as one run, through sendfile. Both bodies
// decode strictly, one chunk per event.
TEST_F(HttpServerTest, EveryOtherArenaEventGoesOutGatheredWithoutSendfile) {
  const LabelList web = {{"app", "web"}};
  const LabelList db = {{"app", "db"}};
  std::vector<EventPtr> all;
  std::vector<EventPtr> selected;
  size_t all_bytes = 0;
  // 200 pods, alternately web and db: one run of the file, 100 frames for
  // the web watch (more than a sendmsg's 64), 50 KB in all.
  for (int i = 0; i < 200; ++i) {
    EventSpec spec;
    spec.name = "pod-" + std::to_string(i);
    spec.labels = i % 2 == 0 ? web : db;
    all.push_back(AppendTxn(101 + i, {spec}, Arena()).front());
    if (i % 2 == 0) selected.push_back(all.back());
    ASSERT_LT(FrameBytes(all.back()), kMinSendfileBytes);
    if (i > 0) {
      ASSERT_TRUE(Adjacent(all[i - 1], all.back())) << i;
    }
    all_bytes += FrameBytes(all.back());
  }
  ASSERT_LT(all_bytes, size_t{64} << 10);

  StartServer();
  const uint64_t sent_before = sendfile_counts.bytes;
  auto web_watch = Connect();
  web_watch->Get(
      "/api/v1/pods?watch=1&resourceVersion=100&labelSelector=app%3Dweb"
      "&timeoutSeconds=1");
  auto all_watch = Connect();
  all_watch->Get("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  for (auto [client, events] :
       {std::pair{web_watch.get(), &selected}, std::pair{all_watch.get(), &all}}) {
    std::optional<std::string> raw = client->ReadAllRaw();
    ASSERT_TRUE(raw);
    std::optional<std::vector<std::string>> chunks = BodyChunks(*raw);
    ASSERT_TRUE(chunks) << "the body is not cleanly chunked";
    ASSERT_EQ(chunks->size(), events->size());
    for (size_t i = 0; i < events->size(); ++i) {
      ASSERT_EQ((*chunks)[i], (*events)[i]->wire()) << i;
    }
  }
  // Both streams have ended: every write is done. Only all_watch's run went
  // with sendfile.
  EXPECT_EQ(sendfile_counts.bytes - sent_before, all_bytes);
}

// A write of one piece always goes with sendfile, however short: a single
// short event, the only one a watch has to write, is one sendfile of its
// frame. Beside an event on the heap, the same short frame is one piece of
// several, and goes from memory with it.
TEST_F(HttpServerTest, ASingleShortArenaEventIsOneSendfile) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  const uint64_t sent_before = sendfile_counts.bytes;
  const uint64_t calls_before = sendfile_counts.calls;
  EventPtr small = AppendArenaPod(101, "small");
  ASSERT_LT(FrameBytes(small), kMinSendfileBytes);
  EXPECT_EQ(client->ReadLine(), Line(small));
  EXPECT_TRUE(WaitFor([&] {
    return sendfile_counts.bytes - sent_before == FrameBytes(small);
  })) << sendfile_counts.bytes - sent_before << " bytes, want "
      << FrameBytes(small);
  EXPECT_EQ(sendfile_counts.calls - calls_before, 1u);

  // The same, with an event on the heap in its transaction: two pieces.
  EventSpec on_heap;
  on_heap.name = "heap";
  std::vector<EventPtr> mixed =
      AppendBuilt(102, {{EventSpec{"small-2"}, Arena()}, {on_heap}});
  ASSERT_GT(FrameBytes(mixed[0]), 0u);
  EXPECT_EQ(client->ReadLine(), Line(mixed[0]));
  EXPECT_EQ(client->ReadLine(), Line(mixed[1]));
  // And a short one alone again: sendfile.
  EventPtr last = AppendArenaPod(103, "small-3");
  EXPECT_EQ(client->ReadLine(), Line(last));
  EXPECT_TRUE(WaitFor([&] {
    return sendfile_counts.bytes - sent_before ==
           FrameBytes(small) + FrameBytes(last);
  })) << sendfile_counts.bytes - sent_before << " bytes, want "
      << FrameBytes(small) + FrameBytes(last);
  EXPECT_EQ(sendfile_counts.calls - calls_before, 2u);
}

// A watcher that reads nothing while 2,000 events of 8 KiB (16 MB, many
// times what its socket holds, well under the backlog bound and read long
// before the write-stall timeout) go into the log, then reads. Each write
// starts with sendfile, which fills the socket, sends part of a piece and is
// refused; the write then copies its unsent rest out of the arena
// (SpillRest) and sends that as the client makes room (OnWritable). Every
// event arrives once, in order, whole; part of the arena's bytes went with
// sendfile, the rest from the copies; and once the client keeps up, a write
// goes all with sendfile again.
TEST_F(LargeLogHttpServerTest,
       ASlowReaderOfManyMegabytesGetsEveryArenaEventOnceInOrder) {
  // Writes of up to 2 MB (a read's 256 events), many socketfuls each: the
  // socket fills long before one is done, and OnWritable waits again.
  options_.max_write_bytes = size_t{4} << 20;
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  const uint64_t sent_before = sendfile_counts.bytes;
  const uint64_t short_before = sendfile_counts.short_writes;
  const uint64_t blocked_before = sendfile_counts.would_block;
  std::vector<EventPtr> events;
  size_t wire_bytes = 0;
  size_t frame_bytes = 0;
  for (int i = 0; i < 2000; ++i) {
    events.push_back(
        AppendArenaPod(101 + i, "pod-" + std::to_string(i), 8000));
    wire_bytes += events.back()->wire().size();
    frame_bytes += FrameBytes(events.back());
  }
  ASSERT_GT(wire_bytes, size_t{15} << 20);
  ASSERT_EQ(log_.GetStats().events, events.size());
  ASSERT_LT(log_.GetStats().bytes, options_.max_backlog_bytes);

  const size_t unread = WaitUntilFull(client.get());
  ASSERT_GT(unread, 0u) << "the socket never filled";
  ASSERT_LT(unread, wire_bytes / 8);
  for (size_t i = 0; i < events.size(); ++i) {
    std::optional<std::string> line = client->ReadLine();
    ASSERT_TRUE(line) << "event " << i << ": "
                      << client->last_error().message();
    ASSERT_TRUE(*line == Line(events[i]))
        << "event " << i << " differs: " << line->size() << " bytes, want "
        << Line(events[i]).size();
  }
  // Every byte of those events has been sent (the client read them all):
  // some with sendfile, which was cut short and refused, and the rest of
  // the writes that waited from their copies.
  const uint64_t sent = sendfile_counts.bytes - sent_before;
  EXPECT_GT(sent, 0u);
  EXPECT_LT(sent, frame_bytes);
  EXPECT_GT(sendfile_counts.short_writes - short_before, 0u);
  EXPECT_GT(sendfile_counts.would_block - blocked_before, 0u);

  // Nothing twice: the next line is the next event's, a write of its own,
  // all with sendfile.
  EventPtr after = AppendArenaPod(3000, "after");
  EXPECT_EQ(client->ReadLine(), Line(after));
  EXPECT_EQ(server_->active_sessions(), 1u);
  EXPECT_TRUE(WaitFor([&] {
    return sendfile_counts.bytes - sent_before == sent + FrameBytes(after);
  })) << sendfile_counts.bytes - sent_before - sent << " bytes, want "
      << FrameBytes(after);
}

// A write that waits on its client is copied out of the arena and lets go of
// its events (SpillRest), so OnWriteEvents counts it from what it took as
// the write began: a transaction of 100 events of 8 KiB, of all three
// types, committed while the watch runs, is one write (max_write_bytes 4
// MiB) that fills the socket and waits; once the client has read it, every
// event is counted by type, and the write's commit-to-write is observed
// once.
TEST_F(HttpServerTest, EventsSentCountsAWriteThatWaitedOnItsClient) {
  options_.metrics = &metrics_;
  options_.max_write_bytes = size_t{4} << 20;
  StartServer();
  // From the log's current RV: what is appended next is live.
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  const uint64_t blocked_before = sendfile_counts.would_block;
  std::vector<EventSpec> specs;
  const EventType kTypes[] = {EventType::kAdded, EventType::kModified,
                              EventType::kDeleted};
  for (int i = 0; i < 100; ++i) {
    EventSpec spec;
    spec.name = "pod-" + std::to_string(i);
    spec.padding = std::string(8000, 'x');
    // 50 ADDED, 30 MODIFIED, 20 DELETED.
    spec.type = kTypes[i < 50 ? 0 : i < 80 ? 1 : 2];
    specs.push_back(spec);
  }
  std::vector<EventPtr> events = AppendTxn(101, specs, Arena());
  const size_t unread = WaitUntilFull(client.get());
  ASSERT_GT(unread, 0u) << "the socket never filled";
  ASSERT_LT(unread, 100u * 8000 / 2);
  EXPECT_GT(sendfile_counts.would_block - blocked_before, 0u);
  // Nothing counted while the write waits.
  EXPECT_EQ(Sample(metrics_.Scrape(),
                   "walwatch_events_sent_total{type=\"ADDED\"}"),
            0);
  for (const EventPtr& event : events) {
    ASSERT_EQ(client->ReadLine(), Line(event));
  }
  std::string scrape;
  EXPECT_TRUE(WaitFor([&] {
    scrape = metrics_.Scrape();
    return Sample(scrape, "walwatch_commit_to_write_seconds_count") == 1;
  })) << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"ADDED\"}"), 50)
      << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"MODIFIED\"}"),
            30)
      << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"DELETED\"}"),
            20)
      << scrape;
}

// sendfile has no MSG_NOSIGNAL: writing to a client that left raises
// SIGPIPE, which ends a process that does not ignore it, and
// HttpServer::Start ignores it if nothing handles it. A client that leaves
// while a large arena write waits on its full socket ends its own session
// only (that write's rest was copied out of the arena, and goes with
// sendmsg, MSG_NOSIGNAL); so does one that stops receiving while its watch
// waits for the log, whose next write, one arena event, is a sendfile into
// a socket that refuses it (EPIPE, and SIGPIPE). The server serves on.
TEST_F(HttpServerTest, AClientLeavingDuringABlockedSendfileEndsOnlyItsSession) {
  // As when walwatch starts: SIGPIPE at its default.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &default_action, nullptr), 0);
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  struct sigaction action {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_IGN);

  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  size_t wire_bytes = 0;
  for (int i = 0; i < 200; ++i) {
    EventPtr event = AppendArenaPod(101 + i, "pod-" + std::to_string(i), 8000);
    wire_bytes += event->wire().size();
  }
  const size_t unread = WaitUntilFull(client.get());
  ASSERT_GT(unread, 0u) << "the socket never filled";
  ASSERT_LT(unread, wire_bytes / 2);
  client->Close();
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  EXPECT_TRUE(WaitFor(
      [&] { return Terminated(metrics.Scrape(), "client_closed") == 1; }));

  // A client that no longer receives, on a watch that is up to date (the
  // pods above went in at RVs 101 to 300).
  auto deaf = OpenWatch("/api/v1/pods?watch=1&resourceVersion=300");
  ASSERT_TRUE(deaf);
  deaf->ShutdownReceive();
  const uint64_t broken_before = sendfile_counts.broken_pipe;
  AppendArenaPod(500, "refused");
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  EXPECT_TRUE(WaitFor(
      [&] { return Terminated(metrics.Scrape(), "client_closed") == 2; }));
  EXPECT_EQ(sendfile_counts.broken_pipe - broken_before, 1u);

  // The server goes on: a new watch gets the next arena event.
  auto next = OpenWatch("/api/v1/pods?watch=1&resourceVersion=500");
  ASSERT_TRUE(next);
  EventPtr after = AppendArenaPod(600, "after");
  EXPECT_EQ(next->ReadLine(), Line(after));
}

// A watch whose write waits on a full socket pins no segment of the arena:
// the write's unsent rest was copied out (SpillRest) and its events let go.
// So while two watches are blocked mid-write, once the log has evicted
// every event of the arena, only the arena's current segment is left. Each
// watch, reading on, then gets every event of its writes, whole and in
// order, and 410 Expired: its cursor fell out of the log meanwhile.
TEST_F(SmallLogHttpServerTest,
       ArenaSegmentsAreFreedOnceEvictedWhileWatchesAreBlocked) {
  WireArena* arena = Arena();
  ASSERT_TRUE(arena);
  // 100 events of 8 KiB, all in the first segment and all in the log. The
  // test keeps their lines, not them.
  std::vector<std::string> first;
  for (int i = 0; i < 100; ++i) {
    EventPtr event = AppendArenaPod(101 + i, "pod-" + std::to_string(i), 8000);
    ASSERT_EQ(SegmentOf(event), 0u);
    first.push_back(Line(event));
  }
  ASSERT_EQ(log_.GetStats().events, first.size());
  StartServer();
  auto one = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(one);
  auto two = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(two);
  // Each session's write waits on a full socket.
  size_t full[2];
  for (int c = 0; c < 2; ++c) {
    full[c] = WaitUntilFull(c == 0 ? one.get() : two.get());
    ASSERT_GT(full[c], 0u) << "the socket never filled";
    ASSERT_LT(full[c], 100u * 8000 / 2);
  }

  // Far past the log's bound: 8 MB more of the arena (several segments
  // more), then 1.6 MB on the heap, which evicts every event of the arena.
  for (int i = 0; i < 1000; ++i) {
    AppendArenaPod(201 + i, "more-" + std::to_string(i), 8000);
  }
  EXPECT_GE(arena->segments_made(), 3u);
  for (int i = 0; i < 200; ++i) {
    EventSpec spec;
    spec.name = "heap-" + std::to_string(i);
    spec.padding = std::string(8000, 'x');
    AppendTxn(1201 + i, {spec});
  }
  ASSERT_GT(log_.GetStats().oldest_rv, 1200u);  // no arena event left
  // Only the current segment is left, while both writes still wait: the
  // servers have sent nothing more, and both sessions are there.
  EXPECT_TRUE(WaitFor([&] { return arena->live_segments() == 1; }))
      << arena->live_segments() << " segments live";
  EXPECT_EQ(one->Unread(), full[0]);
  EXPECT_EQ(two->Unread(), full[1]);
  EXPECT_EQ(server_->active_sessions(), 2u);

  // Reading on, each watcher gets what its socket and its writes held, in
  // order and whole, up to the end of the write that waited, then 410: the
  // next read found its cursor evicted. The status names the last event
  // sent, so the write that waited arrived complete.
  for (TestClient* client : {one.get(), two.get()}) {
    size_t received = 0;
    std::optional<std::string> line;
    while ((line = client->ReadLine())) {
      if (ParseLine(*line).type == "ERROR") break;
      ASSERT_LT(received, first.size());
      ASSERT_TRUE(*line == first[received])
          << "event " << received << " differs: " << line->size()
          << " bytes, want " << first[received].size();
      ++received;
    }
    ASSERT_TRUE(line) << "no 410 after " << received << " events";
    EXPECT_GT(received, 0u);
    EXPECT_LT(received, first.size());
    const nlohmann::json error = nlohmann::json::parse(*line);
    EXPECT_EQ(error["object"]["code"], 410);
    EXPECT_EQ(error["object"]["reason"], "Expired");
    EXPECT_EQ(error["object"]["message"],
              "too old resource version: " + std::to_string(100 + received) +
                  " (" + std::to_string(log_.floor_rv()) + ")");
    EXPECT_EQ(client->ReadLine(), std::nullopt);
    EXPECT_TRUE(client->body_done());
  }
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  EXPECT_EQ(arena->live_segments(), 1u);
}

}  // namespace
}  // namespace walwatch
