// TransactionAssembler fed records as pgoutput's decoder writes them, built
// here by hand: streamed transactions (protocol version 2 on) held until
// their commit among whole transactions, aborts of subtransactions and of
// whole streams, re-sends, the byte bound across everything being built, and
// records out of place.
#include "cdc/postgres/transaction_assembler.h"

#include <array>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace walwatch {
namespace {

using Outcome = TransactionAssembler::Outcome;
using A = RecordAction;

constexpr size_t kLarge = 64 << 20;
constexpr int64_t kTimeUs = 1796217696500000;  // 2026-12-02 13:21:36.5 UTC

// A row of the mapped table, whose cluster is `cluster`.
RowImage Image(const std::string& name, const std::string& cluster) {
  RowImage image;
  image.present = true;
  auto set = [&](MappedField f, std::string text) {
    image[f] = ColumnValue{ColumnValue::State::kValue, std::move(text)};
  };
  set(MappedField::kGroup, "");
  set(MappedField::kVersion, "v1");
  set(MappedField::kResource, "pods");
  set(MappedField::kKind, "Pod");
  set(MappedField::kCluster, cluster);
  set(MappedField::kNamespace, "ns");
  set(MappedField::kName, name);
  set(MappedField::kUid, "u-" + name);
  set(MappedField::kObject, "{\"metadata\": {\"name\": \"" + name + "\"}}");
  return image;
}

LogicalRecord Begin(uint32_t xid, uint64_t commit_lsn) {
  LogicalRecord r;
  r.action = A::kBegin;
  r.xid = xid;
  r.lsn = commit_lsn;
  r.timestamp_us = kTimeUs;
  return r;  // pgoutput's Begin has no end position: next_lsn 0
}

LogicalRecord Commit(uint64_t commit_lsn, uint64_t end_lsn) {
  LogicalRecord r;
  r.action = A::kCommit;
  r.lsn = commit_lsn;
  r.next_lsn = end_lsn;
  r.timestamp_us = kTimeUs;
  return r;
}

// A change of the mapped table (or, !mapped, of another one) by
// (sub)transaction `xid`.
LogicalRecord Change(A action, uint32_t xid, uint64_t lsn,
                     const std::string& name, const std::string& cluster = "c1",
                     bool mapped = true) {
  LogicalRecord r;
  r.action = action;
  r.xid = xid;
  r.lsn = lsn;
  r.mapped_table = mapped;
  if (mapped && (action == A::kInsert || action == A::kUpdate)) {
    r.columns = Image(name, cluster);
  }
  if (mapped && (action == A::kUpdate || action == A::kDelete)) {
    r.identity = Image(name, cluster);
  }
  return r;
}

LogicalRecord Truncate(uint32_t xid, uint64_t lsn, bool mapped) {
  LogicalRecord r;
  r.action = A::kTruncate;
  r.xid = xid;
  r.lsn = lsn;
  r.mapped_table = mapped;
  return r;
}

LogicalRecord StreamStart(uint32_t xid) {
  LogicalRecord r;
  r.action = A::kStreamStart;
  r.xid = xid;
  return r;
}

LogicalRecord StreamStop() {
  LogicalRecord r;
  r.action = A::kStreamStop;
  return r;
}

LogicalRecord StreamCommit(uint32_t xid, uint64_t commit_lsn,
                           uint64_t end_lsn, int64_t time_us = kTimeUs) {
  LogicalRecord r;
  r.action = A::kStreamCommit;
  r.xid = xid;
  r.lsn = commit_lsn;
  r.next_lsn = end_lsn;
  r.timestamp_us = time_us;
  return r;
}

LogicalRecord StreamAbort(uint32_t xid, uint32_t subxid) {
  LogicalRecord r;
  r.action = A::kStreamAbort;
  r.xid = xid;
  r.subxid = subxid;
  return r;
}

LogicalRecord Message() { return LogicalRecord(); }

// What a change holds in memory once kept: its strings' capacity as a copy
// has it (StreamHarness::Feed takes a copy), not as concatenation left it.
size_t Bytes(const LogicalRecord& r) {
  LogicalRecord kept = r;
  return ChangeMemoryBytes(kept.columns, kept.identity);
}
// What one inserted Change() row holds.
size_t RowBytes() { return Bytes(Change(A::kInsert, 1, 1, "a")); }
size_t UpdateBytes() { return Bytes(Change(A::kUpdate, 1, 1, "a")); }

// Feeds records; collects transactions, outcomes and errors.
class StreamHarness {
 public:
  explicit StreamHarness(size_t max_bytes = kLarge, uint64_t last = 0)
      : assembler_(max_bytes, last) {}

