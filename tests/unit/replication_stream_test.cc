// ReplicationStream, the database-neutral loop, driving a scripted
// ChangeSource: what any source may do (deliver a transaction again, report
// a gap or a history that went back, go silent, fail to reconnect) and what
// the loop must make of it. The PostgreSQL source under the same loop:
// tests/unit/postgres_replay_test.cc.
#include "cdc/replication_stream.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cdc/change_source.h"
#include "cdc/model/resource_catalog.h"
#include "watchserver/event_log.h"

namespace walwatch {
namespace {

std::string Decimal(uint64_t position) { return std::to_string(position); }

// A ChangeSource that plays a script: each connection (the first, and one
// per Reconnect that opens) is a list of steps, each one message's worth of
// what it reports to the receiver. Reconnect's outcomes come from a list
// too (kOpen once it is empty).
class ScriptedSource final : public ChangeSource {
 public:
  using Step = std::function<void(ChangeReceiver*)>;
  // What a connection does, in order; a null step ends it ("lost").
  void AddConnection(std::vector<Step> steps) {
    std::lock_guard<std::mutex> lock(mu_);
    connections_.emplace_back(steps.begin(), steps.end());
  }
  // One more step for the open connection (the first, before Start).
  void AppendStep(Step step) {
    std::lock_guard<std::mutex> lock(mu_);
    connections_.front().push_back(std::move(step));
  }
  // What Reconnect does first, before it opens a connection: fail (before
  // Start), or, after the first connection, report to the receiver (a gap,
  // a reset).
  void FailReconnects(int n) { failures_ = n; }
  void OnReconnect(Step step) {
    std::lock_guard<std::mutex> lock(mu_);
    on_reconnect_ = std::move(step);
  }
  // While true, a silent stream is a busy server.
  std::atomic<bool> busy{false};

  std::vector<std::pair<uint64_t, bool>> confirms() const {
    std::lock_guard<std::mutex> lock(mu_);
    return confirms_;
  }
  int recovers() const { return recovers_; }

  const char* database() const override { return "ScriptDB"; }
  LogField stream_field() const override { return {"script", "test"}; }
  PositionFormatter position_formatter() const override { return &Decimal; }
  std::string Prepare(ReplicationStats*, StreamStart* start) override {
    start->floor_rv = 0;
    return "";
  }
  bool connected() const override { return connected_; }
  Reconnected Reconnect(ChangeReceiver* receiver,
                        std::string* error) override {
    if (failures_ > 0) {
      --failures_;
      *error = "refused";
      return Reconnected::kFailed;
    }
    Step report;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (opens_++ > 0) report = std::move(on_reconnect_);
    }
    if (report) report(receiver);
    std::lock_guard<std::mutex> lock(mu_);
    if (connections_.empty()) connections_.emplace_back();
    connected_ = true;
    return Reconnected::kOpen;
  }
  void Recover(ChangeReceiver*, const std::string&) override { ++recovers_; }
  ChangeSource::Step Next(ChangeReceiver* receiver,
                          std::string* error) override {
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::deque<Step>& steps = connections_.front();
      if (steps.empty()) return ChangeSource::Step::kIdle;
      step = std::move(steps.front());
      steps.pop_front();
    }
    if (!step) {
      *error = "lost";
      return ChangeSource::Step::kEnd;
    }
    step(receiver);
    return ChangeSource::Step::kMessage;
  }
  bool Wait(Clock::duration timeout, std::string*) override {
    std::this_thread::sleep_for(
        std::min<Clock::duration>(timeout, std::chrono::milliseconds(1)));
    return true;
  }
  bool Confirm(uint64_t flush, bool want_position, std::string*) override {
    std::lock_guard<std::mutex> lock(mu_);
    confirms_.emplace_back(flush, want_position);
    return true;
  }
  uint64_t received() const override { return 0; }
  bool BusyWhileSilent(std::chrono::seconds) override { return busy; }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    connected_ = false;
    connections_.pop_front();
  }
  void Wake() override {}
  void Stop() override { stop_.Raise(); }
  const StopSignal& stop_signal() const override { return stop_; }

 private:
  mutable std::mutex mu_;
  std::deque<std::deque<Step>> connections_;  // the front one is open
  std::vector<std::pair<uint64_t, bool>> confirms_;
  std::atomic<bool> connected_{false};
  std::atomic<int> recovers_{0};
  int failures_ = 0;  // the replication thread's, once it runs
  int opens_ = 0;
  Step on_reconnect_;
  StopSignal stop_;
};

