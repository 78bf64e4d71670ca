// HttpSession (http_session.h): how a connection's requests are read,
// routed and answered: Status bodies for bad paths and values, HEAD,
// HTTP/1.0, malformed and oversized requests, /readyz, invalid selectors,
// and the waits before a watch's header (a resourceVersion ahead of the
// log, a watch that needs a state source there is none of).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"
#include "watchserver/request_parser.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class HttpSessionTest : public HttpServerTest {};

TEST_F(HttpSessionTest, BadPathsAndValuesGetStatusBodies) {
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
  EXPECT_EQ(client->header("Allow"), "GET");
  EXPECT_EQ(client->BodyJson()["reason"], "MethodNotAllowed");
}

TEST_F(HttpSessionTest, HeadIsAnsweredWithoutABodyAndTheConnectionGoesOn) {
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

TEST_F(HttpSessionTest, WatchOverHttp10IsRefused) {
  StartServer();
  auto client = Connect();
  client->SendRaw("GET /api/v1/pods?watch=1 HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), 400u);
  EXPECT_TRUE(client->ReadEof());
}

TEST_F(HttpSessionTest, MalformedHttpGets400AndTheServerSurvives) {
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
TEST_F(HttpSessionTest, AHeaderFieldTooLongToStoreGets431AndTheServerSurvives) {
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
TEST_F(HttpSessionTest, TooManyHeaderFieldsGet431) {
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

TEST_F(HttpSessionTest, ReadyzFollowsReplication) {
  ready_ = false;
  StartServer();
  auto client = Connect();
  ASSERT_TRUE(Answers(client.get(), "/readyz", 503));
  EXPECT_EQ(client->body(), "not yet");  // the reason, verbatim
  ready_ = true;
  ASSERT_TRUE(Answers(client.get(), "/readyz", 200));
  ASSERT_TRUE(Answers(client.get(), "/livez", 200));
  EXPECT_EQ(client->body(), "ok");
}

TEST_F(HttpSessionTest, InvalidSelectorsAre400) {
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

TEST_F(HttpSessionTest, FutureResourceVersionTimesOutWith504) {
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
  EXPECT_EQ(client->header("Retry-After"),
            std::to_string(
                client->BodyJson()["details"]["retryAfterSeconds"].get<int>()));
}

TEST_F(HttpSessionTest, FutureResourceVersionIsServedOnceReached) {
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

TEST_F(HttpSessionTest, WithoutAStateSourceInitialEventsAre503) {
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

}  // namespace
}  // namespace walwatch::server_test
