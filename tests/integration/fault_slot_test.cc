// Faults of walwatch's replication slot: invalidated, dropped or moved by
// another while walwatch is frozen or down, dropped while it runs, held by
// another walsender at startup (and moved meanwhile), created under an open
// transaction; and the WAL the slot holds back (--replay-window-bytes). The
// fixture and the shared script: support/fault_fixture.h.
#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/support/fault_fixture.h"
#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// --replay-window-bytes caps the replay window in WAL. With the default
// 10-minute window the slot would be held back to the first write below;
// with 256Ki it is confirmed up to the first transaction within 256Ki of the
// newest position -- and no further, so the last 256Ki stay replayable. (A
// private cluster: on a shared one other databases' WAL moves the newest
// position, and the window with it.)
TEST_F(FaultTest, ReplayWindowBytesBoundsTheWalHeldBack) {
  constexpr uint64_t kWindow = 256 << 10;
  StartCluster();
  ASSERT_NO_FATAL_FAILURE(
      LaunchWalwatch(Scenario().Args({"--replay-window-bytes", "256Ki"})));
  auto wal_lsn = [&] {
    return ParseLsn(db().QueryValue("SELECT pg_current_wal_lsn()::text"));
  };
  auto confirmed = [&] {
    return ParseLsn(db().QueryValue(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = $1",
        {kSlot}));
  };
  const uint64_t start = wal_lsn();
  StartWriter();
  while (wal_lsn() < start + 4 * kWindow) {
    ASSERT_TRUE(MoreWrites(50));
  }
  writer_->Stop();
  const uint64_t end = wal_lsn();
  // Status updates go out every second; wait for one after the last write.
  uint64_t c = 0;
  auto deadline = In(seconds(30));
  while ((c = confirmed()) + kWindow + 16384 < end && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_GE(c + kWindow + 16384, end)
      << "the slot holds " << (end - c)
      << " bytes of WAL back; --replay-window-bytes allows 256Ki";
  EXPECT_GT(c, start);
  // Still held back: the newest 256Ki (less the little WAL written since,
  // such as checkpoint records) are kept for a replay.
  EXPECT_LE(c, end - kWindow / 2) << "the slot was confirmed past the window";
}

// With 1 MB WAL segments and max_slot_wal_keep_size = 1MB, a few segment
// switches and checkpoints invalidate a slot that does not advance.
PgCluster::Options SmallWalOptions() {
  PgCluster::Options c;
  c.initdb_args = {"--wal-segsize=1"};
  c.settings = {"max_slot_wal_keep_size = 1MB", "min_wal_size = 2MB",
                "max_wal_size = 64MB", "wal_keep_size = 0"};
  return c;
}

class SlotLostTest : public FaultTest {
 protected:
  // Writes WAL (rows on other_table, segment switches, checkpoints) until
  // the slot's wal_status is 'lost'.
  ::testing::AssertionResult InvalidateSlot(const std::string& slot) {
    auto deadline = In(seconds(60));
    std::string status;
    // A CHECKPOINT that cannot release the slot would otherwise wait forever.
    db().Exec("SET statement_timeout = '60s'");
    struct Reset {
      ~Reset() {
        try {
          db->Exec("RESET statement_timeout");
        } catch (const std::exception&) {
        }
      }
      PgConnection* db;
    } reset{&db()};
    while (Clock::now() < deadline) {
      db().Exec(
          "INSERT INTO other_table (payload) SELECT jsonb_build_object('x', "
          "repeat(md5(g::text), 8)) FROM generate_series(1, 2000) g");
      db().Exec("SELECT pg_switch_wal()");
      db().Exec("CHECKPOINT");
      status = db().QueryValue(
          "SELECT coalesce(wal_status, 'null') FROM pg_replication_slots "
          "WHERE slot_name = $1",
          {slot});
      if (status == "lost") return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "slot " << slot << " still '" << status << "' after 60 s";
  }

  ::testing::AssertionResult DropSlot(const std::string& slot) {
    auto deadline = In(seconds(20));
    std::string last;
    while (Clock::now() < deadline) {
      int pid = WalsenderPid(slot);
      if (pid != 0) {
        db().Query("SELECT pg_terminate_backend($1)", {std::to_string(pid)});
      } else {
        try {
          db().Query("SELECT pg_drop_replication_slot($1)", {slot});
          return ::testing::AssertionSuccess();
        } catch (const std::exception& e) {
          last = e.what();
        }
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return ::testing::AssertionFailure() << "cannot drop " << slot << ": "
                                         << last;
  }
};

// Creating a slot waits for every transaction running at the time; an idle
// session in a transaction holds it open indefinitely. A walwatch that is
// recreating its slot then must still stop on SIGTERM, not wait for it.
TEST_F(SlotLostTest, SigtermWhileTheSlotIsBeingRecreatedStopsPromptly) {
  StartCluster();
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Scenario()));
  PgConnection open_txn(Conninfo());
  open_txn.Exec("BEGIN");
  open_txn.Exec("SELECT txid_current()");
  ASSERT_TRUE(DropSlot(kSlot));
  ASSERT_TRUE(WaitUntilASlotIsBeingCreated())
      << "walwatch never began recreating";
  milliseconds took{0};
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(15), &took));
  EXPECT_LT(took, seconds(10));
  open_txn.Exec("COMMIT");
}

