#include "cdc/postgres/transaction_assembler.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cdc/postgres/lsn.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "tests/unit/wal2json_capture.h"

namespace walwatch {
namespace {

using namespace testing_capture;  // NOLINT: capture constants
using Outcome = TransactionAssembler::Outcome;

constexpr size_t kLarge = 64 << 20;

// Feeds decoded lines; collects transactions, outcomes and errors.
class AssemblerHarness {
 public:
  explicit AssemblerHarness(size_t max_bytes = kLarge, uint64_t last = 0)
      : mapping_(DefaultTableMapping()),
        decoder_(mapping_),
        assembler_(max_bytes, last) {}

  // Returns the assembler's error ("" if none); decoding must succeed.
  std::string Feed(const std::string& line) {
    LogicalRecord r;
    std::string err = decoder_.Decode(line, &r);
    EXPECT_EQ(err, "") << line.substr(0, 200);
    Transaction txn;
    Outcome outcome;
    err = assembler_.Feed(r, &txn, &outcome);
    outcomes.push_back(outcome);
    if (outcome == Outcome::kCommitted) committed.push_back(std::move(txn));
    if (!err.empty()) errors.push_back(err);
    return err;
  }
  void FeedAll(const std::vector<std::string>& lines) {
    for (const auto& l : lines) Feed(l);
  }

  TransactionAssembler& assembler() { return assembler_; }

  std::vector<Transaction> committed;
  std::vector<Outcome> outcomes;
  std::vector<std::string> errors;

 private:
  TableMapping mapping_;
  Wal2JsonDecoder decoder_;
  TransactionAssembler assembler_;
};

std::string BC(char action, uint32_t xid, const char* lsn,
               const char* next_lsn = "0/FFFF",
               const char* ts = "2026-12-02 13:21:36.5+00") {
  return std::string("{\"action\":\"") + action +
         "\",\"xid\":" + std::to_string(xid) + ",\"timestamp\":\"" + ts +
         "\",\"lsn\":\"" + lsn + "\",\"nextlsn\":\"" + next_lsn + "\"}";
}

std::string Row(char action, uint32_t xid, const char* lsn,
                const std::string& name, const char* table = "resources") {
  std::string tuple =
      R"([{"name":"group","value":""},{"name":"version","value":"v1"},)"
      R"({"name":"resource","value":"pods"},{"name":"kind","value":"Pod"},)"
      R"({"name":"cluster","value":"c1"},{"name":"namespace","value":"ns"},)"
      R"({"name":"name","value":")" +
      name + R"("},{"name":"uid","value":"u-)" + name +
      R"("},{"name":"object","value":"{\"metadata\": {\"name\": \")" + name +
      R"(\"}}"}])";
  std::string s = std::string("{\"action\":\"") + action +
                  "\",\"xid\":" + std::to_string(xid) +
                  ",\"lsn\":\"" + lsn +
                  "\",\"schema\":\"public\",\"table\":\"" + table + "\"";
  if (action == 'I' || action == 'U') s += ",\"columns\":" + tuple;
  if (action == 'U' || action == 'D') s += ",\"identity\":" + tuple;
  return s + "}";
}

std::string Truncate(uint32_t xid, const char* lsn,
                     const char* table = "resources") {
  return std::string("{\"action\":\"T\",\"xid\":") + std::to_string(xid) +
         ",\"lsn\":\"" + lsn + "\",\"schema\":\"public\",\"table\":\"" +
         table + "\"}";
}

