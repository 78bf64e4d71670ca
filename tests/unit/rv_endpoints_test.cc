// The RV endpoints, /walwatch/v1/handoff and /walwatch/v1/freshrv
// (HttpSession asking the StateSource): their answers and errors, keep-alive
// around them, and a request nobody waits for any more.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class RvEndpointsTest : public HttpServerTest {};

TEST_F(RvEndpointsTest, HandoffAndFreshRvAnswerTheResourceVersion) {
  StartServer();
  auto client = Connect();
  state_.set_answer({4242, std::nullopt});
  ASSERT_TRUE(Answers(client.get(),
                      "/walwatch/v1/handoff?snapshot=700%3A712%3A701%2C705&"
                      "insertLSN=0%2F16B3748",
                      200));
  EXPECT_EQ(client->header("Content-Type"), "application/json");
  EXPECT_EQ(client->body(),
            "{\"kind\":\"ResourceVersion\",\"apiVersion\":"
            "\"walwatch.clusterpedia.io/v1\",\"resourceVersion\":\"4242\"}");
  auto handoffs = state_.handoffs();
  ASSERT_EQ(handoffs.size(), 1u);
  EXPECT_EQ(handoffs[0].snapshot, "700:712:701,705");
  EXPECT_EQ(handoffs[0].insert_lsn, 0x16B3748u);
  EXPECT_FALSE(handoffs[0].binlog());

  // Keep-alive: the same connection asks again, without insertLSN.
  ASSERT_TRUE(Answers(client.get(), "/walwatch/v1/handoff?snapshot=1:2:", 200));
  EXPECT_EQ(state_.handoffs().at(1).insert_lsn, 0u);

  // The MySQL/MariaDB form: the list's binlog_snapshot_file and _position.
  ASSERT_TRUE(Answers(client.get(),
                      "/walwatch/v1/handoff?binlogFile=mariadb-bin.000003&"
                      "binlogPosition=12345",
                      200));
  EXPECT_EQ(state_.handoffs().at(2).binlog_file, "mariadb-bin.000003");
  EXPECT_EQ(state_.handoffs().at(2).binlog_position, 12345u);
  EXPECT_TRUE(state_.handoffs().at(2).snapshot.empty());

  // A state that holds past its RV says how far.
  state_.set_answer({4242, std::nullopt, 4300});
  ASSERT_TRUE(Answers(client.get(), "/walwatch/v1/handoff?snapshot=1:2:", 200));
  EXPECT_EQ(client->body(),
            "{\"kind\":\"ResourceVersion\",\"apiVersion\":"
            "\"walwatch.clusterpedia.io/v1\",\"resourceVersion\":\"4242\","
            "\"latestResourceVersion\":\"4300\"}");

  state_.set_answer({5000, std::nullopt});
  ASSERT_TRUE(Answers(client.get(), "/walwatch/v1/freshrv", 200));
  EXPECT_EQ(client->BodyJson()["resourceVersion"], "5000");
  EXPECT_EQ(state_.fresh_rvs(), 1);
}

// A worker must not spend itself on an answer nobody waits for any more:
// once a session gives up waiting (its 60 s deadline, or here shutdown,
// which take the same path), the request says so.
TEST_F(RvEndpointsTest, AStateRequestIsNoLongerWantedOnceTheSessionGivesUp) {
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
TEST_F(RvEndpointsTest, AClientThatLeavesWhileItsRequestWaitsIsNoLongerWanted) {
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
TEST_F(RvEndpointsTest, ARequestPipelinedBehindAWaitingOneIsAnsweredAfterIt) {
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
  EXPECT_EQ(client->body(), "ok");
  // A waiting request whose client stays: keep-alive holds after it too.
  state_.set_hold(true);
  client->Get("/walwatch/v1/handoff?snapshot=1:2:");
  ASSERT_TRUE(WaitFor([&] { return state_.held_wanted().size() == 1; }));
  state_.ReleaseHeld({778, std::nullopt});
  ASSERT_TRUE(client->ReadResponse()) << client->last_error().message();
  EXPECT_EQ(client->BodyJson()["resourceVersion"], "778");
  ASSERT_TRUE(Answers(client.get(), "/healthz", 200));
}

TEST_F(RvEndpointsTest, HandoffAndFreshRvErrorsAreStatuses) {
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
        "/walwatch/v1/handoff?snapshot=1:2:&insertLSN=16B3748",
        "/walwatch/v1/handoff?binlogFile=mariadb-bin.000003",
        "/walwatch/v1/handoff?binlogFile=mariadb-bin&binlogPosition=4",
        "/walwatch/v1/handoff?binlogFile=b.1&binlogPosition=-4",
        "/walwatch/v1/handoff?binlogPosition=4",
        "/walwatch/v1/handoff?snapshot=1:2:&binlogFile=b.1&"
        "binlogPosition=4"}) {
    ASSERT_TRUE(Answers(client.get(), target, 400));
  }
  EXPECT_EQ(state_.handoffs().size(), asked);
}

}  // namespace
}  // namespace walwatch::server_test
