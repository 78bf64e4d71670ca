#include "cdc/postgres/slot_monitor.h"

#include <cctype>

#include "cdc/base/logging.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_conn.h"

namespace walwatch {

bool SynchronousStandbyNamesMatch(std::string_view setting,
                                  std::string_view application_name) {
  auto trim = [](std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) {
      v.remove_prefix(1);
    }
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) {
      v.remove_suffix(1);
    }
    return v;
  };
  auto equal_folded = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(a[i])) !=
          std::tolower(static_cast<unsigned char>(b[i]))) {
        return false;
      }
    }
    return true;
  };
  std::string_view list = trim(setting);
  if (size_t open = list.find('('); open != std::string_view::npos) {
    size_t close = list.rfind(')');
    if (close == std::string_view::npos || close < open) return false;
    list = list.substr(open + 1, close - open - 1);
  }
  // Names separated by commas: "quoted" ("" is a quote inside) or bare.
  size_t i = 0;
  while (i < list.size()) {
    while (i < list.size() && std::isspace(static_cast<unsigned char>(list[i]))) {
      ++i;
    }
    std::string name;
    bool quoted = false;
    if (i < list.size() && list[i] == '"') {
      quoted = true;
      for (++i; i < list.size(); ++i) {
        if (list[i] != '"') {
          name.push_back(list[i]);
        } else if (i + 1 < list.size() && list[i + 1] == '"') {
          name.push_back('"');
          ++i;
        } else {
          ++i;
          break;
        }
      }
    }
    size_t comma = list.find(',', i);
    if (!quoted) name = std::string(trim(list.substr(i, comma - i)));
    if (name == "*" ||
        (!name.empty() && equal_folded(name, application_name))) {
      return true;
    }
    if (comma == std::string_view::npos) break;
    i = comma + 1;
  }
  return false;
}

uint64_t SlotMonitor::LagBytes(uint64_t decoded) const {
  const uint64_t server = server_wal_lsn();
  return server > decoded ? server - decoded : 0;
}

std::vector<ServerMonitor::Gauge> SlotMonitor::Gauges() const {
  std::vector<Gauge> gauges;
  gauges.push_back({"walwatch_slot_retained_wal_bytes",
                    "WAL the replication slot keeps on the server (current "
                    "WAL position minus restart_lsn).",
                    "", "",
                    [this] { return static_cast<double>(retained_bytes()); }});
  gauges.push_back({"walwatch_walsender_synchronous",
                    "1 while the slot's walsender is a synchronous standby "
                    "(synchronous_standby_names matches walwatch): commits "
                    "then wait for walwatch's confirmed flush.",
                    "", "", [this] { return synchronous() ? 1.0 : 0.0; }});
  for (const char* status :
       {"reserved", "extended", "unreserved", "lost", "missing", "unknown"}) {
    gauges.push_back({"walwatch_slot_wal_status",
                      "1 for the slot's current wal_status (missing: no "
                      "such slot; unknown: the last poll failed).",
                      "status", status, [this, status] {
                        return wal_status() == status ? 1.0 : 0.0;
                      }});
  }
  return gauges;
}

SlotMonitor::SlotMonitor(SlotMonitorOptions options)
    : options_(std::move(options)),
      stop_signal_(std::make_unique<StopSignal>()) {}

SlotMonitor::~SlotMonitor() { Stop(); }

void SlotMonitor::Start() { thread_ = std::thread([this] { Loop(); }); }

void SlotMonitor::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  stop_signal_->Raise();
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

std::string SlotMonitor::wal_status() const {
  MutexLock lock(&mu_);
  return wal_status_;
}

// A poll the server does not answer within this long counts as failed,
// and the connection is reopened: the gauges would otherwise go stale.
constexpr std::chrono::seconds kPollTimeout{10};