TEST(TransactionAssembler, GroupsTheCaptureIntoTransactions) {
  AssemblerHarness h;
  h.FeedAll(ReadCaptureLines());
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  EXPECT_FALSE(h.assembler().in_transaction());
  ASSERT_EQ(h.committed.size(), 9u);

  struct Want {
    uint32_t xid;
    uint64_t commit;
    const char* end;
    std::vector<RowAction> actions;
    bool truncated;
  };
  using A = RowAction;
  const Want want[] = {
      {746, kCommit746, "0/15585A0", {A::kInsert}, false},
      {747, kCommit747, "0/15588E0", {A::kUpdate}, false},
      {748, kCommit748, "0/1558C28", {A::kUpdate}, false},
      {749, kCommit749, "0/1558C98", {}, false},
      {750, kCommit750, "0/155C000", {A::kUpdate}, false},
      {751, kCommit751, "0/155EEF0", {A::kUpdate}, false},
      {752, kCommit752, "0/155F0E0", {A::kInsert, A::kDelete}, false},
      {753, kCommit753, "0/1562080", {A::kDelete}, false},
      {754, kCommit754, "0/15630F8", {}, true},
  };
  for (size_t i = 0; i < std::size(want); ++i) {
    const Transaction& t = h.committed[i];
    SCOPED_TRACE("xid " + std::to_string(want[i].xid));
    EXPECT_EQ(t.xid, want[i].xid);
    EXPECT_EQ(t.commit_lsn, want[i].commit);
    EXPECT_EQ(t.end_lsn, *ParseLsn(want[i].end));
    ASSERT_EQ(t.changes.size(), want[i].actions.size());
    for (size_t j = 0; j < t.changes.size(); ++j) {
      EXPECT_EQ(t.changes[j].action, want[i].actions[j]);
    }
    EXPECT_EQ(t.truncated, want[i].truncated);
    EXPECT_FALSE(t.overflowed);
  }
  // Change LSNs, in order, and the images moved in whole.
  const Transaction& two = h.committed[6];
  EXPECT_EQ(two.changes[0].lsn, *ParseLsn("0/155EEF0"));
  EXPECT_EQ(two.changes[1].lsn, *ParseLsn("0/155F018"));
  EXPECT_EQ(two.changes[0].columns[MappedField::kName].text, "d1");
  EXPECT_TRUE(two.changes[0].columns.present);
  EXPECT_FALSE(two.changes[0].identity.present);
  EXPECT_EQ(two.changes[1].identity[MappedField::kObject].text,
            R"({"metadata": {}})");
  EXPECT_FALSE(two.changes[1].columns.present);
  // Commit time (B's timestamp).
  EXPECT_EQ(h.committed[0].commit_time_us, 1796217696726676);
  EXPECT_EQ(h.committed[5].commit_time_us, 1796217696732170);
  // The TOAST-omitted update keeps its shape.
  const RowChange& toast = h.committed[5].changes[0];
  EXPECT_EQ(toast.columns[MappedField::kObject].state,
            ColumnValue::State::kAbsent);
  EXPECT_EQ(toast.identity[MappedField::kObject].text.size(), 19447u);
  // bytes counts the memory of the kept changes.
  const Transaction& ins = h.committed[0];
  EXPECT_EQ(ins.bytes, ChangeMemoryBytes(ins.changes[0].columns,
                                         ins.changes[0].identity));
  EXPECT_GT(ins.bytes, 200u);
  EXPECT_EQ(h.committed[3].bytes, 0u);

  EXPECT_EQ(h.assembler().last_commit_lsn(), kCommit754);
  EXPECT_EQ(h.assembler().duplicates_dropped(), 0u);
  // Outcomes: pending for everything but the commits.
  size_t committed = 0;
  for (Outcome o : h.outcomes) committed += o == Outcome::kCommitted;
  EXPECT_EQ(committed, 9u);
  EXPECT_EQ(h.outcomes.size(), 27u);
  EXPECT_EQ(h.outcomes[0], Outcome::kPending);
  EXPECT_EQ(h.outcomes[1], Outcome::kPending);
  EXPECT_EQ(h.outcomes[2], Outcome::kCommitted);
}

TEST(TransactionAssembler, CommitPositionComesFromBegin) {
  AssemblerHarness h;
  // B carries the commit record's LSN; C must repeat it. end and time are
  // B's too (C's nextlsn and timestamp here differ on purpose).
  h.Feed(BC('B', 10, "0/5000", "0/5030", "2026-12-02 13:21:36.1+00"));
  h.Feed(Row('I', 10, "0/4000", "a"));
  h.Feed(BC('C', 10, "0/5000", "0/9999", "2026-12-02 13:21:37+00"));
  ASSERT_TRUE(h.errors.empty());
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_EQ(h.committed[0].commit_lsn, 0x5000u);
  EXPECT_EQ(h.committed[0].end_lsn, 0x5030u);
  EXPECT_EQ(h.committed[0].commit_time_us, 1796217696100000);
  EXPECT_EQ(h.committed[0].xid, 10u);
  ASSERT_EQ(h.committed[0].changes.size(), 1u);
  EXPECT_EQ(h.committed[0].changes[0].lsn, 0x4000u);
  EXPECT_EQ(h.assembler().last_commit_lsn(), 0x5000u);
}

