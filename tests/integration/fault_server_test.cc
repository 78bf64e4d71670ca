// Faults of the PostgreSQL server itself: fast and immediate restarts, a
// server that is down when walwatch starts, a login it refuses, a failover to
// a server that is behind, walwatch's walsender made a synchronous standby,
// and a commit that waits for a standby. The fixture and the shared script:
// support/fault_fixture.h.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/fault_fixture.h"
#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class PgRestartTest : public FaultTest,
                      public ::testing::WithParamInterface<const char*> {};

TEST_P(PgRestartTest, StreamsStayOpenAndEveryEventArrivesOnce) {
  const std::string mode = GetParam();
  const auto shutdown = mode == "fast" ? PgCluster::Shutdown::kFast
                                       : PgCluster::Shutdown::kImmediate;
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario().WithMetrics()));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("restart -m " + mode + " #" + std::to_string(round + 1));
    try {
      cluster_->Restart(shutdown);
    } catch (const std::exception& e) {
      // A fast shutdown waits for every walsender to exit, and a logical
      // walsender exits only once its client has confirmed (flush) all it
      // was sent.
      FAIL() << "PostgreSQL did not restart: " << e.what()
             << "\nIs walwatch's walsender holding the shutdown back? "
                "(PostgreSQL's WalSndDone waits until the client's flush "
                "position reaches what it sent.)";
    }
    ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  }
  StopWriterAndCheckExact(watchers());
  EXPECT_GT(writer_->errors(), 0u)
      << "the writer saw no error: did the server really restart?";

  // walwatch noticed, reconnected with backoff, and resumed each time.
  EXPECT_GE(LogLines(*ww_, "replication connection lost").size(), 2u);
  EXPECT_GE(LogLines(*ww_, "replication resumed").size(), 2u);
  EXPECT_GE(ExpectBackoff(*ww_), 2u);
  auto reconnects = Metric("walwatch_reconnects_total");
  ASSERT_TRUE(reconnects.has_value());
  EXPECT_GE(*reconnects, 2.0);
  // The slot re-sent what walwatch already had (from the replay window's
  // start, or further back where PostgreSQL 15 lost confirmed_flush): the
  // deduplication was exercised, and the check above says it held.
  double duplicates =
      Metric("walwatch_duplicate_transactions_total").value_or(-1);
  std::cerr << "[fault] duplicates dropped after " << mode
            << " restarts: " << duplicates << "\n";
  EXPECT_GT(duplicates, 0.0);
  EXPECT_TRUE(ww_->Running());
}

INSTANTIATE_TEST_SUITE_P(Modes, PgRestartTest,
                         ::testing::Values("fast", "immediate"),
                         [](const auto& info) {
                           return std::string(info.param);
                         });

// The database is down when walwatch starts (restarted with the pod, or
// failing over): walwatch waits for it, retrying with backoff, instead of
// exiting into the kubelet's crash-loop backoff, and streams once it is up.
TEST_F(FaultTest, StartupWaitsForAServerThatIsDown) {
  StartCluster();
  db_.reset();
  cluster_->Stop(PgCluster::Shutdown::kFast);
  const std::string retrying =
      "PostgreSQL does not answer yet (down, starting or shutting down); "
      "retrying";
  WalwatchProcess& ww = Spawn(Options());
  ASSERT_GE(WaitForLogLines(ww, retrying, 2, seconds(30)).size(), 2u)
      << ww.StderrText();
  ASSERT_TRUE(ww.Running()) << ww.StderrText();

  cluster_->Start();
  db_ = std::make_unique<PgConnection>(Conninfo());
  auto ready = ww.WaitReady(seconds(60));
  ASSERT_TRUE(ready) << ready.message();
  ExpectANewRowArrives(ww);
}

