// walwatch on MariaDB, watched through its socket, where the binlog asks
// for cases of its own: TRUNCATE and DDL, and a transaction too large to
// keep. The row-to-event rules every database shares are
// support/row_events_cases.h's (mariadb_row_events_test.cc here). The RV
// values are binlog positions (file number * 10^10 + the commit event's
// end). Real MariaDB (the server ctest starts, a database per test) and the
// walwatch binary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/support/mariadb_walwatch.h"

namespace walwatch::itest {
namespace {

class MariaDbEventsTest : public MariaDbWalwatchTest {};

::testing::AssertionResult Expired(const WatchEvent& e) {
  if (e.type == "ERROR" && e.object.value("code", 0) == 410 &&
      e.object.value("reason", "") == "Expired") {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "not a 410 Expired: " << e.raw;
}

// TRUNCATE and DDL on the table change rows, or may, without row events:
// every watcher relists (410), and a new watch goes on.
TEST_F(MariaDbEventsTest, TruncateAndDdlEndEveryWatchWith410) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  writer().Insert(Pod("c1", "default", "before"));
  for (const std::string& statement :
       {std::string("TRUNCATE TABLE resources"),
        std::string("ALTER TABLE resources ADD COLUMN walwatch_x INT NULL")}) {
    SCOPED_TRACE(statement);
    WatchClient pods, deployments;
    ASSERT_TRUE(OpenWatch(pods, *ww, "/api/v1/pods"));
    ASSERT_TRUE(OpenWatch(deployments, *ww, "/apis/apps/v1/deployments"));
    const uint64_t c = writer().Exec(statement);
    for (WatchClient* w : {&pods, &deployments}) {
      WatchEvent e;
      ASSERT_TRUE(w->NextEvent(&e, In(kEventWait)));
      EXPECT_TRUE(Expired(e));
      EXPECT_TRUE(w->ExpectEnd(In(kEventWait)));
    }
    // A watch from before the statement is expired at once; one from after
    // it goes on.
    WatchClient old;
    ASSERT_TRUE(OpenWatch(old, *ww, "/api/v1/pods", c - 1));
    WatchEvent e;
    ASSERT_TRUE(old.NextEvent(&e, In(kEventWait)));
    EXPECT_TRUE(Expired(e));
    WatchClient after;
    ASSERT_TRUE(OpenWatch(after, *ww, "/api/v1/pods", c));
    const std::string name =
        statement.rfind("TRUNCATE", 0) == 0 ? "after-truncate" : "after-ddl";
    const uint64_t c_after = writer().Insert(Pod("c1", "default", name));
    ASSERT_TRUE(after.NextEvent(&e, In(kEventWait)));
    EXPECT_EQ(e.name(), name);
    EXPECT_EQ(e.rv(), c_after);
  }
}

// A cluster's removal too large for walwatch to keep (more than half of
// --max-log-bytes) ends only the watches it touched: those of that
// cluster's pods. Another cluster's pods and another resource go on, and
// see what comes after it.
TEST_F(MariaDbEventsTest, ARemovalTooLargeToKeepEndsOnlyTheWatchesItTouched) {
  constexpr int kRows = 3000;  // ~1 KB each: past 1 MiB, half of the log
  WalwatchOptions options = Options();
  options.max_log_bytes = "2Mi";
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  for (int batch = 0; batch < kRows / 500; ++batch) {
    std::vector<std::string> inserts;
    for (int i = batch * 500; i < (batch + 1) * 500; ++i) {
      Resource pod = Pod("gone", "ns", "p" + std::to_string(i));
      pod.spec["padding"] = std::string(800, 'x');
      inserts.push_back(InsertSql(database(), pod));
    }
    writer().Transaction(inserts);
  }
  WatchClient all, gone, stays, deployments;
  ASSERT_TRUE(OpenWatch(all, *ww, "/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(gone, *ww, "/clusters/gone/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(stays, *ww, "/clusters/stays/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(deployments, *ww, "/apis/apps/v1/deployments"));

  writer().Exec("DELETE FROM resources WHERE `cluster` = 'gone'");
  for (WatchClient* w : {&all, &gone}) {
    WatchEvent e;
    ASSERT_TRUE(w->NextEvent(&e, In(std::chrono::seconds(60))));
    EXPECT_TRUE(Expired(e)) << w->target();
  }
  const uint64_t c_pod = writer().Insert(Pod("stays", "ns", "later"));
  const uint64_t c_deploy =
      writer().Insert(Deployment("gone", "ns", "later-deploy"));
  WatchEvent e;
  ASSERT_TRUE(stays.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "later") << "the other cluster's watch saw " << e.raw;
  EXPECT_EQ(e.rv(), c_pod);
  ASSERT_TRUE(deployments.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "later-deploy") << "the deployments watch saw " << e.raw;
  EXPECT_EQ(e.rv(), c_deploy);
}

}  // namespace
}  // namespace walwatch::itest