  std::string Feed(LogicalRecord r) {
    Transaction txn;
    Outcome outcome;
    std::string err = assembler_.Feed(r, &txn, &outcome);
    outcomes.push_back(outcome);
    if (outcome == Outcome::kCommitted) committed.push_back(std::move(txn));
    if (!err.empty()) {
      EXPECT_EQ(outcome, Outcome::kPending) << err;
      EXPECT_EQ(err.find('\n'), std::string::npos) << err;
      errors.push_back(err);
    }
    return err;
  }
  void FeedAll(const std::vector<LogicalRecord>& records) {
    for (const LogicalRecord& r : records) Feed(r);
  }

  TransactionAssembler& assembler() { return assembler_; }

  std::vector<Transaction> committed;
  std::vector<Outcome> outcomes;
  std::vector<std::string> errors;

 private:
  TransactionAssembler assembler_;
};

std::vector<std::string> Names(const Transaction& t) {
  std::vector<std::string> names;
  for (const RowChange& c : t.changes) {
    const RowImage& image = c.columns.present ? c.columns : c.identity;
    names.push_back(image[MappedField::kName].text);
  }
  return names;
}

using Strings = std::vector<std::string>;

TEST(TransactionStream, StreamedTransactionCommitsWholeInCommitOrder) {
  StreamHarness h;
  // 900 streams in blocks; 905 begins and commits between them; 910
  // streams too and commits before 900.
  h.FeedAll({StreamStart(900),
             Change(A::kInsert, 900, 0x1100, "a"),
             Change(A::kInsert, 901, 0x1200, "b"),  // a subtransaction's
             StreamStop(),
             Begin(905, 0x2000),
             Change(A::kInsert, 905, 0x1F00, "z"),
             Commit(0x2000, 0x2030),
             StreamStart(900),
             Change(A::kUpdate, 900, 0x2100, "a"),
             StreamStop(),
             StreamStart(910),
             Change(A::kDelete, 910, 0x2200, "q"),
             StreamStop()});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_EQ(h.committed[0].xid, 905u);
  EXPECT_EQ(Names(h.committed[0]), Strings({"z"}));
  EXPECT_EQ(h.assembler().open_streams(), 2u);
  // a, b, a's update, q.
  EXPECT_EQ(h.assembler().held_bytes(),
            2 * RowBytes() + UpdateBytes() + Bytes(Change(A::kDelete, 910, 0, "q")));
  h.Feed(StreamCommit(910, 0x3000, 0x3030));
  h.Feed(StreamCommit(900, 0x3100, 0x3130, kTimeUs + 7));
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 3u);

  const Transaction& q = h.committed[1];
  EXPECT_EQ(q.xid, 910u);
  EXPECT_EQ(q.commit_lsn, 0x3000u);
  EXPECT_EQ(Names(q), Strings({"q"}));
  ASSERT_EQ(q.changes.size(), 1u);
  EXPECT_EQ(q.changes[0].action, RowAction::kDelete);

  const Transaction& big = h.committed[2];
  EXPECT_EQ(big.xid, 900u);
  EXPECT_EQ(big.commit_lsn, 0x3100u);
  EXPECT_EQ(big.end_lsn, 0x3130u);
  EXPECT_EQ(big.commit_time_us, kTimeUs + 7);
  EXPECT_FALSE(big.overflowed);
  EXPECT_FALSE(big.broken);
  EXPECT_FALSE(big.truncated);
  // Every block's changes, the subtransaction's among them, in stream order,
  // at their own positions.
  EXPECT_EQ(Names(big), Strings({"a", "b", "a"}));
  ASSERT_EQ(big.changes.size(), 3u);
  EXPECT_EQ(big.changes[0].action, RowAction::kInsert);
  EXPECT_EQ(big.changes[2].action, RowAction::kUpdate);
  EXPECT_EQ(big.changes[0].lsn, 0x1100u);
  EXPECT_EQ(big.changes[1].lsn, 0x1200u);
  EXPECT_EQ(big.changes[2].lsn, 0x2100u);
  EXPECT_EQ(big.bytes, 2 * RowBytes() + UpdateBytes());
  EXPECT_EQ(big.changes[2].identity[MappedField::kUid].text, "u-a");

