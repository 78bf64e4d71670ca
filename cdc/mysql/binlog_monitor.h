// BinlogMonitor polls a MySQL/MariaDB server, on its own thread and
// connection, for what the binlog stream cannot see: where the server's
// binlog ends (SHOW MASTER STATUS) and which files it keeps (SHOW BINARY
// LOGS), for the replication lag in bytes and /readyz; the highest
// position ever seen, for the fence after a failover; and how long the
// server keeps its binlog (ReadBinlogRetention, as the startup check reads
// it), exported beside the replay window it must cover.
//
// Thread safety: Start/Stop from one thread; the accessors from any.
#ifndef WALWATCH_CDC_MYSQL_BINLOG_MONITOR_H_
#define WALWATCH_CDC_MYSQL_BINLOG_MONITOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "cdc/base/mutex.h"
#include "cdc/database.h"
#include "cdc/mysql/binlog_files.h"
#include "cdc/mysql/mysql_conn.h"

namespace walwatch {
class StopSignal;
}

namespace walwatch::mysql {

class StopInterrupter;

struct BinlogMonitorOptions {
  MysqlConnParams conn;
  std::chrono::milliseconds interval{std::chrono::seconds(2)};
  // --replay-window, exported as walwatch_replay_window_seconds.
  std::chrono::seconds replay_window{0};
};

class BinlogMonitor final : public ServerMonitor {
 public:
  explicit BinlogMonitor(BinlogMonitorOptions options);
  ~BinlogMonitor() override;  // stops

  void Start();
  void Stop();

  // The server's binlog end as a BinlogVersion (in the history of the
  // server polled); 0 until the first poll.
  uint64_t server_position() const { return server_position_.load(); }
  // The highest server_position ever polled in `history` (BinlogHistory),
  // or 0.
  uint64_t highest_server_position(uint64_t history) const;

  // The server's binlog retention in seconds as last polled (0: never
  // purged automatically); -1 until the first poll.
  int64_t retention_seconds() const { return retention_seconds_.load(); }

  // ServerMonitor: the lag is the binlog bytes between `decoded` and the
  // server's end, across the files it keeps. Gauges:
  // walwatch_binlog_retention_seconds and walwatch_replay_window_seconds.
  const char* log_name() const override { return "binlog"; }
  bool server_position_known() const override { return server_position() != 0; }
  uint64_t LagBytes(uint64_t decoded) const override;
  std::vector<Gauge> Gauges() const override;

 private:
  void Loop();
  bool PollOnce(MysqlConnection* conn);

  const BinlogMonitorOptions options_;
  std::atomic<uint64_t> server_position_{0};
  std::atomic<int64_t> retention_seconds_{-1};
  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  BinlogPosition end_ GUARDED_BY(mu_);
  std::vector<BinlogFile> files_ GUARDED_BY(mu_);
  // The polled server's history, and the highest end polled in each.
  uint64_t history_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, uint64_t> highest_ GUARDED_BY(mu_);
  bool warned_ = false;
  const std::unique_ptr<StopSignal> stop_signal_;
  const std::unique_ptr<StopInterrupter> interrupter_;
  std::thread thread_;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_BINLOG_MONITOR_H_
