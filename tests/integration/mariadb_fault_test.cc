// The fault suite on MariaDB (issue 21): the server restarted and crashed,
// walwatch terminated and killed, its connection cut and silently stalled,
// a failover to a server of another history, the binlog rotated under load
// and purged past walwatch's position, DDL on the table, and a 100k-row
// transaction. A writer writes throughout and
// five watchers read; each test ends with every watcher's events exactly
// the committed writes, once and in order, and its state equal to SQL -- or
// an exact prefix and an explicit 410 where the fault demands a relist, and
// exact watches after it. The script: support/mariadb_fault.h on
// support/fault_fixture.h.
//
// Tests that stop, crash or purge the server run a private one (the
// failover two); the others share ctest's `mariadb` server, each in a
// database of its own.
#include "tests/integration/support/mariadb_fault.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cdc/mysql/binlog_position.h"
#include "tests/integration/support/watch_client.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kReconnecting[] = "reconnecting to MySQL/MariaDB";
constexpr char kRelist[] = "the table was truncated; every watcher must relist";
// The start of the message walwatch logs when it finds another history
// (what follows names why).
constexpr char kOtherHistory[] =
    "the server's binlog is not the history walwatch read (";
constexpr char kInsideTheFence[] =
    "the server's binlog positions lie inside the fence: watches that resume "
    "from its new resourceVersions get 410 until it writes past the fence "
    "(fix: FLUSH BINARY LOGS until its binlog file number passes the "
    "fence's)";

// The single value of `sql` on `server`, as root ("" for NULL or no row).
std::string RootValue(const MariaDbServer& server, const std::string& sql) {
  mysql::MysqlConnection conn;
  std::optional<std::string> value;
  std::string err = conn.Connect(server.Root());
  if (err.empty()) err = conn.QueryValue(sql, &value);
  EXPECT_EQ(err, "") << sql;
  return value.value_or("");
}

// SHOW MASTER STATUS on `server`: where its binlog ends.
::testing::AssertionResult BinlogEnd(const MariaDbServer& server,
                                     mysql::BinlogPosition* end) {
  mysql::MysqlConnection conn;
  mysql::MysqlRows rows;
  std::string err = conn.Connect(server.Root());
  if (err.empty()) err = conn.Query("SHOW MASTER STATUS", &rows);
  if (!err.empty()) return ::testing::AssertionFailure() << err;
  if (rows.rows.empty() || rows.rows[0].size() < 2) {
    return ::testing::AssertionFailure() << "SHOW MASTER STATUS: no row";
  }
  end->file = rows.rows[0][0].value_or("");
  end->pos = std::stoull(rows.rows[0][1].value_or("0"));
  return ::testing::AssertionSuccess();
}

uint64_t FileNumber(const mysql::BinlogPosition& p) {
  return mysql::BinlogFileNumber(p.file).value_or(0);
}

// --- 1. The server restarted (a clean shutdown) and crashed (SIGKILL) -------

class MariaDbServerFaultTest : public MariaDbFaultTest,
                               public ::testing::WithParamInterface<bool> {};

TEST_P(MariaDbServerFaultTest, WatchersKeepTheirStreamsAndMissNothing) {
  const bool crash = GetParam();
  ASSERT_NO_FATAL_FAILURE(BeginOnMariaDb(Scenario(), /*private_server=*/true));
  ASSERT_TRUE(crash ? KillServer() : ShutDownServer());
  // Down for a while: walwatch's reconnects are refused, with backoff.
  ASSERT_GE(WaitForLogLines(*ww_, kReconnecting, 2, seconds(30)).size(), 2u);
  ASSERT_TRUE(StartServerAgain());
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  StopWriterAndCheckExact(watchers());
  EXPECT_GE(Metric("walwatch_reconnects_total").value_or(0), 1.0);
  EXPECT_EQ(Metric("walwatch_history_resets_total").value_or(-1), 0.0);
  EXPECT_EQ(Metric("walwatch_stream_gaps_total").value_or(-1), 0.0);
  EXPECT_TRUE(ww_->Running());
}

