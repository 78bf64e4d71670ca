// The metrics whose values live in walwatch's other parts, registered on a
// Metrics (metrics.h) as read hooks that run at each scrape: the
// replication stream's counters, the database's view of its server (its
// ServerMonitor, cdc/database.h: the lag and the database's own gauges),
// the event log's size and positions, and the HTTP server's connections
// and buffers. main() calls these once each, in this order (the order of
// /metrics), before anything scrapes. The names, help texts and labels are
// the ones README.md, watchserver/PROTOCOL.md and packaging/ name
// (tests/packaging checks them against a scrape).
//
// Ownership: the hooks keep pointers and references to the objects passed
// in; each must outlive every later Metrics::Scrape.
// Thread safety: the hooks run on the scraping thread and read only atomics
// and the thread-safe accessors of those objects.
//
// Built into the walwatch binary, beside main.cc, not into the watchserver
// library: it reads cdc/'s ReplicationStream, ServerMonitor and
// StateWorkerPool.
#ifndef WALWATCH_WATCHSERVER_METRIC_HOOKS_H_
#define WALWATCH_WATCHSERVER_METRIC_HOOKS_H_

#include <cstddef>

namespace walwatch {

class EventLog;
class HttpServer;
class Metrics;
class ReplicationStream;
class ServerMonitor;
class StateWorkerPool;

// walwatch_events_decoded_total, walwatch_transactions_total and the other
// counters of the replication stream; the lag, slot and WAL gauges; the
// event log's walwatch_event_log_* and walwatch_current_rv.
void RegisterReplicationMetrics(Metrics* m,
                                const ReplicationStream& replication,
                                const EventLog& log,
                                const ServerMonitor& monitor);

// walwatch_connections*, walwatch_connection_buffer_* and
// walwatch_state_reads_queued. `max_connections` is --max-connections
// resolved; `max_connection_buffer_bytes` --max-connection-buffer-bytes.
void RegisterServingMetrics(Metrics* m, const HttpServer* server,
                            StateWorkerPool* state, size_t max_connections,
                            size_t max_connection_buffer_bytes);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_METRIC_HOOKS_H_