// A transaction of another table (no rows): it only moves the position.
ScriptedSource::Step Commit(uint64_t commit) {
  return [commit](ChangeReceiver* r) {
    Transaction t;
    t.commit_lsn = commit;
    r->Commit(&t);
  };
}

class Loop {
 public:
  explicit Loop(ReplicationOptions options = Defaults())
      : log_(1 << 20, 10), stream_(options, &source_, &catalog_) {}
  ~Loop() { Stop(); }

  static ReplicationOptions Defaults() {
    ReplicationOptions o;
    o.status_interval = std::chrono::milliseconds(5);
    o.backoff_initial = std::chrono::milliseconds(1);
    o.backoff_max = std::chrono::milliseconds(2);
    o.replay_window = std::chrono::milliseconds(0);
    o.events_in_arena = false;
    return o;
  }

  void Start() {
    thread_ = std::thread([this] { stream_.Run(&log_); });
  }
  void Stop() {
    if (!thread_.joinable()) return;
    stream_.Stop();
    thread_.join();
  }
  ::testing::AssertionResult WaitFor(const std::function<bool()>& done) {
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) {
        return ::testing::AssertionFailure() << "timed out";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ::testing::AssertionSuccess();
  }

  ScriptedSource source_;
  ResourceCatalog catalog_;
  EventLog log_;
  ReplicationStream stream_;
  std::thread thread_;
};

// A source may deliver a transaction again (a binlog read again from
// further back): the loop drops what commits at or below the last commit.
TEST(ReplicationStream, DropsATransactionDeliveredAgain) {
  Loop l;
  l.source_.AddConnection({Commit(100), Commit(200), Commit(100), Commit(200),
                           Commit(300)});
  l.Start();
  ASSERT_TRUE(l.WaitFor([&] { return l.log_.current_rv() == 300; }));
  const ReplicationStats& s = l.stream_.stats();
  EXPECT_EQ(s.transactions.load(), 3u);
  EXPECT_EQ(s.duplicate_transactions.load(), 2u);
  EXPECT_EQ(s.barriers.load(), 0u);
}

// A position passed between transactions moves the current RV and the
// dedup line; one below the current RV does nothing.
TEST(ReplicationStream, APositionPassedMovesTheRvAndTheDedupLine) {
  Loop l;
  l.source_.AddConnection(
      {Commit(100), [](ChangeReceiver* r) { r->Passed(500); },
       [](ChangeReceiver* r) { r->Passed(400); }, Commit(450), Commit(600)});
  l.Start();
  ASSERT_TRUE(l.WaitFor([&] { return l.log_.current_rv() == 600; }));
  EXPECT_EQ(l.stream_.stats().duplicate_transactions.load(), 1u);  // 450
  EXPECT_EQ(l.stream_.stats().transactions.load(), 2u);
}

// A gap is a barrier: every watcher relists, and what commits at or below
// it is dropped.
TEST(ReplicationStream, AGapIsABarrierAndMovesTheDedupLine) {
  Loop l;
  l.source_.AddConnection({Commit(100), nullptr});
  l.source_.OnReconnect([](ChangeReceiver* r) { r->Gap(300); });
  l.source_.AddConnection({Commit(250), Commit(400)});
  l.Start();
  ASSERT_TRUE(l.WaitFor([&] { return l.log_.current_rv() == 400; }));
  EXPECT_EQ(l.log_.floor_rv(), 300u);
  EXPECT_EQ(l.stream_.stats().barriers.load(), 1u);
  EXPECT_EQ(l.stream_.stats().duplicate_transactions.load(), 1u);  // 250
}