INSTANTIATE_TEST_SUITE_P(Server, MariaDbServerFaultTest, ::testing::Bool(),
                         [](const auto& info) {
                           return std::string(info.param ? "Crash" : "Restart");
                         });

// --- 2. walwatch terminated (SIGTERM) and killed (SIGKILL), restarted -------

class MariaDbWalwatchRestartTest : public MariaDbFaultTest,
                                   public ::testing::WithParamInterface<int> {};

TEST_P(MariaDbWalwatchRestartTest, WatchersResumeFromTheirLastRvWithout410) {
  const int signal = GetParam();
  ASSERT_NO_FATAL_FAILURE(BeginOnMariaDb(Scenario().Resuming()));
  if (signal == SIGTERM) {
    ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(30)));
  } else {
    ASSERT_EQ(kill(ww_->pid(), SIGKILL), 0);
    ASSERT_TRUE(ww_->WaitExit(seconds(10)).has_value());
  }
  // Written while no walwatch runs: the new one reads them from its replay
  // window (the binlog), where the watchers' RVs lie.
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  ASSERT_NE(Relaunch(), nullptr);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  StopWriterAndCheckExact(watchers());
  for (auto* w : watchers()) {
    EXPECT_GE(w->Snapshot().reconnects, 1u) << w->filter().path;
  }
}

INSTANTIATE_TEST_SUITE_P(Signal, MariaDbWalwatchRestartTest,
                         ::testing::Values(SIGTERM, SIGKILL),
                         [](const auto& info) {
                           return std::string(
                               info.param == SIGTERM ? "Sigterm" : "Sigkill");
                         });

// --- 3. A cut connection, a silently stalled one, a failover ---------------

class MariaDbConnectionFaultTest : public MariaDbFaultTest {
 protected:
  // Through the proxy; heartbeats every second, and a connection silent
  // for 5 s is dead.
  static Scenario Proxied() {
    return Scenario().ThroughProxy().Args(
        {"--status-interval", "1s", "--replication-timeout", "5s"});
  }
};

TEST_F(MariaDbConnectionFaultTest, ACutConnectionIsReopenedWithNothingLost) {
  ASSERT_NO_FATAL_FAILURE(BeginOnMariaDb(Proxied()));
  const double before = Metric("walwatch_reconnects_total").value_or(-1);
  ASSERT_GE(proxy_->CutAll(), 1u);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  EXPECT_EQ(WaitForMetric("walwatch_reconnects_total", before + 1, seconds(30)),
            before + 1);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  StopWriterAndCheckExact(watchers());
}

TEST_F(MariaDbConnectionFaultTest, AStalledConnectionIsNoticedAndReopened) {
  ASSERT_NO_FATAL_FAILURE(BeginOnMariaDb(Proxied()));
  const auto stalled_at = Clock::now();
  proxy_->SetStalled(true);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  // Nothing arrives, not even a heartbeat: after --replication-timeout
  // walwatch gives the connection up and connects again.
  const auto lines = WaitForLogLines(*ww_, kReconnecting, 1, seconds(30));
  const auto noticed = Clock::now();
  proxy_->SetStalled(false);
  ASSERT_FALSE(lines.empty()) << "walwatch did not notice the stall";
  std::cerr
      << "[fault] the stall was noticed after "
      << std::chrono::duration_cast<milliseconds>(noticed - stalled_at).count()
      << " ms\n";
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  StopWriterAndCheckExact(watchers());
  EXPECT_GE(Metric("walwatch_reconnects_total").value_or(0), 1.0);
}

