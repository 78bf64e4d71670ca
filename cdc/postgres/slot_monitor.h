// SlotMonitor polls PostgreSQL, on its own thread and connection, for what
// the replication stream cannot see: the server's WAL position (for the
// replication lag) and the slot's retained WAL and wal_status. It warns in the
// log when the slot retains more than a threshold: a stopped or slow consumer
// keeps WAL until the disk is full unless max_slot_wal_keep_size is set. It
// also reports, with an error in the log, a walsender that
// synchronous_standby_names made a synchronous standby.
//
// Thread safety: Start/Stop from one thread; the accessors from any.
#ifndef WALWATCH_CDC_POSTGRES_SLOT_MONITOR_H_
#define WALWATCH_CDC_POSTGRES_SLOT_MONITOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cdc/base/mutex.h"
#include "cdc/database.h"

namespace walwatch {

// Whether PostgreSQL's synchronous_standby_names `setting` names
// `application_name` as a synchronous standby candidate: '*' or the name
// (case-insensitive, double quotes removed), in any of the forms
// "a, b", "[FIRST] n (a, b)" and "ANY n (a, b)". pg_stat_replication shows
// sync_state only to roles with pg_read_all_stats; this is the fallback.
bool SynchronousStandbyNamesMatch(std::string_view setting,
                                  std::string_view application_name);

class StopSignal;

struct SlotMonitorOptions {
  std::string conninfo;
  std::string slot;
  int connect_timeout_seconds = 10;
  std::chrono::milliseconds interval{std::chrono::seconds(2)};
  uint64_t retained_warn_bytes = uint64_t{1} << 30;
};

class SlotMonitor final : public ServerMonitor {
 public:
  explicit SlotMonitor(SlotMonitorOptions options);
  ~SlotMonitor() override;  // stops

  void Start();
  void Stop();

  // 0 until the first successful poll.
  uint64_t server_wal_lsn() const { return server_wal_lsn_.load(); }
  // The highest server_wal_lsn ever polled: after a failover to a server
  // that was behind, the old server's last known position.
  uint64_t highest_server_wal_lsn() const {
    return highest_server_wal_lsn_.load();
  }
  uint64_t retained_bytes() const { return retained_bytes_.load(); }
  // Whether the slot's walsender is a synchronous standby (sync_state other
  // than async): then commits on the server wait for walwatch's flush.
  bool synchronous() const { return synchronous_.load(); }
  // reserved, extended, unreserved, lost; "missing" if the slot is gone;
  // "unknown" while polls fail (the server cannot be asked); "" before the
  // first poll.
  std::string wal_status() const;
  uint64_t poll_errors() const { return poll_errors_.load(); }

  // ServerMonitor: the lag is the WAL between `decoded` and the server's
  // position; the gauges are walwatch_slot_retained_wal_bytes,
  // walwatch_walsender_synchronous and walwatch_slot_wal_status{status}.
  const char* log_name() const override { return "WAL"; }
  bool server_position_known() const override { return server_wal_lsn() != 0; }
  uint64_t LagBytes(uint64_t decoded) const override;
  std::vector<Gauge> Gauges() const override;

 private:
  void Loop();
  bool PollOnce(void* conn);

  const SlotMonitorOptions options_;
  std::atomic<uint64_t> server_wal_lsn_{0};
  std::atomic<uint64_t> highest_server_wal_lsn_{0};
  std::atomic<uint64_t> retained_bytes_{0};
  std::atomic<uint64_t> poll_errors_{0};
  std::atomic<bool> synchronous_{false};
  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  // Interrupts a poll that waits on the network.
  const std::unique_ptr<StopSignal> stop_signal_;
  std::string wal_status_ GUARDED_BY(mu_);
  bool warned_ = false;
  std::thread thread_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_SLOT_MONITOR_H_
