// The replication loop and the PostgreSQL source, without PostgreSQL: a
// FakeWalsender (tests/unit/fake_walsender.h) plays the recorded wal2json
// capture as a walsender would, under the real PostgresSource,
// ReplicationStream and EventLog. Covered: dedup and reconnect (the server
// re-sends from the confirmed position), keepalives (the current RV moves
// between transactions, never inside one; a keepalive that asks is
// answered), status feedback (the replay window, never past the log, never
// backwards), and the commit policy (TRUNCATE, an oversized transaction, a
// row that cannot become an event).
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cdc/model/event_sink.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/postgres/pg_handoff.h"
#include "cdc/postgres/postgres_source.h"
#include "cdc/postgres/replication_protocol.h"
#include "cdc/replication_stream.h"
#include "tests/unit/fake_walsender.h"
#include "tests/unit/wal2json_capture.h"
#include "watchserver/event_log.h"

namespace walwatch {
namespace {

using namespace testing_capture;  // NOLINT: capture constants
using testing_walsender::FakeWalsender;
using testing_walsender::SplitTransactions;
using testing_walsender::TransactionOf;
using testing_walsender::WalTransaction;

constexpr uint64_t kEnd753 = 0x1562080;  // nextlsn of 753's commit record
constexpr uint64_t kWalEnd = 0x1600000;  // the server's WAL end, for XLogData
constexpr auto kDeadline = std::chrono::seconds(20);

const std::string kPods = EventSink::ResourceKey("", "v1", "pods");

// The capture's transactions, 746 to 754, as wal2json lines.
std::vector<std::vector<std::string>> CaptureTransactions() {
  return SplitTransactions(ReadCaptureLines());
}

// `lines` with every "timestamp" set to `unix_seconds`, so that the replay
// window's age test does not depend on when the capture was made.
std::vector<std::string> Restamped(std::vector<std::string> lines,
                                   int64_t unix_seconds) {
  const time_t t = static_cast<time_t>(unix_seconds);
  tm utc{};
  gmtime_r(&t, &utc);
  char stamp[64];
  strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S.000000+00", &utc);
  for (std::string& line : lines) {
    size_t at = line.find("\"timestamp\":\"");
    if (at == std::string::npos) continue;
    at += 13;
    line.replace(at, line.find('"', at) - at, stamp);
  }
  return lines;
}

// The loop, the source and the log, streaming from a FakeWalsender on a
// thread of their own. The slot starts at 746's commit: the log's floor is
// just below it.
class Replay {
 public:
  struct Options {
    std::chrono::milliseconds replay_window{std::chrono::hours(24 * 365 * 50)};
    uint64_t replay_window_bytes = uint64_t{512} << 20;
    size_t max_transaction_bytes = 64u << 20;
  };

  explicit Replay(Options o) : floor_(kCommit746 - 1), log_(1 << 30, floor_) {
    auto walsender = std::make_unique<FakeWalsender>(kCommit746);
    walsender_ = walsender.get();
    PostgresSourceOptions source_options;
    source_options.mapping = DefaultTableMapping();
    source_options.max_transaction_bytes = o.max_transaction_bytes;
    source_ = std::make_unique<PostgresSource>(
        source_options, &catalog_, &handoff_, std::move(walsender));
    ReplicationOptions options;
    options.status_interval = std::chrono::milliseconds(20);
    options.backoff_initial = std::chrono::milliseconds(1);
    options.backoff_max = std::chrono::milliseconds(5);
    options.replay_window = o.replay_window;
    options.replay_window_bytes = o.replay_window_bytes;
    options.events_in_arena = false;
    stream_ = std::make_unique<ReplicationStream>(options, source_.get(),
                                                  &catalog_);
  }
  Replay() : Replay(Options()) {}
  ~Replay() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { stream_->Run(&log_); });
  }
  void Stop() {
    if (!thread_.joinable()) return;
    stream_->Stop();
    thread_.join();
  }

  // Waits until `done` holds (or the deadline passes).
  ::testing::AssertionResult WaitFor(const std::function<bool()>& done,
                                     const std::string& what) {
    const auto give_up = std::chrono::steady_clock::now() + kDeadline;
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) {
        return ::testing::AssertionFailure()
               << "timed out waiting for " << what << "; current_rv "
               << log_.current_rv() << ", transactions "
               << stats().transactions.load();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ::testing::AssertionSuccess();
  }
  // Waits until the log's current RV is at least `rv`, and the walsender
  // has sent all it was given.
  ::testing::AssertionResult WaitForRv(uint64_t rv) {
    return WaitFor(
        [&] { return log_.current_rv() >= rv && walsender_->drained(); },
        "current_rv " + std::to_string(rv));
  }