// While the server cannot be asked, the slot's wal_status is unknown, not
// the last status read: the slot may be invalidated meanwhile.
TEST_F(FaultTest, SlotStatusIsUnknownWhileTheServerIsDown) {
  StartCluster();
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Scenario().WithMetrics()));
  auto status_is = [&](const std::string& status, seconds timeout) {
    return WaitForMetric("walwatch_slot_wal_status{status=\"" + status + "\"}",
                         1.0, timeout) == 1.0;
  };
  ASSERT_TRUE(status_is("reserved", seconds(20)));
  db_.reset();
  cluster_->Stop(PgCluster::Shutdown::kFast);
  EXPECT_TRUE(status_is("unknown", seconds(30)));
  EXPECT_EQ(Metric("walwatch_slot_wal_status{status=\"reserved\"}"), 0.0);
  cluster_->Start();
  EXPECT_TRUE(status_is("reserved", seconds(30)));
}

// A login the server refuses is not waited for: the server answers, and
// waiting will not fix a wrong database name.
TEST_F(FaultTest, StartupDoesNotWaitForALoginTheServerRefuses) {
  StartCluster();
  auto o = Options();
  o.conninfo = cluster_->Conninfo("no_such_database");
  WalwatchProcess& ww = Spawn(o);
  auto status = ww.WaitExit(seconds(20));
  ASSERT_TRUE(status.has_value()) << "still running: " << ww.StderrText();
  EXPECT_EQ(status->exit_code, 1) << status->Describe();
  EXPECT_TRUE(LogLines(ww, "PostgreSQL does not answer yet (down, starting "
                           "or shutting down); retrying")
                  .empty());
}