TEST_F(SlotLostTest, InvalidatedWhileWalwatchPausedGives410AndRecreates) {
  ASSERT_NO_FATAL_FAILURE(
      Begin(Scenario().Cluster(SmallWalOptions()).WithMetrics()));
  ASSERT_NO_FATAL_FAILURE(
      WhileWalwatchIsFrozen([&] { return InvalidateSlot(kSlot); }));
  ExpectAllExpired(watchers());
  EXPECT_EQ(LogLines(*ww_, "the replication slot was lost and has been "
                           "recreated; every watcher must relist")
                .size(),
            1u);
  EXPECT_EQ(Metric("walwatch_slot_recreations_total").value_or(-1), 1.0);
  ExpectRecreatedRecently();
  EXPECT_NE(db().QueryValue("SELECT coalesce(wal_status, 'null') FROM "
                            "pg_replication_slots WHERE slot_name = $1",
                            {kSlot}),
            "lost");
  if (HasFailure()) return;  // no 410: relisting would only time out
  RelistAndCheckExact();
}

TEST_F(SlotLostTest, DroppedWhileWalwatchPausedGives410AndRecreates) {
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario().WithMetrics()));
  ASSERT_NO_FATAL_FAILURE(
      WhileWalwatchIsFrozen([&] { return DropSlot(kSlot); }));
  ExpectAllExpired(watchers());
  if (HasFailure()) return;  // no 410: relisting would only time out
  EXPECT_EQ(Metric("walwatch_slot_recreations_total").value_or(-1), 1.0);
  RelistAndCheckExact();
}

// Someone else moves the slot while walwatch is away (here
// pg_replication_slot_advance; a second consumer of the slot or a slot
// dropped and created again by hand look the same). The server then resumes
// after the new position, and the rows written in between never arrive:
// every watcher must get a 410 rather than silently miss them.
TEST_F(SlotLostTest, AdvancedByAnotherWhileWalwatchPausedGives410) {
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario().WithMetrics()));
  std::string advanced;
  ASSERT_NO_FATAL_FAILURE(WhileWalwatchIsFrozen(
      [&]() -> ::testing::AssertionResult {
        auto deadline = In(seconds(20));
        while (WalsenderPid(kSlot) != 0 && Clock::now() < deadline) {
          db().Query("SELECT pg_terminate_backend(active_pid) FROM "
                     "pg_replication_slots WHERE slot_name = $1 AND "
                     "active_pid IS NOT NULL",
                     {kSlot});
          std::this_thread::sleep_for(milliseconds(20));
        }
        if (WalsenderPid(kSlot) == 0) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "the walsender did not go away";
      },
      // The writes in between, skipped by the move.
      [&] {
        advanced = *db().Query(
            "SELECT end_lsn::text FROM pg_replication_slot_advance("
            "$1, pg_current_wal_lsn())",
            {kSlot})[0][0];
      }));
  ExpectAllExpired(watchers());
  EXPECT_EQ(LogLines(*ww_, "the replication slot moved past what walwatch "
                           "confirmed; every watcher must relist")
                .size(),
            1u)
      << "advanced to " << advanced;
  EXPECT_GE(Metric("walwatch_barriers_total").value_or(0), 1.0);
  if (HasFailure()) return;  // no 410: relisting would only time out
  RelistAndCheckExact();
}