  EXPECT_EQ(h.assembler().last_commit_lsn(), 0x3100u);
  EXPECT_EQ(h.assembler().open_streams(), 0u);
  EXPECT_EQ(h.assembler().held_bytes(), 0u);
  // Only the three commits ended a transaction.
  size_t ended = 0;
  for (Outcome o : h.outcomes) ended += o != Outcome::kPending;
  EXPECT_EQ(ended, 3u);
}

TEST(TransactionStream, WholeTransactionTakesItsEndFromCommit) {
  // pgoutput's Begin carries the commit's position and time but not its
  // end; Commit carries the end (cdc/transaction.h: where reading again
  // starts after this commit).
  StreamHarness h;
  h.FeedAll({Begin(905, 0x2000), Change(A::kInsert, 905, 0x1F00, "z"),
             Commit(0x2000, 0x2030)});
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_EQ(h.committed[0].commit_lsn, 0x2000u);
  EXPECT_EQ(h.committed[0].commit_time_us, kTimeUs);
  EXPECT_EQ(h.committed[0].end_lsn, 0x2030u);
}

TEST(TransactionStream, SubtransactionAbortDropsOnlyItsChanges) {
  StreamHarness h;
  h.FeedAll({StreamStart(900),
             Change(A::kInsert, 900, 0x10, "a"),
             Change(A::kInsert, 901, 0x20, "b"),
             Change(A::kInsert, 902, 0x30, "c"),
             Change(A::kUpdate, 901, 0x40, "b"),
             StreamStop()});
  EXPECT_EQ(h.assembler().held_bytes(), 3 * RowBytes() + UpdateBytes());
  h.Feed(StreamAbort(900, 901));
  EXPECT_EQ(h.assembler().held_bytes(), 2 * RowBytes());
  EXPECT_EQ(h.assembler().open_streams(), 1u);
  // An abort of a subtransaction with nothing kept changes nothing.
  h.Feed(StreamAbort(900, 907));
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x50, "e"), StreamStop(),
             StreamCommit(900, 0x100, 0x130)});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 1u);
  const Transaction& t = h.committed[0];
  EXPECT_EQ(Names(t), Strings({"a", "c", "e"}));
  EXPECT_EQ(t.changes[1].lsn, 0x30u);
  EXPECT_EQ(t.bytes, 3 * RowBytes());
  EXPECT_EQ(h.assembler().held_bytes(), 0u);
}

TEST(TransactionStream, WholeAbortDropsTheStream) {
  StreamHarness h;
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x10, "a"),
             Change(A::kInsert, 901, 0x20, "b"), Truncate(900, 0x25, true),
             StreamStop(),
             StreamStart(910), Change(A::kInsert, 910, 0x30, "c"), StreamStop()});
  h.Feed(StreamAbort(900, 900));
  EXPECT_EQ(h.assembler().open_streams(), 1u);
  EXPECT_EQ(h.assembler().held_bytes(), RowBytes());
  EXPECT_FALSE(h.assembler().in_transaction());
  // An abort of a transaction never streamed (or already gone) is nothing.
  EXPECT_EQ(h.Feed(StreamAbort(900, 900)), "");
  EXPECT_EQ(h.Feed(StreamAbort(999, 998)), "");
  h.Feed(StreamCommit(910, 0x100, 0x130));
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_EQ(h.committed[0].xid, 910u);
  EXPECT_EQ(Names(h.committed[0]), Strings({"c"}));
  EXPECT_FALSE(h.committed[0].truncated);  // 900's truncate went with it
  EXPECT_EQ(h.assembler().held_bytes(), 0u);
  for (Outcome o : h.outcomes) EXPECT_NE(o, Outcome::kDuplicate);
}

