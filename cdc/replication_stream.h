// ReplicationStream owns walwatch's libpq replication connection. It checks
// the server at startup, creates the wal2json slot if missing, streams
// format-version 2 changes of the mapped table, and turns each committed
// transaction into events appended to an EventSink (the event log). It
// confirms to PostgreSQL only what the log holds, and reconnects with
// capped, jittered exponential backoff when the connection is lost.
//
// Threads: Prepare() and Run() are called by one thread, which then owns the
// connections (the replication thread). Stop() and the accessors may be
// called from any thread.
#ifndef WALWATCH_CDC_REPLICATION_STREAM_H_
#define WALWATCH_CDC_REPLICATION_STREAM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "schema/table_mapping.h"

namespace walwatch {

class EventSink;
class PgHandoff;
class ResourceCatalog;

struct ReplicationOptions {
  std::string conninfo;  // libpq conninfo; empty: PG* environment variables
  std::string slot = "walwatch";
  TableMapping mapping;
  std::chrono::milliseconds status_interval{1000};
  int connect_timeout_seconds = 10;
  // Most bytes of row data one transaction may hold while it is assembled.
  // A larger transaction becomes a barrier: watchers get 410 and relist.
  size_t max_transaction_bytes = 128u << 20;
  // After a restart walwatch rebuilds its log from the slot. It holds the
  // slot's confirmed position back to the oldest transaction younger than
  // this (and still in the log), so that those can be replayed.
  std::chrono::milliseconds replay_window{std::chrono::minutes(10)};
  // ... but never more than this many bytes of WAL behind the newest
  // position received.
  uint64_t replay_window_bytes = uint64_t{512} << 20;
  // A connection that has carried no message for this long is dead (a
  // silent network partition): reconnect. walwatch asks for a keepalive every
  // status interval, so a live server answers far sooner, except while its
  // walsender decodes a huge transaction of other tables, which it does in
  // silence: that walsender (seen busy in pg_stat_activity on a connection
  // of its own) is waited for, another timeout at a time.
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

// Counters for metrics and tests; all monotonic unless noted.
struct ReplicationStats {
  std::atomic<uint64_t> events_added{0}, events_modified{0},
      events_deleted{0};
  std::atomic<uint64_t> transactions{0}, duplicate_transactions{0};
  std::atomic<uint64_t> unchanged_updates{0};
  std::atomic<uint64_t> decode_errors{0}, row_errors{0};
  std::atomic<uint64_t> reconnects{0}, slot_recreations{0};
  // Receive timeouts not taken as a dead connection: the walsender was
  // busy decoding (ReplicationStream::Impl::WalsenderBusy).
  std::atomic<uint64_t> busy_walsender_waits{0};
  std::atomic<uint64_t> barriers{0};  // TRUNCATE or oversized transactions
  // Slots recreated below what walwatch had served (EventSink::ResetHistory).
  std::atomic<uint64_t> history_resets{0};
  std::atomic<uint64_t> bytes_received{0};
  // Gauges.
  std::atomic<uint64_t> received_lsn{0};     // last XLogData start
  // When the slot was last recreated (Unix µs), 0 if never: a recreation at
  // startup is already in the first scrape, where a counter shows no rise.
  std::atomic<int64_t> slot_recreated_unix_us{0};
  void SlotRecreated(int64_t now_unix_us) {
    ++slot_recreations;
    slot_recreated_unix_us = now_unix_us;
  }
  // How far the stream is known complete: the last XLogData start, or a
  // keepalive's walEnd received between transactions.
  std::atomic<uint64_t> decoded_lsn{0};
  std::atomic<uint64_t> server_wal_end{0};   // from the latest message
  std::atomic<uint64_t> confirmed_lsn{0};    // last flush position sent
  std::atomic<int64_t> last_commit_time_us{0};
};

class ReplicationStream {
 public:
  // `handoff` learns where the stream starts, and when its history resets.
  ReplicationStream(ReplicationOptions options, ResourceCatalog* catalog,
                    PgHandoff* handoff);
  ~ReplicationStream();
  ReplicationStream(const ReplicationStream&) = delete;
  ReplicationStream& operator=(const ReplicationStream&) = delete;

  struct StartPosition {
    // The stream continues after this position: the EventSink's floor.
    uint64_t floor_rv = 0;
    // pg_current_snapshot()'s xmax, read after the slot's position: every
    // transaction with this xid or above commits after floor_rv (the
    // PgHandoff is told).
    uint64_t next_xid = 0;
  };
  // Checks the server and the table, creates the slot if it is missing,
  // loads the resource catalog, and starts streaming. Returns "" on success,
  // otherwise one line that names the fix.
  std::string Prepare(StartPosition* start);

  // Streams into `log` until Stop(). Reconnects on errors.
  void Run(EventSink* log);

  // Ends Run(): sends a last status update and closes the connection. Also
  // ends Prepare()'s wait for a slot active elsewhere. Async-signal-safe.
  void Stop();
  // Whether Stop() was called.
  bool stop_requested() const;

  // Before Run(): the highest WAL position seen on the server (the slot
  // monitor's). After a failover to a server that was behind, RVs up to it
  // may have been served by other replicas, so the fence covers them.
  void SetHighestServerWal(std::function<uint64_t()> highest);

  // Asks the server for a keepalive now (a status update with
  // replyRequested), so that the EventSink's current RV catches up with the
  // server's decoded position without waiting for the next one.
  void RequestKeepalive();

  bool streaming() const { return streaming_.load(); }
  const ReplicationStats& stats() const { return stats_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> streaming_{false};
  ReplicationStats stats_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_REPLICATION_STREAM_H_
