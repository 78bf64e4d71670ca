// walwatch on MariaDB: where a watch starts and where it resumes. Resuming
// from any RV a client received loses and repeats nothing, also inside a
// transaction; a restarted walwatch rebuilds its replay window from the
// binlog, so watches resume without 410; a binlog purged before walwatch
// read it ends every watch with 410; the initial state (resourceVersion 0,
// WatchList) and an APIServer's own SQL list (the handoff endpoint, with
// the SQL watchserver/PROTOCOL.md gives) continue exactly at the snapshot's
// binlog position.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/mariadb_walwatch.h"

namespace walwatch::itest {
namespace {

using std::chrono::seconds;

class MariaDbResumeTest : public MariaDbWalwatchTest {};

// "TYPE name rv" of each event.
std::vector<std::string> Summary(const std::vector<WatchEvent>& events) {
  std::vector<std::string> out;
  for (const WatchEvent& e : events) {
    out.push_back(e.type + " " + e.name() + " " + std::to_string(e.rv()));
  }
  return out;
}

// Three transactions of 3, 1 and 2 events; returns what a watch from
// before them received.
std::vector<WatchEvent> WriteThreeTransactions(BinlogWriter& w,
                                               WatchClient& watch,
                                               const std::string& prefix) {
  const std::string db = w.database();
  w.Transaction({InsertSql(db, Pod("c1", "default", prefix + "a")),
                 InsertSql(db, Pod("c1", "default", prefix + "b")),
                 InsertSql(db, Pod("c1", "default", prefix + "c"))});
  w.Insert(Pod("c1", "default", prefix + "d"));
  Resource a = Pod("c1", "default", prefix + "a");
  a.spec["nodeName"] = "node-9";
  w.Transaction(
      {UpdateSql(db, a), DeleteSql(db, Pod("c1", "default", prefix + "b"))});
  std::vector<WatchEvent> events;
  EXPECT_TRUE(ReadEvents(watch, 6, &events, In(kEventWait)));
  return events;
}

// Resuming from any received RV gets exactly the rest: from c - 1 (inside a
// transaction) the transaction again whole, from c the next one.
TEST_F(MariaDbResumeTest, ResumingFromEveryReceivedRvLosesAndRepeatsNothing) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  const std::vector<WatchEvent> all =
      WriteThreeTransactions(writer(), watch, "r-");
  ASSERT_EQ(all.size(), 6u);
  for (size_t i = 0; i < all.size(); ++i) {
    const uint64_t rv = all[i].rv();
    SCOPED_TRACE("resume from event " + std::to_string(i) + ", rv " +
                 std::to_string(rv));
    // A transaction's events carry c - 1 but its last, which carries c,
    // and commits lie more than one apart: an event at x belongs to the
    // transaction committed at x + 1 if some event carries x + 1, else to
    // the one at x. The resumed watch gets every transaction committed
    // after rv, whole.
    std::set<uint64_t> rvs;
    for (const WatchEvent& e : all) rvs.insert(e.rv());
    std::vector<WatchEvent> want;
    for (const WatchEvent& e : all) {
      const uint64_t commit = rvs.count(e.rv() + 1) ? e.rv() + 1 : e.rv();
      if (commit > rv) want.push_back(e);
    }
    WatchClient resumed;
    ASSERT_TRUE(OpenWatch(resumed, *ww, "/api/v1/pods", rv));
    std::vector<WatchEvent> got;
    if (!want.empty()) {
      ASSERT_TRUE(ReadEvents(resumed, want.size(), &got, In(kEventWait)));
    }
    EXPECT_EQ(Summary(got), Summary(want));
  }
}

// MySQL has no slot: a restarted walwatch reads the binlog again from a
// file that began --replay-window ago. Watches resume from the RVs they
// hold, across the restart, without a 410, and get what was written while
// walwatch was down.
TEST_F(MariaDbResumeTest, ARestartRebuildsTheReplayWindow) {
  const std::vector<std::string> window = {"--replay-window", "10m"};
  auto* first = StartWalwatch(Options(window));
  ASSERT_NE(first, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *first, "/api/v1/pods"));
  const std::vector<WatchEvent> before =
      WriteThreeTransactions(writer(), watch, "w-");
  ASSERT_EQ(before.size(), 6u);
  const ExitStatus stopped = first->Stop();
  EXPECT_TRUE(stopped.exited && stopped.exit_code == 0) << stopped.Describe();
  const uint64_t c_down = writer().Insert(Pod("c1", "default", "while-down"));

