// Decoding on a standby (PostgreSQL 16 and later): walwatch pointed at a hot
// standby, with nothing changed but its conninfo (and --plugin pgoutput: the
// servers of tests/tools/install-pg-npm.sh have no wal2json). Its slot, its
// initial states and its handoffs are the standby's; the writes are the
// primary's. What must hold, as on a primary:
//
//  * every commit on the primary reaches every watcher, exactly once, in
//    order, with the primary's commit LSNs as RVs (a slot of the test's own
//    on the primary witnesses them);
//  * a list read on the standby (an APIServer whose SQL reads the standby,
//    so no pg_current_wal_insert_lsn(): recovery is in progress), a list
//    read on the primary, an initial state (resourceVersion=0) and a
//    WatchList, each handed off at P, hold exactly the state of the
//    primary's history at P, and the stream after P continues each exactly;
//  * a standby whose replay is paused (it falls behind the primary) and
//    resumed, a standby restarted (fast, immediate), and walwatch restarted
//    on the standby lose nothing and double nothing; watchers' streams stay
//    open (or, across walwatch's restart, resume from their last RV).
//
// The fixture is support/fault_fixture.h's, with a standby beside its
// cluster (the primary). The suite fails, never skips, on a server older
// than 16 (WALWATCH_TEST_PGBIN; ctest points it at install-pg-npm.sh's 17).
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/fault_fixture.h"
#include "tests/integration/support/harness.h"
#include "tests/integration/support/model.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A pod watch's state handed off at one RV, and the stream that continues it.
struct Listing {
  std::string how;  // "a list on the standby", "an initial state", ...
  uint64_t rv = 0;
  ModelState state;
  // The watch after rv (for the two streams with an initial state, the same
  // stream, past its initial events).
  std::unique_ptr<WatchClient> after;
};

class StandbyTest : public FaultTest {
 protected:
  void SetUp() override {
    FaultTest::SetUp();
    ASSERT_TRUE(RequirePgMajorVersion(16, "logical decoding on a standby"));
  }

  void TearDown() override {
    const bool failed = HasFailure();
    for (auto& l : listings_) l.after.reset();
    FaultTest::TearDown();  // walwatch, the writer, the primary
    if (standby_ && failed) {
      std::string log = standby_->LogText();
      if (log.size() > 20000) log = "..." + log.substr(log.size() - 20000);
      std::cerr << "---- standby's PostgreSQL log (tail) ----\n"
                << log << "---- end of the standby's log ----\n";
    }
    witness_.reset();
    standby_db_.reset();
    standby_.reset();
  }

  // The primary (cluster_, database `fault` as StartCluster makes it), the
  // publication walwatch streams (--publication defaults to the slot's
  // name; on a standby walwatch cannot create it), a witness slot of the
  // test's own, and a standby of it, streaming.
  void StartPrimaryAndStandby() {
    StartCluster();
    db().Exec(std::string("CREATE PUBLICATION ") + kSlot +
              " FOR TABLE resources");
    witness_conn_ = std::make_unique<PgConnection>(Conninfo());
    witness_ = std::make_unique<CommitObserver>(witness_conn_.get(),
                                                "standby_test_witness");
    standby_ = PgCluster::MakeStandby(*cluster_);
    standby_db_ = std::make_unique<PgConnection>(StandbyConninfo());
  }

  std::string StandbyConninfo() const { return standby_->Conninfo(kDb); }

  // walwatch on the standby: only the conninfo differs (and the plugin; and
  // bookmarks every second, which end initial states in InitialState).
  Scenario OnStandby() const {
    return Scenario()
        .Conninfo(StandbyConninfo())
        .Args({"--plugin", "pgoutput", "--bookmark-interval", "1s"})
        .WithMetrics();
  }

  // LaunchWalwatch(s), while the primary logs a standby snapshot every
  // 100 ms: a logical slot made on a standby waits for the primary's next
  // running-transactions record, which comes on its own only every 15 s
  // (and not at all on an idle primary).
  void LaunchOnStandby(const Scenario& s) {
    struct Nudge {
      explicit Nudge(StandbyTest* t) : thread([this, t] { Run(t); }) {}
      ~Nudge() {
        done = true;
        thread.join();
      }
      void Run(StandbyTest* t) {
        try {
          PgConnection primary(t->Conninfo());
          PgConnection standby(t->StandbyConninfo());
          while (!done.load()) {
            primary.Exec("SELECT pg_log_standby_snapshot()");
            if (standby.QueryValue(
                    "SELECT count(*) FROM pg_replication_slots WHERE "
                    "slot_name = $1 AND confirmed_flush_lsn IS NOT NULL",
                    {kSlot}) == "1") {
              return;
            }
            std::this_thread::sleep_for(milliseconds(100));
          }
        } catch (const std::exception& e) {
          std::cerr << "[standby] nudging the slot's creation: " << e.what()
                    << "\n";
        }
      }
      std::atomic<bool> done{false};
      std::thread thread;
    } nudge(this);
    LaunchWalwatch(s);
  }

