// What main takes from a database's entry point (cdc/postgres/postgres.h,
// cdc/mysql/mariadb.h), the same for every database: the change source the
// replication loop drives, the state service the HTTP layer asks, and a
// monitor of the server beside the stream (its log's end, for the lag and
// readiness, and gauges of its own). main picks the entry point from its
// configuration; nothing else under watchserver/ knows which one it is.
//
// Ownership and threads: main owns the Database, declared before the
// ReplicationStream that borrows its source, and destroys the state service
// Start returns before the sink it was given. Start and Stop are called by
// main's thread; the monitor's accessors from any thread.
#ifndef WALWATCH_CDC_DATABASE_H_
#define WALWATCH_CDC_DATABASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace walwatch {

class ChangeSource;
class EventSink;
class StateWorkerPool;

// The server beside the stream, polled on a thread of its own.
class ServerMonitor {
 public:
  virtual ~ServerMonitor() = default;

  // What the database calls its log, in messages: "WAL", "binlog".
  virtual const char* log_name() const = 0;
  // Whether the server's log position has been read at least once.
  virtual bool server_position_known() const = 0;
  // Bytes of the server's log after `decoded`, a position of the source's
  // stream (ReplicationStats::decoded_lsn); 0 when caught up or unknown.
  virtual uint64_t LagBytes(uint64_t decoded) const = 0;

  // A gauge of the database's own for /metrics (PostgreSQL: the slot's
  // retained WAL and wal_status), read at each scrape.
  struct Gauge {
    std::string name;
    std::string help;
    std::string label;  // empty: no label
    std::string label_value;
    std::function<double()> read;
  };
  // The same list at every call; the readers must not outlive the monitor.
  virtual std::vector<Gauge> Gauges() const = 0;
};

class Database {
 public:
  virtual ~Database() = default;

  // For the ReplicationStream.
  virtual ChangeSource* source() = 0;

  // Once the source is prepared and the sink made: starts the monitor and
  // returns the state service over `log`, which asks `request_position`
  // (ReplicationStream::RequestPosition) for fresh positions. Call before
  // the stream runs.
  virtual std::unique_ptr<StateWorkerPool> Start(
      EventSink* log, std::function<void()> request_position) = 0;
  // Stops the monitor.
  virtual void Stop() = 0;

  virtual const ServerMonitor& monitor() const = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_DATABASE_H_