TEST(TransactionAssembler, InterleavedChangeLsnsAreFine) {
  AssemblerHarness h;
  h.Feed(BC('B', 800, "0/3000"));
  h.Feed(Row('I', 800, "0/2800", "a"));
  h.Feed(Row('U', 800, "0/2900", "a"));
  h.Feed(BC('C', 800, "0/3000"));
  h.Feed(BC('B', 801, "0/3100"));
  h.Feed(Row('I', 801, "0/2000", "b"));  // lower than 800's changes
  h.Feed(Row('D', 801, "0/1F00", "b"));  // and going down inside 801
  h.Feed(BC('C', 801, "0/3100"));
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_EQ(h.committed[0].changes.size(), 2u);
  ASSERT_EQ(h.committed[1].changes.size(), 2u);
  EXPECT_EQ(h.committed[1].changes[0].lsn, 0x2000u);
  EXPECT_EQ(h.committed[1].changes[1].lsn, 0x1F00u);
  EXPECT_EQ(h.committed[1].changes[1].identity[MappedField::kName].text, "b");
}

TEST(TransactionAssembler, DropsResentTransactions) {
  // After a reconnect the server re-sends from before the last commit seen.
  AssemblerHarness h(kLarge, kCommit749);
  h.FeedAll(ReadCaptureLines());
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  // 746..749 are at or below 749's commit (749 itself is equal).
  EXPECT_EQ(h.assembler().duplicates_dropped(), 4u);
  ASSERT_EQ(h.committed.size(), 5u);
  EXPECT_EQ(h.committed[0].xid, 750u);
  EXPECT_EQ(h.committed.back().xid, 754u);
  EXPECT_EQ(h.outcomes[2], Outcome::kDuplicate);   // C of 746
  EXPECT_EQ(h.outcomes[10], Outcome::kDuplicate);  // C of 749
  EXPECT_EQ(h.outcomes[13], Outcome::kCommitted);  // C of 750
  // A duplicate's records are all pending until its C.
  EXPECT_EQ(h.outcomes[0], Outcome::kPending);
  EXPECT_EQ(h.outcomes[1], Outcome::kPending);

  // Feeding the whole capture again drops everything.
  size_t before = h.committed.size();
  h.FeedAll(ReadCaptureLines());
  EXPECT_EQ(h.committed.size(), before);
  EXPECT_EQ(h.assembler().duplicates_dropped(), 4u + 9u);
  EXPECT_EQ(h.assembler().last_commit_lsn(), kCommit754);
  EXPECT_TRUE(h.errors.empty());
}

TEST(TransactionAssembler, DuplicateBoundaryIsInclusive) {
  AssemblerHarness h(kLarge, 0x5000);
  h.Feed(BC('B', 1, "0/5000"));
  h.Feed(Row('I', 1, "0/4000", "a"));
  h.Feed(Truncate(1, "0/4100"));
  EXPECT_EQ(h.Feed(BC('C', 1, "0/5000")), "");
  EXPECT_EQ(h.outcomes.back(), Outcome::kDuplicate);
  h.Feed(BC('B', 2, "0/5001"));
  h.Feed(Row('I', 2, "0/4F00", "b"));
  h.Feed(BC('C', 2, "0/5001"));
  EXPECT_EQ(h.outcomes.back(), Outcome::kCommitted);
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_EQ(h.committed[0].commit_lsn, 0x5001u);
  // Nothing of the duplicate leaked into the next transaction.
  ASSERT_EQ(h.committed[0].changes.size(), 1u);
  EXPECT_EQ(h.committed[0].changes[0].columns[MappedField::kName].text, "b");
  EXPECT_FALSE(h.committed[0].truncated);
  EXPECT_EQ(h.assembler().duplicates_dropped(), 1u);
}

TEST(TransactionAssembler, SetLastCommitLsnMovesTheBoundary) {
  AssemblerHarness h;
  h.assembler().set_last_commit_lsn(kCommit752);
  EXPECT_EQ(h.assembler().last_commit_lsn(), kCommit752);
  h.FeedAll(ReadCaptureLines());
  EXPECT_EQ(h.assembler().duplicates_dropped(), 7u);
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_EQ(h.committed[0].xid, 753u);
}

