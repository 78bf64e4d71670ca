// MariaDbStateService implements StateSource on MariaDB: a StateWorkerPool
// (cdc/state_workers.h) whose workers each hold a connection of their own.
// MariaDB names the exact binlog position of a consistent snapshot, so the
// handoff needs no classification (DESIGN.md's "exact or retry" is exact
// here by construction):
//   1. START TRANSACTION WITH CONSISTENT SNAPSHOT (REPEATABLE READ), then
//      SHOW STATUS LIKE 'binlog_snapshot_%' -> file and offset, the
//      position P = BinlogVersion(history, file, offset), the history of
//      the server_id the worker's connection reaches: every transaction
//      that commits at or before P is visible in the snapshot, none after
//      it (MariaDB commits in binlog order and takes the snapshot and the
//      position under one lock, without a global read lock). A server
//      other than the stream's (a failover the stream has not followed
//      yet): 504, retry (a handoff: 410, list again);
//   2. wait until the replication stream has passed P (heartbeats report
//      the position of an idle server), at most `catch_up_timeout`: 504;
//   3. P below the log's floor, or inside a fence (the handoff's too,
//      handoff_fence.h): 410 (the watch that continues it could not start
//      there);
//   4. read the rows in the snapshot as ADDED events carrying P.
// The handoff endpoint does 2 and 3 for a list the APIServer read itself in
// such a snapshot (PROTOCOL.md, "Handoff"); a fresh RV waits for SHOW MASTER
// STATUS's position.
//
// MySQL 8 has no binlog_snapshot_* status: there, initial states and the
// handoff answer 500 and say so (README: the method walwatch would use there,
// untested).
//
// Thread safety: as StateWorkerPool. The EventSink must outlive the service.
#ifndef WALWATCH_CDC_MYSQL_MARIADB_STATE_H_
#define WALWATCH_CDC_MYSQL_MARIADB_STATE_H_

#include <chrono>
#include <cstddef>

#include "cdc/mysql/handoff_fence.h"
#include "cdc/mysql/mysql_conn.h"
#include "cdc/state_workers.h"
#include "schema/table_mapping.h"

namespace walwatch {
class EventSink;
}

namespace walwatch::mysql {

struct MariaDbStateOptions {
  MysqlConnParams conn;  // conn.database holds the table
  TableMapping mapping;
  int workers = 2;
  // How long to wait for the stream to pass a snapshot's position.
  std::chrono::milliseconds catch_up_timeout{3000};
  // Queries on a server that stops answering give up after this long.
  std::chrono::seconds query_timeout{60};
  // Snapshots taken again while one is older than a watch's
  // resourceVersion (WatchList's NotOlderThan).
  int max_retries = 5;
  size_t rows_per_fetch = 500;
  // The source's (MariaDbSource::handoff_fence), if any; it must outlive
  // the service.
  const HandoffFence* handoff_fence = nullptr;
};

class MariaDbStateService final : public StateWorkerPool {
 public:
  MariaDbStateService(MariaDbStateOptions options, EventSink* log);
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_MARIADB_STATE_H_
