#include "cdc/postgres/postgres.h"

#include <utility>

namespace walwatch {

namespace {

SlotMonitorOptions MonitorOptions(const PostgresOptions& o) {
  SlotMonitorOptions m;
  m.conninfo = o.source.conninfo;
  m.slot = o.source.slot;
  m.connect_timeout_seconds = o.source.connect_timeout_seconds;
  m.retained_warn_bytes = o.retained_warn_bytes;
  return m;
}

}  // namespace

Postgres::Postgres(PostgresOptions options, ResourceCatalog* catalog)
    : options_(std::move(options)),
      source_(options_.source, catalog, &handoff_),
      monitor_(MonitorOptions(options_)) {}

Postgres::~Postgres() = default;

std::unique_ptr<StateWorkerPool> Postgres::Start(
    EventSink* log, std::function<void()> request_position) {
  StateServiceOptions state;
  state.conninfo = options_.source.conninfo;
  state.mapping = options_.source.mapping;
  state.connect_timeout_seconds = options_.source.connect_timeout_seconds;
  state.workers = options_.state_workers;
  state.catch_up_timeout = options_.catch_up_timeout;
  auto service = std::make_unique<StateService>(state, log, &handoff_,
                                                std::move(request_position));
  monitor_.Start();
  source_.SetHighestServerWal(
      [this] { return monitor_.highest_server_wal_lsn(); });
  return service;
}

}  // namespace walwatch