TEST(TransactionAssembler, OutOfPlaceRecordsAreErrors) {
  {
    AssemblerHarness h;
    EXPECT_NE(h.Feed(BC('C', 1, "0/10")), "");
    EXPECT_NE(h.Feed(Row('I', 1, "0/8", "a")), "");
    EXPECT_NE(h.Feed(Row('U', 1, "0/8", "a")), "");
    EXPECT_NE(h.Feed(Row('D', 1, "0/8", "a")), "");
    EXPECT_NE(h.Feed(Truncate(1, "0/8")), "");
    EXPECT_TRUE(h.committed.empty());
    for (Outcome o : h.outcomes) EXPECT_EQ(o, Outcome::kPending);
  }
  {
    // B inside a transaction drops the partial one.
    AssemblerHarness h;
    h.Feed(BC('B', 1, "0/10"));
    h.Feed(Row('I', 1, "0/8", "a"));
    std::string err = h.Feed(BC('B', 2, "0/20"));
    EXPECT_NE(err, "");
    EXPECT_NE(err.find('1'), std::string::npos) << err;
    EXPECT_FALSE(h.assembler().in_transaction());
    // Its C is now out of place too.
    EXPECT_NE(h.Feed(BC('C', 1, "0/10")), "");
    EXPECT_TRUE(h.committed.empty());
    // The assembler recovers with a fresh B.
    h.Feed(BC('B', 3, "0/30"));
    h.Feed(Row('I', 3, "0/28", "c"));
    EXPECT_EQ(h.Feed(BC('C', 3, "0/30")), "");
    ASSERT_EQ(h.committed.size(), 1u);
    ASSERT_EQ(h.committed[0].changes.size(), 1u);
    EXPECT_EQ(h.committed[0].changes[0].columns[MappedField::kName].text, "c");
  }
  {
    // C whose LSN differs from B's.
    AssemblerHarness h;
    h.Feed(BC('B', 1, "0/10"));
    h.Feed(Row('I', 1, "0/8", "a"));
    std::string err = h.Feed(BC('C', 1, "0/11"));
    EXPECT_NE(err, "");
    EXPECT_NE(err.find("0/11"), std::string::npos) << err;
    EXPECT_NE(err.find("0/10"), std::string::npos) << err;
    EXPECT_EQ(h.outcomes.back(), Outcome::kPending);
    EXPECT_TRUE(h.committed.empty());
    EXPECT_FALSE(h.assembler().in_transaction());
    EXPECT_EQ(h.assembler().last_commit_lsn(), 0u);
  }
}

TEST(TransactionAssembler, ResetForgetsThePartialTransaction) {
  AssemblerHarness h;
  h.Feed(BC('B', 1, "0/10"));
  h.Feed(Row('I', 1, "0/8", "a"));
  EXPECT_TRUE(h.assembler().in_transaction());
  h.assembler().Reset();
  EXPECT_FALSE(h.assembler().in_transaction());
  h.Feed(BC('B', 1, "0/10"));
  h.Feed(Row('I', 1, "0/8", "b"));
  h.Feed(BC('C', 1, "0/10"));
  ASSERT_EQ(h.committed.size(), 1u);
  ASSERT_EQ(h.committed[0].changes.size(), 1u);
  EXPECT_EQ(h.committed[0].changes[0].columns[MappedField::kName].text, "b");
}

TEST(TransactionAssembler, OtherTablesAreNotKept) {
  AssemblerHarness h;
  h.Feed(BC('B', 1, "0/100"));
  h.Feed(Row('I', 1, "0/10", "x", "other"));
  h.Feed(Row('I', 1, "0/20", "a"));
  h.Feed(Row('U', 1, "0/30", "y", "other"));
  h.Feed(Row('D', 1, "0/40", "z", "other"));
  h.Feed(Truncate(1, "0/50", "other"));
  h.Feed(BC('C', 1, "0/100"));
  ASSERT_TRUE(h.errors.empty());
  ASSERT_EQ(h.committed.size(), 1u);
  ASSERT_EQ(h.committed[0].changes.size(), 1u);
  EXPECT_EQ(h.committed[0].changes[0].lsn, 0x20u);
  EXPECT_FALSE(h.committed[0].truncated);
  // Only the kept change is counted.
  const RowChange& kept = h.committed[0].changes[0];
  EXPECT_EQ(h.committed[0].bytes,
            ChangeMemoryBytes(kept.columns, kept.identity));
}

