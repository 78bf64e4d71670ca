// walwatch on PostgreSQL, built in one place: main takes its change source,
// its state service and its slot monitor from here (a Database,
// cdc/database.h), and `walwatch slots` its subcommand (RunSlotsCli,
// slots_cli.h). The MySQL/MariaDB binlog has an entry point of its own
// beside this one (cdc/mysql/mariadb.h); nothing under watchserver/ but main
// names either.
//
// What it wires: the PostgresSource and the StateService share one
// PgHandoff (the source tells it where the stream starts and when its
// history resets; the state service classifies with it), and the source's
// history fence learns the server's highest WAL from the slot monitor.
//
// Ownership and threads: as cdc/database.h says.
#ifndef WALWATCH_CDC_POSTGRES_POSTGRES_H_
#define WALWATCH_CDC_POSTGRES_POSTGRES_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "cdc/database.h"
#include "cdc/postgres/pg_handoff.h"
#include "cdc/postgres/postgres_source.h"
#include "cdc/postgres/slot_monitor.h"
#include "cdc/postgres/slots_cli.h"
#include "cdc/postgres/state_service.h"

namespace walwatch {

class EventSink;
class ResourceCatalog;

struct PostgresOptions {
  // The replication source: conninfo, slot, table mapping, timeouts.
  PostgresSourceOptions source;
  // The state service's workers, and how long a handoff waits for the
  // stream to pass its snapshot.
  int state_workers = 2;
  std::chrono::milliseconds catch_up_timeout{3000};
  // The slot monitor warns past this much WAL retained by the slot.
  uint64_t retained_warn_bytes = uint64_t{1} << 30;
};

class Postgres final : public Database {
 public:
  // `catalog` is filled at the source's Prepare; it must outlive this.
  Postgres(PostgresOptions options, ResourceCatalog* catalog);
  ~Postgres() override;
  Postgres(const Postgres&) = delete;
  Postgres& operator=(const Postgres&) = delete;

  // Database (cdc/database.h). Start starts the slot monitor and returns
  // the StateService; Stop stops the slot monitor.
  ChangeSource* source() override { return &source_; }
  std::unique_ptr<StateWorkerPool> Start(
      EventSink* log, std::function<void()> request_position) override;
  void Stop() override { monitor_.Stop(); }
  const ServerMonitor& monitor() const override { return monitor_; }

 private:
  const PostgresOptions options_;
  PgHandoff handoff_;
  PostgresSource source_;
  SlotMonitor monitor_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_POSTGRES_H_
