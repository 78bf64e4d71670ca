#include "cdc/replication_stream.h"

#include <algorithm>
#include <random>
#include <string>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/change_source.h"
#include "cdc/commit_policy.h"
#include "cdc/model/event_sink.h"
#include "cdc/replay_window.h"

namespace walwatch {

// The loop's state, and the receiver of what the source delivers. Used by
// the replication thread only, but for RequestPosition's flag.
class ReplicationStream::Loop final : public ChangeReceiver {
 public:
  Loop(ReplicationOptions options, ChangeSource* source,
       ResourceCatalog* catalog, ReplicationStats* stats,
       std::atomic<bool>* streaming)
      : opt_(std::move(options)),
        source_(source),
        stats_(stats),
        streaming_(streaming),
        format_(source->position_formatter()),
        policy_(catalog, stats, opt_.events_in_arena, format_),
        window_(opt_.replay_window, opt_.replay_window_bytes) {}

  std::string Prepare(StartPosition* start);
  void Run(EventSink* log);
  void RequestPosition() {
    position_wanted_ = true;
    source_->Wake();
  }
  ChangeSource* source() const { return source_; }

  // ChangeReceiver.
  void Commit(Transaction* txn) override;
  void Passed(uint64_t position) override;
  void Gap(uint64_t position) override;
  void HistoryReset(uint64_t new_floor, uint64_t fence_hi,
                    uint64_t ceiling_rv) override;
  uint64_t last_commit() const override { return last_commit_; }
  uint64_t served_rv() const override { return log_->current_rv(); }
  ReplicationStats* stats() override { return stats_; }

 private:
  enum class StreamEnd { kStopped, kError };
  // Reads the open stream until it ends or Stop(): the poll/wake loop.
  StreamEnd Stream(std::string* error);
  // Confirms the replay window's start to the source; with
  // `want_position`, asks for the source's position too.
  bool SendStatus(bool want_position, std::string* error);
  // The stream has just opened: a status update is due at once.
  void Opened() { next_status_ = Clock::now(); }
  bool stopped() const { return source_->stop_signal().raised(); }

