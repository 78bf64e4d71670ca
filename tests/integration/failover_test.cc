// Failover without a relist storm (PostgreSQL 17 and later): walwatch's slot
// is a failover slot (--slot-failover), which a standby with
// sync_replication_slots = on keeps a copy of; walwatch reaches PostgreSQL
// through a TCP proxy, as it would an operator's -rw service. The standby is
// promoted, the proxy pointed at it, and the old primary goes.
//
//  * With the primary's synchronized_standby_slots naming the standby's
//    physical slot (walwatch never receives a commit the standby lacks):
//    every watcher receives every commit exactly once (writes before, during
//    and after the failover), their streams stay open, no 410, and RVs
//    given out before the failover stay valid: a watch resumed from one
//    after the failover is exact, and so is one after a restart of walwatch
//    on the new primary.
//  * Without it, and with the standby cut off from the primary's WAL so that
//    walwatch has received commits the standby lacks: walwatch cannot go on
//    from the copy of its slot without losing what it served from the lost
//    history, so every watcher gets every write before the failover and then
//    410, walwatch says why in its log and counts it
//    (walwatch_history_resets_total), an RV of the lost history is refused,
//    and watches after the relist are exact.
//
// The fixture is support/fault_fixture.h's, with a standby beside its cluster
// (the primary); after the failover cluster_ is the promoted standby. The
// suite fails, never skips, on a server older than 17 (WALWATCH_TEST_PGBIN;
// ctest points it at install-pg-npm.sh's 17).
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
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

class FailoverTest : public FaultTest {
 protected:
  static constexpr char kStandbySlot[] = "standby1";

  void SetUp() override {
    FaultTest::SetUp();
    ASSERT_TRUE(RequirePgMajorVersion(
        17, "failover slots: sync_replication_slots, "
            "synchronized_standby_slots"));
  }

  void TearDown() override {
    const bool failed = HasFailure();
    FaultTest::TearDown();  // walwatch, the writer, cluster_
    for (auto* c : {standby_.get(), old_primary_.get()}) {
      if (!c || !failed) continue;
      std::string log = c->LogText();
      if (log.size() > 20000) log = "..." + log.substr(log.size() - 20000);
      std::cerr << "---- PostgreSQL log of " << c->dir() << " (tail) ----\n"
                << log << "---- end ----\n";
    }
    standby_.reset();
    old_primary_.reset();
  }