  // Adds capture transactions [first, last) to the walsender's WAL.
  void Add(const std::vector<std::vector<std::string>>& txns, size_t first,
           size_t last) {
    for (size_t i = first; i < last; ++i) {
      walsender_->Add(TransactionOf(txns[i], kWalEnd));
    }
  }

  // The events the log holds (not the places losses keep).
  std::vector<EventPtr> Events() const {
    std::vector<EventPtr> all, out;
    EXPECT_EQ(log_.Read(log_.first_seq(), 1 << 20, &all),
              EventLog::ReadStatus::kOk);
    for (EventPtr& e : all) {
      if (!e->resource().empty()) out.push_back(std::move(e));
    }
    return out;
  }
  // The flushes the loop confirmed, in order (keepalive replies left out).
  std::vector<uint64_t> Flushes() const {
    std::vector<uint64_t> out;
    for (const StandbyStatusUpdate& u : walsender_->status_updates()) {
      if (u.flush != 0) out.push_back(u.flush);
    }
    return out;
  }

  const ReplicationStats& stats() const { return stream_->stats(); }
  FakeWalsender& walsender() { return *walsender_; }
  EventLog& log() { return log_; }
  uint64_t floor() const { return floor_; }

 private:
  const uint64_t floor_;
  ResourceCatalog catalog_;
  PgHandoff handoff_;
  EventLog log_;
  FakeWalsender* walsender_;
  std::unique_ptr<PostgresSource> source_;
  std::unique_ptr<ReplicationStream> stream_;
  std::thread thread_;
};

std::vector<EventType> Types(const std::vector<EventPtr>& events) {
  std::vector<EventType> out;
  for (const EventPtr& e : events) out.push_back(e->type);
  return out;
}

// The capture's 746 to 753 become their four events (an ADDED and DELETED
// of one object in one transaction fold into nothing, and two UPDATEs
// change nothing a watcher sees), each transaction's last event at its
// commit; 754's TRUNCATE is a barrier at its commit.
TEST(PostgresReplay, TheCaptureBecomesItsEventsAndTheTruncateABarrier) {
  Replay r;
  const auto txns = CaptureTransactions();
  ASSERT_EQ(txns.size(), 9u);
  r.Add(txns, 0, 8);
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit753));
  const std::vector<EventPtr> events = r.Events();
  EXPECT_EQ(Types(events),
            (std::vector<EventType>{EventType::kAdded, EventType::kModified,
                                    EventType::kModified,
                                    EventType::kDeleted}));
  for (const EventPtr& e : events) {
    EXPECT_TRUE(e->last_in_txn);
    EXPECT_EQ(e->rv, e->commit_lsn);
  }
  EXPECT_EQ(events.front()->commit_lsn, kCommit746);
  EXPECT_EQ(events.back()->commit_lsn, kCommit753);
  EXPECT_EQ(events.front()->xid, 746u);  // widened: epoch 0
  EXPECT_EQ(r.stats().transactions.load(), 8u);
  EXPECT_EQ(r.stats().unchanged_updates.load(), 2u);
  EXPECT_EQ(r.stats().barriers.load(), 0u);

  r.Add(txns, 8, 9);
  ASSERT_TRUE(r.WaitForRv(kCommit754));
  EXPECT_EQ(r.stats().barriers.load(), 1u);
  EXPECT_EQ(r.log().floor_rv(), kCommit754);
  EXPECT_TRUE(r.Events().empty());
}

// The connection is lost inside 750; the server re-sends every transaction
// from the position the loop confirmed (held back to 746 by the replay
// window), and what the log already holds is dropped, not doubled.
TEST(PostgresReplay, AReconnectResendsFromTheConfirmedPositionNoneTwice) {
  Replay r;
  const auto txns = CaptureTransactions();
  r.Add(txns, 0, 8);
  // B, U and C of 746, 747, 748; B and C of 749; B of 750: cut after it.
  r.walsender().Cut(3 + 3 + 3 + 2 + 1);
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit753));
  EXPECT_EQ(r.walsender().starts(), 2);
  EXPECT_EQ(r.stats().reconnects.load(), 2u);  // the first start included
  EXPECT_EQ(r.walsender().confirmed_flush(), kCommit746);
  // 746 to 749 came twice.
  EXPECT_EQ(r.stats().duplicate_transactions.load(), 4u);
  EXPECT_EQ(r.stats().transactions.load(), 8u);
  EXPECT_EQ(r.Events().size(), 4u);
  EXPECT_EQ(r.stats().barriers.load(), 0u);
}