bool SlotMonitor::PollOnce(void* c) {
  PGconn* conn = static_cast<PGconn*>(c);
  std::string err;
  // On a standby pg_current_wal_lsn() fails; the replay position is the
  // newest WAL there.
  PgResult r = PgQuery(
      conn,
      "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
      "ELSE pg_current_wal_lsn() END)::text, "
      "(SELECT coalesce(wal_status, '') || ':' || "
      "coalesce((CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
      "ELSE pg_current_wal_lsn() END) - restart_lsn, 0)::bigint::text "
      "FROM pg_replication_slots WHERE slot_name = $1), "
      // The slot's walsender as pg_stat_replication sees it: 'async', or
      // a synchronous standby's state.
      "(SELECT r.sync_state FROM pg_stat_replication r JOIN "
      "pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1), "
      // Without pg_read_all_stats sync_state is NULL: then match the
      // setting against the walsender's application_name (its own role
      // sees that in pg_stat_activity).
      "(SELECT a.application_name FROM pg_stat_activity a JOIN "
      "pg_replication_slots s ON s.active_pid = a.pid WHERE s.slot_name = $1), "
      "current_setting('synchronous_standby_names')",
      {options_.slot}, &err, stop_signal_.get(), kPollTimeout);
  if (!r) {
    if (stop_signal_->raised()) return false;
    ++poll_errors_;
    LogWarn("cannot read the slot's state", {{"error", err}});
    return false;
  }
  auto lsn = ParseLsn(PQgetvalue(r.get(), 0, 0));
  if (lsn) {
    server_wal_lsn_ = *lsn;
    if (*lsn > highest_server_wal_lsn_) highest_server_wal_lsn_ = *lsn;
  }
  std::string status = "missing";
  uint64_t retained = 0;
  if (!PQgetisnull(r.get(), 0, 1)) {
    std::string v = PQgetvalue(r.get(), 0, 1);
    size_t colon = v.rfind(':');
    status = v.substr(0, colon);
    retained = std::stoull(v.substr(colon + 1));
  }
  retained_bytes_ = retained;
  std::string sync_state =
      PQgetisnull(r.get(), 0, 2) ? "" : PQgetvalue(r.get(), 0, 2);
  if (sync_state.empty() && !PQgetisnull(r.get(), 0, 3) &&
      SynchronousStandbyNamesMatch(PQgetvalue(r.get(), 0, 4),
                                   PQgetvalue(r.get(), 0, 3))) {
    sync_state = "named in synchronous_standby_names";
  }
  const bool synchronous = !sync_state.empty() && sync_state != "async";
  if (synchronous && !synchronous_) {
    LogError(
        "walwatch's walsender is a synchronous standby: "
        "synchronous_standby_names matches its application_name, so commits "
        "wait for the flush walwatch confirms, which lags by the replay "
        "window; exclude walwatch from synchronous_standby_names",
        {{"slot", options_.slot}, {"sync_state", sync_state}});
  }
  synchronous_ = synchronous;
  {
    MutexLock lock(&mu_);
    wal_status_ = status;
  }
  if (retained > options_.retained_warn_bytes && !warned_) {
    LogWarn("the replication slot retains much WAL; set "
            "max_slot_wal_keep_size so that it cannot fill the disk",
            {{"slot", options_.slot}, {"retained_bytes", retained}});
    warned_ = true;
  } else if (retained <= options_.retained_warn_bytes / 2) {
    warned_ = false;
  }
  return true;
}

void SlotMonitor::Loop() {
  PgConn conn;
  for (;;) {
    if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
      conn = ConnectPg(options_.conninfo, false,
                       options_.connect_timeout_seconds);
      if (PQstatus(conn.get()) != CONNECTION_OK) {
        ++poll_errors_;
        conn.reset();
      }
    }
    // A failed poll may leave its query pending (a timeout): start over.
    if (conn && !PollOnce(conn.get())) conn.reset();
    if (!conn && !stop_signal_->raised()) {
      // The last status read may no longer hold (a slot invalidated while
      // the server cannot be asked, say): say it is unknown, rather than
      // keep showing it. The other readings keep their last value.
      MutexLock lock(&mu_);
      wal_status_ = "unknown";
    }
    MutexLock lock(&mu_);
    if (cv_.WaitFor(&lock, options_.interval,
                    [this]() REQUIRES(mu_) { return stop_; })) {
      return;
    }
  }
}

}  // namespace walwatch