  // The writer reaches the primary as walwatch does, through the proxy:
  // after the failover, its writes go to the new primary.
  FaultStoreFactory WriterStore() override {
    return [conninfo = ServiceConninfo()] { return PgFaultStore(conninfo); };
  }
  std::string ServiceConninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(proxy_->port()) +
           " dbname=" + kDb + " user=postgres";
  }

  // The primary (cluster_) and a standby that syncs failover slots; with
  // `synchronized`, the primary's logical walsenders wait for the standby
  // (synchronized_standby_slots).
  void StartPrimaryAndStandby(bool synchronized) {
    StartCluster();
    PgCluster::StandbyOptions o;
    o.slot = kStandbySlot;
    o.settings = {"sync_replication_slots = on"};
    standby_ = PgCluster::MakeStandby(*cluster_, o);
    if (synchronized) {
      db().Exec(std::string("ALTER SYSTEM SET synchronized_standby_slots = '") +
                kStandbySlot + "'");
      db().Exec("SELECT pg_reload_conf()");
    }
  }

  Scenario ThroughTheService() const {
    return Scenario().ThroughProxy().WithMetrics().Args(
        {"--plugin", "pgoutput", "--slot-failover"});
  }

  // walwatch's slot on the primary is a failover slot, and the standby holds
  // a copy of it that survives a promotion (synced and no longer temporary:
  // the sync worker keeps a new copy temporary until the primary's slot has
  // passed the standby's own catalog_xmin and restart_lsn).
  void WaitForTheSyncedSlot() {
    ASSERT_EQ(db().QueryValue("SELECT failover::text FROM "
                              "pg_replication_slots WHERE slot_name = $1",
                              {kSlot}),
              "true")
        << "walwatch's slot on the primary is not a failover slot "
           "(--slot-failover)";
    PgConnection standby(standby_->Conninfo(kDb));
    auto deadline = In(seconds(90));
    std::string state;
    for (;;) {
      auto rows = standby.Query(
          "SELECT synced::text, temporary::text, "
          "coalesce(confirmed_flush_lsn::text, '') FROM pg_replication_slots "
          "WHERE slot_name = $1",
          {kSlot});
      state = rows.empty() ? "no copy"
                           : "synced " + *rows[0][0] + ", temporary " +
                                 *rows[0][1] + ", confirmed_flush_lsn " +
                                 *rows[0][2];
      if (!rows.empty() && *rows[0][0] == "true" && *rows[0][1] == "false") {
        break;
      }
      ASSERT_LT(Clock::now(), deadline)
          << "the standby has no lasting copy of walwatch's slot after 90 s ("
          << state << ")";
      std::this_thread::sleep_for(milliseconds(100));
    }
    std::cerr << "[failover] the standby's copy of the slot: " << state
              << "\n";
  }

  // The standby stops receiving the primary's WAL (its walreceiver ends):
  // what the primary commits from now on is not on it.
  void CutTheStandbyOff() {
    PgConnection standby(standby_->Conninfo("postgres"));
    standby.Exec("ALTER SYSTEM SET primary_conninfo = ''");
    standby.Exec("SELECT pg_reload_conf()");
    auto deadline = In(seconds(30));
    while (standby.QueryValue("SELECT count(*) FROM pg_stat_wal_receiver") !=
           "0") {
      ASSERT_LT(Clock::now(), deadline) << "the walreceiver did not stop";
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  // The service stops taking connections and cuts those it has; no client
  // commit is left in flight on the primary. Returns the primary's WAL
  // flush position then.
  uint64_t FenceThePrimary() {
    proxy_->SetRefusing(true);
    proxy_->CutAll();
    auto deadline = In(seconds(30));
    for (;;) {
      const std::string left = db().QueryValue(
          "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
          "WHERE backend_type = 'client backend' AND pid <> "
          "pg_backend_pid()");
      if (left == "0") break;
      EXPECT_LT(Clock::now(), deadline) << "client backends stay on the "
                                           "old primary";
      if (Clock::now() >= deadline) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return ParseLsn(
        db().QueryValue("SELECT pg_current_wal_flush_lsn()::text"));
  }

  // The standby is promoted, the service points at it and takes
  // connections again, and the old primary dies (first, with `crash`: a
  // failover after a crash rather than a switchover). cluster_ and db() are
  // the new primary's from then on.
  void PromoteAndSwitch(bool crash = false) {
    db_.reset();
    if (crash) cluster_->Stop(PgCluster::Shutdown::kImmediate);
    standby_->Promote();
    proxy_->SetUpstream(standby_->SocketPath());
    proxy_->SetRefusing(false);
    if (!crash) cluster_->Stop(PgCluster::Shutdown::kImmediate);
    old_primary_ = std::move(cluster_);
    cluster_ = std::move(standby_);
    db_ = std::make_unique<PgConnection>(Conninfo());
  }

  // walwatch's log lines at `level` whose message contains `part`.
  std::vector<nlohmann::json> LinesContaining(const std::string& level,
                                              const std::string& part) {
    std::vector<nlohmann::json> found;
    for (const auto& l : ww_->LogLines()) {
      if (l.value("level", "") == level &&
          l.value("msg", "").find(part) != std::string::npos) {
        found.push_back(l);
      }
    }
    return found;
  }

  // The index in the writer's log just after the write whose event is
  // `watcher`'s `k`th (0-based): its events map one to one, in order, onto
  // the writes its filter matches.
  size_t LogIndexAfterEvent(const FaultWatcher& watcher, size_t k) {
    const auto log = writer_->Log();
    size_t seen = 0;
    for (size_t i = 0; i < log.size(); ++i) {
      if (watcher.filter().Matches(log[i]) && seen++ == k) return i + 1;
    }
    ADD_FAILURE() << "the writer's log has no write for event " << k;
    return log.size();
  }

  // A watch of Filters()[0] from `rv` receives exactly the writes of the
  // writer's log from `from` (the writer is stopped and its tail written).
  void ExpectAResumeFromIsExact(uint64_t rv, size_t from,
                                const std::string& when) {
    SCOPED_TRACE("a watch resumed from " + std::to_string(rv) + " " + when);
    FaultWatcher w(ww_->socket_path(), Filters()[0], rv,
                   FaultWatcher::Policy::kStayOpen);
    ASSERT_TRUE(w.Start());
    const auto log = writer_->Log(from);
    size_t want = 0;
    for (const auto& e : log) want += w.filter().Matches(e);
    w.WaitForEvents(want, In(kDeliveryWait));
    w.Stop();
    EXPECT_TRUE(ExactlyOnceInOrder(log, w));
  }

  std::unique_ptr<PgCluster> standby_;
  std::unique_ptr<PgCluster> old_primary_;
};

TEST_F(FailoverTest, ASyncedFailoverSlotLosesNothingAndNeedsNoRelist) {
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndStandby(/*synchronized=*/true));
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(ThroughTheService()));
  ASSERT_NO_FATAL_FAILURE(WaitForTheSyncedSlot());
  ASSERT_NO_FATAL_FAILURE(StartTraffic());

  // An RV a client received before the failover, in the middle of the
  // first writes: resumed later, it must still be exact.
  ASSERT_TRUE(watchers()[0]->WaitForEvents(20, In(kDeliveryWait)));
  const auto before = watchers()[0]->Snapshot().events;
  const uint64_t pre_rv = before[before.size() / 2].rv();
  const size_t pre_from =
      LogIndexAfterEvent(*watchers()[0], before.size() / 2);

  // The failover, while the writer goes on writing through the service:
  // it is refused, retries, and writes on the new primary.
  const uint64_t fenced_at = FenceThePrimary();
  {
    PgConnection standby(standby_->Conninfo("postgres"));
    auto deadline = In(seconds(60));
    while (ParseLsn(standby.QueryValue(
               "SELECT pg_last_wal_replay_lsn()::text")) < fenced_at) {
      ASSERT_LT(Clock::now(), deadline)
          << "the standby did not replay up to " << FormatLsn(fenced_at);
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
  const size_t writes_at_failover = writer_->writes();
  ASSERT_NO_FATAL_FAILURE(PromoteAndSwitch());
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  ASSERT_GT(writer_->writes(), writes_at_failover);

  // A watch resumed after the failover from the RV received before it.
  std::unique_ptr<FaultWatcher> resumed = std::make_unique<FaultWatcher>(
      ww_->socket_path(), Filters()[0], pre_rv,
      FaultWatcher::Policy::kStayOpen);
  ASSERT_TRUE(resumed->Start());
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));

  // Every watcher: every write exactly once, streams open throughout, no 410.
  StopWriterAndCheckExact(watchers());
  {
    const auto log = writer_->Log(pre_from);
    size_t want = 0;
    for (const auto& e : log) want += resumed->filter().Matches(e);
    resumed->WaitForEvents(want, In(kDeliveryWait));
    resumed->Stop();
    EXPECT_TRUE(ExactlyOnceInOrder(log, *resumed))
        << "a watch resumed after the failover from " << pre_rv;
  }
  EXPECT_GT(writer_->errors(), 0u)
      << "the writer saw no error: did the failover cut it?";
  // The copy of the slot lags the primary's (the sync worker's naps): the
  // new primary sends again what walwatch had, which it drops.
  std::cerr << "[failover] transactions sent again and dropped: "
            << Metric("walwatch_duplicate_transactions_total").value_or(-1)
            << "\n";
  EXPECT_EQ(Metric("walwatch_history_resets_total").value_or(-1), 0.0);
  EXPECT_EQ(Metric("walwatch_slot_recreations_total").value_or(-1), 0.0);
  EXPECT_EQ(Metric("walwatch_stream_gaps_total").value_or(-1), 0.0);
  EXPECT_EQ(Metric("walwatch_barriers_total").value_or(-1), 0.0);
  EXPECT_EQ(LinesContaining("error", "").size(), 0u)
      << "walwatch logged errors across a failover that lost nothing";
  EXPECT_FALSE(LinesContaining("info", "new timeline").empty())
      << "walwatch did not say that it followed the failover";
  EXPECT_EQ(db().QueryValue("SELECT count(*) FROM pg_replication_slots "
                            "WHERE slot_name = $1 AND active",
                            {kSlot}),
            "1")
      << "walwatch does not stream from the new primary's copy of its slot";

  // And after walwatch restarts on the new primary, from the copy of its
  // slot, the same RV resumes exactly.
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(15)));
  ASSERT_NE(Relaunch(), nullptr);
  ExpectAResumeFromIsExact(pre_rv, pre_from, "after walwatch's restart");
}