TEST(TransactionStream, ResentStreamCommitIsDropped) {
  StreamHarness h(kLarge, 0x5000);
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x4000, "a"), StreamStop()});
  EXPECT_EQ(h.Feed(StreamCommit(900, 0x5000, 0x5030)), "");
  EXPECT_EQ(h.outcomes.back(), Outcome::kDuplicate);
  EXPECT_EQ(h.assembler().duplicates_dropped(), 1u);
  EXPECT_EQ(h.assembler().open_streams(), 0u);
  EXPECT_EQ(h.assembler().held_bytes(), 0u);
  EXPECT_EQ(h.assembler().last_commit_lsn(), 0x5000u);
  // Just above the boundary: new.
  h.FeedAll({StreamStart(901), Change(A::kInsert, 901, 0x4100, "b"), StreamStop(),
             StreamCommit(901, 0x5001, 0x5031)});
  EXPECT_EQ(h.outcomes.back(), Outcome::kCommitted);
  // A whole transaction commits past a stream that then commits below it.
  h.FeedAll({StreamStart(902), Change(A::kInsert, 902, 0x5100, "c"), StreamStop(),
             Begin(903, 0x6000), Change(A::kInsert, 903, 0x5F00, "d"),
             Commit(0x6000, 0x6030),
             StreamCommit(902, 0x5800, 0x5830)});
  EXPECT_EQ(h.outcomes.back(), Outcome::kDuplicate);
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_EQ(Names(h.committed[0]), Strings({"b"}));
  EXPECT_EQ(Names(h.committed[1]), Strings({"d"}));
  EXPECT_EQ(h.assembler().duplicates_dropped(), 2u);
  EXPECT_EQ(h.assembler().last_commit_lsn(), 0x6000u);
}

TEST(TransactionStream, ResetForgetsOpenStreams) {
  StreamHarness h;
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x10, "a"), StreamStop(),
             StreamStart(910), Change(A::kInsert, 910, 0x20, "b")});
  EXPECT_TRUE(h.assembler().in_transaction());
  EXPECT_EQ(h.assembler().open_streams(), 2u);
  h.assembler().Reset();
  EXPECT_FALSE(h.assembler().in_transaction());
  EXPECT_EQ(h.assembler().open_streams(), 0u);
  EXPECT_EQ(h.assembler().held_bytes(), 0u);
  // The server streams 900 again from its start.
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x10, "a2"), StreamStop(),
             StreamCommit(900, 0x100, 0x130)});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_EQ(Names(h.committed[0]), Strings({"a2"}));
  // 910 was forgotten: its commit is an empty transaction.
  h.Feed(StreamCommit(910, 0x200, 0x230));
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_TRUE(h.committed[1].changes.empty());
}

TEST(TransactionStream, InTransactionInsideABlockOrBeginCommit) {
  StreamHarness h;
  TransactionAssembler& a = h.assembler();
  EXPECT_FALSE(a.in_transaction());
  h.Feed(StreamStart(900));
  EXPECT_TRUE(a.in_transaction());
  h.Feed(Change(A::kInsert, 900, 0x10, "a"));
  EXPECT_TRUE(a.in_transaction());
  h.Feed(StreamStop());
  // Between blocks a keepalive's position is between records.
  EXPECT_FALSE(a.in_transaction());
  h.Feed(Begin(905, 0x2000));
  EXPECT_TRUE(a.in_transaction());
  h.Feed(Commit(0x2000, 0x2030));
  EXPECT_FALSE(a.in_transaction());
  h.Feed(StreamCommit(900, 0x3000, 0x3030));
  EXPECT_FALSE(a.in_transaction());
  EXPECT_TRUE(h.errors.empty());
}

