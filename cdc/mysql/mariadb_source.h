// MariaDbSource is the ChangeSource (cdc/change_source.h) of a MariaDB or
// MySQL server: its binary log, read as a replica reads it (BinlogReader,
// on Connector/C), of the mapped table only.
//   * Positions. A binlog position (file, offset) is the uint64
//     BinlogVersion = history * 10^16 + file number * 10^10 + offset
//     (binlog_position.h), the history being the server's server_id modulo
//     1844: each server's RVs have a range of their own, the stream's
//     ceiling (StreamStart, HistoryReset). A transaction's commit position
//     is the end of the event that closes it (XID, COMMIT, or a DDL
//     statement), so c - 1 lies strictly between two commits. Heartbeats
//     and rotations are positions passed between transactions.
//   * Startup (mariadb_startup.cc): waits for a server that is down,
//     checks its settings, grants, table and walwatch's server id (one line
//     naming the fix each, mysql_checks.h), loads the resource catalog, and
//     starts the replay window: MySQL has no slot to remember where walwatch
//     was, so the stream starts at the newest binlog file that began
//     --replay-window ago (at most --replay-window-bytes of binlog back),
//     and watches from an RV inside it resume after a restart. The GTID
//     state there (MariaDB's BINLOG_GTID_POS) is recorded.
//   * The stream (mariadb_source.cc): a BinlogFetcher reads on a thread of
//     its own; Next takes what it queued, without waiting. Transactions
//     become neutral ones (ToTransaction), heartbeats (one per
//     --status-interval of silence) and rotations are positions passed. The
//     server is never told a position: Confirm only records it.
//   * Reconnects (binlog_recovery.cc): the stream reopens where it left
//     off, after checking that the server still has that history: the
//     same server_id (and on MySQL server_uuid), and the GTID state at the
//     resume position the one walwatch tracked (MariaDB). A binlog
//     purged before walwatch read it is a Gap (every watcher relists); a
//     server with another history (a failover, a server restored from a
//     backup, a binlog cut short by a crash) is a HistoryReset, and the
//     stream continues from the new server's end. The RVs the old one may
//     have served are fenced: in the event log if the new server's range
//     is the old one's (the same server_id); else the range refuses them,
//     and only handoffs are fenced (handoff_fence.h).
//
// Threads and ownership: as ChangeSource says; the fetcher's thread and a
// StopInterrupter's are the source's own. The catalog must outlive it.
#ifndef WALWATCH_CDC_MYSQL_MARIADB_SOURCE_H_
#define WALWATCH_CDC_MYSQL_MARIADB_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cdc/change_source.h"
#include "cdc/mysql/binlog_files.h"
#include "cdc/mysql/binlog_position.h"
#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/handoff_fence.h"
#include "cdc/mysql/mysql_conn.h"
#include "cdc/mysql/stop_interrupter.h"
#include "schema/table_mapping.h"

namespace walwatch {
class ResourceCatalog;
}

namespace walwatch::mysql {

class BinlogFetcher;

struct MariaDbSourceOptions {
  // The server; conn.database holds the mapped table (the mapping's schema
  // is PostgreSQL's, and not read here).
  MysqlConnParams conn;
  TableMapping mapping;
  // walwatch's server id as a replica, and the name it registers under
  // (SHOW SLAVE HOSTS), unique per walwatch replica.
  uint32_t server_id = 0;
  std::string replica_host;
  // The server sends a heartbeat after this long without events; nothing at
  // all for silence_timeout fails the stream (a silent partition).
  std::chrono::milliseconds heartbeat_period{1000};
  std::chrono::seconds silence_timeout{60};
  // Where the stream starts after a restart (see the header comment).
  std::chrono::milliseconds replay_window{std::chrono::minutes(10)};
  uint64_t replay_window_bytes = uint64_t{512} << 20;
  // Most bytes of row data one transaction may hold; a larger one keeps
  // none, and every watcher relists (the reader keeps no keys of it).
  size_t max_transaction_bytes = size_t{128} << 20;
};

class MariaDbSource final : public ChangeSource {
 public:
  MariaDbSource(MariaDbSourceOptions options, ResourceCatalog* catalog);
  ~MariaDbSource() override;
  MariaDbSource(const MariaDbSource&) = delete;
  MariaDbSource& operator=(const MariaDbSource&) = delete;