  // The primary, the standby, walwatch on the standby (OnStandby(), with
  // watchers that resume if `resuming`); the watchers from a marker (the
  // primary's), the writer (on the primary), and its first writes. state0_
  // is what the pod watch starts from.
  void BeginOnStandby(bool resuming = false) {
    ASSERT_NO_FATAL_FAILURE(StartPrimaryAndStandby());
    Scenario s = OnStandby();
    if (resuming) s.Resuming();
    ASSERT_NO_FATAL_FAILURE(LaunchOnStandby(s));
    state0_ = SqlState(Filters()[0]);
    ASSERT_NO_FATAL_FAILURE(StartTraffic());
  }

  // walwatch's slot is the standby's, and the primary has none: walwatch
  // really decodes there.
  void ExpectWalwatchDecodesOnTheStandby() {
    EXPECT_EQ(standby_db_->QueryValue(
                  "SELECT count(*) FROM pg_replication_slots WHERE "
                  "slot_name = $1 AND slot_type = 'logical'",
                  {kSlot}),
              "1")
        << "walwatch's slot is not on the standby";
    EXPECT_EQ(db().QueryValue("SELECT count(*) FROM pg_replication_slots "
                              "WHERE slot_name = $1",
                              {kSlot}),
              "0")
        << "walwatch made its slot on the primary";
  }

  // --- Lists -----------------------------------------------------------------

  // An APIServer's list on the standby: LOCK TABLE, pg_current_snapshot()
  // first (no insert LSN: the standby is in recovery), the pods, then
  // /walwatch/v1/handoff with the snapshot only; a new snapshot on 409, 410
  // and 504. Then a watch from the RV.
  void ListOnStandby() {
    Listing l;
    l.how = "a list on the standby";
    PgConnection conn(StandbyConninfo());
    auto deadline = In(seconds(60));
    std::string last;
    int attempts = 0;
    for (;;) {
      ASSERT_LT(Clock::now(), deadline)
          << "no handoff for a list on the standby after " << attempts
          << " snapshots: " << last;
      ++attempts;
      conn.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
      conn.Exec("LOCK TABLE resources IN ACCESS SHARE MODE");
      const std::string snapshot =
          conn.QueryValue("SELECT pg_current_snapshot()::text");
      l.state = QueryModelState(conn, ToModelFilter(Filters()[0]));
      conn.Exec("COMMIT");
      int status = 0;
      std::string body;
      if (GetRvEndpoint(ww_->socket_path(),
                        "/walwatch/v1/handoff?snapshot=" +
                            QueryEscape(snapshot),
                        &l.rv, &status, &body, deadline)) {
        break;
      }
      ASSERT_TRUE(status == 409 || status == 410 || status == 504)
          << "handoff of snapshot " << snapshot << ": HTTP " << status << " "
          << body;
      last = body;
    }
    ASSERT_NO_FATAL_FAILURE(WatchAfter(&l));
    listings_.push_back(std::move(l));
  }

  // The same list on the primary, with its insert LSN (support/model.h's
  // ListWithHandoff): walwatch on the standby waits until it has decoded
  // that far.
  void ListOnPrimary() {
    Listing l;
    l.how = "a list on the primary";
    PgConnection conn(Conninfo());
    ListedState listed;
    ASSERT_TRUE(ListWithHandoff(conn, ww_->socket_path(),
                                ToModelFilter(Filters()[0]), &listed,
                                In(seconds(60))));
    l.rv = listed.rv;
    l.state = std::move(listed.state);
    ASSERT_NO_FATAL_FAILURE(WatchAfter(&l));
    listings_.push_back(std::move(l));
  }