// A failover to another server (issue 21, "resourceVersion"): walwatch,
// through the proxy to A, is switched to B, a server of another history
// whose binlog has the same file numbers and offsets past A's. Every
// watcher gets each of A's writes exactly once and then 410; an RV of A is
// refused, before and after a restart of walwatch; B's writes reach new
// watches, which are exact, and an RV B gave out resumes. Each server's
// RVs lie in a range of their own (its server_id's): B's below A's, or
// above, so that A's RVs are above B's ceiling, or below its floor. With
// the same server_id (a server restored from a backup) the ranges are one:
// the GTID state tells the histories apart, the fence covers watches, and
// the fix walwatch logs (FLUSH BINARY LOGS past the fence) lets B's RVs
// through; a restarted walwatch cannot refuse A's RVs there
// (PROTOCOL.md, "Holes not closed").
class MariaDbFailoverTest
    : public MariaDbConnectionFaultTest,
      public ::testing::WithParamInterface<std::pair<int, int>> {};

TEST_P(MariaDbFailoverTest, EveryWatchEndsWith410AndOldRvsAreRefused) {
  const auto [a_id, b_id] = GetParam();
  const bool same_id = a_id == b_id;
  ASSERT_NO_FATAL_FAILURE(StartServer(
      /*private_server=*/true, "server_id=" + std::to_string(a_id)));  // A
  ASSERT_NO_FATAL_FAILURE(
      StartOtherServer("server_id=" + std::to_string(b_id)));  // B
  // The sandbox's server_id=1 comes first in my.cnf: the later line wins,
  // so B's GTIDs are its own.
  ASSERT_EQ(RootValue(server(), "SELECT @@server_id"), std::to_string(a_id));
  ASSERT_EQ(RootValue(other_server(), "SELECT @@server_id"),
            std::to_string(b_id));
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Proxied()));
  ASSERT_NO_FATAL_FAILURE(StartTraffic());

  // Writes on A, each received exactly once before the failover.
  const uint64_t old_rv = StopWriterBeforeFailover();
  ASSERT_FALSE(HasFailure());
  ASSERT_GT(old_rv, 0u);
  EXPECT_EQ(mysql::HistoryOfVersion(old_rv), mysql::BinlogHistory(a_id));

  // B's binlog covers old_rv's numbers: the same file number, and an end
  // past A's. An RV of A then names a position that B has too, in a history
  // where it means something else: exactly what must not be reused (were
  // B's binlog shorter, old_rv would be refused as merely unknown).
  mysql::BinlogPosition a_end, b_end;
  ASSERT_TRUE(BinlogEnd(server(), &a_end));
  // (History 0: the file and offset alone, to compare across servers.)
  ASSERT_LE(mysql::PositionOfVersion(old_rv),
            mysql::BinlogVersion(0, a_end).value_or(0));
  ASSERT_TRUE(BinlogEnd(other_server(), &b_end));
  for (int i = 0; i < 100 && FileNumber(b_end) < FileNumber(a_end); ++i) {
    ASSERT_EQ(RootExec(other_server(), "FLUSH BINARY LOGS"), "");
    ASSERT_TRUE(BinlogEnd(other_server(), &b_end));
  }
  ASSERT_EQ(FileNumber(b_end), FileNumber(a_end))
      << b_end.ToString() << " against A's " << a_end.ToString();
  const auto filled_by = In(seconds(60));
  while (b_end.pos <= a_end.pos) {
    ASSERT_LT(Clock::now(), filled_by) << "B's binlog stays at " << b_end.pos;
    ASSERT_EQ(RootExec(other_server(),
                       "INSERT INTO " + mysql::QuoteIdentifier(database()) +
                           ".other_table (payload) VALUES "
                           "(JSON_OBJECT('fill', REPEAT('x', 100000)))"),
              "");
    ASSERT_TRUE(BinlogEnd(other_server(), &b_end));
  }
  ASSERT_GT(mysql::BinlogVersion(0, b_end).value_or(0),
            mysql::PositionOfVersion(old_rv));

  // The failover: A dies, and the address walwatch connects to is B's.
  ASSERT_TRUE(KillServer());
  ASSERT_NO_FATAL_FAILURE(SwitchToOtherServer());
  proxy_->SetUpstream(server().socket);
  proxy_->CutAll();
  // Each of A's writes exactly once, in order, none missing, and then the
  // 410 that makes the watcher relist.
  ExpectEveryWriteThenExpired();
  auto reset_lines = [&] {
    std::vector<nlohmann::json> lines;
    for (auto& line : ww_->LogLines()) {
      if (line.value("msg", "").rfind(kOtherHistory, 0) == 0) {
        lines.push_back(line);
      }
    }
    return lines;
  };
  const auto logged_by = In(seconds(60));
  while (reset_lines().empty() && Clock::now() < logged_by) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  const auto resets = reset_lines();
  ASSERT_EQ(resets.size(), 1u) << ww_->StderrText();
  EXPECT_EQ(WaitForMetric("walwatch_history_resets_total", 1, seconds(30)), 1.0)
      << "walwatch_history_resets_total";
  // B's positions lie in A's file numbers, inside the fence. In a range of
  // B's own, watches from B's RVs need no fence (A's RVs lie in A's range),
  // only handoffs do (below): nothing to fix by hand. In A's range, walwatch
  // says so and names the fix, which the test applies below.
  EXPECT_EQ(LogLines(*ww_, kInsideTheFence).size(), same_id ? 1u : 0u);
  // "history/file:offset"
  const std::string fence_to = resets[0].value("fence_to", "");
  const size_t slash = fence_to.find('/');
  const size_t colon = fence_to.find(':');
  ASSERT_TRUE(slash != std::string::npos && colon != std::string::npos &&
              slash < colon)
      << resets[0].dump();
  EXPECT_EQ(fence_to.substr(0, slash),
            std::to_string(mysql::BinlogHistory(b_id)));
  const uint64_t fence_file =
      std::stoull(fence_to.substr(slash + 1, colon - slash - 1));
  ASSERT_TRUE(BinlogEnd(server(), &b_end));
  ASSERT_LE(FileNumber(b_end), fence_file)
      << "B's binlog must lie in the fence for this test";
  for (int i = 0; same_id && i < 100 && FileNumber(b_end) <= fence_file; ++i) {
    ASSERT_NO_FATAL_FAILURE(Sql("FLUSH BINARY LOGS"));
    ASSERT_TRUE(BinlogEnd(server(), &b_end));
  }

  // A watch of cluster b's pods (from `rv`, or from now with 0) receives
  // the pod `name` inserted on B as ADDED, in *event.
  auto expect_pod_on_b = [&](uint64_t rv, const std::string& name,
                             WatchEvent* event) {
    WatchClient watch;
    ASSERT_TRUE(watch.Open(
        ww_->socket_path(),
        "/clusters/b/api/v1/pods?watch=1" +
            (rv ? "&resourceVersion=" + std::to_string(rv) : std::string()),
        In(seconds(20))));
    ASSERT_EQ(watch.status(), 200) << watch.body();
    // The name holds no quote or backslash: the JSON goes in as it is.
    const nlohmann::json object = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", name},
          {"namespace", "b"},
          {"uid", "uid-" + name},
          {"resourceVersion", "1"},
          {"annotations", {{"shadow.clusterpedia.io/cluster-name", "b"}}}}}};
    ASSERT_NO_FATAL_FAILURE(
        Sql("INSERT INTO resources (`group`, version, resource, kind, cluster, "
            "namespace, name, uid, resource_version, object, created_at, "
            "synced_at) VALUES ('', 'v1', 'pods', 'Pod', 'b', 'b', '" +
            name + "', 'uid-" + name + "', '1', '" + object.dump() +
            "', NOW(3), NOW(3))"));
    ASSERT_TRUE(watch.NextEvent(event, In(seconds(20))));
    EXPECT_EQ(event->type, "ADDED") << event->raw;
    EXPECT_EQ(event->name(), name) << event->raw;
  };
  // An RV of A's history is refused: walwatch answers 410 (HTTP), or opens
  // the watch and sends a 410 ERROR event first.
  auto expect_a_resume_refused = [&](const std::string& when) {
    WatchClient resume;
    ASSERT_TRUE(resume.Open(
        ww_->socket_path(),
        "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(old_rv),
        In(seconds(20))));
    if (resume.status() == 410) {
      const auto status = nlohmann::json::parse(resume.body(), nullptr, false);
      EXPECT_TRUE(status.is_object() && status.value("code", 0) == 410)
          << when << resume.body();
      std::cerr << "[fault] " << when << ": A's RV " << old_rv
                << " was answered HTTP 410\n";
      return;
    }
    ASSERT_EQ(resume.status(), 200) << when << resume.body();
    WatchEvent first;
    ASSERT_TRUE(resume.NextEvent(&first, In(seconds(20)))) << when;
    EXPECT_EQ(first.type, "ERROR") << when << ": A's RV " << old_rv
                                   << " was resumed; first event " << first.raw;
    EXPECT_EQ(first.object.value("code", 0), 410) << when << first.raw;
    std::cerr << "[fault] " << when << ": A's RV " << old_rv
              << " was answered with a " << first.type
              << " event: " << first.raw.substr(0, 300) << "\n";
  };

  // B's transactions reach a new watch, and A's RV is refused.
  WatchEvent added;
  ASSERT_NO_FATAL_FAILURE(expect_pod_on_b(0, "pod-on-b", &added));
  EXPECT_EQ(mysql::HistoryOfVersion(added.rv()), mysql::BinlogHistory(b_id));
  ASSERT_NO_FATAL_FAILURE(expect_a_resume_refused("after the failover"));
  // The relist on B: watches from a position on B are exact.
  StartWriter();
  ASSERT_NO_FATAL_FAILURE(RelistAndCheckExact());

  // An APIServer's list on B, in the fence (another server_id). Its
  // handoff cannot tell it from a list read on A (the same file and offset
  // numbers) unless the list names its server: without serverId 410, with
  // B's the RV, with A's 410. (With the same server_id, B's list lies past
  // the fence, which the test pushed B past: exact with B's id.)
  mysql::MysqlConnection list;
  ASSERT_EQ(list.Connect(server().Root(database())), "");
  ASSERT_EQ(list.Query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"),
            "");
  mysql::MysqlRows status;
  ASSERT_EQ(list.Query("SHOW STATUS LIKE 'binlog_snapshot_%'", &status), "");
  std::map<std::string, std::string> snapshot;
  for (const auto& r : status.rows) snapshot[*r[0]] = r[1].value_or("");
  mysql::MysqlRows listed_id;
  ASSERT_EQ(list.Query("SELECT @@server_id", &listed_id), "");
  ASSERT_EQ(list.Query("COMMIT"), "");
  ASSERT_EQ(listed_id.rows.at(0).at(0).value_or(""), std::to_string(b_id));
  const mysql::BinlogPosition listed_at{
      snapshot["Binlog_snapshot_file"],
      std::stoull(snapshot["Binlog_snapshot_position"])};
  if (same_id) {
    ASSERT_GT(FileNumber(listed_at), fence_file);
  } else {
    ASSERT_LE(FileNumber(listed_at), fence_file);
  }
  auto handoff = [&](const std::string& server_id) {
    return HttpGet(ww_->socket_path(),
                   "/walwatch/v1/handoff?binlogFile=" + listed_at.file +
                       "&binlogPosition=" + std::to_string(listed_at.pos) +
                       (server_id.empty() ? "" : "&serverId=" + server_id),
                   In(seconds(20)));
  };
  if (!same_id) {
    HttpResponse unnamed = handoff("");
    EXPECT_EQ(unnamed.status, 410) << unnamed.body;
    EXPECT_NE(unnamed.body.find("serverId"), std::string::npos) << unnamed.body;
    HttpResponse of_a = handoff(std::to_string(a_id));
    EXPECT_EQ(of_a.status, 410) << of_a.body;
  }
  HttpResponse of_b = handoff(std::to_string(b_id));
  ASSERT_EQ(of_b.status, 200) << of_b.body;
  const uint64_t listed_rv = std::stoull(
      nlohmann::json::parse(of_b.body)["resourceVersion"].get<std::string>());
  EXPECT_EQ(listed_rv, RvOf(&list, listed_at));
  // The watch that continues the list gets what B commits after it.
  WatchEvent after_list;
  ASSERT_NO_FATAL_FAILURE(
      expect_pod_on_b(listed_rv, "pod-after-list", &after_list));

  EXPECT_EQ(reset_lines().size(), 1u) << "one failover, one history reset";

  // Restarted on B: it rebuilds its window from B's binlog, which reaches
  // back past old_rv's numbers. A's RV must still be refused; B's resumes.
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(30)));
  ASSERT_NE(Relaunch(), nullptr);
  if (!same_id) {
    EXPECT_NO_FATAL_FAILURE(
        expect_a_resume_refused("after a restart of walwatch"));
  }
  WatchEvent next;
  ASSERT_NO_FATAL_FAILURE(
      expect_pod_on_b(after_list.rv(), "pod-on-b-2", &next));
}

