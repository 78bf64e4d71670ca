// In-process tests of HttpServer: a real EventLog filled with hand-made
// events, the server on a temporary Unix socket, and a Beast client that
// reads the chunked stream line by line. No PostgreSQL.
#include "watchserver/http_server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "watchserver/event.h"
#include "watchserver/event_log.h"
#include "watchserver/logging.h"
#include "watchserver/resource_catalog.h"

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
};

// An Event with the wire bytes the EventBuilder would produce for a small
// object: {"type":T,"object":{...}}\n
EventPtr MakeEvent(const EventSpec& spec, uint64_t rv, uint64_t commit_lsn,
                   bool last_in_txn) {
  auto event = std::make_shared<Event>();
  event->rv = rv;
  event->commit_lsn = commit_lsn;
  event->last_in_txn = last_in_txn;
  event->type = spec.type;
  event->group = spec.group;
  event->version = spec.version;
  event->resource = spec.resource;
  event->cluster = spec.cluster;
  event->ns = spec.ns;
  event->name = spec.name;
  std::string api_version =
      spec.group.empty() ? spec.version : spec.group + "/" + spec.version;
  std::string& w = event->wire;
  w = "{\"type\":";
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
  w += "}}}}\n";
  return event;
}

std::string Line(const EventPtr& event) {
  return event->wire.substr(0, event->wire.size() - 1);
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

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/walwatch-http-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    options_.socket_path = dir_ + "/walwatch.sock";
    options_.too_large_rv_wait = 300ms;
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
    std::remove(options_.socket_path.c_str());
    rmdir(dir_.c_str());
  }

  void StartServer() {
    server_ = std::make_unique<HttpServer>(io_, log_, catalog_, options_,
                                           [this] { return ready_.load(); });
    ASSERT_EQ(server_->Start(), "");
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
  }

  // Appends one transaction; events before the last carry the previous
  // commit as their rv (DESIGN.md).
  std::vector<EventPtr> AppendTxn(uint64_t commit_lsn,
                                  const std::vector<EventSpec>& specs) {
    std::vector<EventPtr> events;
    for (size_t i = 0; i < specs.size(); ++i) {
      bool last = i + 1 == specs.size();
      events.push_back(MakeEvent(specs[i], last ? commit_lsn : last_commit_,
                                 commit_lsn, last));
    }
    last_commit_ = commit_lsn;
    EXPECT_EQ(log_.AppendTransaction(commit_lsn, events),
              EventLog::AppendResult::kAppended);
    return events;
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

  std::unique_ptr<TestClient> Connect() {
    auto client = std::make_unique<TestClient>(
        stream_protocol::endpoint(options_.socket_path));
    EXPECT_TRUE(client->connected());
    return client;
  }

  std::string dir_;
  HttpServerOptions options_;
  EventLog log_{1 << 20, kFloorRv};
  ResourceCatalog catalog_;
  uint64_t last_commit_ = kFloorRv;
  std::atomic<bool> ready_{true};
  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_{
      io_.get_executor()};
  std::vector<std::thread> threads_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, StreamsAppendedEventsInOrderWithWatchHeaders) {
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
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

  std::string lines = events[0]->wire + events[1]->wire + events[2]->wire;
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

  auto scoped = Connect();
  scoped->Get(
      "/clusters/c1/api/v1/namespaces/ns1/"
      "pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(scoped->ReadHeader());
  EXPECT_EQ(scoped->ReadLine(), Line(want1));
  EXPECT_EQ(scoped->ReadLine(), Line(want2));
  EXPECT_EQ(scoped->ReadLine(), std::nullopt);
  EXPECT_TRUE(scoped->body_done());

  auto all_pods = Connect();
  all_pods->Get("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(all_pods->ReadHeader());
  std::vector<std::string> names;
  while (std::optional<std::string> line = all_pods->ReadLine()) {
    names.push_back(nlohmann::json::parse(*line)["object"]["metadata"]["name"]);
  }
  EXPECT_TRUE(all_pods->body_done());
  EXPECT_EQ(names, (std::vector<std::string>{"p1", "p2", "p3", "p4"}));

  auto deployments = Connect();
  deployments->Get(
      "/clusters/c1/apis/apps/v1/"
      "deployments?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(deployments->ReadHeader());
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

  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&resourceVersion=120");
  ASSERT_TRUE(client->ReadHeader());
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
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client->ReadHeader());
  for (const EventPtr& event : events) {
    ASSERT_EQ(client->ReadLine(), Line(event));
  }
}

TEST_F(HttpServerTest, TooOldResourceVersionGetsOneExpiredEvent) {
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&resourceVersion=50");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
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
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  ASSERT_TRUE(client->ReadHeader());
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
  client->Get("/api/v1/pods?watch=1&resourceVersion=500");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_EQ(client->status(), 504u);
  EXPECT_EQ(client->header(http::field::content_type), "application/json");
  nlohmann::json status = client->BodyJson();
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["reason"], "Timeout");
  EXPECT_EQ(status["code"], 504);
  EXPECT_EQ(status["message"],
            "Timeout: Too large resource version: 500, current: 100");
  EXPECT_EQ(status["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge");
  EXPECT_EQ(status["details"]["retryAfterSeconds"], 1);
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

TEST_F(HttpServerTest, UnknownResourceIsNotFoundAndKeepsTheConnection) {
  StartServer();
  auto client = Connect();
  client->Get("/apis/example.com/v1/widgets?watch=1");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 404u);
  nlohmann::json status = client->BodyJson();
  EXPECT_EQ(status["reason"], "NotFound");
  EXPECT_EQ(status["message"],
            "the server could not find the requested resource");
  EXPECT_EQ(status["code"], 404);

  client->Get("/healthz");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 200u);
  EXPECT_EQ(client->response().body(), "ok");
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
    client->Get(c.target);
    ASSERT_TRUE(client->ReadResponse()) << c.target;
    EXPECT_EQ(client->status(), c.code) << c.target;
    nlohmann::json status = client->BodyJson();
    ASSERT_FALSE(status.is_discarded()) << client->response().body();
    EXPECT_EQ(status["kind"], "Status");
    EXPECT_EQ(status["status"], "Failure");
    EXPECT_EQ(status["reason"], c.reason) << c.target;
    EXPECT_EQ(status["code"], c.code);
    EXPECT_NE(status["message"].get<std::string>().find(c.in_message),
              std::string::npos)
        << status["message"];
  }
  client->SendRaw(
      "POST /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\nContent-Length: "
      "0\r\n\r\n");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 405u);
  EXPECT_EQ(client->header(http::field::allow), "GET");
  EXPECT_EQ(client->BodyJson()["reason"], "MethodNotAllowed");
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
    auto client = Connect();
    client->SendRaw(garbage);
    ASSERT_TRUE(client->ReadResponse());
    EXPECT_EQ(client->status(), 400u);
    EXPECT_EQ(client->BodyJson()["reason"], "BadRequest");
    EXPECT_TRUE(client->ReadEof());
  }
  auto big = Connect();
  big->SendRaw("GET /healthz HTTP/1.1\r\nX-Big: " +
               std::string(64 * 1024, 'x') + "\r\n\r\n");
  ASSERT_TRUE(big->ReadResponse());
  EXPECT_EQ(big->status(), 431u);

  auto client = Connect();
  client->Get("/healthz");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 200u);
}

TEST_F(HttpServerTest, ReadyzFollowsReplication) {
  ready_ = false;
  StartServer();
  auto client = Connect();
  client->Get("/readyz");
  ASSERT_TRUE(client->ReadResponse()) << client->last_error().message();
  EXPECT_EQ(client->status(), 503u);
  ready_ = true;
  client->Get("/readyz");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 200u);
  client->Get("/livez");
  ASSERT_TRUE(client->ReadResponse());
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
  auto watch1 = Connect();
  watch1->Get("/api/v1/pods?watch=1");
  ASSERT_TRUE(watch1->ReadHeader());
  auto watch2 = Connect();
  watch2->Get("/apis/apps/v1/deployments?watch=1");
  ASSERT_TRUE(watch2->ReadHeader());
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
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  ASSERT_TRUE(client->ReadHeader());
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
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  ASSERT_TRUE(client->ReadHeader());
  auto idle = Connect();  // between requests
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 2; }));
  client->Close();
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 1; }));
  // Appending afterwards wakes nobody and breaks nothing.
  AppendPod(110, "a");
  idle->Close();
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
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
  client->Get("/healthz");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 200u);
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

}  // namespace
}  // namespace walwatch