TEST_F(SlotLostTest, InvalidatedOrDroppedWhileWalwatchDownGives410) {
  ASSERT_NO_FATAL_FAILURE(
      Begin(Scenario().Cluster(SmallWalOptions()).WithMetrics().Resuming()));

  // Invalidated while down: the next walwatch drops and recreates the slot;
  // every watcher reconnecting with its RV gets 410.
  ASSERT_EQ(ww_->Stop().exit_code, 0);
  ASSERT_TRUE(InvalidateSlot(kSlot));
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  ASSERT_NE(Relaunch(), nullptr);
  ExpectAllExpired(watchers());
  if (HasFailure()) return;  // no 410: relisting would only time out
  EXPECT_EQ(Metric("walwatch_slot_recreations_total").value_or(-1), 1.0);
  // In the first scrape already, where the counter shows no rise: the
  // alert WalwatchSlotLost reads this gauge.
  ExpectRecreatedRecently();
  EXPECT_EQ(LogLines(*ww_, "replication slot was invalidated; dropping and "
                           "recreating it")
                .size(),
            1u);

  // Dropped while down: likewise.
  size_t from = 0;
  auto second = StartWatchersFromNow(FaultWatcher::Policy::kResume, &from);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  ASSERT_EQ(ww_->Stop().exit_code, 0);
  ASSERT_TRUE(DropSlot(kSlot));
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  ASSERT_NE(Relaunch(), nullptr);
  ExpectAllExpired(second, from);
  if (HasFailure()) return;
  RelistAndCheckExact();
}

// A node is lost: the new walwatch starts while the old one's walsender
// still holds the slot (until wal_sender_timeout). walwatch waits for the
// slot instead of exiting into the kubelet's crash-loop backoff, and is not
// ready until it streams. Here another replication connection holds the slot
// until walwatch has been refused it twice.
TEST_F(FaultTest, StartupWaitsForASlotHeldByAnotherWalsender) {
  ASSERT_NO_FATAL_FAILURE(SpawnWhileAnotherWalsenderHoldsTheSlot());
  WalwatchProcess& ww = *ww_;
  size_t refusals = WaitForLogLines(ww, kSlotHeldMessage, 2, seconds(30)).size();
  // While the slot is held, /readyz must not say 200.
  int ready_while_held = 0;
  for (int i = 0; i < 10; ++i) {
    HttpResponse r = HttpGet(ww.socket_path(), "/readyz", In(seconds(2)));
    ready_while_held += r.ok && r.status == 200;
    std::this_thread::sleep_for(milliseconds(100));
  }
  holder_.reset();
  ASSERT_GE(refusals, 2u) << "walwatch did not wait for the slot: "
                          << ww.StderrText();
  EXPECT_EQ(ready_while_held, 0)
      << "walwatch said it was ready while another walsender held its slot";
  auto ready = ww.WaitReady(seconds(30));
  ASSERT_TRUE(ready) << "not ready after the slot was released: "
                     << ready.message();
  // And it streams.
  ExpectANewRowArrives(ww);
}