INSTANTIATE_TEST_SUITE_P(ServerIds, MariaDbFailoverTest,
                         ::testing::Values(std::pair<int, int>{1, 2},
                                           std::pair<int, int>{2, 1},
                                           std::pair<int, int>{1, 1}),
                         [](const auto& info) {
                           const int a = info.param.first;
                           const int b = info.param.second;
                           return std::string(a < b   ? "ToAHigherServerId"
                                              : a > b ? "ToALowerServerId"
                                                      : "ToTheSameServerId");
                         });

// --- 4. Binlog rotation under load ------------------------------------------

TEST_F(MariaDbFaultTest, RotationUnderLoadKeepsRvsIncreasingAcrossFiles) {
  ASSERT_NO_FATAL_FAILURE(
      BeginOnMariaDb(Scenario().FirstWrites(kWritesPerPhase / 3)));
  constexpr int kRotations = 8;
  for (int i = 0; i < kRotations; ++i) {
    ASSERT_NO_FATAL_FAILURE(Sql("FLUSH BINARY LOGS"));
    ASSERT_TRUE(MoreWrites(kWritesPerPhase / 6));
  }
  StopWriterAndCheckExact(watchers());
  // The RVs increase (checked above) across files: each rotation's writes
  // carry a file number of their own.
  std::set<uint64_t> files;
  for (const auto& e : watchers()[0]->Snapshot().events) {
    files.insert(e.rv() / 10000000000ull);
  }
  EXPECT_GE(files.size(), static_cast<size_t>(kRotations + 1));
}