TEST(TransactionStream, BoundCoversEverythingBeingBuilt) {
  const size_t row = RowBytes();
  ASSERT_GT(row, 100u);
  StreamHarness h(3 * row);
  // 900 holds two rows; 910's second would make four: 910 overflows.
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x10, "a"),
             Change(A::kInsert, 900, 0x20, "b"), StreamStop(),
             StreamStart(910), Change(A::kInsert, 910, 0x30, "c", "k1")});
  EXPECT_EQ(h.assembler().held_bytes(), 3 * row);  // exactly at the bound
  h.FeedAll({Change(A::kInsert, 910, 0x40, "d", "k2"), StreamStop()});
  EXPECT_EQ(h.assembler().held_bytes(), 2 * row);  // 910 keeps nothing
  // A whole transaction's one row fits beside 900's; its second does not.
  h.FeedAll({Begin(905, 0x2000), Change(A::kInsert, 905, 0x50, "e"),
             Commit(0x2000, 0x2030)});
  h.FeedAll({Begin(906, 0x2100), Change(A::kInsert, 906, 0x60, "f", "k3"),
             Change(A::kUpdate, 906, 0x70, "g", "k4"), Commit(0x2100, 0x2130)});
  h.FeedAll({StreamCommit(910, 0x3000, 0x3030), StreamCommit(900, 0x3100, 0x3130)});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 4u);
  using Touched = std::set<std::array<std::string, 4>>;

  const Transaction& e = h.committed[0];
  EXPECT_EQ(e.xid, 905u);
  EXPECT_FALSE(e.overflowed);
  EXPECT_EQ(Names(e), Strings({"e"}));

  const Transaction& fg = h.committed[1];
  EXPECT_EQ(fg.xid, 906u);
  EXPECT_TRUE(fg.overflowed);
  EXPECT_TRUE(fg.changes.empty());
  EXPECT_EQ(fg.bytes, 0u);
  EXPECT_EQ(fg.touched, (Touched{{"", "v1", "pods", "k3"}, {"", "v1", "pods", "k4"}}));
  EXPECT_FALSE(fg.touched_unknown);

  const Transaction& cd = h.committed[2];
  EXPECT_EQ(cd.xid, 910u);
  EXPECT_TRUE(cd.overflowed);
  EXPECT_TRUE(cd.changes.empty());
  EXPECT_EQ(cd.bytes, 0u);
  // The row kept before the overflow and the one that passed the bound.
  EXPECT_EQ(cd.touched, (Touched{{"", "v1", "pods", "k1"}, {"", "v1", "pods", "k2"}}));

  const Transaction& ab = h.committed[3];
  EXPECT_EQ(ab.xid, 900u);
  EXPECT_FALSE(ab.overflowed);
  EXPECT_EQ(Names(ab), Strings({"a", "b"}));
  EXPECT_EQ(ab.bytes, 2 * row);
  EXPECT_EQ(h.assembler().held_bytes(), 0u);
}

TEST(TransactionStream, OverflowedStreamKeepsTouchingInLaterBlocks) {
  const size_t row = RowBytes();
  StreamHarness h(row);
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x10, "a", "k1"),
             Change(A::kInsert, 901, 0x20, "b", "k2"), StreamStop(),
             StreamStart(900), Change(A::kDelete, 900, 0x30, "c", "k3"),
             // A change with no cluster to say what it touched.
             Change(A::kUpdate, 900, 0x40, "d", "k4"), StreamStop()});
  // d's images lack the cluster column: every watcher must relist.
  {
    LogicalRecord unknown = Change(A::kInsert, 900, 0x50, "x");
    unknown.columns[MappedField::kCluster] = ColumnValue();
    h.FeedAll({StreamStart(900), unknown, StreamStop()});
  }
  h.Feed(StreamAbort(900, 901));  // what 901 touched stays: safe
  h.Feed(StreamCommit(900, 0x100, 0x130));
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 1u);
  const Transaction& t = h.committed[0];
  EXPECT_TRUE(t.overflowed);
  EXPECT_TRUE(t.changes.empty());
  using Touched = std::set<std::array<std::string, 4>>;
  EXPECT_EQ(t.touched, (Touched{{"", "v1", "pods", "k1"},
                                {"", "v1", "pods", "k2"},
                                {"", "v1", "pods", "k3"},
                                {"", "v1", "pods", "k4"}}));
  EXPECT_TRUE(t.touched_unknown);
  EXPECT_EQ(h.assembler().held_bytes(), 0u);
}

