#include "cdc/mysql/mariadb.h"

#include <utility>

namespace walwatch::mysql {

namespace {

BinlogMonitorOptions MonitorOptions(const MariaDbOptions& o) {
  BinlogMonitorOptions m;
  m.conn = o.source.conn;
  m.replay_window =
      std::chrono::duration_cast<std::chrono::seconds>(o.source.replay_window);
  return m;
}

}  // namespace

MariaDb::MariaDb(MariaDbOptions options, ResourceCatalog* catalog)
    : options_(std::move(options)),
      source_(options_.source, catalog),
      monitor_(MonitorOptions(options_)) {}

MariaDb::~MariaDb() = default;

std::unique_ptr<StateWorkerPool> MariaDb::Start(
    EventSink* log, std::function<void()> request_position) {
  MariaDbStateOptions state;
  state.conn = options_.source.conn;
  state.mapping = options_.source.mapping;
  state.workers = options_.state_workers;
  state.catch_up_timeout = options_.catch_up_timeout;
  state.query_timeout = options_.source.silence_timeout;
  state.handoff_fence = source_.handoff_fence();
  auto service = std::make_unique<MariaDbStateService>(state, log);
  monitor_.Start();
  source_.SetHighestServerPosition([this](uint64_t history) {
    return monitor_.highest_server_position(history);
  });
  return service;
}

}  // namespace walwatch::mysql