  // walwatch's own initial state of the pods: resourceVersion=0 (ADDED
  // events at P, then the events after P; with bookmarks, which never come
  // during the initial events), or a WatchList (ADDED events, then the
  // bookmark at P marked k8s.io/initial-events-end).
  void InitialState(bool watch_list) {
    Listing l;
    l.how = watch_list ? "a WatchList's initial state" : "an initial state";
    l.after = std::make_unique<WatchClient>();
    const std::string target =
        watch_list ? "/api/v1/pods?watch=1&sendInitialEvents=true&"
                     "resourceVersionMatch=NotOlderThan&"
                     "allowWatchBookmarks=true"
                   : "/api/v1/pods?watch=1&resourceVersion=0&"
                     "allowWatchBookmarks=true";
    auto deadline = In(seconds(60));
    ASSERT_TRUE(l.after->OpenState(ww_->socket_path(), target, deadline));
    ASSERT_EQ(l.after->status(), 200) << l.after->body();
    WatchModel::Options options;
    options.initial_events_expected = watch_list;
    WatchModel model({}, 0, options);
    for (;;) {
      WatchEvent e;
      ASSERT_TRUE(l.after->NextEvent(&e, deadline))
          << l.how << ": the initial events did not end";
      if (watch_list) {
        ASSERT_TRUE(model.Apply(e));
        if (model.initial_events_end()) {
          l.rv = e.rv();
          break;
        }
        continue;
      }
      // Without an end marker: the initial events all carry P; the first
      // bookmark comes after them, and every live event carries more than
      // P (it committed after P).
      if (e.type == "BOOKMARK") {
        if (l.rv == 0) l.rv = e.rv();
        break;
      }
      if (l.rv == 0) l.rv = e.rv();
      if (e.rv() != l.rv) {
        ASSERT_GT(e.rv(), l.rv) << e.raw;
        first_live_[listings_.size()] = e;
        break;
      }
      ASSERT_EQ(e.type, "ADDED") << e.raw;
      ASSERT_TRUE(model.Apply(e));
    }
    l.state = model.state();
    listings_.push_back(std::move(l));
  }

  void WatchAfter(Listing* l) {
    l->after = std::make_unique<WatchClient>();
    ASSERT_TRUE(l->after->Open(ww_->socket_path(),
                               WatchTarget(Filters()[0].path, l->rv),
                               In(seconds(30))));
    ASSERT_EQ(l->after->status(), 200) << l->after->body();
  }

  // What SQL held of the pods at `rv` in the primary's history: the state at
  // the marker, with the pod watch's events up to rv. That watch is checked
  // against the writer's log (StopWriterAndCheckExact) and its RVs against
  // the witness (ExpectRvsAreCommitsOfThePrimary), so this is the state of
  // the primary as of that commit position.
  ModelState StateAt(uint64_t rv,
                     const std::vector<WatchEvent>& reference) const {
    WatchModel::Options options;
    options.strict = false;
    WatchModel model(state0_, start_rv(), options);
    for (const auto& e : reference) {
      if (e.rv() <= rv) model.Apply(e);
    }
    return model.state();
  }

  // Every pod event's RV is the commit LSN of a transaction the witness slot
  // decoded on the primary (each write is a transaction of one row, so each
  // event is its transaction's last).
  void ExpectRvsAreCommitsOfThePrimary(
      const std::vector<WatchEvent>& reference) {
    witness_->Poll();
    std::set<uint64_t> commits;
    for (const auto& c : witness_->commits()) commits.insert(c.lsn);
    size_t foreign = 0;
    for (const auto& e : reference) {
      if (commits.count(e.rv()) == 0 && foreign++ == 0) {
        ADD_FAILURE() << "RV " << e.rv() << " (" << FormatLsn(e.rv())
                      << ") is no commit of the primary: " << e.raw;
      }
    }
    EXPECT_EQ(foreign, 0u) << "of " << reference.size() << " events";
    EXPECT_GT(reference.size(), 0u);
  }