TEST(TransactionStream, StreamCommitOfNothingHeldIsAnEmptyTransaction) {
  StreamHarness h;
  // Never started (the header: all its changes were of other tables).
  h.Feed(StreamCommit(999, 0x100, 0x130, kTimeUs + 1));
  // Started, with other tables' changes only.
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x150, "x", "c1", false),
             Change(A::kDelete, 901, 0x160, "x", "c1", false),
             Truncate(900, 0x170, false), Message(), StreamStop(),
             StreamCommit(900, 0x200, 0x230)});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_EQ(h.committed[0].xid, 999u);
  EXPECT_EQ(h.committed[0].commit_lsn, 0x100u);
  EXPECT_EQ(h.committed[0].end_lsn, 0x130u);
  EXPECT_EQ(h.committed[0].commit_time_us, kTimeUs + 1);
  for (const Transaction& t : h.committed) {
    EXPECT_TRUE(t.changes.empty());
    EXPECT_FALSE(t.truncated);
    EXPECT_FALSE(t.overflowed);
    EXPECT_EQ(t.bytes, 0u);
  }
  EXPECT_EQ(h.assembler().last_commit_lsn(), 0x200u);
}

TEST(TransactionStream, TruncateInAStreamMarksItsTransaction) {
  StreamHarness h;
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x10, "a"),
             Truncate(901, 0x20, true), StreamStop(),
             StreamStart(910), Truncate(910, 0x30, false), StreamStop(),
             StreamCommit(910, 0x100, 0x130), StreamCommit(900, 0x200, 0x230)});
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_FALSE(h.committed[0].truncated);
  EXPECT_TRUE(h.committed[1].truncated);
  EXPECT_EQ(Names(h.committed[1]), Strings({"a"}));
}

TEST(TransactionStream, UndecodableRecordInABlockBreaksItsTransaction) {
  StreamHarness h;
  h.FeedAll({StreamStart(900), Change(A::kInsert, 900, 0x10, "a"), StreamStop(),
             StreamStart(910), Change(A::kInsert, 910, 0x20, "b")});
  h.assembler().MarkBroken();  // inside 910's block
  h.FeedAll({StreamStop()});
  h.assembler().MarkBroken();  // between blocks: nothing
  h.FeedAll({StreamCommit(900, 0x100, 0x130), StreamCommit(910, 0x200, 0x230)});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_FALSE(h.committed[0].broken);
  EXPECT_TRUE(h.committed[1].broken);
  EXPECT_EQ(Names(h.committed[1]), Strings({"b"}));
}

// pgoutput's messages depend on earlier ones (a block's start, a relation):
// one that could not be decoded between transactions breaks the next
// transaction to commit, whole or streamed; a reconnect forgets it.
TEST(TransactionStream, UndecodableRecordBetweenTransactionsBreaksTheNext) {
  StreamHarness h;
  h.assembler().MarkBrokenOrNext();  // e.g. a malformed StreamStart
  // Its block's change and stop are refused by the decoder too, and so
  // never fed; the stream's commit is the next transaction.
  h.FeedAll({StreamCommit(900, 0x100, 0x130)});
  h.FeedAll({Begin(10, 0x200), Change(A::kInsert, 0, 0x1F0, "a"),
             Commit(0x200, 0x230)});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_TRUE(h.committed[0].broken);
  EXPECT_FALSE(h.committed[1].broken);  // once only

  // Inside a transaction it breaks that one, as MarkBroken does.
  h.FeedAll({Begin(11, 0x300), Change(A::kInsert, 0, 0x2F0, "b")});
  h.assembler().MarkBrokenOrNext();
  h.FeedAll({Commit(0x300, 0x330), Begin(12, 0x400), Commit(0x400, 0x430)});
  ASSERT_EQ(h.committed.size(), 4u);
  EXPECT_TRUE(h.committed[2].broken);
  EXPECT_FALSE(h.committed[3].broken);

  // A re-sent transaction is dropped, so the mark waits for a new one.
  h.assembler().MarkBrokenOrNext();
  h.FeedAll({Begin(12, 0x400), Commit(0x400, 0x430), Begin(13, 0x500),
             Commit(0x500, 0x530)});
  ASSERT_EQ(h.committed.size(), 5u);
  EXPECT_TRUE(h.committed[4].broken);

  // A new connection sends the lost message again: the mark goes.
  h.assembler().MarkBrokenOrNext();
  h.assembler().Reset();
  h.FeedAll({Begin(14, 0x600), Commit(0x600, 0x630)});
  ASSERT_EQ(h.committed.size(), 6u);
  EXPECT_FALSE(h.committed[5].broken);
}

