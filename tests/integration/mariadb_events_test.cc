// walwatch on MariaDB, watched through its socket: row changes in
// `resources` become the same watch events as on PostgreSQL (events_test.cc,
// ordering_test.cc), but for the RV values, which are binlog positions
// (file number * 10^10 + the commit event's end). Real MariaDB (the server
// ctest starts, a database per test) and the walwatch binary.
#include <gtest/gtest.h>

#include <string>
#include <thread>
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

TEST_F(MariaDbEventsTest, InsertUpdateDeleteGiveAddedModifiedDeleted) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));

  Resource pod = Pod("c1", "default", "p1");
  pod.member_rv = "4711";
  const uint64_t c_insert = writer().Insert(pod);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "ADDED"));
  EXPECT_EQ(e.rv(), c_insert) << "the RV is the commit's binlog position "
                              << mysql::FormatBinlogVersion(c_insert);
  EXPECT_EQ(e.member_rv(), "4711");
  EXPECT_EQ(e.object, pod.Expected(c_insert)) << e.raw;

  Resource modified = pod;
  modified.member_rv = "4712";
  modified.spec["nodeName"] = "node-2 \"é\"";
  const uint64_t c_update = writer().Update(modified);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "MODIFIED"));
  EXPECT_EQ(e.rv(), c_update);
  EXPECT_GT(c_update, c_insert);
  EXPECT_EQ(e.object, modified.Expected(c_update)) << e.raw;

  const uint64_t c_delete = writer().Delete(modified);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "DELETED"));
  EXPECT_EQ(e.rv(), c_delete);
  // The last full object, from the binlog's old row image.
  EXPECT_EQ(e.object, modified.Expected(c_delete)) << e.raw;
}

// Clusterpedia's coalescing: a Deleted then Added object is one UPDATE with
// a new uid. Watchers see the old object go and the new one come, in one
// transaction: DELETED at c - 1, ADDED at c.
TEST_F(MariaDbEventsTest, ANewUidIsDeletedThenAdded) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  Resource pod = Pod("c1", "default", "reborn");
  writer().Insert(pod);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));

  Resource reborn = pod;
  reborn.uid = "uid-reborn-2";
  reborn.member_rv = "200";
  const uint64_t c = writer().Update(reborn);
  std::vector<WatchEvent> events;
  ASSERT_TRUE(ReadEvents(watch, 2, &events, In(kEventWait)));
  EXPECT_EQ(events[0].type, "DELETED");
  EXPECT_EQ(events[0].object, pod.Expected(c - 1)) << events[0].raw;
  EXPECT_EQ(events[1].type, "ADDED");
  EXPECT_EQ(events[1].object, reborn.Expected(c)) << events[1].raw;
}

// Clusterpedia records Kubernetes events on the row (its events columns);
// the object does not change, and watchers see nothing.
TEST_F(MariaDbEventsTest, EventRecordingGivesNoEvent) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  Resource quiet = Pod("c1", "default", "quiet");
  writer().Insert(quiet);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  writer().RecordKubeEvent(quiet, "Scheduled");
  writer().RecordKubeEvent(quiet, "Pulled");
  const uint64_t c_next = writer().Insert(Pod("c1", "default", "next"));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "ADDED");
  EXPECT_EQ(e.name(), "next") << "an event recording made an event: " << e.raw;
  EXPECT_EQ(e.rv(), c_next);
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
    const std::string name = "after-" + std::to_string(c);
    const uint64_t c_after = writer().Insert(Pod("c1", "default", name));
    ASSERT_TRUE(after.NextEvent(&e, In(kEventWait)));
    EXPECT_EQ(e.name(), name);
    EXPECT_EQ(e.rv(), c_after);
  }
}

// Events follow commit order, not the order the changes were made in.
TEST_F(MariaDbEventsTest, ConcurrentTransactionsArriveInCommitOrder) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  BinlogWriter second(server(), database());
  writer().Run("BEGIN");
  writer().Run(InsertSql(database(), Pod("c1", "default", "first-begun")));
  second.Run("BEGIN");
  second.Run(InsertSql(database(), Pod("c1", "default", "first-committed")));
  second.Run(InsertSql(database(), Pod("c1", "default", "first-committed-2")));
  const uint64_t c_second = second.Exec("COMMIT");
  writer().Run(InsertSql(database(), Pod("c1", "default", "last-committed")));
  const uint64_t c_first = writer().Exec("COMMIT");
  ASSERT_LT(c_second, c_first);

  std::vector<WatchEvent> events;
  ASSERT_TRUE(ReadEvents(watch, 4, &events, In(kEventWait)));
  EXPECT_EQ(events[0].name(), "first-committed") << Describe(events);
  EXPECT_EQ(events[1].name(), "first-committed-2") << Describe(events);
  EXPECT_EQ(events[2].name(), "first-begun") << Describe(events);
  EXPECT_EQ(events[3].name(), "last-committed") << Describe(events);
  // The last event of a transaction carries its commit, the others c - 1.
  EXPECT_EQ(events[0].rv(), c_second - 1);
  EXPECT_EQ(events[1].rv(), c_second);
  EXPECT_EQ(events[2].rv(), c_first - 1);
  EXPECT_EQ(events[3].rv(), c_first);
}