  auto* second = StartWalwatch(Options(window));
  ASSERT_NE(second, nullptr);
  for (const WatchEvent& from : before) {
    SCOPED_TRACE("resume from " + from.name() + " at " +
                 std::to_string(from.rv()));
    WatchClient resumed;
    ASSERT_TRUE(OpenWatch(resumed, *second, "/api/v1/pods", from.rv()));
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadUntilName(resumed, "while-down", &got, In(kEventWait)));
    for (const WatchEvent& e : got) {
      EXPECT_NE(e.type, "ERROR") << e.raw;
      EXPECT_GE(e.rv(), from.rv());
    }
    EXPECT_EQ(got.back().rv(), c_down);
  }
}

// The initial state of a watch without resourceVersion, and of WatchList:
// the rows of one consistent snapshot as ADDED events at its binlog
// position, then the changes after it.
TEST_F(MariaDbResumeTest, InitialStateAndWatchListStartAtTheSnapshot) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  std::set<std::string> rows;
  for (const char* name : {"s1", "s2", "s3"}) {
    writer().Insert(Pod("c1", "default", name));
    rows.insert(name);
  }
  writer().Insert(Deployment("c1", "default", "not-a-pod"));

  // resourceVersion unset.
  WatchClient watch;
  ASSERT_TRUE(
      watch.Open(ww->socket_path(), "/api/v1/pods?watch=1", In(kEventWait)));
  ASSERT_EQ(watch.status(), 200) << watch.body();
  std::vector<WatchEvent> initial;
  ASSERT_TRUE(ReadEvents(watch, 3, &initial, In(kEventWait)));
  std::set<std::string> names;
  for (const WatchEvent& e : initial) {
    EXPECT_EQ(e.type, "ADDED");
    EXPECT_EQ(e.rv(), initial[0].rv()) << "one snapshot, one RV";
    names.insert(e.name());
  }
  EXPECT_EQ(names, rows);
  const uint64_t snapshot = initial[0].rv();
  const uint64_t c_live = writer().Insert(Pod("c1", "default", "live"));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "live");
  EXPECT_EQ(e.rv(), c_live);
  EXPECT_GT(c_live, snapshot);

  // WatchList: the state, then the bookmark that ends it.
  WatchClient list;
  ASSERT_TRUE(list.Open(ww->socket_path(),
                        "/api/v1/pods?watch=1&sendInitialEvents=true&"
                        "resourceVersionMatch=NotOlderThan&"
                        "allowWatchBookmarks=true",
                        In(kEventWait)));
  ASSERT_EQ(list.status(), 200) << list.body();
  std::vector<WatchEvent> listed;
  ASSERT_TRUE(ReadEvents(list, 5, &listed, In(kEventWait)));
  names.clear();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(listed[i].type, "ADDED");
    names.insert(listed[i].name());
  }
  rows.insert("live");
  EXPECT_EQ(names, rows);
  EXPECT_EQ(listed[4].type, "BOOKMARK") << listed[4].raw;
  EXPECT_EQ(
      listed[4].object["metadata"]["annotations"]["k8s.io/initial-events-end"],
      "true")
      << listed[4].raw;
  EXPECT_EQ(listed[4].rv(), listed[0].rv());
  EXPECT_GE(listed[4].rv(), c_live);
}

// An APIServer's own SQL list, read as watchserver/PROTOCOL.md says, and the
// handoff endpoint: the watch from the RV it answers delivers exactly the
// transactions the list did not see.
TEST_F(MariaDbResumeTest, TheHandoffContinuesAnApiServersListExactly) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  writer().Insert(Pod("c1", "default", "listed"));

  // The APIServer's connection (PROTOCOL.md, "Handoff", MySQL/MariaDB).
  mysql::MysqlConnection list;
  ASSERT_EQ(list.Connect(server().Tcp(server().pw_user, server().pw_password,
                                      database())),
            "");
  ASSERT_EQ(list.Query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE "
                       "READ"),
            "");
  ASSERT_EQ(list.Query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ "
                       "ONLY"),
            "");
  // Committed after the snapshot: not in the list, so in the watch.
  const uint64_t c_late = writer().Insert(Pod("c1", "default", "late"));
  mysql::MysqlRows status;
  ASSERT_EQ(list.Query("SHOW STATUS LIKE 'binlog_snapshot_%'", &status), "");
  std::map<std::string, std::string> snapshot;
  for (const auto& r : status.rows) snapshot[*r[0]] = r[1].value_or("");
  mysql::MysqlRows rows;
  ASSERT_EQ(list.Query("SELECT `name` FROM resources WHERE `group` = '' AND "
                       "`version` = 'v1' AND `resource` = 'pods'",
                       &rows),
            "");
  ASSERT_EQ(list.Query("COMMIT"), "");
  ASSERT_EQ(rows.rows.size(), 1u);
  EXPECT_EQ(*rows.rows[0][0], "listed");

  HttpResponse r = HttpGet(
      ww->socket_path(),
      "/walwatch/v1/handoff?binlogFile=" + snapshot["Binlog_snapshot_file"] +
          "&binlogPosition=" + snapshot["Binlog_snapshot_position"],
      In(kEventWait));
  ASSERT_TRUE(r.ok && r.status == 200) << r.status << " " << r.body;
  const uint64_t rv = std::stoull(
      nlohmann::json::parse(r.body)["resourceVersion"].get<std::string>());
  EXPECT_EQ(rv,
            RvOf(&list, {snapshot["Binlog_snapshot_file"],
                         std::stoull(snapshot["Binlog_snapshot_position"])}));
  EXPECT_LT(rv, c_late);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods", rv));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "late");
  EXPECT_EQ(e.rv(), c_late);

  // The other database's form, and a position the server has not reached.
  r = HttpGet(ww->socket_path(),
              "/walwatch/v1/handoff?snapshot=1:2:", In(kEventWait));
  EXPECT_EQ(r.status, 400) << r.body;
  r = HttpGet(ww->socket_path(),
              "/walwatch/v1/handoff?binlogFile=mariadb-bin.999999&"
              "binlogPosition=4",
              In(kEventWait));
  EXPECT_EQ(r.status, 400) << r.body;
}

