#include "watchserver/metric_hooks.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cdc/base/clock.h"
#include "cdc/database.h"
#include "cdc/replication_stream.h"
#include "cdc/state_workers.h"
#include "watchserver/event_log.h"
#include "watchserver/http_server.h"
#include "watchserver/metrics.h"

namespace walwatch {

void RegisterReplicationMetrics(Metrics* m,
                                const ReplicationStream& replication,
                                const EventLog& log,
                                const ServerMonitor& monitor) {
  const ReplicationStats& s = replication.stats();
  auto counter = [m](const char* name, const char* help,
                     const std::atomic<uint64_t>& v) {
    m->AddCounter(name, help, [&v] { return static_cast<double>(v.load()); });
  };
  m->AddLabeledCounter("walwatch_events_decoded_total",
                       "Watch events built from the replication stream, by type.",
                       "type", "ADDED",
                       [&s] { return static_cast<double>(s.events_added.load()); });
  m->AddLabeledCounter("walwatch_events_decoded_total", "", "type", "MODIFIED",
                       [&s] { return static_cast<double>(s.events_modified.load()); });
  m->AddLabeledCounter("walwatch_events_decoded_total", "", "type", "DELETED",
                       [&s] { return static_cast<double>(s.events_deleted.load()); });
  counter("walwatch_transactions_total",
          "Transactions received: wal2json sends every transaction's "
          "begin and commit, empty for other tables; pgoutput (from "
          "PostgreSQL 15 on) only those that changed a published table.",
          s.transactions);
  counter("walwatch_duplicate_transactions_total",
          "Transactions the server sent again after a reconnect, dropped.",
          s.duplicate_transactions);
  counter("walwatch_unchanged_updates_total",
          "UPDATEs that changed nothing a watcher sees (no event).",
          s.unchanged_updates);
  counter("walwatch_decode_errors_total",
          "PostgreSQL replication messages (wal2json or pgoutput) that "
          "could not be decoded.",
          s.decode_errors);
  counter("walwatch_row_errors_total",
          "Rows that could not become watch events.", s.row_errors);
  counter("walwatch_reconnects_total",
          "Successful reconnections to the database.", s.reconnects);
  counter("walwatch_history_resets_total",
          "Replication slots recreated below what walwatch had served: "
          "PostgreSQL's history went back (a failover to a server that was "
          "behind). Every watcher relisted; a fence refuses the ambiguous "
          "resourceVersions.",
          s.history_resets);
  counter("walwatch_busy_walsender_waits_total",
          "Replication timeouts not taken as a dead connection: the walsender "
          "was busy decoding a large transaction of other tables.",
          s.busy_walsender_waits);
  counter("walwatch_slot_recreations_total",
          "Times the replication slot was lost and recreated.",
          s.slot_recreations);
  m->AddGauge("walwatch_slot_recreated_timestamp_seconds",
              "When the replication slot was last lost and recreated (Unix "
              "seconds); 0 if it has not been since walwatch started.",
              [&s] { return s.slot_recreated_unix_us.load() / 1e6; });
  counter("walwatch_barriers_total",
          "TRUNCATEs, lost slots and oversized transactions that ended every "
          "watch with 410.",
          s.barriers);
  counter("walwatch_stream_gaps_total",
          "Times the stream lost what committed up to a position and went on "
          "after it: a replication slot lost or moved (PostgreSQL), a binlog "
          "purged before walwatch read it (MySQL). Every watcher relisted.",
          s.gaps);
  counter("walwatch_received_bytes_total",
          "Bytes of replication messages received.", s.bytes_received);
  m->AddGauge("walwatch_replication_streaming",
              "1 while the replication stream is open.",
              [&replication] { return replication.streaming() ? 1.0 : 0.0; });
  m->AddGauge(
      "walwatch_replication_lag_bytes",
      "The database's log (PostgreSQL's WAL, MySQL's binlog) past "
      "the position walwatch has decoded, in bytes.",
      [&s, &monitor] {
        return static_cast<double>(monitor.LagBytes(s.decoded_lsn.load()));
      });
  m->AddGauge(
      "walwatch_replication_lag_seconds",
      "Seconds since the commit of the last transaction received, "
      "while the database's log remains to be decoded; 0 when "
      "caught up.",
      [&s, &monitor] {
        int64_t commit = s.last_commit_time_us.load();
        if (monitor.LagBytes(s.decoded_lsn.load()) == 0 || commit == 0) {
          return 0.0;
        }
        return std::max(0.0, (NowUnixMicros() - commit) / 1e6);
      });
  m->AddGauge("walwatch_last_commit_timestamp_seconds",
              "Commit time of the last transaction received (Unix seconds).",
              [&s] { return s.last_commit_time_us.load() / 1e6; });
  m->AddGauge(
      "walwatch_confirmed_flush_lsn",
      "The flush position last confirmed to the source (PostgreSQL: the "
      "slot's; MySQL: the start of the replay window, kept by walwatch).",
      [&s] { return static_cast<double>(s.confirmed_lsn.load()); });
  // The database's own (PostgreSQL: the slot's retained WAL, wal_status,
  // a synchronous walsender).
  for (const ServerMonitor::Gauge& g : monitor.Gauges()) {
    if (g.label.empty()) {
      m->AddGauge(g.name, g.help, g.read);
    } else {
      m->AddLabeledGauge(g.name, g.help, g.label, g.label_value, g.read);
    }
  }
  m->AddGauge("walwatch_event_log_bytes",
              "Bytes held by the event log: its events and, once each, the "
              "filter fields they share.",
              [&log] { return static_cast<double>(log.GetStats().bytes); });
  m->AddGauge("walwatch_event_log_events", "Events held by the event log.",
              [&log] { return static_cast<double>(log.GetStats().events); });
  m->AddGauge("walwatch_event_log_oldest_rv",
              "resourceVersion of the oldest event retained.",
              [&log] { return static_cast<double>(log.GetStats().oldest_rv); });
  m->AddGauge("walwatch_event_log_floor_rv",
              "Watches may resume from this resourceVersion or newer.",
              [&log] { return static_cast<double>(log.floor_rv()); });
  m->AddGauge("walwatch_current_rv",
              "The newest resourceVersion: the stream has passed it.",
              [&log] { return static_cast<double>(log.current_rv()); });
  m->AddCounter("walwatch_event_log_evicted_transactions_total",
                "Transactions evicted from the event log to respect its bound.",
                [&log] {
                  return static_cast<double>(log.GetStats().evicted_transactions);
                });
}

void RegisterServingMetrics(Metrics* m, const HttpServer* server,
                            StateWorkerPool* state, size_t max_connections,
                            size_t max_connection_buffer_bytes) {
  m->AddGauge("walwatch_connections",
              "Client connections open (watches, probes, requests).", [server] {
                return static_cast<double>(server->active_sessions());
              });
  m->AddGauge(
      "walwatch_connections_limit",
      "--max-connections, resolved: connections past it are "
      "answered 429.",
      [max_connections] { return static_cast<double>(max_connections); });
  m->AddLabeledCounter(
      "walwatch_connections_refused_total",
      "Connections refused: past --max-connections (limit, answered 429) "
      "or not on the socket's allow-list (peer, closed).",
      "reason", "limit", [server] {
        return static_cast<double>(server->connections_refused().limit);
      });
  m->AddLabeledCounter(
      "walwatch_connections_refused_total", "", "reason", "peer", [server] {
        return static_cast<double>(server->connections_refused().peer);
      });
  m->AddGauge("walwatch_state_reads_queued",
              "Initial states waiting for a state worker: all of them "
              "busy, or their client holding its share (half of "
              "--state-workers).",
              [state] { return static_cast<double>(state->queued_states()); });
  m->AddGauge(
      "walwatch_connection_buffer_bytes",
      "Bytes connections hold in request buffers (requests being read and "
      "their parsed headers) and in stalled watchers' pending writes; "
      "bounded by walwatch_connection_buffer_limit_bytes.",
      [server] {
        return static_cast<double>(server->connection_buffer_bytes());
      });
  m->AddGauge("walwatch_connection_buffer_limit_bytes",
              "--max-connection-buffer-bytes: the most bytes "
              "walwatch_connection_buffer_bytes may reach.",
              [limit = max_connection_buffer_bytes] {
                return static_cast<double>(limit);
              });
  m->AddLabeledCounter(
      "walwatch_connection_buffer_refused_total",
      "Allocations the connection buffer budget refused: of a request "
      "(answered 429) or of a stalled watcher's pending write (the watch "
      "ended, its connection closed).",
      "what", "request", [server] {
        return static_cast<double>(
            server->connection_buffer_refusals().request);
      });
  m->AddLabeledCounter(
      "walwatch_connection_buffer_refused_total", "", "what", "watch",
      [server] {
        return static_cast<double>(server->connection_buffer_refusals().watch);
      });
}

}  // namespace walwatch