// What synchronized_standby_slots is for: the standby falls behind (cut off
// from the primary's WAL), the primary commits rows it never gets, and
// crashes. walwatch's walsender held those rows back, waiting for the
// standby, so walwatch served nothing the promoted standby lacks: it goes on
// from its copy of the slot with no 410, and the lost rows never reach a
// watcher.
TEST_F(FailoverTest, ACrashWhileTheStandbyLagsLosesNothingWalwatchServed) {
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndStandby(/*synchronized=*/true));
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(ThroughTheService()));
  ASSERT_NO_FATAL_FAILURE(WaitForTheSyncedSlot());
  ASSERT_NO_FATAL_FAILURE(StartTraffic());

  // The writer pauses (its writes would be lost with the old primary, and
  // its model of the table with them); the standby stops following; rows
  // of the test's own commit on the primary alone.
  writer_->Pause();
  ASSERT_NO_FATAL_FAILURE(CutTheStandbyOff());
  for (int i = 0; i < 5; ++i) {
    InsertRow(db(), Pod("c1", "ns-a", "lost-" + std::to_string(i)));
  }
  // walwatch's walsender waits for the standby to confirm them.
  {
    auto deadline = In(seconds(30));
    std::string wait;
    for (;;) {
      auto rows = db().Query(
          "SELECT coalesce(a.wait_event, '') FROM pg_replication_slots s "
          "JOIN pg_stat_activity a ON a.pid = s.active_pid "
          "WHERE s.slot_name = $1",
          {kSlot});
      wait = rows.empty() ? "no walsender" : *rows[0][0];
      if (wait == "WaitForStandbyConfirmation") break;
      ASSERT_LT(Clock::now(), deadline)
          << "walwatch's walsender does not wait for the standby (" << wait
          << ")";
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  // The old primary crashes with the rows; the standby is promoted.
  proxy_->SetRefusing(true);
  proxy_->CutAll();
  ASSERT_NO_FATAL_FAILURE(PromoteAndSwitch(/*crash=*/true));
  ASSERT_EQ(db().QueryValue(
                "SELECT count(*) FROM resources WHERE name LIKE 'lost-%'"),
            "0")
      << "the promoted standby has the rows: it did not lag";
  writer_->Resume();
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));

  // Exactly the writer's writes: a lost row would be an unexpected event.
  StopWriterAndCheckExact(watchers());
  EXPECT_EQ(Metric("walwatch_history_resets_total").value_or(-1), 0.0);
  EXPECT_EQ(Metric("walwatch_slot_recreations_total").value_or(-1), 0.0);
  EXPECT_EQ(Metric("walwatch_stream_gaps_total").value_or(-1), 0.0);
  EXPECT_EQ(LinesContaining("error", "").size(), 0u)
      << "walwatch logged errors across a failover that lost nothing it "
         "served";
}

