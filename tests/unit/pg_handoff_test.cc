// PgHandoff (cdc/postgres/pg_handoff.h): a list read in a PostgreSQL
// snapshot, placed among the commits an EventLog holds. These tests were the
// event log's when it classified snapshots itself (tests/unit/event_log_test.cc
// keeps what is the log's own). A snapshot that sees every held transaction
// is handed the last one's commit (the state's own RV, as etcd's revision
// after a write is the write's), no longer the position before insert_lsn.
#include "cdc/postgres/pg_handoff.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cdc/model/event.h"
#include "cdc/model/state_source.h"
#include "watchserver/event_log.h"

namespace walwatch {
namespace {

constexpr size_t kBig = size_t{1} << 30;

// A transaction of `rows` events, xid `xid`, committed at `commit`, as the
// EventBuilder makes them: every event but the last carries commit - 1.
::testing::AssertionResult AppendTxn(EventLog* log, uint64_t commit,
                                     uint64_t xid, size_t rows = 1) {
  std::vector<EventPtr> events;
  for (size_t i = 0; i < rows; ++i) {
    Event::Strings strings;
    MutableEventPtr e = Event::Make(strings, "{}\n");
    e->last_in_txn = i + 1 == rows;
    e->rv = e->last_in_txn ? commit : commit - 1;
    e->commit_lsn = commit;
    e->xid = xid;
    events.push_back(std::move(e));
  }
  if (log->AppendTransaction(commit, std::move(events)) !=
      EventLog::AppendResult::kAppended) {
    return ::testing::AssertionFailure() << "not appended at " << commit;
  }
  return ::testing::AssertionSuccess();
}

HandoffSnapshot Snapshot(std::string_view text) {
  HandoffSnapshot snapshot;
  EXPECT_TRUE(ParseHandoffSnapshot(text, &snapshot)) << text;
  return snapshot;
}

// The list-to-watch handoff (DESIGN.md "exact or retry") classifies each
// retained transaction, a multi-row one once, by its xid and commit LSN.
TEST(PgHandoff, ClassifiesRetainedTransactionsBySnapshot) {
  EventLog log(kBig, 10);
  PgHandoff handoff;
  ASSERT_TRUE(AppendTxn(&log, 20, 100, 1));
  ASSERT_TRUE(AppendTxn(&log, 30, 101, 2));
  ASSERT_TRUE(AppendTxn(&log, 40, 102, 1));
  log.AdvanceCurrentRv(49);  // the stream has passed insert_lsn (50)
  auto classify = [&](std::string_view text, uint64_t insert_lsn) {
    return handoff.Classify(log, Snapshot(text), insert_lsn);
  };
  // 101 unseen but 102 seen, though it committed later: no RV is exact.
  EXPECT_EQ(classify("101:103:101", 50).status, HandoffStatus::kRetry);
  // 100 seen, 101 and 102 not: just before 101's commit, what 101's first
  // event's RV (29) says.
  HandoffResult r = classify("101:102:101", 50);
  EXPECT_EQ(r.status, HandoffStatus::kExact);
  EXPECT_EQ(r.rv, 29u);
  EXPECT_EQ(r.latest, 29u);  // 101 commits at 30: the state ends there
  // Everything seen: the last commit before insert_lsn (nothing of the
  // table commits between it and insert_lsn - 1).
  r = classify("103:103:", 50);
  EXPECT_EQ(r.status, HandoffStatus::kExact);
  EXPECT_EQ(r.rv, 40u);
  // Transactions committed at or after insert_lsn are unseen whatever the
  // snapshot says of their xid: the state is the one after 100's commit.
  r = classify("101:103:101", 30);
  EXPECT_EQ(r.status, HandoffStatus::kExact);
  EXPECT_EQ(r.rv, 20u);
  // A barrier evicts 100..102: a snapshot whose xmin is among them can no
  // longer be classified.
  log.AppendBarrier(60, 103);
  EXPECT_EQ(classify("101:104:", 70).status, HandoffStatus::kExpired);
  EXPECT_EQ(log.GetStats().evicted_transactions, 3u);
}

// A barrier without xids (the slot lost or moved by someone else) skipped
// transactions whose xids nobody knows: a snapshot taken before it cannot be
// handed off, whatever its xmin says.
TEST(PgHandoff, RefusesSnapshotsOlderThanABarrierWithoutXids) {
  EventLog log(kBig, 10);
  PgHandoff handoff;
  ASSERT_TRUE(AppendTxn(&log, 20, 100));
  // xid 101 was open; it committed in the gap.
  const HandoffSnapshot before = Snapshot("101:102:101");
  log.AppendBarrier(60);
  EXPECT_EQ(handoff.Classify(log, before, 50).status, HandoffStatus::kExpired);
  // A snapshot taken after the barrier is handed off, at the barrier: no
  // transaction is held after it.
  log.AdvanceCurrentRv(69);
  HandoffResult r = handoff.Classify(log, Snapshot("102:102:"), 70);
  EXPECT_EQ(r.status, HandoffStatus::kExact);
  EXPECT_EQ(r.rv, 60u);
}

// insert_lsn may lie past the stream's position when no commit record lies
// between them (the last WAL record ends at a page boundary, and the
// database is idle): the handoff is the stream's position, which a watch
// can start from at once.
TEST(PgHandoff, IsNeverAboveTheCurrentRv) {
  EventLog log(kBig, 10);
  PgHandoff handoff;
  ASSERT_TRUE(AppendTxn(&log, 20, 100));
  HandoffResult r = handoff.Classify(log, Snapshot("101:101:"), 44);
  EXPECT_EQ(r.status, HandoffStatus::kExact);
  EXPECT_EQ(r.rv, 20u);
  EXPECT_LE(r.rv, log.current_rv());
}

// A list that sees every held transaction is handed the last one's commit
// only while a restart of walwatch would keep it (the replay window's
// confirmed position): past that, the position a restart starts after, so
// that a watch from the list's RV resumes across a restart. Never past
// insert_lsn - 1.
TEST(PgHandoff, IsNeverBelowWhereARestartWouldStart) {
  EventLog log(kBig, 10);
  PgHandoff handoff;
  ASSERT_TRUE(AppendTxn(&log, 20, 100));
  log.AdvanceCurrentRv(49);
  const HandoffSnapshot all = Snapshot("101:101:");
  EXPECT_EQ(handoff.Classify(log, all, 50).rv, 20u);
  // The same state holds up to insert_lsn - 1: nothing commits after 20.
  EXPECT_EQ(handoff.Classify(log, all, 50).latest, 49u);
  log.SetRestartFloor(30);  // the window let go of 20
  EXPECT_EQ(handoff.Classify(log, all, 50).rv, 30u);
  log.SetRestartFloor(49);
  EXPECT_EQ(handoff.Classify(log, all, 40).rv, 39u);
}

// Transactions that may have committed before the log began (below the
// xmax read after the slot's position) cannot be classified.
TEST(PgHandoff, RefusesSnapshotsOlderThanWhereTheStreamBegan) {
  EventLog log(kBig, 10);
  PgHandoff handoff;
  handoff.SetClassifiableFromXid(100);
  log.AdvanceCurrentRv(49);
  EXPECT_EQ(handoff.Classify(log, Snapshot("99:101:99"), 50).status,
            HandoffStatus::kExpired);
  EXPECT_EQ(handoff.Classify(log, Snapshot("100:101:100"), 50).status,
            HandoffStatus::kExact);
}

// After a history reset (the event log's ResetHistory test has the log's
// side): a list read past the fence while the stream is still inside it is
// handed the first RV past the fence, unless it missed a transaction of the
// fence; a list whose position lies in the fence is refused.
TEST(PgHandoff, AfterAHistoryResetTheFenceIsHandedOffPastOrRefused) {
  EventLog log(kBig, 50);
  PgHandoff handoff;
  ASSERT_TRUE(AppendTxn(&log, 100, 0, 1));
  ASSERT_TRUE(AppendTxn(&log, 200, 0, 3));
  ASSERT_TRUE(AppendTxn(&log, 300, 0, 1));
  const uint64_t old_current = log.current_rv();
  handoff.ResetHistory(/*next_xid=*/40, [&] {
    log.ResetHistory(/*new_floor=*/150, /*fence_hi=*/old_current + 10,
                     kNoRvCeiling);
  });
  ASSERT_TRUE(AppendTxn(&log, 200, 0));
  // While the stream is still inside the fence, a list read past it is
  // handed the first RV past the fence, which a watch accepts, not the
  // stream's position, which it would refuse.
  ASSERT_TRUE(AppendTxn(&log, 210, /*xid=*/100));
  log.AdvanceCurrentRv(old_current);
  {
    HandoffResult h =
        handoff.Classify(log, Snapshot("5000:5000:"), old_current + 20);
    ASSERT_EQ(h.status, HandoffStatus::kExact);
    EXPECT_EQ(h.rv, old_current + 11);
    EXPECT_FALSE(log.Fenced(h.rv));
    // Not when the list did not see a transaction of the fence.
    const HandoffSnapshot unseen = Snapshot("100:5000:100");  // xid 100, at 210
    EXPECT_EQ(handoff.Classify(log, unseen, old_current + 20).status,
              HandoffStatus::kExpired);
  }
  // Once past the fence, RVs are unambiguous again.
  log.AdvanceCurrentRv(old_current + 20);

  // A handoff whose list position lies in the fence is refused.
  const HandoffSnapshot snapshot = Snapshot("5000:5000:");
  EXPECT_EQ(handoff.Classify(log, snapshot, 201).status,
            HandoffStatus::kExpired);
  EXPECT_EQ(handoff.Classify(log, snapshot, old_current + 20).status,
            HandoffStatus::kExact);
}

}  // namespace
}  // namespace walwatch