// A keepalive moves the current RV to walEnd - 1 between transactions, but
// not inside one: there the next commit may lie below walEnd, and moving
// would put it below the current RV.
TEST(PostgresReplay, KeepalivesMoveTheCurrentRvBetweenTransactionsOnly) {
  Replay r;
  const auto txns = CaptureTransactions();
  r.Add(txns, 0, 7);
  // 753 with a keepalive far ahead between its B and its DELETE.
  std::vector<std::string> with_keepalive = txns[7];
  with_keepalive.insert(with_keepalive.begin() + 1,
                        "k:" + std::to_string(kCommit753 + 0x10000));
  r.walsender().Add(TransactionOf(with_keepalive, kWalEnd));
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit753));
  // The loop's own status updates ask for keepalives: the walsender answers
  // with the end of what it sent, and the RV moves just below it.
  ASSERT_TRUE(r.WaitFor([&] { return r.log().current_rv() == kEnd753 - 1; },
                        "the keepalive after 753"));
  EXPECT_EQ(r.stats().barriers.load(), 0u);
  EXPECT_EQ(r.Events().back()->type, EventType::kDeleted);
  EXPECT_EQ(r.Events().back()->commit_lsn, kCommit753);
  // Between transactions, a keepalive from further on moves it further.
  r.walsender().Send(EncodePrimaryKeepalive({kEnd753 + 0x100, 0, false}));
  ASSERT_TRUE(r.WaitFor(
      [&] { return r.log().current_rv() == kEnd753 + 0x100 - 1; },
      "a keepalive between transactions"));
  EXPECT_EQ(r.stats().decoded_lsn.load(), kEnd753 + 0x100);
}

// A keepalive that asks for a reply is answered at once with its walEnd as
// the write position and an invalid flush (0), which does not move the
// slot: a walsender shutting down waits for it.
TEST(PostgresReplay, AKeepaliveThatAsksIsAnsweredWithoutMovingTheSlot) {
  Replay r;
  r.Add(CaptureTransactions(), 0, 1);
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit746));
  r.walsender().Send(EncodePrimaryKeepalive({kCommit746 + 0x777, 0, true}));
  ASSERT_TRUE(r.WaitFor(
      [&] {
        for (const StandbyStatusUpdate& u : r.walsender().status_updates()) {
          if (u.write == kCommit746 + 0x777) return true;
        }
        return false;
      },
      "the reply"));
  for (const StandbyStatusUpdate& u : r.walsender().status_updates()) {
    if (u.write != kCommit746 + 0x777) continue;
    EXPECT_EQ(u.flush, 0u);
    EXPECT_EQ(u.apply, 0u);
    EXPECT_FALSE(u.reply_requested);
  }
  EXPECT_EQ(r.walsender().confirmed_flush(), kCommit746);
}

// The flush confirmed is the oldest commit of the replay window, so that a
// restart rebuilds it; the write position is what was received.
TEST(PostgresReplay, TheFlushIsHeldBackToTheReplayWindow) {
  Replay r;
  r.Add(CaptureTransactions(), 0, 8);
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit753));
  const size_t before = r.walsender().status_updates().size();
  ASSERT_TRUE(r.WaitFor(
      [&] { return r.walsender().status_updates().size() > before + 1; },
      "status updates after 753"));
  const StandbyStatusUpdate last = r.walsender().status_updates().back();
  EXPECT_EQ(last.flush, kCommit746);
  EXPECT_EQ(last.apply, kCommit746);
  EXPECT_EQ(last.write, kEnd753);
  EXPECT_TRUE(last.reply_requested);
  EXPECT_EQ(r.stats().confirmed_lsn.load(), kCommit746);
}

// With nothing young enough to keep (the transactions committed an hour
// ago, the window is ten minutes), everything the log holds is confirmed,
// and never more: the current RV + 1.
TEST(PostgresReplay, WithNothingToKeepTheFlushIsTheLogsEndNeverPast) {
  Replay::Options o;
  o.replay_window = std::chrono::minutes(10);
  Replay r(o);
  const int64_t an_hour_ago =
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count() -
      3600;
  const auto txns = CaptureTransactions();
  for (size_t i = 0; i < 8; ++i) {
    r.walsender().Add(TransactionOf(Restamped(txns[i], an_hour_ago), kWalEnd));
  }
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit753));
  ASSERT_TRUE(r.WaitFor(
      [&] {
        std::vector<uint64_t> f = r.Flushes();
        return !f.empty() && f.back() == r.log().current_rv() + 1;
      },
      "a flush of everything"));
  EXPECT_EQ(r.Events().size(), 4u);
  for (uint64_t flush : r.Flushes()) {
    EXPECT_LE(flush, r.log().current_rv() + 1);
  }
}