// Tests that purge the binlog: on the server no other test reads
// (ctest's mariadb_exclusive fixture, one test at a time).
class MariaDbPurgeTest : public MariaDbWalwatchTest {};

// A binlog purged before walwatch read it: what it held is lost, so every
// watcher gets 410 (never a silent gap), the log says so, a metric counts
// it, and new watches go on.
TEST_F(MariaDbPurgeTest, APurgedBinlogEndsEveryWatchWith410) {
  const int metrics_port = FreeLoopbackPort();
  WalwatchOptions o = Options();
  o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port);
  auto* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  const uint64_t c_seen = writer().Insert(Pod("c1", "default", "seen"));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  ASSERT_EQ(e.rv(), c_seen);

  // walwatch falls behind: it is stopped, its binlog connection cut, and
  // the files it had not read yet purged.
  ASSERT_EQ(kill(ww->pid(), SIGSTOP), 0);
  writer().Insert(Pod("c1", "default", "unread"));
  mysql::MysqlRows dumps;
  ASSERT_EQ(
      writer().conn().Query("SELECT id FROM information_schema.processlist "
                            "WHERE command LIKE 'Binlog Dump%'",
                            &dumps),
      "");
  for (const auto& d : dumps.rows) writer().Run("KILL " + *d[0]);
  writer().Run("FLUSH BINARY LOGS");
  mysql::BinlogPosition now;
  ASSERT_TRUE(mysql::ReadBinlogEnd(&writer().conn(), &now).ok());
  // MariaDB keeps a file until its binlog checkpoint has passed.
  const auto deadline = In(kEventWait);
  std::string oldest;
  while (oldest != now.file && Clock::now() < deadline) {
    writer().Run("PURGE BINARY LOGS TO '" + now.file + "'");
    mysql::MysqlRows logs;
    ASSERT_EQ(writer().conn().Query("SHOW BINARY LOGS", &logs), "");
    oldest = *logs.rows[0][0];
    if (oldest != now.file) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_EQ(kill(ww->pid(), SIGCONT), 0);
  ASSERT_EQ(oldest, now.file) << "the binlog was not purged in time";

  // What the socket still held may come first; then the 410.
  for (;;) {
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
    if (e.type == "ERROR") break;
    EXPECT_EQ(e.name(), "unread") << e.raw;
  }
  EXPECT_EQ(e.object.value("code", 0), 410) << e.raw;
  bool logged = false;
  for (const nlohmann::json& line : ww->LogLines()) {
    logged |= line.value("msg", "").find("was purged") != std::string::npos;
  }
  EXPECT_TRUE(logged) << ww->StderrText();
  CommandResult scrape = RunCommand(
      {"curl", "-sf", "--max-time", "10",
       "http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics"},
      seconds(20));
  EXPECT_NE(scrape.output.find("walwatch_stream_gaps_total 1"),
            std::string::npos)
      << scrape.output;

  WatchClient after;
  ASSERT_TRUE(OpenWatch(after, *ww, "/api/v1/pods"));
  const uint64_t c_after = writer().Insert(Pod("c1", "default", "after"));
  ASSERT_TRUE(after.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "after");
  EXPECT_EQ(e.rv(), c_after);
}

}  // namespace
}  // namespace walwatch::itest