// While the new walwatch waits for the slot, the walsender that holds it
// (the old walwatch's) still confirms, and moves it past a write. The new
// walwatch read the slot before it waited: a floor from that read would
// claim the write, and a client resuming from before it would silently
// never get it. The floor comes from the slot as it is once walwatch holds
// it, so that resume is a 410 (relist), and the stream goes on.
TEST_F(FaultTest, ASlotMovedWhileStartupWaitsRaisesTheFloor) {
  ASSERT_NO_FATAL_FAILURE(SpawnWhileAnotherWalsenderHoldsTheSlot());
  WalwatchProcess& ww = *ww_;
  ASSERT_FALSE(WaitForLogLines(ww, kSlotHeldMessage, 1, seconds(30)).empty())
      << "walwatch did not wait for the slot: " << ww.StderrText();

  // walwatch has read the slot. A client's last RV, then a write that only
  // the holder receives and confirms.
  const uint64_t before = Marker();
  InsertRow(db(), Pod("c1", "default", "old-walsender-only"));
  const uint64_t confirmed =
      ParseLsn(db().QueryValue("SELECT pg_current_wal_lsn()::text"));
  ASSERT_GT(confirmed, before);
  // A standby status update (FACTS.md: 'r', write, flush, apply, clock,
  // reply), flush = confirmed: the walsender moves confirmed_flush_lsn.
  std::string update(1 + 8 * 4 + 1, '\0');
  update[0] = 'r';
  for (int field = 0; field < 3; ++field) {
    for (int b = 0; b < 8; ++b) {
      update[1 + 8 * field + b] =
          static_cast<char>((confirmed >> (8 * (7 - b))) & 0xff);
    }
  }
  ASSERT_EQ(PQputCopyData(holder_.get(), update.data(),
                          static_cast<int>(update.size())),
            1)
      << PQerrorMessage(holder_.get());
  ASSERT_EQ(PQflush(holder_.get()), 0) << PQerrorMessage(holder_.get());
  auto deadline = In(seconds(30));
  uint64_t moved = 0;
  while (Clock::now() < deadline && moved < confirmed) {
    moved = ParseLsn(db().QueryValue(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE "
        "slot_name = '" + std::string(kSlot) + "'"));
    if (moved < confirmed) std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_GE(moved, confirmed) << "the holder did not move the slot";
  holder_.reset();

  auto ready = ww.WaitReady(seconds(60));
  ASSERT_TRUE(ready) << "not ready after the slot was released: "
                     << ready.message();
  EXPECT_FALSE(LogLines(ww, "the replication slot moved while walwatch "
                            "waited for it; the log starts after the moved "
                            "position")
                   .empty());

  // The resume from before the write the new walwatch never saw: a 410.
  WatchClient resume;
  ASSERT_TRUE(resume.Open(ww.socket_path(),
                          "/api/v1/pods?watch=1&resourceVersion=" +
                              std::to_string(before),
                          In(seconds(20))));
  if (resume.status() == 200) {
    WatchEvent e;
    ASSERT_TRUE(resume.NextEvent(&e, In(seconds(20))))
        << "a resume from " << before
        << " streams as if exact, without the write the old walsender "
           "confirmed";
    EXPECT_EQ(e.type, "ERROR") << e.raw;
    EXPECT_EQ(e.object.value("code", 0), 410) << e.raw;
  } else {
    EXPECT_EQ(resume.status(), 410) << resume.body();
  }
  // And the stream goes on from where the slot is.
  ExpectANewRowArrives(ww);
}

// SIGTERM while startup waits for the slot: a clean exit, not death by the
// signal's default action.
TEST_F(FaultTest, SigtermWhileStartupWaitsForTheSlotExitsCleanly) {
  ASSERT_NO_FATAL_FAILURE(SpawnWhileAnotherWalsenderHoldsTheSlot());
  WalwatchProcess& ww = *ww_;
  ASSERT_FALSE(WaitForLogLines(ww, kSlotHeldMessage, 1, seconds(30)).empty());
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(ww, seconds(10)));
  EXPECT_EQ(LogLines(ww, "stopped before streaming").size(), 1u);
}

// The same while startup creates the slot, which a session idle in a
// transaction holds up: every query of the startup watches the stop.
TEST_F(FaultTest, SigtermWhileStartupCreatesTheSlotExitsCleanly) {
  StartCluster();
  PgConnection open_txn(Conninfo());
  open_txn.Exec("BEGIN");
  open_txn.Exec("SELECT txid_current()");
  WalwatchProcess& ww = Spawn(Options());
  ASSERT_TRUE(WaitUntilASlotIsBeingCreated())
      << "walwatch never began creating";
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(ww, seconds(10)));
  EXPECT_EQ(LogLines(ww, "stopped before streaming").size(), 1u);
  open_txn.Exec("COMMIT");
}

}  // namespace
}  // namespace walwatch::itest
