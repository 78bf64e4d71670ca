// ReplicationStats: the counters and gauges of one replication stream,
// which the loop (cdc/replication_stream.h), the commit policy and a
// database's source each keep their part of, and the metrics read. Apart
// from the loop's header so that what sits below the loop (the commit
// policy) counts without depending on it.
//
// Thread safety: every field is atomic; written by the replication thread,
// read from any.
#ifndef WALWATCH_CDC_REPLICATION_STATS_H_
#define WALWATCH_CDC_REPLICATION_STATS_H_

#include <atomic>
#include <cstdint>

namespace walwatch {

// Counters for metrics and tests; all monotonic unless noted.
struct ReplicationStats {
  std::atomic<uint64_t> events_added{0}, events_modified{0},
      events_deleted{0};
  std::atomic<uint64_t> transactions{0}, duplicate_transactions{0};
  std::atomic<uint64_t> unchanged_updates{0};
  std::atomic<uint64_t> decode_errors{0}, row_errors{0};
  std::atomic<uint64_t> reconnects{0}, slot_recreations{0};
  // Receive timeouts not taken as a dead connection: the server was busy
  // (ChangeSource::BusyWhileSilent; on PostgreSQL, a walsender decoding).
  std::atomic<uint64_t> busy_walsender_waits{0};
  std::atomic<uint64_t> barriers{0};  // TRUNCATE or oversized transactions
  // What committed up to a position was lost to the stream, which went on
  // after it (ChangeReceiver::Gap: a PostgreSQL slot lost or moved, a MySQL
  // binlog purged before walwatch read it).
  std::atomic<uint64_t> gaps{0};
  // Histories that went back below what walwatch had served (on PostgreSQL,
  // slots recreated there; EventSink::ResetHistory).
  std::atomic<uint64_t> history_resets{0};
  std::atomic<uint64_t> bytes_received{0};
  // Gauges.
  std::atomic<uint64_t> received_lsn{0};     // last message's position
  // When the slot was last recreated (Unix µs), 0 if never: a recreation at
  // startup is already in the first scrape, where a counter shows no rise.
  std::atomic<int64_t> slot_recreated_unix_us{0};
  void SlotRecreated(int64_t now_unix_us) {
    ++slot_recreations;
    slot_recreated_unix_us = now_unix_us;
  }
  // How far the stream is known complete: the last message's position, or
  // a position passed between transactions (a keepalive's walEnd).
  std::atomic<uint64_t> decoded_lsn{0};
  std::atomic<uint64_t> server_wal_end{0};   // from the latest message
  std::atomic<uint64_t> confirmed_lsn{0};    // last flush position sent
  std::atomic<int64_t> last_commit_time_us{0};
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_REPLICATION_STATS_H_