// --- 5. The binlog purged past walwatch's position while it is stopped ------

TEST_F(MariaDbFaultTest, ABinlogPurgedWhileWalwatchIsStoppedGives410) {
  ASSERT_NO_FATAL_FAILURE(
      BeginOnMariaDb(Scenario().Resuming(), /*private_server=*/true));
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(30)));
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  writer_->Pause();
  std::string kept;
  ASSERT_TRUE(PurgeAllButTheCurrentBinlog(&kept));
  writer_->Resume();
  ASSERT_NE(Relaunch(), nullptr);
  // The watchers resume from RVs in purged files: 410 for every one.
  ExpectAllExpired(watchers());
  if (HasFailure()) return;  // no 410: relisting would only time out
  ASSERT_NO_FATAL_FAILURE(ExpectAWatchFromIsExpiredAtOnce(start_rv()));
  size_t logged = 0;
  for (const auto& line : ww_->LogLines()) {
    logged += line.value("msg", "").find("was purged") != std::string::npos;
  }
  EXPECT_EQ(logged, 1u) << ww_->StderrText();
  EXPECT_EQ(Metric("walwatch_stream_gaps_total"), 1.0)
      << "walwatch_stream_gaps_total";
  RelistAndCheckExact();
}

// --- 6. DDL on the table ----------------------------------------------------

