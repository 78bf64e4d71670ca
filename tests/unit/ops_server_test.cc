// OpsServer (--metrics-address): what one client may cost, and shutdown.
#include "watchserver/ops_server.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "watchserver/metrics.h"

namespace walwatch {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

class OpsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ops_ = std::make_unique<OpsServer>(io_, metrics_, [] { return ""; });
    ASSERT_EQ(ops_->Start("127.0.0.1:0"), "");
    done_ = std::async(std::launch::async, [this] { io_.run(); });
  }
  void TearDown() override {
    ops_->Stop();
    if (done_.valid() && done_.wait_for(10s) != std::future_status::ready) {
      io_.stop();
      ADD_FAILURE() << "the io_context did not run out of work";
    }
  }

  std::unique_ptr<tcp::socket> Connect() {
    auto s = std::make_unique<tcp::socket>(client_io_);
    s->connect({asio::ip::make_address("127.0.0.1"), ops_->port()});
    return s;
  }
  // Whether the server closes `s` within `limit` (its idle timeout, 30 s,
  // is what a server that waits for more would take).
  static bool ClosedWithin(tcp::socket& s, std::chrono::seconds limit,
                           std::string* got) {
    auto start = std::chrono::steady_clock::now();
    *got = ReadAll(s);
    return std::chrono::steady_clock::now() - start < limit;
  }
  static void Send(tcp::socket& s, const std::string& bytes) {
    asio::write(s, asio::buffer(bytes));
  }
  // Everything until the server closes (EOF, or a reset when it closed
  // with our bytes unread); another error is appended.
  static std::string ReadAll(tcp::socket& s) {
    std::string out;
    char buf[4096];
    for (;;) {
      boost::system::error_code ec;
      size_t n = s.read_some(asio::buffer(buf), ec);
      out.append(buf, n);
      if (ec == asio::error::eof || ec == asio::error::connection_reset) {
        return out;
      }
      if (ec) return out + "<" + ec.message() + ">";
    }
  }
  // One response to a keep-alive GET (its header and "ok\n").
  static std::string ReadHealthz(tcp::socket& s) {
    std::string out;
    char buf[4096];
    while (out.find("ok\n") == std::string::npos) {
      boost::system::error_code ec;
      size_t n = s.read_some(asio::buffer(buf), ec);
      out.append(buf, n);
      if (ec) break;
    }
    return out;
  }

  asio::io_context io_, client_io_;
  Metrics metrics_;
  std::unique_ptr<OpsServer> ops_;
  std::future<void> done_;
};

// A scraper that keeps its connection alive must not keep walwatch from
// exiting on SIGTERM: Stop ends open connections, and the io_context runs
// out of work.
TEST_F(OpsServerTest, StopEndsKeepAliveConnections) {
  auto client = Connect();
  Send(*client, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NE(ReadHealthz(*client).find("200 OK"), std::string::npos);
  ops_->Stop();
  EXPECT_EQ(done_.wait_for(5s), std::future_status::ready)
      << "a keep-alive connection kept the server running";
  std::string got;
  EXPECT_TRUE(ClosedWithin(*client, 5s, &got));
  EXPECT_EQ(got, "");
}

// The port takes GETs: a request with a body is dropped as its header
// ends, not read (up to Beast's default 1 MiB) and held for 30 s.
TEST_F(OpsServerTest, ARequestWithABodyIsDroppedAtOnce) {
  auto client = Connect();
  Send(*client,
       "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" +
           std::string(1000, 'x'));
  std::string got;
  EXPECT_TRUE(ClosedWithin(*client, 5s, &got)) << "the body was waited for";
  EXPECT_EQ(got, "");
}

// Connections past the limit are closed as they come; the ones served
// still work, and a freed slot serves again.
TEST_F(OpsServerTest, ConnectionsPastTheLimitAreClosed) {
  std::vector<std::unique_ptr<tcp::socket>> held;
  for (int i = 0; i < 64; ++i) {
    held.push_back(Connect());
    // One request each, so that each is known accepted and counted.
    Send(*held.back(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_NE(ReadHealthz(*held.back()).find("200 OK"), std::string::npos)
        << "connection " << i;
  }
  auto extra = Connect();
  Send(*extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got;
  EXPECT_TRUE(ClosedWithin(*extra, 5s, &got));
  EXPECT_EQ(got, "");

  held.pop_back();  // frees one
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool served = false;
  while (!served && std::chrono::steady_clock::now() < deadline) {
    auto again = Connect();
    Send(*again, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    served = ReadHealthz(*again).find("200 OK") != std::string::npos;
    if (!served) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(served);
  Send(*held.front(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadHealthz(*held.front()).find("200 OK"), std::string::npos);
}

}  // namespace
}  // namespace walwatch
