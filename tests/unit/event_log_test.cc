#include "watchserver/event_log.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace walwatch {
namespace {

constexpr size_t kBig = size_t{1} << 30;

// One transaction's events as the EventBuilder makes them: all but the last
// carry commit - 1, the last carries the commit. `id` numbers the events so
// that readers can check order; it goes into commit_time_us unless a
// transaction time is given.
struct TxnMaker {
  uint64_t prev = 0;
  int64_t next_id = 0;

  std::vector<EventPtr> Make(uint64_t commit, size_t n, size_t wire_bytes = 100,
                             int64_t commit_time_us = -1) {
    std::vector<EventPtr> out;
    for (size_t i = 0; i < n; ++i) {
      Event::Strings strings;
      std::string name = std::to_string(next_id);
      strings.name = name;
      auto e = Event::Make(strings, std::string(wire_bytes, 'x'));
      e->last_in_txn = i + 1 == n;
      e->rv = e->last_in_txn ? commit : commit - 1;
      e->commit_lsn = commit;
      e->commit_time_us = commit_time_us >= 0 ? commit_time_us : next_id;
      ++next_id;
      out.push_back(std::move(e));
    }
    prev = commit;
    return out;
  }
};

size_t BytesOf(const std::vector<EventPtr>& events) {
  size_t n = 0;
  for (const auto& e : events) n += e->MemoryBytes();
  return n;
}

std::vector<EventPtr> ReadAll(const EventLog& log, uint64_t seq) {
  std::vector<EventPtr> out;
  EXPECT_EQ(log.Read(seq, 1 << 20, &out), EventLog::ReadStatus::kOk);
  return out;
}

std::vector<std::string> Names(const std::vector<EventPtr>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.emplace_back(e->name());
  return out;
}

using NameList = std::vector<std::string>;

TEST(EventLog, EmptyLog) {
  EventLog log(kBig, 500);
  EXPECT_EQ(log.floor_rv(), 500u);
  EXPECT_EQ(log.current_rv(), 500u);
  EXPECT_EQ(log.first_seq(), 0u);
  EXPECT_EQ(log.tail_seq(), 0u);
  auto s = log.Seek(500);
  EXPECT_EQ(s.status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(s.seq, 0u);
  EXPECT_EQ(log.Seek(499).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(0).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(10000).seq, 0u);
  EXPECT_TRUE(ReadAll(log, 0).empty());
  EXPECT_EQ(log.OldestCommitSince(0), 0u);
  auto st = log.GetStats();
  EXPECT_EQ(st.events, 0u);
  EXPECT_EQ(st.bytes, 0u);
  EXPECT_EQ(st.oldest_rv, 500u);
}

// Three transactions: T1 (commit 100, 1 event), T2 (200, 3 events), T3 (300,
// 1 event), after floor 50. Seqs: T1 = 0, T2 = 1..3, T3 = 4.
class EventLogTest : public ::testing::Test {
 protected:
  EventLogTest() : log_(kBig, 50) {
    maker_.prev = 50;
    EXPECT_EQ(log_.AppendTransaction(100, maker_.Make(100, 1)),
              EventLog::AppendResult::kAppended);
    EXPECT_EQ(log_.AppendTransaction(200, maker_.Make(200, 3)),
              EventLog::AppendResult::kAppended);
    EXPECT_EQ(log_.AppendTransaction(300, maker_.Make(300, 1)),
              EventLog::AppendResult::kAppended);
  }
  EventLog log_;
  TxnMaker maker_;
};

TEST_F(EventLogTest, AppendAndRead) {
  EXPECT_EQ(log_.first_seq(), 0u);
  EXPECT_EQ(log_.tail_seq(), 5u);
  EXPECT_EQ(log_.current_rv(), 300u);
  EXPECT_EQ(log_.floor_rv(), 50u);
  auto all = ReadAll(log_, 0);
  EXPECT_EQ(Names(all), (NameList{"0", "1", "2", "3", "4"}));
  const uint64_t rvs[] = {100, 199, 199, 200, 300};
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i]->rv, rvs[i]) << i;

  std::vector<EventPtr> some;
  EXPECT_EQ(log_.Read(2, 2, &some), EventLog::ReadStatus::kOk);
  EXPECT_EQ(Names(some), (NameList{"2", "3"}));
  // Read appends.
  EXPECT_EQ(log_.Read(4, 10, &some), EventLog::ReadStatus::kOk);
  EXPECT_EQ(Names(some), (NameList{"2", "3", "4"}));
  // At the tail: OK and nothing.
  std::vector<EventPtr> none;
  EXPECT_EQ(log_.Read(5, 10, &none), EventLog::ReadStatus::kOk);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(log_.Read(0, 0, &none), EventLog::ReadStatus::kOk);
  EXPECT_TRUE(none.empty());

  auto st = log_.GetStats();
  EXPECT_EQ(st.events, 5u);
  EXPECT_EQ(st.bytes, BytesOf(all));
  EXPECT_EQ(st.oldest_rv, 100u);
  EXPECT_EQ(st.evicted_transactions, 0u);
  EXPECT_EQ(st.barriers, 0u);
}