TEST(TransactionAssembler, MessagesAreIgnored) {
  AssemblerHarness h;
  // As wal2json 2.5 writes them: a non-transactional one outside any
  // transaction, with null xid and timestamp; a transactional one inside.
  const std::string outside =
      R"({"action":"M","xid":null,"timestamp":null,"lsn":"0/50","transactional":false,"prefix":"p","content":"x"})";
  const std::string inside =
      R"({"action":"M","xid":1,"lsn":"0/50","transactional":true,"prefix":"p","content":"x"})";
  EXPECT_EQ(h.Feed(outside), "");
  h.Feed(BC('B', 1, "0/100"));
  EXPECT_EQ(h.Feed(inside), "");
  h.Feed(BC('C', 1, "0/100"));
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_TRUE(h.committed[0].changes.empty());
}

TEST(TransactionAssembler, TruncateOfMappedTableSetsTruncated) {
  AssemblerHarness h;
  h.Feed(BC('B', 1, "0/100"));
  h.Feed(Row('I', 1, "0/10", "a"));
  h.Feed(Truncate(1, "0/20"));
  h.Feed(Row('I', 1, "0/30", "b"));
  h.Feed(BC('C', 1, "0/100"));
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_TRUE(h.committed[0].truncated);
  // The next transaction starts clean.
  h.Feed(BC('B', 2, "0/200"));
  h.Feed(BC('C', 2, "0/200"));
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_FALSE(h.committed[1].truncated);
}

// A record of the open transaction that could not be decoded breaks it;
// outside a transaction, or in a re-sent one, MarkBroken changes nothing.
TEST(TransactionAssembler, MarkBrokenBreaksOnlyTheOpenNewTransaction) {
  AssemblerHarness h(kLarge, 0x5000);
  h.assembler().MarkBroken();  // between transactions: nothing
  h.Feed(BC('B', 1, "0/4000"));  // a duplicate
  h.assembler().MarkBroken();
  h.Feed(BC('C', 1, "0/4000"));
  EXPECT_EQ(h.outcomes.back(), Outcome::kDuplicate);
  h.Feed(BC('B', 2, "0/6000"));
  h.Feed(Row('I', 2, "0/5800", "a"));
  h.assembler().MarkBroken();
  h.Feed(BC('C', 2, "0/6000"));
  h.Feed(BC('B', 3, "0/7000"));
  h.Feed(BC('C', 3, "0/7000"));
  ASSERT_TRUE(h.errors.empty()) << h.errors.front();
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_TRUE(h.committed[0].broken);
  EXPECT_FALSE(h.committed[1].broken);  // the next one starts whole
}

TEST(TransactionAssembler, OverflowKeepsOnlyWhatItTouched) {
  // What one row of Row() holds in memory.
  size_t row;
  {
    AssemblerHarness probe;
    probe.Feed(BC('B', 1, "0/100"));
    probe.Feed(Row('I', 1, "0/10", "a"));
    probe.Feed(BC('C', 1, "0/100"));
    ASSERT_EQ(probe.committed.size(), 1u);
    row = probe.committed[0].bytes;
    ASSERT_GT(row, 44u);
  }
  AssemblerHarness h(2 * row);
  h.Feed(BC('B', 1, "0/100"));
  h.Feed(Row('I', 1, "0/10", "a"));
  h.Feed(Row('I', 1, "0/20", "b"));
  h.Feed(Row('I', 1, "0/30", "c"));  // the third does not fit
  h.Feed(Row('I', 1, "0/40", "d"));
  h.Feed(BC('C', 1, "0/100"));
  ASSERT_TRUE(h.errors.empty());
  ASSERT_EQ(h.committed.size(), 1u);
  EXPECT_TRUE(h.committed[0].overflowed);
  EXPECT_TRUE(h.committed[0].changes.empty());
  EXPECT_EQ(h.committed[0].bytes, 0u);
  EXPECT_EQ(h.committed[0].commit_lsn, 0x100u);
  EXPECT_EQ(h.assembler().last_commit_lsn(), 0x100u);
  // What it changed is kept, so that only those watches must relist: the
  // rows kept before the overflow count, and those after it.
  const std::set<std::array<std::string, 4>> pods_c1 = {
      {"", "v1", "pods", "c1"}};
  EXPECT_EQ(h.committed[0].touched, pods_c1);
  EXPECT_FALSE(h.committed[0].touched_unknown);

  // Exactly at the limit is fine, and the next transaction starts clean.
  h.Feed(BC('B', 2, "0/200"));
  h.Feed(Row('I', 2, "0/110", "a"));
  h.Feed(Row('I', 2, "0/120", "b"));
  h.Feed(BC('C', 2, "0/200"));
  ASSERT_EQ(h.committed.size(), 2u);
  EXPECT_FALSE(h.committed[1].overflowed);
  EXPECT_TRUE(h.committed[1].touched.empty());
  EXPECT_EQ(h.committed[1].changes.size(), 2u);
  EXPECT_EQ(h.committed[1].bytes, 2 * row);
}