  // After StopWriterAndCheckExact: each listing holds exactly the state at
  // its RV, and its stream continues with exactly the pod watch's events
  // after that RV.
  void CheckListings() {
    const auto reference = watchers()[0]->Snapshot().events;
    ASSERT_NO_FATAL_FAILURE(ExpectRvsAreCommitsOfThePrimary(reference));
    const uint64_t last = reference.empty() ? 0 : reference.back().rv();
    for (size_t i = 0; i < listings_.size(); ++i) {
      Listing& l = listings_[i];
      SCOPED_TRACE(l.how + " handed off at " + std::to_string(l.rv));
      EXPECT_GE(l.rv, start_rv());
      EXPECT_LE(l.rv, last);
      EXPECT_TRUE(CompareModelStates(StateAt(l.rv, reference), l.state));
      std::vector<std::string> want, got;
      for (const auto& e : reference) {
        if (e.rv() > l.rv) want.push_back(e.raw);
      }
      if (auto it = first_live_.find(i); it != first_live_.end()) {
        got.push_back(it->second.raw);
      }
      auto deadline = In(seconds(60));
      while (got.size() < want.size()) {
        WatchEvent e;
        auto r = l.after->Next(&e, deadline);
        if (r != WatchClient::Result::kEvent) break;
        if (e.type == "BOOKMARK") continue;
        got.push_back(e.raw);
      }
      EXPECT_EQ(got.size(), want.size())
          << "events after the handoff: " << got.size() << " of "
          << want.size();
      for (size_t k = 0; k < std::min(got.size(), want.size()); ++k) {
        if (got[k] != want[k]) {
          ADD_FAILURE() << "event " << k << " after the handoff differs:\n"
                        << "  got  " << got[k] << "\n  want " << want[k];
          break;
        }
      }
    }
    std::cerr << "[standby] " << listings_.size()
              << " lists and initial states checked against the primary's "
                 "history\n";
  }

  // One round of every kind of list, while the writer writes.
  void ListEveryWay() {
    ASSERT_NO_FATAL_FAILURE(ListOnStandby());
    ASSERT_NO_FATAL_FAILURE(ListOnPrimary());
    ASSERT_NO_FATAL_FAILURE(InitialState(false));
    ASSERT_NO_FATAL_FAILURE(InitialState(true));
  }

  std::unique_ptr<PgCluster> standby_;
  std::unique_ptr<PgConnection> standby_db_;
  std::unique_ptr<PgConnection> witness_conn_;
  std::unique_ptr<CommitObserver> witness_;
  ModelState state0_;
  std::vector<Listing> listings_;
  // An initial state's first live event, read to find the state's end.
  std::map<size_t, WatchEvent> first_live_;
};

TEST_F(StandbyTest, EveryCommitOnThePrimaryReachesWatchersOfTheStandby) {
  ASSERT_NO_FATAL_FAILURE(BeginOnStandby());
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  ExpectWalwatchDecodesOnTheStandby();
  StopWriterAndCheckExact(watchers());
  ExpectRvsAreCommitsOfThePrimary(watchers()[0]->Snapshot().events);
  EXPECT_EQ(Metric("walwatch_barriers_total").value_or(-1), 0.0);
}

TEST_F(StandbyTest, ListsOnTheStandbyHandOffExactly) {
  ASSERT_NO_FATAL_FAILURE(BeginOnStandby());
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round + 1));
    ASSERT_NO_FATAL_FAILURE(ListEveryWay());
    ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  }
  StopWriterAndCheckExact(watchers());
  CheckListings();
}