// Removing a cluster is one DELETE of thousands of rows: one transaction of
// DELETED events, all but the last at c - 1, in one piece. Another
// cluster's watch sees none of it.
TEST_F(MariaDbEventsTest, AClustersRemovalOf5000RowsIsOneTransaction) {
  constexpr int kRows = 5000;
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  for (int batch = 0; batch < kRows / 500; ++batch) {
    std::vector<std::string> inserts;
    for (int i = batch * 500; i < (batch + 1) * 500; ++i) {
      inserts.push_back(
          InsertSql(database(), Pod("gone", "ns", "p" + std::to_string(i))));
    }
    writer().Transaction(inserts);
  }
  writer().Insert(Pod("stays", "ns", "kept"));
  WatchClient all, gone, stays;
  ASSERT_TRUE(OpenWatch(all, *ww, "/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(gone, *ww, "/clusters/gone/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(stays, *ww, "/clusters/stays/api/v1/pods"));

  const uint64_t c =
      writer().Exec("DELETE FROM resources WHERE `cluster` = 'gone'");
  for (WatchClient* w : {&all, &gone}) {
    std::vector<WatchEvent> events;
    ASSERT_TRUE(ReadEvents(*w, kRows, &events, In(std::chrono::seconds(60))));
    size_t not_deleted = 0, not_previous = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      not_deleted += events[i].type != "DELETED";
      not_previous += i + 1 < events.size() && events[i].rv() != c - 1;
    }
    EXPECT_EQ(not_deleted, 0u);
    EXPECT_EQ(not_previous, 0u);
    EXPECT_EQ(events.back().rv(), c);
  }
  const uint64_t c_later = writer().Insert(Pod("stays", "ns", "later"));
  WatchEvent e;
  ASSERT_TRUE(stays.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "later") << "the other cluster's watch saw " << e.raw;
  EXPECT_EQ(e.rv(), c_later);
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

// The kinds of the resources already in the table come from the table at
// startup (LoadCatalog), not from the stream: with no replay window
// walwatch reads nothing of the row, yet its bookmarks carry the row's
// kind, which no guess from the plural would give.
TEST_F(MariaDbEventsTest, BookmarksCarryTheKindOfAResourceOnlyTheTableHolds) {
  Resource r;
  r.group = "example.com";
  r.version = "v1";
  r.resource = "foobazes";
  r.kind = "FooBazThing";
  r.cluster = "c1";
  r.ns = "default";
  r.name = "one";
  r.uid = "uid-foobaz-one";
  writer().Insert(r);
  auto* ww = StartWalwatch(Options({"--bookmark-interval", "1s"}));
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(watch.Open(ww->socket_path(),
                         "/apis/example.com/v1/foobazes?watch=1&"
                         "allowWatchBookmarks=true&resourceVersion=" +
                             std::to_string(FreshRv(*ww)),
                         In(kEventWait)));
  ASSERT_EQ(watch.status(), 200) << watch.body();
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  ASSERT_EQ(e.type, "BOOKMARK") << e.raw;
  EXPECT_EQ(e.object.value("kind", ""), "FooBazThing") << e.raw;
  EXPECT_EQ(e.object.value("apiVersion", ""), "example.com/v1") << e.raw;
}

// Selectors, namespaces and clusters filter as on PostgreSQL.
TEST_F(MariaDbEventsTest, SelectorsNamespacesAndClustersFilter) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  const uint64_t rv = FreshRv(*ww);
  struct Case {
    std::string target;
    std::vector<std::string> names;
  };
  const std::vector<Case> cases = {
      {WatchTarget("/api/v1/pods", rv) + "&labelSelector=tier%3Dweb",
       {"web-a", "web-b"}},
      {WatchTarget("/api/v1/pods", rv) + "&labelSelector=tier%21%3Dweb",
       {"db-a"}},
      {WatchTarget("/api/v1/pods", rv) +
           "&fieldSelector=metadata.namespace%3Dns-b",
       {"web-b"}},
      {WatchTarget("/api/v1/namespaces/ns-a/pods", rv), {"web-a", "db-a"}},
      {WatchTarget("/clusters/c2/api/v1/pods", rv), {"web-b"}},
      {WatchTarget("/apis/apps/v1/deployments", rv), {"deploy-a"}},
  };
  std::vector<std::unique_ptr<WatchClient>> watches;
  for (const Case& c : cases) {
    watches.push_back(std::make_unique<WatchClient>());
    ASSERT_TRUE(
        watches.back()->Open(ww->socket_path(), c.target, In(kEventWait)));
    ASSERT_EQ(watches.back()->status(), 200) << watches.back()->body();
  }
  Resource web_a = Pod("c1", "ns-a", "web-a");
  web_a.labels = {{"tier", "web"}};
  Resource db_a = Pod("c1", "ns-a", "db-a");
  db_a.labels = {{"tier", "db"}};
  Resource web_b = Pod("c2", "ns-b", "web-b");
  web_b.labels = {{"tier", "web"}};
  for (const Resource& r :
       {web_a, db_a, web_b, Deployment("c1", "ns-a", "deploy-a")}) {
    writer().Insert(r);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].target);
    std::vector<std::string> got;
    WatchEvent e;
    while (got.size() < cases[i].names.size() &&
           watches[i]->NextEvent(&e, In(kEventWait))) {
      got.push_back(e.name());
    }
    EXPECT_EQ(got, cases[i].names);
  }
}

}  // namespace
}  // namespace walwatch::itest