// A history that went back resets the log with its fence, and the
// positions that only grow: what the new history commits below the old
// ones is kept, and the flush confirmed may go back (to the new server's).
TEST(ReplicationStream, AHistoryResetStartsThePositionsAgain) {
  Loop l;
  l.source_.AddConnection({Commit(100), Commit(200), Commit(300)});
  l.Start();
  ASSERT_TRUE(l.WaitFor([&] {
    auto c = l.source_.confirms();
    return !c.empty() && c.back().first == 301;
  }));
  l.source_.OnReconnect(
      [](ChangeReceiver* r) { r->HistoryReset(50, 1000, kNoRvCeiling); });
  l.source_.AddConnection({Commit(120), Commit(130)});
  l.source_.AppendStep(nullptr);  // the first connection is lost
  ASSERT_TRUE(l.WaitFor([&] {
    auto c = l.source_.confirms();
    return l.log_.current_rv() == 130 && c.back().first == 131;
  }));
  const ReplicationStats& s = l.stream_.stats();
  EXPECT_EQ(s.history_resets.load(), 1u);
  EXPECT_EQ(s.barriers.load(), 1u);
  EXPECT_EQ(s.transactions.load(), 5u);
  EXPECT_EQ(s.duplicate_transactions.load(), 0u);
  EXPECT_EQ(l.log_.floor_rv(), 50u);
  EXPECT_TRUE(l.log_.Fenced(1000));
  EXPECT_EQ(s.confirmed_lsn.load(), 131u);
}

// A stream silent past the receive timeout is dead (reconnect), unless the
// source says the server is busy: then it is waited for, and counted.
TEST(ReplicationStream, ASilentStreamIsDeadUnlessTheServerIsBusy) {
  ReplicationOptions o = Loop::Defaults();
  o.receive_timeout = std::chrono::milliseconds(30);
  o.status_interval = std::chrono::hours(1);
  Loop l(o);
  l.source_.busy = true;
  l.source_.AddConnection({Commit(100)});
  l.Start();
  ASSERT_TRUE(l.WaitFor(
      [&] { return l.stream_.stats().busy_walsender_waits.load() >= 2; }));
  EXPECT_EQ(l.stream_.stats().reconnects.load(), 1u);  // the first open
  l.source_.busy = false;
  ASSERT_TRUE(
      l.WaitFor([&] { return l.stream_.stats().reconnects.load() >= 2; }));
}

// A failed reconnect is repaired (Recover) and tried again after the
// backoff.
TEST(ReplicationStream, AFailedReconnectIsRecoveredAndRetried) {
  Loop l;
  l.source_.FailReconnects(2);
  l.source_.AddConnection({Commit(100)});
  l.Start();
  ASSERT_TRUE(l.WaitFor([&] { return l.log_.current_rv() == 100; }));
  EXPECT_EQ(l.source_.recovers(), 2);
  EXPECT_EQ(l.stream_.stats().reconnects.load(), 1u);
}

// RequestPosition asks the source for its position at once, not at the
// next status interval.
TEST(ReplicationStream, RequestPositionAsksTheSourceAtOnce) {
  ReplicationOptions o = Loop::Defaults();
  o.status_interval = std::chrono::hours(1);
  Loop l(o);
  l.source_.AddConnection({Commit(100)});
  l.Start();
  ASSERT_TRUE(l.WaitFor([&] {
    return l.log_.current_rv() == 100 && l.source_.confirms().size() == 1;
  }));
  l.stream_.RequestPosition();
  ASSERT_TRUE(l.WaitFor([&] { return l.source_.confirms().size() == 2; }));
  EXPECT_TRUE(l.source_.confirms().back().second);
}

}  // namespace
}  // namespace walwatch