// PostgreSQL 15 has no failover slots: after a failover to a standby that
// was behind, the slot is missing and walwatch recreates it on a server
// whose WAL lies below what walwatch has served. Here the old primary is A
// (pushed ahead), the server failed over to is B (a fresh cluster, behind),
// and walwatch has both in one multi-host conninfo.
TEST_F(FaultTest, AFailoverToAServerBehindLosesNothingAndFencesOldRvs) {
  StartCluster();  // A
  for (int i = 0; i < 4; ++i) {
    db().Exec(
        "SELECT pg_logical_emit_message(false, 'test', repeat('x', 16777216))");
  }
  auto b = std::make_unique<PgCluster>();
  PrepareDatabase(*b);
  PgConnection bdb(b->Conninfo(kDb));
  // Writes on A, each received exactly once before the failover.
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Scenario().WithMetrics().Conninfo(
      "host=" + cluster_->dir() + "," + b->dir() + " port=5432,5432 dbname=" +
      kDb + " user=postgres")));
  ASSERT_NO_FATAL_FAILURE(StartTraffic());
  const uint64_t old_rv = StopWriterBeforeFailover();
  ASSERT_FALSE(HasFailure());
  ASSERT_GT(old_rv, ParseLsn(bdb.QueryValue(
                        "SELECT pg_current_wal_insert_lsn()::text")))
      << "B must be behind A for this test";

  // The failover: A goes away, walwatch finds B without its slot.
  db_.reset();
  cluster_ = std::move(b);
  db_ = std::make_unique<PgConnection>(Conninfo());
  // Across the switch: each of A's writes exactly once, in order, none
  // missing, and then the 410 that makes the watcher relist.
  ExpectEveryWriteThenExpired();
  auto deadline = In(seconds(60));
  while (Clock::now() < deadline &&
         bdb.QueryValue("SELECT count(*) FROM pg_replication_slots WHERE "
                        "slot_name = '" +
                        std::string(kSlot) + "' AND active") != "1") {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_LT(Clock::now(), deadline) << "walwatch never streamed from B";
  EXPECT_EQ(LogLines(*ww_,
                     "PostgreSQL's WAL is behind what walwatch has served (a "
                     "failover to a server that was behind, or another "
                     "server at the same address); every watcher must "
                     "relist, and resourceVersions in the fence are refused "
                     "from now on")
                .size(),
            1u);

  // The relist on B: from a position on B with B's state, every write on
  // B after it exactly once (and, with the state, what B holds). The writer
  // starts once walwatch streams from B past the fence: B's commits inside
  // the fence would be retained, and confirmed, below A's RVs (see the
  // restart below).
  ASSERT_FALSE(
      WaitForLogLines(*ww_, "pushed the WAL past the fence", 1, seconds(60))
          .empty());
  // Counted before the WAL was pushed, once, as logged once.
  EXPECT_EQ(Metric("walwatch_history_resets_total"), 1.0)
      << "walwatch_history_resets_total";
  StartWriter();
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  ASSERT_NO_FATAL_FAILURE(RelistAndCheckExact());

  // A watch of cluster b's pods (from `rv`, or from now with 0) receives
  // the pod `name` inserted on B as ADDED, in *event.
  auto expect_pod_on_b = [&](uint64_t rv, const std::string& name,
                             WatchEvent* event) {
    WatchClient watch;
    ASSERT_TRUE(watch.Open(ww_->socket_path(),
                           "/clusters/b/api/v1/pods?watch=1" +
                               (rv ? "&resourceVersion=" + std::to_string(rv)
                                   : std::string()),
                           In(seconds(20))));
    ASSERT_EQ(watch.status(), 200) << watch.body();
    InsertRow(bdb, Pod("b", "b", name));
    ASSERT_TRUE(watch.NextEvent(event, In(seconds(20))));
    EXPECT_EQ(event->type, "ADDED") << event->raw;
    EXPECT_EQ(event->name(), name) << event->raw;
  };
  // An RV of A's history names no position of B's: relist.
  auto expect_a_resume_refused = [&](const std::string& why) {
    WatchClient resume;
    ASSERT_TRUE(resume.Open(ww_->socket_path(),
                            "/api/v1/pods?watch=1&resourceVersion=" +
                                std::to_string(old_rv),
                            In(seconds(20))));
    ASSERT_EQ(resume.status(), 200) << resume.body();
    WatchEvent expired;
    ASSERT_TRUE(resume.NextEvent(&expired, In(seconds(20))));
    EXPECT_EQ(expired.type, "ERROR") << why << expired.raw;
    EXPECT_EQ(expired.object.value("code", 0), 410) << expired.raw;
  };

  // B's transactions reach a new watch: none is taken for one of A's.
  WatchEvent added;
  ASSERT_NO_FATAL_FAILURE(expect_pod_on_b(0, "pod-on-b", &added));
  EXPECT_GT(added.rv(), old_rv) << "new RVs must lie past the fence";
  ASSERT_NO_FATAL_FAILURE(expect_a_resume_refused(""));

  // Restarted within the replay window. The window starts at the oldest
  // transaction walwatch retains, B's first, which committed past the
  // fence: A's RV is below the restarted log and refused, B's resumes.
  ASSERT_EQ(ww_->Stop().exit_code, 0);
  EXPECT_GT(ParseLsn(bdb.QueryValue(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                "WHERE slot_name = $1",
                {kSlot})),
            old_rv)
      << "the slot was confirmed inside the fence";
  ASSERT_NE(Relaunch(), nullptr);
  ASSERT_NO_FATAL_FAILURE(expect_a_resume_refused(
      "an RV of A's history was resumed after the restart: "));
  WatchEvent next;
  ASSERT_NO_FATAL_FAILURE(expect_pod_on_b(added.rv(), "pod-on-b-2", &next));
}

