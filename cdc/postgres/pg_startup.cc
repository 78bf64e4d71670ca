// PostgresSource's startup (ChangeSource::Prepare): the server, the table
// and the slot are checked or made, and the stream starts.
#include <algorithm>
#include <string>
#include <string_view>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_checks.h"
#include "cdc/postgres/pg_conn.h"
#include "cdc/postgres/pg_handoff.h"
#include "cdc/postgres/postgres_source.h"
#include "cdc/replication_stats.h"

namespace walwatch {

namespace {

// How long startup waits for a slot active in another process.
constexpr std::chrono::seconds kSlotBusyStartupWait{150};
// How long startup waits for a server that is down: a database restarted
// with the pod, or failing over, is waited for rather than answered with
// an exit and the kubelet's crash-loop backoff. Within the startupProbe of
// packaging/kubernetes (180 s).
constexpr std::chrono::seconds kServerDownStartupWait{150};

// PostgreSQL has no TLS on its Unix socket: libpq connects there in the
// clear whatever sslmode asks, verify-full included. Said at startup, so
// that such a conninfo is not taken for an encrypted one.
void WarnOfSslmodeWithoutTls(PGconn* conn) {
  if (PQsslInUse(conn)) return;
  std::string mode;
  PQconninfoOption* options = PQconninfo(conn);
  for (PQconninfoOption* o = options; o != nullptr && o->keyword != nullptr;
       ++o) {
    if (std::string_view(o->keyword) == "sslmode" && o->val != nullptr) {
      mode = o->val;
    }
  }
  PQconninfoFree(options);
  if (mode == "require" || mode == "verify-ca" || mode == "verify-full") {
    LogWarn("sslmode=" + mode +
                " has no effect on a Unix socket: PostgreSQL offers no TLS "
                "there, and this connection is local and unencrypted (use a "
                "TCP host for TLS)",
            {{"host", std::string(PQhost(conn) ? PQhost(conn) : "")}});
  }
}

// Prepare's connection. A server that does not answer, or refuses
// connections while it starts or shuts down, is retried with backoff for
// up to kServerDownStartupWait; any other failure (the login, the
// database, TLS certificates and keys) is returned at once.
std::string ConnectAtStartup(const PostgresSourceOptions& opt,
                             const StopSignal& stop, PgConn* conn) {
  const auto give_up = Clock::now() + kServerDownStartupWait;
  std::chrono::milliseconds delay{500};
  for (int attempt = 1;; ++attempt) {
    *conn = ConnectPg(opt.conninfo, /*replication=*/false,
                      opt.connect_timeout_seconds);
    if (PQstatus(conn->get()) == CONNECTION_OK) {
      WarnOfSslmodeWithoutTls(conn->get());
      return "";
    }
    const std::string pg_error = PgError(conn->get());
    std::string err =
        "cannot connect to PostgreSQL: " + ExplainPgError(pg_error);
    conn->reset();
    if (IsClientTlsError(pg_error)) return err;
    // A server that takes connections refused walwatch's own: waiting
    // will not fix a password, a database name or pg_hba.conf.
    const PGPing ping = PingPg(opt.conninfo, opt.connect_timeout_seconds);
    if (ping != PQPING_NO_RESPONSE && ping != PQPING_REJECT) return err;
    if (Clock::now() + delay >= give_up) {
      return err + " (the server has not answered for " +
             std::to_string(kServerDownStartupWait.count()) + " s)";
    }
    LogWarn("PostgreSQL does not answer yet (down, starting or shutting "
            "down); retrying",
            {{"attempt", attempt},
             {"delay_ms", static_cast<int64_t>(delay.count())},
             {"error", err}});
    if (!stop.WaitFor(delay)) return "stopped";
    delay = std::min<std::chrono::milliseconds>(delay * 2,
                                                std::chrono::seconds(10));
  }
}

}  // namespace

std::string PostgresSource::Prepare(ReplicationStats* stats,
                                    StreamStart* start) {
  PgConn conn;
  if (std::string err = ConnectAtStartup(opt_, stop_, &conn); !err.empty()) {
    return err;
  }
  if (std::string err = CheckDatabase(conn.get(), opt_.mapping, &stop_);
      !err.empty()) {
    return err;
  }
  if (format_.pgoutput) {
    if (std::string err = EnsurePublication(conn.get(), format_.publication,
                                            opt_.mapping, &stop_);
        !err.empty()) {
      return err;
    }
  }
  SlotState slot;
  if (std::string err =
          ReadSlot(conn.get(), opt_.slot, slot_spec_, &slot, &stop_);
      !err.empty()) {
    return err;
  }
  if (slot.exists && slot.wal_status == "lost") {
    LogWarn("replication slot was invalidated; dropping and recreating it",
            {{"slot", opt_.slot}});
    if (std::string err = DropSlot(conn.get(), opt_.slot, &stop_);
        !err.empty()) {
      return err;
    }
    stats->SlotRecreated(NowUnixMicros());
    slot.exists = false;
  }
  if (!slot.exists) {
    if (std::string err = CreateSlot(conn.get(), opt_.slot, slot_spec_, &stop_);
        !err.empty()) {
      return err;
    }
    if (std::string err =
            ReadSlot(conn.get(), opt_.slot, slot_spec_, &slot, &stop_);
        !err.empty()) {
      return err;
    }
    LogInfo("created replication slot",
            {{"slot", opt_.slot},
             {"confirmed_flush_lsn", FormatLsn(slot.confirmed_flush)}});
  }
  if (slot_spec_.failover && !slot.failover) {
    LogWarn("the replication slot is not a failover slot, though "
            "--slot-failover is given: a standby keeps no copy of it, and "
            "after a failover every watcher relists (fix: drop the slot "
            "while walwatch is stopped, so that it is created again as a "
            "failover slot)",
            {{"slot", opt_.slot}});
  }
  // Read after the slot's position: a transaction with an xid at or above
  // xmax started later, so it commits after the position.
  std::string err;
  PgResult snap = PgQuery(conn.get(), "SELECT pg_current_snapshot()::text", {},
                          &err, &stop_);
  if (!snap) return "cannot read pg_current_snapshot(): " + err;
  size_t colon = std::string(PQgetvalue(snap.get(), 0, 0)).find(':');
  const uint64_t next_xid = std::stoull(
      std::string(PQgetvalue(snap.get(), 0, 0)).substr(colon + 1));
  xid_reference_ = next_xid;
  handoff_->SetClassifiableFromXid(next_xid);
  if (std::string e = LoadCatalog(conn.get(), opt_.mapping, catalog_, &stop_);
      !e.empty()) {
    return e;
  }
  conn.reset();
  // The server sends every transaction whose commit record starts at or
  // after confirmed_flush, so the stream continues after confirmed_flush-1.
  start->floor_rv = slot.confirmed_flush > 0 ? slot.confirmed_flush - 1 : 0;
  // 55006: the slot is active in another process. After a node was lost,
  // that is the previous walwatch's walsender, which lives on until
  // wal_sender_timeout ends it (or TCP gives up on its client): wait for
  // it rather than exit into a crash-loop backoff. A second walwatch with
  // the same slot name keeps it for good, and is told so in the end.
  const auto give_up = Clock::now() + kSlotBusyStartupWait;
  for (int attempt = 1;; ++attempt) {
    std::string err = StartStreaming();
    if (err.empty()) break;
    if (start_sqlstate_ != "55006" || Clock::now() >= give_up) {
      if (start_sqlstate_ == "55006") {
        err += " (still active after " +
               std::to_string(kSlotBusyStartupWait.count()) +
               " s: is another walwatch using the same slot name?)";
      }
      return err;
    }
    LogWarn("the replication slot is active in another process; waiting for "
            "it to end (a previous walwatch's walsender lives until "
            "wal_sender_timeout)",
            {{"slot", opt_.slot}, {"attempt", attempt}, {"error", err}});
    if (!stop_.WaitFor(std::chrono::seconds(2))) return "stopped";
  }
  // The slot was read before this walsender held it. While another one
  // held it (the previous walwatch's, above), that process could still
  // confirm and move it: the server now sends from the moved position, and
  // a floor from the first read would claim transactions nobody will see.
  // Held now, the slot moves only by this stream's feedback: read it again.
  {
    PgConn again;
    SlotState now;
    if (std::string err = ConnectAtStartup(opt_, stop_, &again);
        !err.empty()) {
      return err;
    }
    if (std::string err =
            ReadSlot(again.get(), opt_.slot, slot_spec_, &now, &stop_);
        !err.empty()) {
      return err;
    }
    if (now.exists && now.confirmed_flush > slot.confirmed_flush) {
      LogWarn("the replication slot moved while walwatch waited for it; the "
              "log starts after the moved position",
              {{"slot", opt_.slot},
               {"read_at_start", FormatLsn(slot.confirmed_flush)},
               {"confirmed_flush_lsn", FormatLsn(now.confirmed_flush)}});
      slot.confirmed_flush = now.confirmed_flush;
      start->floor_rv = slot.confirmed_flush - 1;
    }
  }
  LogInfo("streaming",
          {{"slot", opt_.slot},
           {"plugin", slot_spec_.plugin},
           {"table", opt_.mapping.QualifiedTable()},
           {"from", FormatLsn(slot.confirmed_flush)}});
  return "";
}

}  // namespace walwatch