  const ReplicationOptions opt_;
  ChangeSource* const source_;
  ReplicationStats* const stats_;
  std::atomic<bool>* const streaming_;
  const PositionFormatter format_;
  CommitPolicy policy_;
  ReplayWindow window_;
  EventSink* log_ = nullptr;
  // The commit position of the last transaction taken or passed: the dedup
  // line (ChangeReceiver::last_commit).
  uint64_t last_commit_ = 0;
  Clock::time_point next_status_;
  std::atomic<bool> position_wanted_{false};
};

std::string ReplicationStream::Loop::Prepare(StartPosition* start) {
  std::string err = source_->Prepare(stats_, start);
  if (err.empty()) Opened();
  return err;
}

void ReplicationStream::Loop::Commit(Transaction* txn) {
  if (txn->commit_lsn <= last_commit_) {
    // Re-sent after a reconnect (or a restart, from the replay window),
    // and not dropped by the source already.
    ++stats_->duplicate_transactions;
    return;
  }
  last_commit_ = txn->commit_lsn;
  policy_.Apply(txn, log_);
}

void ReplicationStream::Loop::Passed(uint64_t position) {
  if (position <= log_->current_rv()) return;
  log_->AdvanceCurrentRv(position);
  last_commit_ = std::max(last_commit_, position);
}

void ReplicationStream::Loop::Gap(uint64_t position) {
  log_->AppendBarrier(position);
  ++stats_->barriers;
  ++stats_->gaps;
  last_commit_ = position;
}

void ReplicationStream::Loop::HistoryReset(uint64_t new_floor,
                                           uint64_t fence_hi,
                                           uint64_t ceiling_rv) {
  log_->ResetHistory(new_floor, fence_hi, ceiling_rv);
  ++stats_->barriers;
  ++stats_->history_resets;
  // Positions of the old history, which only ever grow: the new history's
  // transactions below them must not be taken for ones already seen, nor a
  // flush past the new server's WAL be confirmed to it.
  last_commit_ = new_floor;
  window_.ResetHistory();
  stats_->received_lsn = 0;
  stats_->decoded_lsn = new_floor;
  stats_->server_wal_end = 0;
  stats_->confirmed_lsn = 0;
}

bool ReplicationStream::Loop::SendStatus(bool want_position,
                                         std::string* error) {
  const uint64_t flush =
      window_.FlushToConfirm(*log_, source_->received(), NowUnixMicros());
  if (!source_->Confirm(flush, want_position, error)) return false;
  window_.Confirmed(flush);
  log_->SetRestartFloor(flush > 0 ? flush - 1 : 0);
  stats_->confirmed_lsn = flush;
  next_status_ = Clock::now() + opt_.status_interval;
  return true;
}

ReplicationStream::Loop::StreamEnd ReplicationStream::Loop::Stream(
    std::string* error) {
  auto last_message = Clock::now();
  // Wakes the watchers once per read from the source (see BeginBatch), and
  // at least every kWakeEvery messages during a long burst.
  constexpr int kWakeEvery = 256;
  // Watchers are woken as a batch ends, and on every way out.
  class Batch {
   public:
    explicit Batch(EventSink* log) : log_(log) {}
    ~Batch() { End(); }
    void Begin() {
      if (!open_) log_->BeginBatch();
      open_ = true;
    }
    // Returns how many watches the batch concerned (EventSink::EndBatch).
    size_t End() {
      size_t woken = open_ ? log_->EndBatch() : 0;
      open_ = false;
      return woken;
    }
    bool open() const { return open_; }

   private:
    EventSink* const log_;
    bool open_ = false;
  };
  // After a wake, the next one waits for the hold (see wake_interval).
  // A batch ends after kWakeEvery messages even while a wake is held, so
  // that a hold never keeps more than that from the watchers.
  Batch batch(log_);
  Clock::time_point last_wake;
  Clock::duration hold{0};
  int handled = 0;  // messages since the batch began
  auto woke = [&](size_t watchers) {
    last_wake = Clock::now();
    hold = opt_.WakeHold(watchers);
    handled = 0;
  };
  for (;;) {
    batch.Begin();
    for (;;) {
      const ChangeSource::Step step = source_->Next(this, error);
      if (step == ChangeSource::Step::kIdle) break;
      if (step == ChangeSource::Step::kEnd) return StreamEnd::kError;
      last_message = Clock::now();
      if (++handled >= kWakeEvery) {
        woke(batch.End());
        batch.Begin();
      }
      // A large transaction arrives as a long run of messages: keep
      // reporting status while it does.
      if (Clock::now() >= next_status_ && !SendStatus(true, error)) {
        return StreamEnd::kError;
      }
      if (stopped()) return StreamEnd::kStopped;
    }
    // Wake the watchers now, not after the wait below: the events of this
    // read would otherwise wait for the next message (up to a status
    // interval, 1 s, when the table goes quiet). Unless the last wake was
    // less than the hold ago: then the wait below ends when it has passed,
    // and the watchers are woken with whatever came meanwhile.
    const Clock::time_point wake_due = last_wake + hold;
    if (Clock::now() >= wake_due) woke(batch.End());
    if (stopped()) return StreamEnd::kStopped;
    if (position_wanted_.exchange(false) && !SendStatus(true, error)) {
      return StreamEnd::kError;
    }
    auto now = Clock::now();
    if (now - last_message > opt_.receive_timeout) {
      // Silence from a server that is working is not a partition:
      // reconnecting would only make it start the same work again, as
      // silently, for ever.
      const auto silence =
          std::chrono::duration_cast<std::chrono::seconds>(now - last_message);
      if (source_->BusyWhileSilent(silence)) {
        ++stats_->busy_walsender_waits;
        last_message = now;  // another receive timeout before asking again
        continue;
      }
      *error = "no message from the server for " +
               std::to_string(silence.count()) +
               " s (a silent network partition?)";
      return StreamEnd::kError;
    }
    if (now >= next_status_) {
      // Ask for the source's position each time: it moves the current RV
      // and the known-decoded position while the table is idle.
      if (!SendStatus(true, error)) return StreamEnd::kError;
      now = Clock::now();
    }
    // Until the next status update or, with a wake held, until the hold
    // ends. A hold may be a few microseconds: the source's wait must not
    // round it up to a millisecond.
    Clock::duration timeout = std::max<Clock::duration>(
        next_status_ - now + std::chrono::milliseconds(1), Clock::duration{0});
    if (batch.open()) {
      timeout = std::clamp<Clock::duration>(wake_due - now, Clock::duration{0},
                                            timeout);
    }
    if (!source_->Wait(timeout, error)) return StreamEnd::kError;
    if (stopped()) return StreamEnd::kStopped;
  }
}

void ReplicationStream::Loop::Run(EventSink* log) {
  log_ = log;
  last_commit_ = log->current_rv();
  std::mt19937_64 rng(std::random_device{}());
  int attempt = 0;
  while (!stopped()) {
    if (!source_->connected()) {
      ++attempt;
      std::chrono::milliseconds base = std::min<std::chrono::milliseconds>(
          opt_.backoff_max,
          opt_.backoff_initial * (int64_t{1} << std::min(attempt - 1, 16)));
      std::uniform_real_distribution<double> jitter(0.8, 1.2);
      auto delay = std::chrono::milliseconds(
          static_cast<int64_t>(base.count() * jitter(rng)));
      LogInfo(std::string("reconnecting to ") + source_->database(),
              {{"attempt", attempt},
               {"delay_ms", static_cast<int64_t>(delay.count())}});
      if (!source_->stop_signal().WaitFor(delay)) break;
      std::string err;
      switch (source_->Reconnect(this, &err)) {
        case ChangeSource::Reconnected::kOpen:
          break;
        case ChangeSource::Reconnected::kNotYet:
          continue;
        case ChangeSource::Reconnected::kFailed:
          LogWarn("reconnect failed", {{"attempt", attempt}, {"error", err}});
          source_->Recover(this, err);
          continue;
      }
      Opened();
      ++stats_->reconnects;
      LogInfo("replication resumed",
              {source_->stream_field(), {"attempt", attempt}});
    }
    *streaming_ = true;
    auto started = Clock::now();
    std::string err;
    StreamEnd end = Stream(&err);
    *streaming_ = false;
    if (end == StreamEnd::kStopped) break;
    LogWarn("replication connection lost", {{"error", err}});
    source_->Close();
    if (Clock::now() - started > std::chrono::seconds(30)) attempt = 0;
  }
  if (source_->connected()) {
    std::string err;
    if (SendStatus(false, &err)) {
      LogInfo("sent the last status update",
              {{"flush_lsn", format_(stats_->confirmed_lsn.load())}});
    }
    source_->Close();
  }
}

ReplicationStream::ReplicationStream(ReplicationOptions options,
                                     ChangeSource* source,
                                     ResourceCatalog* catalog)
    : loop_(std::make_unique<Loop>(std::move(options), source, catalog,
                                   &stats_, &streaming_)) {}

ReplicationStream::~ReplicationStream() = default;

std::string ReplicationStream::Prepare(StartPosition* start) {
  return loop_->Prepare(start);
}

void ReplicationStream::Run(EventSink* log) { loop_->Run(log); }

void ReplicationStream::Stop() { loop_->source()->Stop(); }

bool ReplicationStream::stop_requested() const {
  return loop_->source()->stop_signal().raised();
}

void ReplicationStream::RequestPosition() { loop_->RequestPosition(); }

}  // namespace walwatch
