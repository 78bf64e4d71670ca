// sendInitialEvents (WatchList): the state, then the bookmark annotated
// k8s.io/initial-events-end, then live events; from a resourceVersion the
// log has not reached yet; and sendInitialEvents=false.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "tests/unit/support/http_server_fixture.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class WatchListTest : public HttpServerTest {};

TEST_F(WatchListTest, WatchListEndsItsStateWithAnAnnotatedBookmark) {
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

TEST_F(WatchListTest, WatchListBookmarkNamesTheKindAndGroup) {
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

TEST_F(WatchListTest, WatchListFromAFutureRvWaitsForItThenReadsTheState) {
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

TEST_F(WatchListTest, WatchListFromAnRvNeverReachedIs504) {
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

TEST_F(WatchListTest, SendInitialEventsFalseStartsWithoutState) {
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

}  // namespace
}  // namespace walwatch::server_test
