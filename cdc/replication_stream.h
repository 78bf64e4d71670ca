// ReplicationStream is walwatch's replication loop, the same for every
// database: it drives one ChangeSource (cdc/change_source.h), which reads
// the database's change log and delivers whole transactions, and does the
// rest:
//   * drops transactions delivered again (dedup by commit position: after a
//     reconnect the source re-sends from the last position confirmed);
//   * applies each transaction to the EventSink by the CommitPolicy
//     (cdc/commit_policy.h): events, barriers, losses;
//   * moves the sink's current RV with the positions the stream passes
//     between transactions;
//   * batches the appends of one read into one wake of the watchers, and
//     holds the next wake (wake_interval);
//   * confirms to the source, on a timer and when asked, the start of the
//     replay window (cdc/replay_window.h), never past what the sink holds;
//   * takes a silent stream for a dead one after receive_timeout, unless
//     the source says the server is busy;
//   * reconnects with capped, jittered exponential backoff;
//   * counts all of it (ReplicationStats).
//
// Threads: Prepare() is called before Run(), and Run() by the replication
// thread, which then owns the source's stream; the source is called only
// from them. Stop(), RequestPosition() and the accessors may be called from
// any thread; Stop() is async-signal-safe. The source and the catalog must
// outlive the stream, and the sink given to Run() must outlive Run().
#ifndef WALWATCH_CDC_REPLICATION_STREAM_H_
#define WALWATCH_CDC_REPLICATION_STREAM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cdc/change_source.h"
#include "cdc/replication_stats.h"

namespace walwatch {

class ResourceCatalog;

struct ReplicationOptions {
  // How often the loop confirms its position to the source (and asks it
  // for its own).
  std::chrono::milliseconds status_interval{1000};
  // After a restart walwatch rebuilds its log from the source. It holds the
  // position it confirms back to the oldest transaction younger than this
  // (and still in the log), so that those can be replayed.
  std::chrono::milliseconds replay_window{std::chrono::minutes(10)};
  // ... but never more than this many bytes (of WAL, on PostgreSQL) behind
  // the newest position received.
  uint64_t replay_window_bytes = uint64_t{512} << 20;
  // A stream that has carried no message for this long is dead (a silent
  // network partition): reconnect. walwatch asks for the source's position
  // every status interval, so a live server answers far sooner, unless the
  // source says it is busy (ChangeSource::BusyWhileSilent: on PostgreSQL a
  // walsender that decodes a huge transaction of other tables does it in
  // silence); then it is waited for, another timeout at a time.
  std::chrono::milliseconds receive_timeout{std::chrono::seconds(60)};
  // After a wake, watchers are not woken again for a while (the hold): what
  // the server sends meanwhile (a transaction, or a keepalive) waits for the
  // hold to pass, and the next wake takes it all, so that each watcher gets
  // more events in fewer, larger writes. Fan-out costs walwatch, the kernel
  // and the clients mostly per write, little per byte (BENCHMARKS.md,
  // 2026-12-03). What comes after a quiet spell longer than the hold is
  // woken for at once. See WakeHold.
  std::chrono::milliseconds wake_interval{0};
  bool wake_interval_auto = false;
  static constexpr std::chrono::microseconds kAutoWakeHoldPerWatcher{10};
  // The hold after a wake that concerned `watchers` watches (those of the
  // resources it changed, EventSink::EndBatch). Without wake_interval_auto,
  // wake_interval whatever the wake (0: none, wake after every read from the
  // server). With it, kAutoWakeHoldPerWatcher for each such watch, at most
  // wake_interval: one watcher is held 10 us, next to nothing; 1,000
  // watchers of one resource at most every 10 ms, so that fanning out to
  // them (~4 us per write) takes at most ~40 % of the serving thread. Every
  // watch of a changed resource counts, whatever its namespace or
  // selectors: each is woken to read and filter the batch.
  std::chrono::microseconds WakeHold(size_t watchers) const {
    const std::chrono::microseconds most = wake_interval;
    if (!wake_interval_auto) return most;
    if (watchers >= static_cast<size_t>(most / kAutoWakeHoldPerWatcher)) {
      return most;
    }
    return kAutoWakeHoldPerWatcher * static_cast<int64_t>(watchers);
  }
  // Backoff between reconnect attempts.
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{10000};
  // Build the log's events in a WireArena (a memfd), so that watch sessions
  // send them with sendfile(2) instead of copying them into every socket.
  // Without a memfd, or when false, they stay on the heap.
  bool events_in_arena = true;
};

class ReplicationStream {
 public:
  ReplicationStream(ReplicationOptions options, ChangeSource* source,
                    ResourceCatalog* catalog);
  ~ReplicationStream();
  ReplicationStream(const ReplicationStream&) = delete;
  ReplicationStream& operator=(const ReplicationStream&) = delete;

  // The EventSink's floor and ceiling (ChangeSource::Prepare).
  using StartPosition = StreamStart;
  // The source's startup (ChangeSource::Prepare): checks the database,
  // loads the resource catalog, and opens the stream. Returns "" on
  // success, otherwise one line that names the fix.
  std::string Prepare(StartPosition* start);

  // Streams into `log` until Stop(). Reconnects on errors.
  void Run(EventSink* log);

  // Ends Run(): sends a last status update and closes the stream. Also ends
  // Prepare()'s waits. Async-signal-safe.
  void Stop();
  // Whether Stop() was called.
  bool stop_requested() const;

  // Asks the source for its position now (on PostgreSQL, a status update
  // with replyRequested, answered by a keepalive), so that the EventSink's
  // current RV catches up with the server without waiting for the next.
  void RequestPosition();

  bool streaming() const { return streaming_.load(); }
  const ReplicationStats& stats() const { return stats_; }

 private:
  class Loop;
  std::atomic<bool> streaming_{false};
  ReplicationStats stats_;
  std::unique_ptr<Loop> loop_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_REPLICATION_STREAM_H_