TEST(TransactionAssembler, OverflowOnTheCapturesBigObject) {
  AssemblerHarness h(10000);
  h.FeedAll(ReadCaptureLines());
  ASSERT_TRUE(h.errors.empty());
  ASSERT_EQ(h.committed.size(), 9u);
  for (const Transaction& t : h.committed) {
    SCOPED_TRACE("xid " + std::to_string(t.xid));
    // 750 (big new object), 751 (big old object in identity), 753 (big old
    // row) do not fit; the rest do.
    bool big = t.xid == 750 || t.xid == 751 || t.xid == 753;
    EXPECT_EQ(t.overflowed, big);
    if (big) {
      EXPECT_TRUE(t.changes.empty());
      EXPECT_EQ(t.bytes, 0u);
    }
    EXPECT_LE(t.bytes, 10000u);
  }
  EXPECT_EQ(h.committed[6].changes.size(), 2u);  // 752 fits
}

// The bound is on memory (DESIGN.md "Memory"): what kept changes hold must
// stay within max_transaction_bytes, as Event::MemoryBytes counts for the
// log. Each kept RowChange holds two RowImages of nine std::strings, and the
// decoder reserves SIMDJSON_PADDING (64) extra bytes in every string value.
// What a transaction holds in memory (its changes' array, slack included,
// and their strings' heap buffers) stays within the bound, both when it
// fits and as it approaches the bound; past the bound it holds nothing.
TEST(TransactionAssembler, BoundCountsTheMemoryChangesHold) {
  const size_t kMax = 64 * 1024;
  auto held_by = [](const Transaction& t) {
    size_t held = t.changes.capacity() * sizeof(RowChange);
    for (const auto& c : t.changes) {
      for (const RowImage* img : {&c.columns, &c.identity}) {
        for (const auto& f : img->fields) {
          // Heap buffers only (libstdc++ keeps up to 15 bytes inline).
          if (f.text.capacity() > 15) held += f.text.capacity() + 1;
        }
      }
    }
    return held;
  };
  size_t largest_kept = 0;
  for (int rows : {1, 10, 30, 45, 50, 55, 60, 70, 1000}) {
    SCOPED_TRACE(rows);
    AssemblerHarness h(kMax);
    h.Feed(BC('B', 1, "0/100000"));
    for (int i = 0; i < rows; ++i) {
      h.Feed(Row('I', 1, "0/10", "r" + std::to_string(i)));
    }
    h.Feed(BC('C', 1, "0/100000"));
    ASSERT_EQ(h.committed.size(), 1u);
    const Transaction& t = h.committed[0];
    if (t.overflowed) {
      EXPECT_TRUE(t.changes.empty());
      continue;
    }
    EXPECT_EQ(t.changes.size(), static_cast<size_t>(rows));
    largest_kept = std::max(largest_kept, t.changes.size());
    EXPECT_LE(held_by(t), kMax) << "bytes counted: " << t.bytes;
  }
  // Both branches ran: some kept close to the bound, 1000 rows overflowed.
  EXPECT_GE(largest_kept, 30u);
  EXPECT_LT(largest_kept, 1000u);
}

}  // namespace
}  // namespace walwatch