  // Before Run: the highest binlog position seen on the server in a
  // history (the monitor's). After a failover, RVs up to it may have been
  // served by other replicas, so the fence covers them.
  void SetHighestServerPosition(std::function<uint64_t(uint64_t)> highest);

  // What handoffs must refuse after a failover to another server_id (see
  // handoff_fence.h); the state service reads it.
  const HandoffFence* handoff_fence() const { return &handoff_fence_; }

  // ChangeSource.
  const char* database() const override { return "MySQL/MariaDB"; }
  LogField stream_field() const override;
  PositionFormatter position_formatter() const override;
  std::string Prepare(ReplicationStats* stats, StreamStart* start) override;
  bool connected() const override { return fetcher_ != nullptr; }
  Reconnected Reconnect(ChangeReceiver* receiver, std::string* error) override;
  void Recover(ChangeReceiver* receiver, const std::string& error) override;
  Step Next(ChangeReceiver* receiver, std::string* error) override;
  bool Wait(Clock::duration timeout, std::string* error) override;
  bool Confirm(uint64_t flush, bool want_position, std::string* error) override;
  uint64_t received() const override { return received_; }
  bool BusyWhileSilent(std::chrono::seconds silence) override;
  void Close() override;
  void Wake() override;
  void Stop() override { stop_.Raise(); }
  const StopSignal& stop_signal() const override { return stop_; }

 private:
  // An ordinary connection (queries), interruptible by Stop.
  std::string Connect(MysqlConnection* conn);
  // Opens a reader at `start` and hands it to a new fetcher.
  BinlogStatus StartStreaming(const BinlogPosition& start);
  BinlogReaderOptions ReaderOptions() const;

  // mariadb_startup.cc.
  std::string ConnectAtStartup(MysqlConnection* conn);
  std::string LoadCatalog(MysqlConnection* conn);
  // Where the replay window starts: a file's start. *purged: the window
  // reaches back past the oldest file the server keeps, and the server
  // wrote files before that one (they were purged).
  std::string ChooseStart(MysqlConnection* conn, BinlogPosition* start,
                          bool* purged);
  // The history markers at `at`: the server's server_id, and
  // MariaDB's GTID state or MySQL's server_uuid (gtid_state_,
  // server_uuid_).
  std::string RecordHistory(MysqlConnection* conn, const BinlogPosition& at);
  uint64_t history() const { return BinlogHistory(source_server_id_); }

  // binlog_recovery.cc.
  enum class History { kSame, kPurged, kOther };
  // Whether the server still has the history walwatch read up to resume_.
  std::string CheckHistory(MysqlConnection* conn, History* history,
                           std::string* why);
  // The binlog walwatch still needed was purged: continue at the oldest
  // file the server keeps, after a Gap.
  std::string ContinueAfterPurge(MysqlConnection* conn,
                                 ChangeReceiver* receiver);
  // Another history: continue at the server's end, after a HistoryReset
  // whose fence covers what the old history may have served.
  std::string ContinueInNewHistory(MysqlConnection* conn,
                                   ChangeReceiver* receiver,
                                   const std::string& why);

  const MariaDbSourceOptions opt_;
  ResourceCatalog* const catalog_;
  StopSignal stop_;
  // An eventfd: Wake() and every item the fetcher queues end a Wait.
  const int wake_fd_;
  StopInterrupter interrupter_;
  // The server is MariaDB (else MySQL), once Prepare has asked.
  bool mariadb_ = true;
  std::unique_ptr<BinlogFetcher> fetcher_;
  // Where reading again loses nothing: the end of the last item taken.
  BinlogPosition resume_;
  // The history walwatch read up to resume_: the server's server_id, whose
  // BinlogHistory every version carries (history()); MariaDB's GTID state
  // there; MySQL's server_uuid.
  uint64_t source_server_id_ = 0;
  std::optional<GtidState> gtid_state_;
  std::string server_uuid_;
  // The last open failed because the server has no event at the resume
  // position: the next reconnect takes it for another history.
  bool no_position_ = false;
  // The newest position taken on this connection (received()).
  uint64_t received_ = 0;
  // BusyWhileSilent: the reader's bytes when last asked.
  uint64_t bytes_at_last_check_ = 0;
  bool waiting_for_busy_reader_ = false;
  std::function<uint64_t(uint64_t)> highest_server_position_;
  HandoffFence handoff_fence_;
  Transaction txn_;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_MARIADB_SOURCE_H_
