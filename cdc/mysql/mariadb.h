// walwatch on MySQL/MariaDB, built in one place beside PostgreSQL's
// (cdc/postgres/postgres.h): main takes its change source (MariaDbSource,
// the binlog), its state service (MariaDbStateService: consistent snapshots
// with their binlog position) and its monitor (BinlogMonitor: the server's
// binlog end) from here, as a Database (cdc/database.h).
//
// What it wires: the source's history fence learns the highest binlog
// position seen on the server from the monitor.
//
// Ownership and threads: as cdc/database.h says.
#ifndef WALWATCH_CDC_MYSQL_MARIADB_H_
#define WALWATCH_CDC_MYSQL_MARIADB_H_

#include <chrono>
#include <functional>
#include <memory>

#include "cdc/database.h"
#include "cdc/mysql/binlog_monitor.h"
#include "cdc/mysql/mariadb_source.h"
#include "cdc/mysql/mariadb_state.h"

namespace walwatch {
class ResourceCatalog;
}

namespace walwatch::mysql {

struct MariaDbOptions {
  // The binlog source: connection, table mapping, server id, replay window.
  MariaDbSourceOptions source;
  // The state service's workers, and how long a handoff waits for the
  // stream to pass its snapshot.
  int state_workers = 2;
  std::chrono::milliseconds catch_up_timeout{3000};
};

class MariaDb final : public Database {
 public:
  // `catalog` is filled at the source's Prepare; it must outlive this.
  MariaDb(MariaDbOptions options, ResourceCatalog* catalog);
  ~MariaDb() override;
  MariaDb(const MariaDb&) = delete;
  MariaDb& operator=(const MariaDb&) = delete;

  // Database. Start starts the binlog monitor and returns the
  // MariaDbStateService; Stop stops the monitor. `request_position` is not
  // needed: an idle server reports its position in heartbeats unasked.
  ChangeSource* source() override { return &source_; }
  std::unique_ptr<StateWorkerPool> Start(
      EventSink* log, std::function<void()> request_position) override;
  void Stop() override { monitor_.Stop(); }
  const ServerMonitor& monitor() const override { return monitor_; }

 private:
  const MariaDbOptions options_;
  MariaDbSource source_;
  BinlogMonitor monitor_;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_MARIADB_H_