// Every record out of place is an error: everything being built is
// dropped, and the assembler starts again clean (the caller reconnects).
struct OutOfPlace {
  const char* what;
  std::vector<LogicalRecord> before;  // taken without error
  LogicalRecord record;               // refused
};

TEST(TransactionStream, RecordsOutOfPlaceAreErrors) {
  const std::vector<LogicalRecord> open_stream = {
      StreamStart(910), Change(A::kInsert, 910, 0x5, "held"), StreamStop()};
  auto with_stream = [&](std::vector<LogicalRecord> records) {
    std::vector<LogicalRecord> all = open_stream;
    all.insert(all.end(), records.begin(), records.end());
    return all;
  };
  const OutOfPlace cases[] = {
      {"stream start inside begin..commit", with_stream({Begin(1, 0x100)}),
       StreamStart(900)},
      {"stream start inside a block", with_stream({StreamStart(900)}),
       StreamStart(920)},
      {"the same stream started twice", with_stream({StreamStart(900)}),
       StreamStart(900)},
      {"insert outside everything", {}, Change(A::kInsert, 1, 0x10, "a")},
      {"update between blocks", open_stream, Change(A::kUpdate, 910, 0x10, "a")},
      {"delete between blocks", open_stream, Change(A::kDelete, 910, 0x10, "a")},
      {"truncate between blocks", open_stream, Truncate(910, 0x10, true)},
      {"other table's change outside", {}, Change(A::kInsert, 1, 0x10, "a", "c1", false)},
      {"stream stop outside a block", open_stream, StreamStop()},
      {"stream stop inside begin..commit", with_stream({Begin(1, 0x100)}),
       StreamStop()},
      {"begin inside a block", with_stream({StreamStart(900)}), Begin(1, 0x100)},
      {"commit inside a block", with_stream({StreamStart(900)}),
       Commit(0x100, 0x130)},
      {"commit between blocks", open_stream, Commit(0x100, 0x130)},
      {"stream commit inside a block", with_stream({StreamStart(900)}),
       StreamCommit(910, 0x100, 0x130)},
      {"stream commit inside begin..commit", with_stream({Begin(1, 0x100)}),
       StreamCommit(910, 0x100, 0x130)},
      {"stream abort inside a block", with_stream({StreamStart(900)}),
       StreamAbort(910, 910)},
      {"stream abort inside begin..commit", with_stream({Begin(1, 0x100)}),
       StreamAbort(910, 911)},
  };
  for (const OutOfPlace& c : cases) {
    SCOPED_TRACE(c.what);
    StreamHarness h;
    h.FeedAll(c.before);
    ASSERT_TRUE(h.errors.empty()) << h.errors.front();
    EXPECT_NE(h.Feed(c.record), "");
    EXPECT_EQ(h.outcomes.back(), Outcome::kPending);
    EXPECT_FALSE(h.assembler().in_transaction());
    EXPECT_EQ(h.assembler().open_streams(), 0u);
    EXPECT_EQ(h.assembler().held_bytes(), 0u);
    EXPECT_TRUE(h.committed.empty());
    // 910's commit now finds nothing held.
    h.errors.clear();
    h.Feed(StreamCommit(910, 0x300, 0x330));
    ASSERT_EQ(h.committed.size(), 1u);
    EXPECT_TRUE(h.committed[0].changes.empty());
    // And a new stream goes through.
    h.FeedAll({StreamStart(930), Change(A::kInsert, 930, 0x400, "n"), StreamStop(),
               StreamCommit(930, 0x500, 0x530)});
    EXPECT_TRUE(h.errors.empty());
    ASSERT_EQ(h.committed.size(), 2u);
    EXPECT_EQ(Names(h.committed[1]), Strings({"n"}));
  }
}

TEST(TransactionStream, MessagesAreNothingAnywhere) {
  StreamHarness h;
  h.FeedAll({Message(), StreamStart(900), Message(),
             Change(A::kInsert, 900, 0x10, "a"), StreamStop(), Message(),
             Begin(5, 0x50), Message(), Commit(0x50, 0x60),
             StreamCommit(900, 0x100, 0x130)});
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_EQ(Names(h.committed[1]), Strings({"a"}));
}

}  // namespace
}  // namespace walwatch
