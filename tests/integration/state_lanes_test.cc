// The state readers' lanes (issue 18, part 5): initial states, however many
// and however slowly read, never take the reader that answers handoffs and
// fresh RVs, so an APIServer's own SQL list always gets its RV.

#include <atomic>
#include <future>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model.h"
#include "tests/integration/support/watch_client.h"

namespace walwatch::itest {
namespace {

class StateLanesTest : public WalwatchTest {};

// Fails if handoffs share the initial states' readers: with the only one
// held by a client that does not read, the handoff waits for a free reader
// and, after 60 s, is answered 504 ("all busy").
TEST_F(StateLanesTest, AClientThatDoesNotReadItsStateLeavesHandoffsAnswered) {
  // Enough pods (~12 MB) that an unread initial state fills the socket and
  // the stream's buffer, so its reader blocks.
  InsertBulkPods(db(), 6000);
  WalwatchOptions o = DefaultOptions();
  o.extra_args = {"--state-workers", "1"};
  WalwatchProcess* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);

  // The one state reader streams this WatchList, which is never read.
  auto stalled = std::make_unique<WatchClient>();
  ASSERT_TRUE(stalled->OpenState(ww->socket_path(),
                                 "/api/v1/pods?watch=1&sendInitialEvents=true&"
                                 "resourceVersionMatch=NotOlderThan&"
                                 "allowWatchBookmarks=true",
                                 In(std::chrono::seconds(60))));
  ASSERT_EQ(stalled->status(), 200);

  // A second initial state now waits for a reader: it is the case meant
  // here only if it is still waiting once the handoff below was answered.
  std::atomic<bool> second_answered{false};
  auto second = std::async(std::launch::async, [&] {
    WatchClient w;
    auto r = w.Open(ww->socket_path(), "/apis/apps/v1/deployments?watch=1",
                    In(std::chrono::seconds(90)));
    second_answered = true;
    return r;
  });

  PgConnection conn = Connect();
  const std::string snapshot =
      conn.QueryValue("SELECT pg_current_snapshot()::text");
  const std::string insert_lsn =
      conn.QueryValue("SELECT pg_current_wal_insert_lsn()::text");
  uint64_t rv = 0;
  int status = 0;
  std::string body;
  // Well inside the 60 s after which a queued request is answered 504.
  EXPECT_TRUE(GetRvEndpoint(ww->socket_path(),
                            HandoffTarget(snapshot, insert_lsn), &rv, &status,
                            &body, In(std::chrono::seconds(30))))
      << status << " " << body;
  EXPECT_GT(rv, 0u);
  uint64_t fresh = 0;
  EXPECT_TRUE(GetFreshRv(ww->socket_path(), &fresh,
                         In(std::chrono::seconds(30))));
  EXPECT_GE(fresh, rv);
  EXPECT_FALSE(second_answered)
      << "the second initial state was served: the only state reader was not "
         "held by the stalled client, so this test checked nothing";

  // Let go of the stalled state: the reader is freed, the second is served.
  stalled.reset();
  auto second_result = second.get();
  EXPECT_TRUE(second_result) << second_result.message();
}

}  // namespace
}  // namespace walwatch::itest
