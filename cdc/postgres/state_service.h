// StateService implements StateSource on PostgreSQL: a few worker threads
// (a StateWorkerPool), each with its own ordinary connection, read states in
// REPEATABLE READ snapshots and hand them off to the stream exactly
// (DESIGN.md, "exact or retry"):
//   1. BEGIN REPEATABLE READ; SELECT pg_current_snapshot(),
//      pg_current_wal_insert_lsn()  -> S, L
//   2. wait until the replication stream has passed L (asking the walsender
//      for a keepalive), at most `catch_up_timeout`;
//   3. PgHandoff::Classify(the sink's commits, S, L) -> the exact RV P, or
//      retry with a new snapshot, or expired;
//   4. read the rows in S through a cursor, as ADDED events carrying P.
//
// Thread safety: the StateSource methods may be called from any thread;
// callbacks run on a worker thread. The EventSink and the PgHandoff must
// outlive the service.
#ifndef WALWATCH_CDC_POSTGRES_STATE_SERVICE_H_
#define WALWATCH_CDC_POSTGRES_STATE_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "cdc/state_workers.h"
#include "schema/table_mapping.h"

namespace walwatch {

class EventSink;
class PgHandoff;

struct StateServiceOptions {
  std::string conninfo;
  TableMapping mapping;
  int connect_timeout_seconds = 10;
  int workers = 2;
  // How long to wait for the stream to pass a snapshot's insert LSN.
  std::chrono::milliseconds catch_up_timeout{3000};
  // Snapshots retried when commit order and visibility disagree.
  int max_retries = 5;
  size_t rows_per_fetch = 500;
};

// The PostgreSQL worker pool: StateServiceOptions::workers threads, each
// with a PostgreSQL connection of its own (cdc/state_workers.h schedules
// them).
class StateService final : public StateWorkerPool {
 public:
  // `handoff` classifies the sink's commits by a snapshot;
  // `request_keepalive` asks the replication thread for a fresh keepalive.
  // The sink and the handoff must outlive the service.
  StateService(StateServiceOptions options, EventSink* log,
               const PgHandoff* handoff,
               std::function<void()> request_keepalive);
};

// The position the stream must pass before every record that began before
// `insert_lsn` has been decoded: pg_current_wal_insert_lsn() points past a
// page header when it sits at the start of a page, where no record can
// begin. Exposed for tests.
uint64_t RecordBoundaryBefore(uint64_t insert_lsn, uint64_t wal_block_size,
                              uint64_t wal_segment_size);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_STATE_SERVICE_H_