class MariaDbDdlTest : public MariaDbFaultTest,
                       public ::testing::WithParamInterface<const char*> {};

// The binlog logs DDL as a statement whose effect on rows walwatch cannot
// see: every watcher gets 410 (README, PROTOCOL.md "Rows to events"), a
// watch from before it is told to relist at once, and after the relist the
// events flow again and match SQL.
TEST_P(MariaDbDdlTest, EveryWatcherRelistsThenEventsFlowAgain) {
  const std::string statement = GetParam();
  ASSERT_NO_FATAL_FAILURE(
      BeginOnMariaDb(Scenario().FirstWrites(kWritesPerPhase / 2)));
  // The replay window holds this test's own CREATE TABLE, a relist too.
  const size_t relists_before = LogLines(*ww_, kRelist).size();
  writer_->Pause();
  ASSERT_NO_FATAL_FAILURE(Sql(statement));
  if (statement.rfind("TRUNCATE", 0) == 0) writer_->ForgetAllObjects();
  writer_->Resume();
  ExpectAllExpired(watchers());
  if (HasFailure()) return;
  EXPECT_EQ(LogLines(*ww_, kRelist).size(), relists_before + 1);
  ASSERT_NO_FATAL_FAILURE(ExpectAWatchFromIsExpiredAtOnce(start_rv()));
  RelistAndCheckExact();
}

