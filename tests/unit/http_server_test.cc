// HttpServer (http_server.h): its listeners on the Unix socket and on
// loopback TCP, the peer allow-list, the connection limit and its 429s,
// Start's checks and Stop, and RunHandlers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

namespace net = boost::asio;
using stream_protocol = net::local::stream_protocol;

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
  EXPECT_FALSE(TestClient(options_.socket_path).connected());
  server_->Stop();  // twice is fine
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
  TestClient client("127.0.0.1", port);
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
  EXPECT_EQ(refused->header("Retry-After"), "1");
  const auto body = nlohmann::json::parse(std::string(refused->body()));
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

// A handler that throws takes itself down, not the process nor the
// handlers queued behind it.
TEST(RunHandlersTest, AnExceptionOutOfAHandlerEndsOnlyThatHandler) {
  boost::asio::io_context io;
  int ran_after = 0;
  boost::asio::post(io,
                    [] { throw std::length_error("field value too large"); });
  boost::asio::post(io, [&] { ++ran_after; });
  boost::asio::post(io, [] { throw std::runtime_error("second"); });
  boost::asio::post(io, [&] { ++ran_after; });
  RunHandlers(io);  // returns once out of work
  EXPECT_EQ(ran_after, 2);
}

}  // namespace
}  // namespace walwatch::server_test