// The standby falls behind: its replay is paused while the primary goes on
// writing, then resumed. Meanwhile a list on the standby and walwatch's
// initial states hand off at the standby's position, exactly, and a list on
// the primary (its insert LSN past the standby's replay) gets 504: walwatch
// cannot reach it and says so, rather than answer a position it has not
// decoded.
TEST_F(StandbyTest, AStandbyPausedBehindThePrimaryLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(BeginOnStandby());
  standby_db_->Exec("SELECT pg_wal_replay_pause()");
  auto deadline = In(seconds(30));
  while (standby_db_->QueryValue("SELECT pg_get_wal_replay_pause_state()") !=
         "paused") {
    ASSERT_LT(Clock::now(), deadline) << "the standby's replay did not pause";
    std::this_thread::sleep_for(milliseconds(20));
  }
  const uint64_t paused_at = ParseLsn(
      standby_db_->QueryValue("SELECT pg_last_wal_replay_lsn()::text"));
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  ASSERT_GT(ParseLsn(db().QueryValue("SELECT pg_current_wal_lsn()::text")),
            paused_at);

  // Lists while paused: at or below the paused position.
  ASSERT_NO_FATAL_FAILURE(ListOnStandby());
  ASSERT_NO_FATAL_FAILURE(InitialState(false));
  ASSERT_NO_FATAL_FAILURE(InitialState(true));
  for (const auto& l : listings_) {
    EXPECT_LE(l.rv, paused_at) << l.how << " while the replay was paused";
  }
  // A list on the primary meanwhile, its snapshot and insert LSN past the
  // paused standby: 504 until the standby has replayed that far, then (the
  // same request, as PROTOCOL.md says to retry it) exact.
  Listing held;
  held.how = "a list on the primary, handed off after the replay resumed";
  std::string held_target;
  {
    PgConnection primary(Conninfo());
    primary.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    primary.Exec("LOCK TABLE resources IN ACCESS SHARE MODE");
    auto row = primary.Query(
        "SELECT pg_current_snapshot()::text, "
        "pg_current_wal_insert_lsn()::text");
    held.state = QueryModelState(primary, ToModelFilter(Filters()[0]));
    primary.Exec("COMMIT");
    held_target = HandoffTarget(*row[0][0], *row[0][1]);
    uint64_t rv = 0;
    int status = 0;
    std::string body;
    auto answer = GetRvEndpoint(ww_->socket_path(), held_target, &rv, &status,
                                &body, In(seconds(30)));
    EXPECT_FALSE(answer) << "handed off at " << rv << " a list on the "
                         << "primary at " << *row[0][1]
                         << ", which the paused standby has not replayed "
                            "(paused at "
                         << FormatLsn(paused_at) << ")";
    EXPECT_EQ(status, 504) << body;
    EXPECT_NE(body.find("ResourceVersionTooLarge"), std::string::npos)
        << body;
  }
  const uint64_t current = static_cast<uint64_t>(
      Metric("walwatch_current_rv").value_or(0));
  EXPECT_LE(current, paused_at)
      << "walwatch's current RV passed what the standby has replayed";

  standby_db_->Exec("SELECT pg_wal_replay_resume()");
  {
    auto until = In(seconds(60));
    int status = 0;
    std::string body;
    while (!GetRvEndpoint(ww_->socket_path(), held_target, &held.rv, &status,
                          &body, until)) {
      ASSERT_EQ(status, 504) << body;
      ASSERT_LT(Clock::now(), until) << body;
    }
    ASSERT_NO_FATAL_FAILURE(WatchAfter(&held));
    listings_.push_back(std::move(held));
  }
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  ASSERT_NO_FATAL_FAILURE(ListEveryWay());
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  StopWriterAndCheckExact(watchers());
  CheckListings();
  EXPECT_EQ(Metric("walwatch_barriers_total").value_or(-1), 0.0);
}

class StandbyRestartTest : public StandbyTest,
                           public ::testing::WithParamInterface<const char*> {
};

// As PgRestartTest on a primary (fault_server_test.cc): walwatch reconnects
// to the restarted standby, the stream re-sent from the slot's confirmed
// position is deduplicated, and the watchers' streams stay open.
TEST_P(StandbyRestartTest, StreamsStayOpenAndEveryEventArrivesOnce) {
  const std::string mode = GetParam();
  const auto shutdown = mode == "fast" ? PgCluster::Shutdown::kFast
                                       : PgCluster::Shutdown::kImmediate;
  ASSERT_NO_FATAL_FAILURE(BeginOnStandby());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("standby restart -m " + mode + " #" +
                 std::to_string(round + 1));
    standby_db_.reset();
    try {
      standby_->Restart(shutdown);
    } catch (const std::exception& e) {
      FAIL() << "the standby did not restart: " << e.what();
    }
    standby_db_ = std::make_unique<PgConnection>(StandbyConninfo());
    ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  }
  ExpectWalwatchDecodesOnTheStandby();
  StopWriterAndCheckExact(watchers());
  EXPECT_GE(LogLines(*ww_, "replication connection lost").size(), 2u);
  EXPECT_GE(LogLines(*ww_, "replication resumed").size(), 2u);
  EXPECT_GE(Metric("walwatch_reconnects_total").value_or(0), 2.0);
  EXPECT_EQ(Metric("walwatch_barriers_total").value_or(-1), 0.0);
  std::cerr << "[standby] duplicates dropped after " << mode
            << " restarts: "
            << Metric("walwatch_duplicate_transactions_total").value_or(-1)
            << "\n";
  EXPECT_TRUE(ww_->Running());
}

INSTANTIATE_TEST_SUITE_P(Modes, StandbyRestartTest,
                         ::testing::Values("fast", "immediate"),
                         [](const auto& info) {
                           return std::string(info.param);
                         });

// walwatch itself restarted on the standby: it rebuilds its log from the
// standby's slot, and watchers resume from their last RV without a 410.
TEST_F(StandbyTest, WalwatchRestartedOnTheStandbyResumesWatchers) {
  ASSERT_NO_FATAL_FAILURE(BeginOnStandby(/*resuming=*/true));
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(15)));
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  ASSERT_NE(Relaunch(), nullptr);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  StopWriterAndCheckExact(watchers());
  for (auto* w : watchers()) {
    EXPECT_GE(w->Snapshot().reconnects, 1u) << w->filter().path;
  }
}

}  // namespace
}  // namespace walwatch::itest