INSTANTIATE_TEST_SUITE_P(
    Ddl, MariaDbDdlTest,
    ::testing::Values("ALTER TABLE resources ADD COLUMN fault_x int",
                      "TRUNCATE TABLE resources"),
    [](const auto& info) {
      return std::string(info.index == 0 ? "AlterTableAddColumn" : "Truncate");
    });

// --- 7. A 100k-row transaction ----------------------------------------------

class MariaDbHugeTransactionTest : public MariaDbFaultTest,
                                   public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override {
    rss_.Stop();
    MariaDbFaultTest::TearDown();
  }

  RssSampler rss_;
};

// One INSERT ... SELECT of 100k ~1 KB pods (a cluster's worth), into the
// watched table or into another one: walwatch's memory stays bounded,
// nothing times out, and the watches of pods in every cluster get a 410
// (the transaction exceeds what --max-log-bytes keeps) while the others go
// on exact; a transaction of another table reaches nobody, and everyone
// stays exact.
TEST_P(MariaDbHugeTransactionTest, BoundedMemoryNoTimeoutAnd410OrAll) {
  const bool watched = GetParam();
  ASSERT_NO_FATAL_FAILURE(StartServer(/*private_server=*/true));
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(
      Scenario()
          .MaxLogBytes("64Mi")
          .Args({"--status-interval", "1s", "--replication-timeout", "10s"})
          .FirstWrites(kWritesPerPhase / 3)));
  // The replay window holds this test's own CREATE TABLE, a barrier.
  const double barriers_before = Metric("walwatch_barriers_total").value_or(-1);
  const pid_t pid = ww_->pid();
  const uint64_t baseline_rss = ProcessRssBytes(pid);
  rss_.Start(pid);
  ASSERT_NO_FATAL_FAILURE(StartTraffic());

  const size_t rows = HugeTransactionRows();
  const std::string object =
      "JSON_OBJECT('apiVersion', 'v1', 'kind', 'Pod', 'metadata', "
      "JSON_OBJECT('name', CONCAT('huge-', seq), 'namespace', 'huge', 'uid', "
      "CONCAT('uid-huge-', seq), 'resourceVersion', '1', 'annotations', "
      "JSON_OBJECT('shadow.clusterpedia.io/cluster-name', 'huge')), 'spec', "
      "JSON_OBJECT('seq', 0, 'data', REPEAT(MD5(seq), 28)))";
  const std::string source = " FROM seq_1_to_" + std::to_string(rows);
  const auto t0 = Clock::now();
  ASSERT_NO_FATAL_FAILURE(Sql(
      watched ? "INSERT INTO resources (`group`, version, resource, kind, "
                "cluster, namespace, name, uid, resource_version, object, "
                "created_at, synced_at) SELECT '', 'v1', 'pods', 'Pod', "
                "'huge', 'huge', CONCAT('huge-', seq), CONCAT('uid-huge-', "
                "seq), '1', " +
                    object + ", NOW(3), NOW(3)" + source
              : "INSERT INTO other_table (payload) SELECT " + object + source));
  const auto inserted = Clock::now();
  const uint64_t after = Marker();  // commits after the huge transaction
  const uint64_t bytes = std::stoull(SqlValue(
      watched ? "SELECT SUM(LENGTH(object)) FROM resources WHERE cluster = "
                "'huge'"
              : "SELECT SUM(LENGTH(payload)) FROM other_table"));
  ASSERT_TRUE(WaitForCurrentRv(after, seconds(180)));
  const auto read = Clock::now();
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  rss_.Stop();
  const uint64_t peak = ProcessPeakRssBytes(pid);
  std::cerr << "[fault] huge transaction on "
            << (watched ? "the watched table" : "another table") << ": " << rows
            << " rows, " << bytes / 1000000 << " MB of objects; insert "
            << std::chrono::duration_cast<milliseconds>(inserted - t0).count()
            << " ms, read by walwatch after "
            << std::chrono::duration_cast<milliseconds>(read - inserted).count()
            << " ms more; walwatch RSS baseline " << baseline_rss / 1000000
            << " MB, max sampled " << rss_.max() / 1000000 << " MB, VmHWM "
            << peak / 1000000 << " MB\n";
  if (rows >= 100000) {
    EXPECT_GE(bytes, 100u * 1000 * 1000);
  }
  // 64 MiB of log, of which one transaction may hold half while it is
  // assembled, and the process's own tens of MB: well below what the
  // transaction held whole would need on top.
  EXPECT_LT(peak, 200u * 1000 * 1000);
  EXPECT_TRUE(LogLines(*ww_, kReconnecting).empty())
      << "walwatch gave its connection up while the transaction streamed";
  EXPECT_TRUE(ww_->Running());

  if (!watched) {
    StopWriterAndCheckExact(watchers());
    EXPECT_EQ(Metric("walwatch_barriers_total").value_or(-1), barriers_before);
    return;
  }
  // Pods in cluster `huge` are lost to the log: the watches of pods in
  // every cluster get 410; those of c1's pods and of deployments go on.
  std::vector<FaultWatcher*> touched, untouched;
  for (auto* w : watchers()) {
    const bool pods_everywhere =
        w->filter().kind == "Pod" && w->filter().cluster.empty();
    (pods_everywhere ? touched : untouched).push_back(w);
  }
  ExpectAllExpired(touched);
  for (auto* w : untouched) {
    EXPECT_FALSE(w->expired()) << w->filter().path << " was ended";
  }
  EXPECT_EQ(Metric("walwatch_barriers_total").value_or(-1),
            barriers_before + 1);
  EXPECT_EQ(LogLines(*ww_,
                     "a transaction is larger than --max-log-bytes "
                     "allows; the watches of the resources it "
                     "changed must relist")
                .size(),
            1u);
  if (HasFailure()) return;
  RelistAndCheckExact(untouched);
}

INSTANTIATE_TEST_SUITE_P(Table, MariaDbHugeTransactionTest, ::testing::Bool(),
                         [](const auto& info) {
                           return std::string(info.param ? "Watched"
                                                         : "OtherTable");
                         });

}  // namespace
}  // namespace walwatch::itest