// synchronous_standby_names = '*' makes walwatch's walsender a synchronous
// standby, and every commit then waits for the flush walwatch confirms,
// which lags by the replay window. walwatch cannot prevent it; it says so,
// in its log and a gauge. (--replay-window 0s keeps the test's own commits
// from waiting long.)
TEST_F(FaultTest, AWalsenderMadeASynchronousStandbyIsReported) {
  StartCluster();  // its own commits must not wait for a standby
  // As schema/roles.sql makes it: without pg_read_all_stats, so
  // pg_stat_replication hides sync_state and walwatch must read the setting.
  db().Exec(
      "CREATE ROLE ww_plain LOGIN REPLICATION; GRANT USAGE ON SCHEMA public "
      "TO ww_plain; GRANT SELECT ON resources TO ww_plain");
  db().Exec("ALTER SYSTEM SET synchronous_standby_names = '*'");
  db().Exec("SELECT pg_reload_conf()");
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(
      Scenario()
          .WithMetrics()
          .Conninfo(cluster_->Conninfo(kDb) + " user=ww_plain")
          .Args({"--replay-window=0s"})));
  const std::string msg =
      "walwatch's walsender is a synchronous standby: "
      "synchronous_standby_names matches its application_name, so commits "
      "wait for the flush walwatch confirms, which lags by the replay "
      "window; exclude walwatch from synchronous_standby_names";
  auto lines = WaitForLogLines(*ww_, msg, 1, seconds(30));
  ASSERT_EQ(lines.size(), 1u);
  // Found through the setting: the role cannot see sync_state.
  EXPECT_EQ(lines[0].value("sync_state", ""),
            "named in synchronous_standby_names");
  EXPECT_EQ(db().QueryValue("SELECT sync_state FROM pg_stat_replication "
                            "WHERE application_name = 'walwatch'"),
            "sync");
  // And the gauge says so (the slot monitor polls every 2 s).
  EXPECT_EQ(WaitForMetric("walwatch_walsender_synchronous", 1.0, seconds(30)),
            1.0)
      << "walwatch_walsender_synchronous";
  // Not a gauge stuck at 1: it falls back once walwatch is excluded.
  db().Exec("ALTER SYSTEM RESET synchronous_standby_names");
  db().Exec("SELECT pg_reload_conf()");
  EXPECT_EQ(WaitForMetric("walwatch_walsender_synchronous", 0.0, seconds(30)),
            0.0)
      << "walwatch_walsender_synchronous after synchronous_standby_names was "
         "reset";
}

// WatchList with resourceVersion=N promises a state at least as new as N.
// A transaction whose commit record the stream has passed, while its backend
// still waits for a synchronous standby, is invisible to every new snapshot:
// no state that new can be read yet, and walwatch must say so (504) rather
// than answer an older one.
TEST_F(FaultTest, WatchListNotOlderThanAnRvNoSnapshotSeesYetIs504) {
  PgCluster::Options c;
  c.settings = {"synchronous_standby_names = 'nobody'",
                "synchronous_commit = local"};
  StartCluster(c);
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Scenario()));
  WatchClient live;
  ASSERT_TRUE(live.Open(ww_->socket_path(),
                        WatchTarget("/api/v1/pods", Marker()),
                        In(seconds(10))));
  // A pod whose commit waits for a standby that never answers.
  PgConnection waiting(Conninfo());
  waiting.Exec("SET synchronous_commit = on");
  const std::string pid = *waiting.Query("SELECT pg_backend_pid()")[0][0];
  std::thread insert([&] {
    try {
      waiting.Exec(
          "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
          "namespace, name, uid, resource_version, object, created_at, "
          "synced_at) VALUES ('', 'v1', 'pods', 'Pod', 'c1', 'default', "
          "'waiting', 'uid-waiting', '1', '{\"apiVersion\":\"v1\",\"kind\":"
          "\"Pod\",\"metadata\":{\"name\":\"waiting\",\"namespace\":"
          "\"default\",\"uid\":\"uid-waiting\",\"resourceVersion\":\"1\"}}', "
          "now(), now())");
    } catch (const std::exception&) {
      // Cancelled below; the row is committed all the same.
    }
  });
  struct Release {
    ~Release() {
      try {
        db->Query("SELECT pg_cancel_backend($1)", {pid});
      } catch (const std::exception&) {
      }
      thread->join();
    }
    PgConnection* db;
    std::string pid;
    std::thread* thread;
  } release{&db(), pid, &insert};
  // The stream passes it.
  WatchEvent added;
  ASSERT_TRUE(live.NextEvent(&added, In(seconds(20))));
  ASSERT_EQ(added.name(), "waiting") << added.raw;
  const uint64_t n = added.rv();
  WatchClient list;
  ASSERT_TRUE(list.Open(ww_->socket_path(),
                        "/api/v1/pods?watch=1&sendInitialEvents=true&"
                        "resourceVersionMatch=NotOlderThan&"
                        "allowWatchBookmarks=true&resourceVersion=" +
                            std::to_string(n),
                        In(seconds(60))));
  EXPECT_EQ(list.status(), 504) << list.body();
  EXPECT_NE(list.body().find("no snapshot sees every transaction up to "
                             "resourceVersion " + std::to_string(n)),
            std::string::npos)
      << list.body();
}

}  // namespace
}  // namespace walwatch::itest