TEST_F(FailoverTest, AFailoverToAStandbyBehindWalwatchFencesWith410) {
  ASSERT_NO_FATAL_FAILURE(StartPrimaryAndStandby(/*synchronized=*/false));
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(ThroughTheService()));
  ASSERT_NO_FATAL_FAILURE(WaitForTheSyncedSlot());
  ASSERT_NO_FATAL_FAILURE(StartTraffic());

  // The standby stops following; walwatch receives what it lacks.
  ASSERT_NO_FATAL_FAILURE(CutTheStandbyOff());
  const uint64_t standby_end = ParseLsn(
      PgConnection(standby_->Conninfo("postgres"))
          .QueryValue("SELECT pg_last_wal_replay_lsn()::text"));
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  const uint64_t old_rv = StopWriterBeforeFailover();
  ASSERT_FALSE(HasFailure());
  ASSERT_GT(old_rv, standby_end)
      << "walwatch must have served commits the standby lacks";

  // The failover: the old primary dies with them.
  FenceThePrimary();
  ASSERT_NO_FATAL_FAILURE(PromoteAndSwitch());

  // Every write before the failover exactly once, then the 410.
  ExpectEveryWriteThenExpired();
  EXPECT_FALSE(LinesContaining("error", "new timeline").empty())
      << "walwatch did not say why it fenced";
  EXPECT_EQ(LogLines(*ww_,
                     "PostgreSQL's WAL is behind what walwatch has served (a "
                     "failover to a server that was behind, or another "
                     "server at the same address); every watcher must "
                     "relist, and resourceVersions in the fence are refused "
                     "from now on")
                .size(),
            1u);
  EXPECT_EQ(Metric("walwatch_history_resets_total").value_or(-1), 1.0)
      << "walwatch_history_resets_total";
  if (HasFailure()) {
    // What walwatch does instead, for the report: a row written on the
    // new primary now, watched from now.
    ExpectANewRowArrives(*ww_);
    return;
  }

  // An RV of the lost history names no position of the new one.
  ASSERT_NO_FATAL_FAILURE(ExpectAWatchFromIsExpiredAtOnce(old_rv));
  // The relist on the new primary, once walwatch's new RVs lie past the
  // fence: the writer's objects go (the new primary holds them as of the
  // fork), a writer starts afresh, and watchers from a new marker are exact.
  ASSERT_FALSE(
      WaitForLogLines(*ww_, "pushed the WAL past the fence", 1, seconds(60))
          .empty());
  db().Exec("DELETE FROM resources WHERE name LIKE 'obj-%'");
  StartWriter();
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  ASSERT_NO_FATAL_FAILURE(RelistAndCheckExact());
}

}  // namespace
}  // namespace walwatch::itest