// The window reaches no further back than its bytes behind the newest
// position received, at the first commit there.
TEST(PostgresReplay, TheWindowsBytesLimitWhereTheFlushMayStay) {
  Replay::Options o;
  o.replay_window_bytes = kEnd753 - kCommit753;  // 753 alone fits
  Replay r(o);
  r.Add(CaptureTransactions(), 0, 8);
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit753));
  ASSERT_TRUE(r.WaitFor(
      [&] {
        std::vector<uint64_t> f = r.Flushes();
        return !f.empty() && f.back() == kCommit753;
      },
      "a flush at 753"));
}

// A new connection starts its newest position from nothing, and on
// PostgreSQL 15 the slot may even fall back and re-send what was
// confirmed: the flush confirmed still never moves back.
TEST(PostgresReplay, TheFlushNeverMovesBack) {
  Replay::Options o;
  o.replay_window_bytes = kEnd753 - kCommit753;
  Replay r(o);
  const auto txns = CaptureTransactions();
  r.Add(txns, 0, 8);
  // 754's B and TRUNCATE, its commit still to come.
  WalTransaction open = TransactionOf(txns[8], kWalEnd);
  open.messages.pop_back();
  r.walsender().Add(open);
  r.Start();
  ASSERT_TRUE(r.WaitFor(
      [&] {
        std::vector<uint64_t> f = r.Flushes();
        return r.walsender().drained() && !f.empty() &&
               f.back() > kCommit753;
      },
      "a flush past 753"));
  const uint64_t high = r.Flushes().back();
  r.walsender().FallBackTo(kCommit753);
  r.walsender().Cut();
  ASSERT_TRUE(r.WaitFor([&] { return r.walsender().starts() == 2; },
                        "the reconnect"));
  ASSERT_TRUE(r.WaitFor(
      [&] { return r.Flushes().size() > 2 && r.walsender().drained(); },
      "status updates after the reconnect"));
  const std::vector<uint64_t> flushes = r.Flushes();
  for (size_t i = 1; i < flushes.size(); ++i) {
    EXPECT_GE(flushes[i], flushes[i - 1]) << i;
  }
  EXPECT_GE(flushes.back(), high);
  EXPECT_EQ(r.stats().duplicate_transactions.load(), 1u);  // 753 again
}

// A transaction larger than the source may hold keeps only what it touched:
// the watches of those resources (pods, up to 753) relist, another
// resource's go on, and the events of what came before stay.
TEST(PostgresReplay, AnOversizedTransactionIsALossOfWhatItTouched) {
  Replay::Options o;
  o.max_transaction_bytes = 8192;  // 750, 751 and 753 hold ~20 KB objects
  Replay r(o);
  r.Add(CaptureTransactions(), 0, 8);
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit753));
  // (752's small rows may count the capacity their decoded strings kept
  // from the large ones before: a loss of what it touched too.)
  EXPECT_GE(r.stats().barriers.load(), 3u);
  EXPECT_EQ(r.log().FloorRv({kPods, ""}), kCommit753);
  EXPECT_EQ(r.log().FloorRv({EventSink::ResourceKey("apps", "v1",
                                                    "statefulsets"),
                             ""}),
            r.floor());
  EXPECT_EQ(r.log().floor_rv(), r.floor());
  EXPECT_EQ(Types(r.Events()), (std::vector<EventType>{EventType::kAdded,
                                                       EventType::kModified}));
}

// A row that cannot become an event (its object is not a JSON object) is
// logged and counted, and its transaction is a barrier: the other events
// alone would silently diverge every watcher from the table.
TEST(PostgresReplay, ARowThatCannotBecomeAnEventIsABarrier) {
  Replay r;
  auto txns = CaptureTransactions();
  ASSERT_TRUE(ReplaceFirst(&txns[0][1], R"("value":"{\"kind\": \"Pod\")",
                           R"("value":"[\"kind\", \"Pod\")"));
  r.Add(txns, 0, 2);
  r.Start();
  ASSERT_TRUE(r.WaitForRv(kCommit747));
  EXPECT_EQ(r.stats().row_errors.load(), 1u);
  EXPECT_EQ(r.stats().barriers.load(), 1u);
  EXPECT_EQ(r.log().floor_rv(), kCommit746);
  EXPECT_EQ(Types(r.Events()),
            (std::vector<EventType>{EventType::kModified}));
}

}  // namespace
}  // namespace walwatch