TEST_F(EventLogTest, SeekFloorAndBelow) {
  EXPECT_EQ(log_.Seek(49).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log_.Seek(0).status, EventLog::SeekStatus::kExpired);
  auto s = log_.Seek(50);
  EXPECT_EQ(s.status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(s.seq, 0u);
  EXPECT_EQ(log_.Seek(99).seq, 0u);
}

TEST_F(EventLogTest, ResumeFromNonLastRvRedeliversItsTransaction) {
  // A watcher that saw event seq 1 or 2 (rv 100, inside T2) was cut off
  // inside T2: it gets T2 again, whole.
  auto all = ReadAll(log_, 0);
  ASSERT_FALSE(all[1]->last_in_txn);
  auto s = log_.Seek(all[1]->rv);
  EXPECT_EQ(s.status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(s.seq, 1u);
  EXPECT_EQ(Names(ReadAll(log_, s.seq)), (NameList{"1", "2", "3", "4"}));
  EXPECT_EQ(log_.Seek(all[2]->rv).seq, 1u);
  // Between commits: the first transaction committing after it.
  EXPECT_EQ(log_.Seek(150).seq, 1u);
  EXPECT_EQ(log_.Seek(199).seq, 1u);
}

TEST_F(EventLogTest, ResumeFromLastRvGivesTheNextTransaction) {
  auto all = ReadAll(log_, 0);
  ASSERT_TRUE(all[3]->last_in_txn);
  auto s = log_.Seek(all[3]->rv);  // 200
  EXPECT_EQ(s.status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(s.seq, 4u);
  EXPECT_EQ(Names(ReadAll(log_, s.seq)), (NameList{"4"}));
  EXPECT_EQ(log_.Seek(300).seq, 5u);  // up to date
  EXPECT_EQ(log_.Seek(250).seq, 4u);
  EXPECT_EQ(log_.Seek(100).seq, 1u);
  // Beyond the current RV (a client from the future): the tail.
  EXPECT_EQ(log_.Seek(1000).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log_.Seek(1000).seq, 5u);
}

TEST_F(EventLogTest, AdvanceCurrentRv) {
  log_.AdvanceCurrentRv(350);
  EXPECT_EQ(log_.current_rv(), 350u);
  log_.AdvanceCurrentRv(320);  // never backwards
  EXPECT_EQ(log_.current_rv(), 350u);
  EXPECT_EQ(log_.tail_seq(), 5u);
  // A resume from an RV that only an empty transaction had is fine.
  EXPECT_EQ(log_.Seek(350).seq, 5u);
  // The next transaction's non-last events carry 350.
  maker_.prev = 350;
  log_.AppendTransaction(400, maker_.Make(400, 2));
  EXPECT_EQ(log_.Seek(350).seq, 5u);
  EXPECT_EQ(Names(ReadAll(log_, 5)), (NameList{"5", "6"}));
}

TEST(EventLog, EvictionDropsWholeTransactions) {
  TxnMaker maker;
  maker.prev = 10;
  auto t1 = maker.Make(100, 1);
  auto t2 = maker.Make(200, 2);
  auto t3 = maker.Make(300, 1);
  auto t4 = maker.Make(400, 1);
  const size_t one = t1[0]->MemoryBytes();
  ASSERT_EQ(t2[0]->MemoryBytes(), one);
  // Room for three events.
  EventLog log(3 * one + one / 2, 10);
  log.AppendTransaction(100, t1);
  log.AppendTransaction(200, t2);
  EXPECT_EQ(log.GetStats().events, 3u);
  EXPECT_EQ(log.floor_rv(), 10u);

  // T3 needs one event's room: T1 goes, floor moves to T1's commit.
  log.AppendTransaction(300, t3);
  EXPECT_EQ(log.first_seq(), 1u);
  EXPECT_EQ(log.tail_seq(), 4u);
  EXPECT_EQ(log.floor_rv(), 100u);
  EXPECT_EQ(log.GetStats().evicted_transactions, 1u);
  std::vector<EventPtr> out;
  EXPECT_EQ(log.Read(0, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(log.Seek(99).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(100).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(100).seq, 1u);

  // T4 needs one event's room, but T2 has two: both go, never half of it.
  log.AppendTransaction(400, t4);
  EXPECT_EQ(log.first_seq(), 3u);
  EXPECT_EQ(log.tail_seq(), 5u);
  EXPECT_EQ(log.floor_rv(), 200u);
  EXPECT_EQ(Names(ReadAll(log, 3)), (NameList{"3", "4"}));
  EXPECT_EQ(log.Read(1, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log.Read(2, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_TRUE(out.empty());
  // A watcher cut off inside T2 (rv 100) can no longer get T2 whole.
  EXPECT_EQ(log.Seek(100).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(200).seq, 3u);
  auto st = log.GetStats();
  EXPECT_EQ(st.events, 2u);
  EXPECT_EQ(st.bytes, 2 * one);
  EXPECT_EQ(st.evicted_transactions, 2u);
  EXPECT_EQ(st.oldest_rv, 300u);
  EXPECT_LE(st.bytes, 3 * one + one / 2);
}

// An event of `resource` in `cluster`, one of a transaction of `n` at
// `commit` (the last one if i + 1 == n).
EventPtr EventOf(const std::string& resource, const std::string& cluster,
                 uint64_t commit, size_t i, size_t n) {
  Event::Strings strings;
  strings.group = "g";
  strings.version = "v1";
  strings.resource = resource;
  strings.cluster = cluster;
  std::string name = resource + "@" + std::to_string(commit) + "." +
                     std::to_string(i);
  strings.name = name;
  auto e = Event::Make(strings, std::string(100, 'x'));
  e->last_in_txn = i + 1 == n;
  e->rv = e->last_in_txn ? commit : commit - 1;
  e->commit_lsn = commit;
  e->commit_time_us = static_cast<int64_t>(commit);
  return e;
}

// A transaction larger than the log (a cluster's removal: thousands of
// DELETEs) ends only the watches of what it changed.
TEST(EventLog, TooLargeTransactionEndsOnlyTheWatchesItTouches) {
  const std::string pods = EventLog::ResourceKey("g", "v1", "pods");
  const std::string nodes = EventLog::ResourceKey("g", "v1", "nodes");
  auto probe = EventOf("pods", "a", 100, 0, 1);
  const size_t one = probe->MemoryBytes() + probe->fields()->MemoryBytes();
  EventLog log(3 * one, 10);
  log.AppendTransaction(100, {EventOf("pods", "a", 100, 0, 1)});
  log.AppendTransaction(110, {EventOf("nodes", "a", 110, 0, 1)});
  const uint64_t reader = log.tail_seq();  // watchers at the tail
  int woken = 0;
  auto owner = std::make_shared<int>(0);
  log.WaitForAppendOf(reader, pods, owner, [&] { ++woken; });

  std::vector<EventPtr> removal;
  for (size_t i = 0; i < 5; ++i) removal.push_back(EventOf("pods", "b", 200, i, 5));
  EXPECT_EQ(log.AppendTransaction(200, removal),
            EventLog::AppendResult::kTooLarge);
  EXPECT_EQ(woken, 1);  // its watchers learn of it at once
  EXPECT_EQ(log.current_rv(), 200u);
  EXPECT_EQ(log.GetStats().barriers, 0u);
  EXPECT_EQ(log.GetStats().events, 3u);  // the two, and its placeholder
  std::vector<EventPtr> out;
  std::vector<uint64_t> seqs;
  auto status = [&](uint64_t seq, const EventLog::Selection& s) {
    return log.ReadForWatch(seq, s, 10, &out, &seqs).status;
  };
  using RS = EventLog::ReadStatus;
  // Every-cluster pods and cluster b's pods watches behind it end...
  EXPECT_EQ(status(reader, {pods, ""}), RS::kExpired);
  EXPECT_EQ(status(reader, {pods, "b"}), RS::kExpired);
  EXPECT_EQ(log.Seek(110, {pods, ""}).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(199, {pods, "b"}).status,
            EventLog::SeekStatus::kExpired);
  // ...cluster a's pods and the nodes watches go on, and resume.
  EXPECT_EQ(status(reader, {pods, "a"}), RS::kOk);
  EXPECT_EQ(status(reader, {nodes, ""}), RS::kOk);
  out.clear();
  EXPECT_EQ(status(0, {nodes, ""}), RS::kOk);
  ASSERT_EQ(out.size(), 1u);  // the placeholder is nobody's event
  EXPECT_EQ(out[0]->commit_lsn, 110u);
  EXPECT_EQ(log.Seek(110, {pods, "a"}).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(100, {nodes, ""}).status, EventLog::SeekStatus::kOk);
  // From its commit on, everyone is fine; a bookmark after it carries it.
  EXPECT_EQ(log.Seek(200, {pods, ""}).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(200, {pods, ""}).seq, log.tail_seq());
  EXPECT_EQ(status(log.tail_seq(), {pods, ""}), RS::kOk);
  EXPECT_EQ(log.ResumeRvAt(log.tail_seq()), 200u);

  // The log goes on after it.
  EXPECT_EQ(log.AppendTransaction(300, {EventOf("pods", "b", 300, 0, 1)}),
            EventLog::AppendResult::kAppended);
  out.clear();
  log.ReadForWatch(log.Seek(200, {pods, ""}).seq, {pods, ""}, 10, &out, &seqs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->commit_lsn, 300u);
  // Its placeholder is evicted like any transaction, and takes nothing with
  // it that a watch could miss.
  for (uint64_t c = 310; c < 360; c += 10) {
    log.AppendTransaction(c, {EventOf("nodes", "a", c, 0, 1)});
  }
  EXPECT_GT(log.first_seq(), 2u);
  EXPECT_EQ(log.Seek(200, {pods, "a"}).status, EventLog::SeekStatus::kOk);
}

// Without resources (rows that lack the columns), a loss is a barrier.
TEST(EventLog, ALossOfNothingKnownIsABarrier) {
  TxnMaker maker;
  EventLog log(kBig, 10);
  log.AppendTransaction(100, maker.Make(100, 1));
  const uint64_t reader = log.tail_seq();
  log.AppendLoss(200, 7, 0, {});
  EXPECT_EQ(log.GetStats().barriers, 1u);
  EXPECT_EQ(log.floor_rv(), 200u);
  std::vector<EventPtr> out;
  EXPECT_EQ(log.Read(reader, 10, &out), EventLog::ReadStatus::kExpired);
}

TEST_F(EventLogTest, BarrierExpiresEvenAReaderAtTheTail) {
  const uint64_t tail = log_.tail_seq();
  int woken = 0;
  log_.WaitForAppend(tail, [&] { ++woken; });
  log_.AppendBarrier(350);
  EXPECT_EQ(woken, 1);
  EXPECT_GT(log_.first_seq(), tail);
  EXPECT_EQ(log_.tail_seq(), log_.first_seq());
  EXPECT_EQ(log_.floor_rv(), 350u);
  EXPECT_EQ(log_.current_rv(), 350u);
  std::vector<EventPtr> out;
  EXPECT_EQ(log_.Read(tail, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log_.Read(0, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(log_.Seek(300).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log_.Seek(349).status, EventLog::SeekStatus::kExpired);
  auto s = log_.Seek(350);
  EXPECT_EQ(s.status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(s.seq, log_.tail_seq());
  auto st = log_.GetStats();
  EXPECT_EQ(st.events, 0u);
  EXPECT_EQ(st.bytes, 0u);
  EXPECT_EQ(st.barriers, 1u);
  EXPECT_EQ(st.oldest_rv, 350u);

  // A watcher that resumed at the barrier gets what follows.
  maker_.prev = 350;
  log_.AppendTransaction(400, maker_.Make(400, 2));
  EXPECT_EQ(Names(ReadAll(log_, s.seq)), (NameList{"5", "6"}));
  EXPECT_EQ(ReadAll(log_, s.seq)[0]->rv, 399u);
}

TEST(EventLog, BarrierOnEmptyLogExpiresTheTail) {
  EventLog log(kBig, 10);
  log.AppendBarrier(20);
  EXPECT_EQ(log.first_seq(), 1u);
  std::vector<EventPtr> out;
  EXPECT_EQ(log.Read(0, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log.Seek(10).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(20).seq, 1u);
}

TEST_F(EventLogTest, WaitForAppendFiresAtOnceWhenDataIsThere) {
  int woken = 0;
  log_.WaitForAppend(0, [&] { ++woken; });
  EXPECT_EQ(woken, 1);
  log_.WaitForAppend(4, [&] { ++woken; });
  EXPECT_EQ(woken, 2);
  // An appended event or barrier does not call it again.
  log_.AppendTransaction(400, maker_.Make(400, 1));
  log_.AppendBarrier(500);
  EXPECT_EQ(woken, 2);
}

// One event of `resource` (group "g", version "v1") in its own transaction.
std::vector<EventPtr> OneOf(const std::string& resource, uint64_t commit,
                            uint64_t prev) {
  Event::Strings strings;
  strings.group = "g";
  strings.version = "v1";
  strings.resource = resource;
  std::string name = resource + "@" + std::to_string(commit);
  strings.name = name;
  auto e = Event::Make(strings, std::string(100, 'x'));
  e->rv = commit;
  e->commit_lsn = commit;
  e->last_in_txn = true;
  (void)prev;
  return {e};
}

// What one event of OneOf costs the log: itself and its filter fields, which
// it shares with nobody.
size_t ChargedBytes(const EventPtr& e) {
  return e->MemoryBytes() + e->fields()->MemoryBytes();
}

TEST(EventLog, WaitForAppendOfWakesOnlyForItsResource) {
  EventLog log(kBig, 10);
  const std::string pods = EventLog::ResourceKey("g", "v1", "pods");
  auto owner = std::make_shared<int>(0);
  int woken = 0;
  log.WaitForAppendOf(log.tail_seq(), pods, owner, [&] { ++woken; });
  log.AppendTransaction(20, OneOf("nodes", 20, 10));
  log.AppendTransaction(30, OneOf("nodes", 30, 20));
  EXPECT_EQ(woken, 0);
  // Its cursor (0) may step over the other resource's events...
  EXPECT_EQ(log.SkipOtherResources(0, {pods, ""}), 2u);
  log.AppendTransaction(40, OneOf("pods", 40, 30));
  EXPECT_EQ(woken, 1);
  // ...up to its own next event, never over it.
  EXPECT_EQ(log.SkipOtherResources(0, {pods, ""}), 2u);
  EXPECT_EQ(log.SkipOtherResources(2, {pods, ""}), 2u);
  EXPECT_EQ(log.SkipOtherResources(3, {pods, ""}), 3u);  // the tail

  // Batched appends wake once, at EndBatch.
  log.WaitForAppendOf(log.tail_seq(), pods, owner, [&] { ++woken; });
  log.BeginBatch();
  log.AppendTransaction(50, OneOf("pods", 50, 40));
  EXPECT_EQ(woken, 1);
  log.EndBatch();
  EXPECT_EQ(woken, 2);
}

// A transaction at or below the current RV is refused, not appended (in
// release builds too): appended, it would break the order Seek relies on.
TEST(EventLog, ATransactionBelowTheCurrentRvIsRefused) {
  EventLog log(kBig, 10);
  ASSERT_EQ(log.AppendTransaction(20, OneOf("pods", 20, 10)),
            EventLog::AppendResult::kAppended);
  log.AdvanceCurrentRv(30);
  for (uint64_t lsn : {20u, 25u, 30u}) {
    EXPECT_EQ(log.AppendTransaction(lsn, OneOf("pods", lsn, 10)),
              EventLog::AppendResult::kOutOfOrder)
        << lsn;
  }
  EXPECT_EQ(log.tail_seq(), 1u);
  EXPECT_EQ(log.current_rv(), 30u);
  EXPECT_EQ(log.AppendTransaction(31, OneOf("pods", 31, 30)),
            EventLog::AppendResult::kAppended);
  EXPECT_EQ(log.tail_seq(), 2u);
}

TEST(EventLog, ABatchBecomesReadableWholeAtEndBatch) {
  EventLog log(kBig, 10);
  const std::string pods = EventLog::ResourceKey("g", "v1", "pods");
  auto owner = std::make_shared<int>(0);
  log.AppendTransaction(20, OneOf("pods", 20, 10));  // seq 0
  log.BeginBatch();
  log.AppendTransaction(30, OneOf("pods", 30, 20));  // seq 1
  log.AppendTransaction(40, OneOf("pods", 40, 30));  // seq 2
  EXPECT_EQ(log.tail_seq(), 3u);
  EXPECT_EQ(log.current_rv(), 40u);
  // A watcher awake mid-batch (its write just ended) reads up to the batch
  // and no further...
  std::vector<EventPtr> out;
  EXPECT_EQ(log.Read(0, 10, &out), EventLog::ReadStatus::kOk);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->rv, 20u);
  out.clear();
  std::vector<uint64_t> seqs;
  EventLog::WatchRead read = log.ReadForWatch(1, {pods, ""}, 10, &out, &seqs);
  EXPECT_EQ(read.status, EventLog::ReadStatus::kOk);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(read.next_seq, 1u);
  // ...and where it stops is where it waits, woken when the batch ends.
  int woken = 0;
  log.WaitForAppendOf(1, pods, owner, [&] { ++woken; });
  log.WaitForAppend(1, [&] { ++woken; });
  EXPECT_EQ(woken, 0);
  // Bookmarks mid-batch never claim the unreadable events...
  EXPECT_EQ(log.ResumeRvAt(1), 20u);
  // ...but Seek finds them (what the replay window keeps unconfirmed).
  EventLog::SeekResult seek = log.Seek(20);
  EXPECT_EQ(seek.status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(seek.seq, 1u);
  EXPECT_EQ(seek.commit_lsn, 30u);
  EXPECT_EQ(log.Seek(40).commit_lsn, 0u);  // nothing after it
  log.EndBatch();
  EXPECT_EQ(woken, 2);
  out.clear();
  EXPECT_EQ(log.Read(1, 10, &out), EventLog::ReadStatus::kOk);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]->rv, 30u);
  EXPECT_EQ(out[1]->rv, 40u);

  // A barrier in a batch ends cursors behind it at once; at the tail they
  // wait for the batch's end.
  log.BeginBatch();
  log.AppendTransaction(50, OneOf("pods", 50, 40));  // seq 3
  log.AppendBarrier(60);                             // seq 4, gone at once
  log.AppendTransaction(70, OneOf("pods", 70, 60));  // seq 5
  out.clear();
  EXPECT_EQ(log.Read(3, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log.Read(5, 10, &out), EventLog::ReadStatus::kOk);
  EXPECT_TRUE(out.empty());
  log.WaitForAppendOf(5, pods, owner, [&] { ++woken; });
  EXPECT_EQ(woken, 2);
  log.EndBatch();
  EXPECT_EQ(woken, 3);
  EXPECT_EQ(log.Read(5, 10, &out), EventLog::ReadStatus::kOk);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->rv, 70u);
}

// EndBatch reports the watches of the resources the batch appended to
// (the replication loop's wake hold grows with them).
TEST(EventLog, EndBatchCountsTheWatchesOfWhatItAppended) {
  EventLog log(kBig, 10);
  const std::string pods = EventLog::ResourceKey("g", "v1", "pods");
  const std::string nodes = EventLog::ResourceKey("g", "v1", "nodes");
  for (int i = 0; i < 3; ++i) log.AddWatcher(pods);
  log.AddWatcher(nodes);
  log.BeginBatch();
  EXPECT_EQ(log.EndBatch(), 0u);  // nothing appended
  log.BeginBatch();
  log.AppendTransaction(20, OneOf("pods", 20, 10));
  log.AppendTransaction(30, OneOf("pods", 30, 20));
  EXPECT_EQ(log.EndBatch(), 3u);  // each watch once, however many events
  log.BeginBatch();
  log.AppendTransaction(40, OneOf("pods", 40, 30));
  log.AppendTransaction(50, OneOf("nodes", 50, 40));
  log.AppendTransaction(60, OneOf("services", 60, 50));  // watched by none
  EXPECT_EQ(log.EndBatch(), 4u);
  log.RemoveWatcher(pods);
  // Removing a watch never added changes nothing.
  log.RemoveWatcher(EventLog::ResourceKey("g", "v1", "services"));
  log.BeginBatch();
  log.AppendTransaction(70, OneOf("pods", 70, 60));
  EXPECT_EQ(log.EndBatch(), 2u);
  // A barrier concerns every watch.
  log.BeginBatch();
  log.AppendBarrier(80);
  EXPECT_EQ(log.EndBatch(), 3u);
  log.RemoveWatcher(nodes);
  log.RemoveWatcher(pods);
  log.RemoveWatcher(pods);
  log.BeginBatch();
  log.AppendTransaction(90, OneOf("pods", 90, 80));
  EXPECT_EQ(log.EndBatch(), 0u);
}

TEST(EventLog, SkipOtherResourcesNeverSkipsABarrierNorAnEvictedOwnEvent) {
  // Room for two events of "nodes" (the larger: events count their exact
  // string sizes), not three.
  auto one = ChargedBytes(OneOf("nodes", 30, 20)[0]);
  EventLog log(2 * one, 10);
  const std::string pods = EventLog::ResourceKey("g", "v1", "pods");
  log.AppendTransaction(20, OneOf("pods", 20, 10));    // seq 0
  log.AppendTransaction(30, OneOf("nodes", 30, 20));   // seq 1
  log.AppendTransaction(40, OneOf("nodes", 40, 30));   // seq 2, evicts 0
  log.AppendTransaction(50, OneOf("nodes", 50, 40));   // seq 3, evicts 1
  EXPECT_EQ(log.first_seq(), 2u);
  // A cursor at 1 is behind the log, but only other resources' events were
  // evicted: it continues at the tail rather than with 410.
  EXPECT_EQ(log.SkipOtherResources(1, {pods, ""}), 4u);
  // A cursor at 0 missed its own event: it stays, and Read says Expired.
  EXPECT_EQ(log.SkipOtherResources(0, {pods, ""}), 0u);

  int woken = 0;
  auto owner = std::make_shared<int>(0);
  log.WaitForAppendOf(4, pods, owner, [&] { ++woken; });
  log.AppendBarrier(60);
  EXPECT_EQ(woken, 1);  // a barrier wakes every resource's waiters
  EXPECT_EQ(log.SkipOtherResources(4, {pods, ""}), 4u);
  std::vector<EventPtr> out;
  EXPECT_EQ(log.Read(4, 10, &out), EventLog::ReadStatus::kExpired);
  std::vector<uint64_t> seqs;
  EXPECT_EQ(log.ReadForWatch(4, {pods, ""}, 10, &out, &seqs).status,
            EventLog::ReadStatus::kExpired);
}

// ReadForWatch reads the watch's own resource only, through its index: it
// expires only for a lost event of its own, and its backlog is its own.
TEST(EventLog, ReadForWatchReadsItsOwnResourceAndItsOwnBacklog) {
  auto one = ChargedBytes(OneOf("nodes", 30, 20)[0]);
  EventLog log(2 * one, 10);
  const EventLog::Selection pods{EventLog::ResourceKey("g", "v1", "pods"), ""};
  const EventLog::Selection nodes{EventLog::ResourceKey("g", "v1", "nodes"),
                                  ""};
  log.AppendTransaction(20, OneOf("pods", 20, 10));   // seq 0
  log.AppendTransaction(30, OneOf("nodes", 30, 20));  // seq 1
  log.AppendTransaction(40, OneOf("nodes", 40, 30));  // seq 2, evicts 0
  log.AppendTransaction(50, OneOf("pods", 50, 40));   // seq 3, evicts 1

  std::vector<EventPtr> out;
  std::vector<uint64_t> seqs;
  // A nodes watch at 1 lost its own evicted event: Expired, not skipped.
  EventLog::WatchRead read = log.ReadForWatch(1, nodes, 10, &out, &seqs);
  EXPECT_EQ(read.status, EventLog::ReadStatus::kExpired);
  EXPECT_TRUE(out.empty());
  // A pods watch at 1 lost only a nodes event: it reads its own at 3.
  read = log.ReadForWatch(1, pods, 10, &out, &seqs);
  EXPECT_EQ(read.status, EventLog::ReadStatus::kOk);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->commit_lsn, 50u);
  EXPECT_EQ(seqs, std::vector<uint64_t>{3});
  EXPECT_EQ(read.next_seq, 4u);
  EXPECT_EQ(read.backlog_bytes, out[0]->MemoryBytes());
  // A nodes watch at 2 reads nodes only, and goes past pods to the tail.
  out.clear();
  seqs.clear();
  read = log.ReadForWatch(2, nodes, 10, &out, &seqs);
  EXPECT_EQ(read.status, EventLog::ReadStatus::kOk);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->commit_lsn, 40u);
  EXPECT_EQ(read.next_seq, 4u);
  EXPECT_EQ(read.backlog_bytes, out[0]->MemoryBytes());
  EXPECT_LT(read.backlog_bytes, log.BacklogBytes(2));  // not pods' bytes

  out.clear();
  seqs.clear();
  log.AppendTransaction(60, OneOf("nodes", 60, 50));  // seq 4, evicts 2
  read = log.ReadForWatch(4, pods, 10, &out, &seqs);
  EXPECT_EQ(read.status, EventLog::ReadStatus::kOk);
  EXPECT_EQ(read.next_seq, 5u);  // past the nodes event: at the tail
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(read.backlog_bytes, 0u);
}

TEST(EventLog, ReadForWatchStopsAtMaxEventsOnItsOwnNextEvent) {
  EventLog log(kBig, 10);
  const EventLog::Selection pods{EventLog::ResourceKey("g", "v1", "pods"), ""};
  uint64_t c = 20;
  for (int i = 0; i < 3; ++i) {
    log.AppendTransaction(c, OneOf("pods", c, c - 10));  // 0, 3, 6
    c += 10;
    log.AppendTransaction(c, OneOf("nodes", c, c - 10));
    c += 10;
    log.AppendTransaction(c, OneOf("nodes", c, c - 10));
    c += 10;
  }
  std::vector<EventPtr> out;
  std::vector<uint64_t> seqs;
  EventLog::WatchRead read = log.ReadForWatch(1, pods, 1, &out, &seqs);
  EXPECT_EQ(seqs, std::vector<uint64_t>{3});
  EXPECT_EQ(read.next_seq, 6u);  // its next own event
  EXPECT_EQ(read.backlog_bytes, 2 * out[0]->MemoryBytes());
  read = log.ReadForWatch(read.next_seq, pods, 5, &out, &seqs);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{3, 6}));
  EXPECT_EQ(read.next_seq, log.tail_seq());
}

// Clusterpedia keeps every resource in one table: a hot resource's churn
// must not expire a quiet one's watchers, nor their resumes.
TEST(EventLog, AHotResourceDoesNotExpireAQuietOnesWatchOrResume) {
  auto one = ChargedBytes(OneOf("pods", 30, 20)[0]);
  EventLog log(4 * one, 10);
  const EventLog::Selection deployments{
      EventLog::ResourceKey("g", "v1", "deployments"), ""};
  const EventLog::Selection pods{EventLog::ResourceKey("g", "v1", "pods"), ""};
  log.AppendTransaction(20, OneOf("deployments", 20, 10));  // seq 0
  // The deployments watch received it: its cursor is at 1, its RV 20.
  uint64_t c = 30;
  for (int i = 0; i < 100; ++i, c += 10) {
    log.AppendTransaction(c, OneOf("pods", c, c - 10));
  }
  ASSERT_GT(log.first_seq(), 50u);  // pods' churn evicted deployments' event
  EXPECT_GT(log.floor_rv(), 20u);
  std::vector<EventPtr> out;
  std::vector<uint64_t> seqs;
  EventLog::WatchRead read = log.ReadForWatch(1, deployments, 10, &out, &seqs);
  EXPECT_EQ(read.status, EventLog::ReadStatus::kOk);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(read.next_seq, log.tail_seq());
  EXPECT_EQ(read.backlog_bytes, 0u);
  // Its bookmark moves with the stream.
  EXPECT_EQ(log.ResumeRvAt(read.next_seq), log.current_rv());
  // A resume from its last RV is exact; from before its event, too old.
  EXPECT_EQ(log.FloorRv(deployments), 20u);
  EXPECT_EQ(log.Seek(20, deployments).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(20, deployments).seq, log.first_seq());
  EXPECT_EQ(log.Seek(19, deployments).status,
            EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(20).status, EventLog::SeekStatus::kExpired);
  // The pods watch that fell behind is expired, as it should be.
  EXPECT_EQ(log.ReadForWatch(1, pods, 10, &out, &seqs).status,
            EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log.Seek(20, pods).status, EventLog::SeekStatus::kExpired);
  // A deployments event wakes the stream as usual.
  log.AppendTransaction(c, OneOf("deployments", c, c - 10));
  read = log.ReadForWatch(1, deployments, 10, &out, &seqs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->commit_lsn, c);
  // A barrier still ends everyone.
  log.AppendBarrier(c + 10);
  EXPECT_EQ(log.ReadForWatch(log.tail_seq() - 1, deployments, 10, &out, &seqs)
                .status,
            EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log.FloorRv(deployments), c + 10);
}

// The floors of a watch of one cluster are the pair's: another cluster's
// evictions of the same resource leave it alone.
TEST(EventLog, AWatchOfOneClusterHasTheFloorOfItsPair) {
  auto make = [](const std::string& cluster, uint64_t commit) {
    Event::Strings strings;
    strings.group = "g";
    strings.version = "v1";
    strings.resource = "pods";
    strings.cluster = cluster;
    std::string name = cluster + "@" + std::to_string(commit);
    strings.name = name;
    auto e = Event::Make(strings, std::string(100, 'x'));
    e->rv = commit;
    e->commit_lsn = commit;
    e->last_in_txn = true;
    return std::vector<EventPtr>{e};
  };
  auto one = make("a", 20)[0];
  EventLog log(4 * (one->MemoryBytes() + one->fields()->MemoryBytes()), 10);
  const std::string key = EventLog::ResourceKey("g", "v1", "pods");
  log.AppendTransaction(20, make("a", 20));
  uint64_t c = 30;
  for (int i = 0; i < 20; ++i, c += 10) log.AppendTransaction(c, make("b", c));
  std::vector<EventPtr> out;
  std::vector<uint64_t> seqs;
  // Cluster a's watch at 1 lost nothing of its own; every-cluster's did.
  EXPECT_EQ(log.ReadForWatch(1, {key, "a"}, 10, &out, &seqs).status,
            EventLog::ReadStatus::kOk);
  EXPECT_EQ(log.ReadForWatch(1, {key, ""}, 10, &out, &seqs).status,
            EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log.FloorRv({key, "a"}), 20u);
  EXPECT_EQ(log.Seek(20, {key, "a"}).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(20, {key, "b"}).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(20, {key, "c"}).status, EventLog::SeekStatus::kOk);
}

// A watch whose write ended inside a transaction (its events split over
// two writes) has not seen the transaction's rest: its bookmark must not
// carry the commit, or a resume from it would skip the rest.
TEST(EventLog, ResumeRvInsideATransactionNeverClaimsItsRest) {
  EventLog log(kBig, 10);
  TxnMaker maker;
  log.AppendTransaction(20, maker.Make(20, 1));  // seq 0
  log.AppendTransaction(30, maker.Make(30, 3));  // seqs 1-3
  EXPECT_EQ(log.ResumeRvAt(0), 19u);  // the first: before the log's first
  EXPECT_EQ(log.ResumeRvAt(1), 20u);  // a boundary
  EXPECT_EQ(log.ResumeRvAt(2), 29u);  // inside: the earlier events' RV
  EXPECT_EQ(log.ResumeRvAt(3), 29u);  // before the last: not 30
  EXPECT_EQ(log.ResumeRvAt(4), 30u);  // the tail
  // A resume from 29 re-sends the transaction whole.
  EXPECT_EQ(log.Seek(29).seq, 1u);
  // At the log's first event, inside or not, never below the floor.
  EventLog split(kBig, 10);
  split.AppendTransaction(11, maker.Make(11, 2));
  EXPECT_EQ(split.ResumeRvAt(0), 10u);
  EXPECT_EQ(split.ResumeRvAt(1), 10u);
}

// What a source's handoff reads (EventSink::CommitsFrom): the held
// commits before a position, each once with its xid, from the first whose
// xid reaches a bound; and the floor, the position, the highest xid no
// longer held and the fence, all from one moment.
TEST(EventLog, CommitsFromListsTheHeldCommitsWithTheirXids) {
  EventLog log(kBig, 10);
  auto append = [&](uint64_t commit, uint64_t xid, size_t rows) {
    std::vector<EventPtr> events;
    for (size_t i = 0; i < rows; ++i) {
      MutableEventPtr e = Event::Make({}, "{}\n");
      e->last_in_txn = i + 1 == rows;
      e->rv = e->last_in_txn ? commit : commit - 1;
      e->commit_lsn = commit;
      e->xid = xid;
      events.push_back(std::move(e));
    }
    ASSERT_EQ(log.AppendTransaction(commit, std::move(events)),
              EventLog::AppendResult::kAppended);
  };
  append(20, 105, 1);
  append(30, 101, 3);
  append(40, 103, 1);
  append(50, 102, 2);
  log.AdvanceCurrentRv(55);
  using Commits = std::vector<std::pair<uint64_t, uint64_t>>;
  auto commits = [](const EventSink::HeldCommits& held) {
    Commits out;
    for (const EventSink::Commit& c : held.commits) {
      out.emplace_back(c.commit_lsn, c.xid);
    }
    return out;
  };
  EventSink::HeldCommits held = log.CommitsFrom(0, 100);
  EXPECT_EQ(commits(held),
            (Commits{{20, 105}, {30, 101}, {40, 103}, {50, 102}}));
  EXPECT_EQ(held.floor_rv, 10u);
  EXPECT_EQ(held.current_rv, 55u);
  EXPECT_EQ(held.max_evicted_xid, 0u);
  EXPECT_EQ(held.fence_hi, 0u);
  // Only those before `before`; from the first xid at or above the bound,
  // then every one, whatever its xid.
  EXPECT_EQ(commits(log.CommitsFrom(0, 40)), (Commits{{20, 105}, {30, 101}}));
  EXPECT_EQ(commits(log.CommitsFrom(102, 100)),
            (Commits{{20, 105}, {30, 101}, {40, 103}, {50, 102}}));
  EXPECT_EQ(commits(log.CommitsFrom(106, 100)), Commits{});
  EXPECT_EQ(commits(log.CommitsFrom(0, 0)), Commits{});
  // The last held commit before `before`, whatever the xid bound; else the
  // floor.
  EXPECT_EQ(held.last_commit_lsn, 50u);
  EXPECT_EQ(log.CommitsFrom(106, 100).last_commit_lsn, 50u);
  EXPECT_EQ(log.CommitsFrom(0, 50).StateRv(), 40u);
  EXPECT_EQ(log.CommitsFrom(0, 20).last_commit_lsn, 0u);
  EXPECT_EQ(log.CommitsFrom(0, 20).StateRv(), 10u);
  // Never below where a restart would start the stream.
  log.SetRestartFloor(45);
  EXPECT_EQ(log.CommitsFrom(0, 100).StateRv(), 50u);
  EXPECT_EQ(log.CommitsFrom(0, 50).StateRv(), 45u);
  log.SetRestartFloor(10);
  // A barrier drops them all: their highest xid, and its own, are gone.
  log.AppendBarrier(60, 107);
  held = log.CommitsFrom(0, 100);
  EXPECT_EQ(commits(held), Commits{});
  EXPECT_EQ(held.max_evicted_xid, 107u);
  EXPECT_EQ(held.floor_rv, 60u);
  // A reset history forgets them, and fences what lies between.
  log.ResetHistory(30, 70, kNoRvCeiling);
  held = log.CommitsFrom(0, 100);
  EXPECT_EQ(held.max_evicted_xid, 0u);
  EXPECT_EQ(held.floor_rv, 30u);
  EXPECT_TRUE(held.Fenced(31));
  EXPECT_TRUE(held.Fenced(70));
  EXPECT_FALSE(held.Fenced(30));
  EXPECT_FALSE(held.Fenced(71));
}

// A history that went back (a failover to a server that was behind): the
// log restarts below what it had served, every cursor expires, and an RV
// between the new floor and the old position is refused for good, since it
// may name a position of either history.
TEST_F(EventLogTest, ResetHistoryExpiresEveryCursorAndFencesTheOldRange) {
  const uint64_t tail = log_.tail_seq();
  const uint64_t old_current = log_.current_rv();
  ASSERT_GT(old_current, 250u);
  int woken = 0;
  log_.WaitForAppend(tail, [&] { ++woken; });
  log_.ResetHistory(/*new_floor=*/150, /*fence_hi=*/old_current + 10,
                    kNoRvCeiling);
  EXPECT_EQ(woken, 1);
  std::vector<EventPtr> out;
  EXPECT_EQ(log_.Read(tail, 10, &out), EventLog::ReadStatus::kExpired);
  EXPECT_EQ(log_.floor_rv(), 150u);
  EXPECT_EQ(log_.current_rv(), 150u);
  EXPECT_EQ(log_.GetStats().events, 0u);
  EXPECT_EQ(log_.GetStats().bytes, 0u);
  EXPECT_EQ(log_.GetStats().barriers, 1u);
  // Below the floor, and inside the fence: expired. The new floor itself
  // (where new watches start) and past the fence: fine.
  EXPECT_EQ(log_.Seek(149).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log_.Seek(150).status, EventLog::SeekStatus::kOk);
  for (uint64_t rv : {uint64_t{151}, old_current, old_current + 10}) {
    EXPECT_EQ(log_.Seek(rv).status, EventLog::SeekStatus::kExpired) << rv;
    EXPECT_TRUE(log_.Fenced(rv)) << rv;
  }
  EXPECT_FALSE(log_.Fenced(old_current + 11));

  // The new history goes on from the floor: its transactions below the old
  // position are kept (not taken for ones already seen) and readable from
  // the floor.
  maker_.prev = 150;
  ASSERT_EQ(log_.AppendTransaction(200, maker_.Make(200, 1)),
            EventLog::AppendResult::kAppended);
  EXPECT_EQ(ReadAll(log_, log_.Seek(150).seq).size(), 1u);
  EXPECT_EQ(log_.current_rv(), 200u);
  // (What a handoff makes of the fence: PgHandoff's tests,
  // tests/unit/pg_handoff_test.cc.)
  // Once past the fence, RVs are unambiguous again.
  log_.AdvanceCurrentRv(old_current + 20);
  EXPECT_EQ(log_.Seek(old_current + 20).status, EventLog::SeekStatus::kOk);
}

// A binlog source gives each server a range of RVs of its own (a history:
// cdc/mysql/binlog_position.h), here [1000, 1999] and [3000, 3999]. An RV
// above the stream's ceiling names another server's position: no wait
// reaches it, and a watch from it is expired.
TEST(EventLog, AnRvAboveTheCeilingIsAnotherHistorysAndExpired) {
  EventLog log(kBig, 3100, /*ceiling_rv=*/3999);
  EXPECT_EQ(log.ceiling_rv(), 3999u);
  EXPECT_EQ(log.Seek(3100).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(3999).status, EventLog::SeekStatus::kOk);  // future
  EXPECT_EQ(log.Seek(4000).status, EventLog::SeekStatus::kExpired);
  EXPECT_EQ(
      log.Seek(4000, {EventLog::ResourceKey("", "v1", "pods"), ""}).status,
      EventLog::SeekStatus::kExpired);
  EXPECT_EQ(log.Seek(1500).status, EventLog::SeekStatus::kExpired);  // floor
  EXPECT_EQ(EventLog(kBig, 10).ceiling_rv(), kNoRvCeiling);
}

// A failover to a server whose range lies below the old one's: the new
// range is not fenced (the old current_rv lies above the new ceiling, which
// refuses the old RVs itself), but the positions the old server may have
// given out are, in the new range: fence_hi as the source computed it.
TEST(EventLog, AResetIntoALowerRangeFencesOnlyWhatTheSourceAsks) {
  EventLog log(kBig, 3100, 3999);
  TxnMaker maker;
  maker.prev = 3100;
  ASSERT_EQ(log.AppendTransaction(3500, maker.Make(3500, 1)),
            EventLog::AppendResult::kAppended);
  log.ResetHistory(/*new_floor=*/1200, /*fence_hi=*/1600, /*ceiling_rv=*/1999);
  EXPECT_EQ(log.ceiling_rv(), 1999u);
  EXPECT_EQ(log.current_rv(), 1200u);
  EXPECT_EQ(log.Seek(3500).status, EventLog::SeekStatus::kExpired);  // old
  EXPECT_TRUE(log.Fenced(1600));
  EXPECT_FALSE(log.Fenced(1601));
  EXPECT_EQ(log.Seek(1601).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(1999).status, EventLog::SeekStatus::kOk);
  maker.prev = 1200;
  ASSERT_EQ(log.AppendTransaction(1700, maker.Make(1700, 1)),
            EventLog::AppendResult::kAppended);
  EXPECT_EQ(ReadAll(log, log.Seek(1650).seq).size(), 1u);

  // Back to a higher range: the fence of the lower one lies below the new
  // floor and goes; a later reset in the new range fences only that range.
  log.ResetHistory(/*new_floor=*/3700, /*fence_hi=*/0, /*ceiling_rv=*/3999);
  EXPECT_FALSE(log.Fenced(1600));
  EXPECT_EQ(log.Seek(1700).status, EventLog::SeekStatus::kExpired);  // floor
  EXPECT_EQ(log.Seek(3701).status, EventLog::SeekStatus::kOk);
  log.ResetHistory(/*new_floor=*/3300, /*fence_hi=*/3800, /*ceiling_rv=*/3999);
  EXPECT_TRUE(log.Fenced(3301));
  EXPECT_TRUE(log.Fenced(3800));
  EXPECT_FALSE(log.Fenced(3801));
  EXPECT_FALSE(log.Fenced(1600));
  // And down again: that fence lies above the new ceiling, and must not
  // widen the new one over the rest of the lower range.
  log.ResetHistory(/*new_floor=*/1800, /*fence_hi=*/1850, /*ceiling_rv=*/1999);
  EXPECT_TRUE(log.Fenced(1850));
  EXPECT_FALSE(log.Fenced(1851));
  EXPECT_EQ(log.Seek(1900).status, EventLog::SeekStatus::kOk);
  EXPECT_EQ(log.Seek(3500).status, EventLog::SeekStatus::kExpired);
}

TEST(EventLog, WaitersOfEndedWatchesAreDropped) {
  EventLog log(kBig, 10);
  const std::string idle = EventLog::ResourceKey("g", "v1", "idle");
  auto alive = std::make_shared<int>(0);
  int woken = 0;
  log.WaitForAppendOf(0, idle, alive, [&] { ++woken; });
  // Many watches that ended while waiting on a resource that never changes.
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> watch_sentinel = sentinel;
  for (int i = 0; i < 1000; ++i) {
    auto owner = std::make_shared<int>(i);
    log.WaitForAppendOf(0, idle, owner, [sentinel] {});
  }
  sentinel.reset();
  // The sweeps released them (and what their callbacks held).
  EXPECT_TRUE(watch_sentinel.use_count() < 200);
  log.AppendTransaction(20, OneOf("idle", 20, 10));
  EXPECT_EQ(woken, 1);
}

TEST_F(EventLogTest, WaitForAppendFiresOnceOnAppend) {
  int woken = 0;
  std::thread::id woke_on;
  log_.WaitForAppend(5, [&] {
    ++woken;
    woke_on = std::this_thread::get_id();
  });
  EXPECT_EQ(woken, 0);
  log_.AdvanceCurrentRv(350);  // no event: not woken
  EXPECT_EQ(woken, 0);
  std::thread appender([&] { log_.AppendTransaction(400, maker_.Make(400, 1)); });
  std::thread::id appender_id = appender.get_id();
  appender.join();
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(woke_on, appender_id);  // from the appending thread
  log_.AppendTransaction(500, maker_.Make(500, 1));
  EXPECT_EQ(woken, 1);  // once
}

TEST_F(EventLogTest, WaitForAppendFiresOnBarrier) {
  int woken = 0;
  log_.WaitForAppend(5, [&] { ++woken; });
  log_.WaitForAppend(5, [&] { woken += 10; });
  log_.AppendBarrier(400);
  EXPECT_EQ(woken, 11);
}

TEST_F(EventLogTest, WaitForAppendOnExpiredSeqFiresAtOnce) {
  log_.AppendBarrier(400);
  int woken = 0;
  log_.WaitForAppend(2, [&] { ++woken; });
  EXPECT_EQ(woken, 1);
}

TEST(EventLog, OldestCommitSince) {
  TxnMaker maker;
  EventLog log(kBig, 0);
  log.AppendTransaction(100, maker.Make(100, 1, 10, 1000));
  log.AppendTransaction(200, maker.Make(200, 2, 10, 2000));
  log.AppendTransaction(300, maker.Make(300, 1, 10, 3000));
  EXPECT_EQ(log.OldestCommitSince(0), 100u);
  EXPECT_EQ(log.OldestCommitSince(1000), 100u);
  EXPECT_EQ(log.OldestCommitSince(1001), 200u);
  EXPECT_EQ(log.OldestCommitSince(2000), 200u);
  EXPECT_EQ(log.OldestCommitSince(2500), 300u);
  EXPECT_EQ(log.OldestCommitSince(3000), 300u);
  EXPECT_EQ(log.OldestCommitSince(3001), 0u);
  log.AppendBarrier(400);
  EXPECT_EQ(log.OldestCommitSince(0), 0u);
}

TEST(EventLog, OldestCommitSinceAfterEviction) {
  TxnMaker maker;
  auto t1 = maker.Make(100, 1, 10, 1000);
  const size_t one = t1[0]->MemoryBytes();
  EventLog log(2 * one, 0);
  log.AppendTransaction(100, t1);
  log.AppendTransaction(200, maker.Make(200, 1, 10, 2000));
  log.AppendTransaction(300, maker.Make(300, 1, 10, 3000));
  EXPECT_EQ(log.floor_rv(), 100u);
  EXPECT_EQ(log.OldestCommitSince(0), 200u);
}

// One appender, several readers pulling with their own cursors and waiting
// with WaitForAppend. Every reader must see every event, in order, without
// gaps; nothing is timed except a guard against hanging.
struct Reader {
  const EventLog* log;
  uint64_t seq = 0;
  int64_t want_id = 0;
  uint64_t last_rv = 0;
  uint64_t last_commit = 0;
  bool expired = false;
  std::string failure;

  std::mutex mu;
  std::condition_variable cv;
  bool signalled = false;

  // Reads until `total` events were seen or the cursor expired.
  void Run(EventLog* mutable_log, int64_t total) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::vector<EventPtr> batch;
    while (want_id < total) {
      batch.clear();
      if (log->Read(seq, 7, &batch) == EventLog::ReadStatus::kExpired) {
        expired = true;
        return;
      }
      if (batch.empty()) {
        {
          std::lock_guard<std::mutex> lock(mu);
          signalled = false;
        }
        mutable_log->WaitForAppend(seq, [this] {
          std::lock_guard<std::mutex> lock(mu);
          signalled = true;
          cv.notify_one();
        });
        std::unique_lock<std::mutex> lock(mu);
        if (!cv.wait_until(lock, deadline, [this] { return signalled; })) {
          failure = "no wake-up at seq " + std::to_string(seq);
          return;
        }
        continue;
      }
      for (const auto& e : batch) {
        if (e->commit_time_us != want_id) {
          failure = "gap: wanted event " + std::to_string(want_id) + ", got " +
                    std::to_string(e->commit_time_us);
          return;
        }
        if (e->rv < last_rv || e->commit_lsn < last_commit) {
          failure = "order";
          return;
        }
        last_rv = e->rv;
        last_commit = e->commit_lsn;
        ++want_id;
        ++seq;
      }
    }
  }
};

void RunConcurrently(size_t max_bytes, int txns, bool expect_all) {
  EventLog log(max_bytes, 1);
  const int kReaders = 4;
  // Build everything first so the appender runs fast.
  TxnMaker maker;
  maker.prev = 1;
  std::vector<std::pair<uint64_t, std::vector<EventPtr>>> work;
  int64_t total = 0;
  for (int i = 0; i < txns; ++i) {
    uint64_t commit = 10 + 10 * static_cast<uint64_t>(i);
    size_t n = 1 + i % 3;
    total += n;
    work.emplace_back(commit, maker.Make(commit, n, 50));
  }
  std::vector<std::unique_ptr<Reader>> readers;
  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; ++r) {
    readers.push_back(std::make_unique<Reader>());
    readers.back()->log = &log;
  }
  for (auto& r : readers) {
    Reader* reader = r.get();
    threads.emplace_back([reader, &log, total] { reader->Run(&log, total); });
  }
  std::thread appender([&] {
    for (auto& [commit, events] : work) {
      ASSERT_EQ(log.AppendTransaction(commit, std::move(events)),
                EventLog::AppendResult::kAppended);
      if (commit % 70 == 0) std::this_thread::yield();
    }
  });
  appender.join();
  for (auto& t : threads) t.join();
  EXPECT_EQ(log.tail_seq(), static_cast<uint64_t>(total));
  for (auto& r : readers) {
    EXPECT_EQ(r->failure, "");
    if (expect_all) {
      EXPECT_FALSE(r->expired);
      EXPECT_EQ(r->want_id, total);
    } else {
      // Either everything or a clean expiry: never a silent gap.
      EXPECT_TRUE(r->expired || r->want_id == total);
    }
  }
  if (!expect_all) {
    // A reader that comes after the log moved on must expire (the checks
    // above alone would pass a log that never expires anyone).
    Reader late;
    late.log = &log;
    late.Run(&log, total);
    EXPECT_EQ(late.failure, "");
    EXPECT_TRUE(late.expired);
    EXPECT_EQ(late.want_id, 0);
  }
}

TEST(EventLogConcurrency, ReadersSeeEveryEventInOrder) {
  RunConcurrently(kBig, 3000, true);
}

TEST(EventLogConcurrency, ReadersOfASmallLogExpireButNeverSkip) {
  // Room for about ten events: slow readers are evicted past.
  auto probe = TxnMaker().Make(1, 1, 50);
  RunConcurrently(10 * probe[0]->MemoryBytes(), 3000, false);
}

}  // namespace
}  // namespace walwatch
