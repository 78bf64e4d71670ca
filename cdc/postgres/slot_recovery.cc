// PostgresSource's lost slots: a slot the server invalidated, or one that is
// missing, is made again while walwatch runs. Where the new slot starts says
// what was lost: transactions (a Gap), or, below what walwatch served, the
// history itself (a HistoryReset with a fence: a failover to a server that
// was behind, or another server at the same address).
#include <algorithm>
#include <string>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/model/state_source.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_checks.h"
#include "cdc/postgres/pg_conn.h"
#include "cdc/postgres/pg_handoff.h"
#include "cdc/postgres/postgres_source.h"
#include "cdc/replication_stream.h"

namespace walwatch {

namespace {

// Opens an ordinary connection into *conn and reads the slot.
std::string ReadSlotOnNewConnection(const PostgresSourceOptions& opt,
                                    const SlotSpec& spec,
                                    const StopSignal& stop, PgConn* conn,
                                    SlotState* slot) {
  *conn = ConnectPg(opt.conninfo, false, opt.connect_timeout_seconds);
  if (PQstatus(conn->get()) != CONNECTION_OK) {
    return ExplainPgError(PgError(conn->get()));
  }
  return ReadSlot(conn->get(), opt.slot, spec, slot, &stop);
}

// The next xid: pg_current_snapshot()'s xmax.
std::string ReadNextXid(PGconn* conn, const StopSignal& stop,
                        uint64_t* next_xid) {
  std::string err;
  PgResult snap = PgQuery(conn, "SELECT pg_current_snapshot()::text", {},
                          &err, &stop);
  if (!snap || PQntuples(snap.get()) != 1) {
    return "cannot read pg_current_snapshot(): " + err;
  }
  HandoffSnapshot parsed;
  if (!ParseHandoffSnapshot(PQgetvalue(snap.get(), 0, 0), &parsed)) {
    return "cannot parse pg_current_snapshot()";
  }
  *next_xid = parsed.xmax;
  return "";
}

// Writes WAL (non-transactional logical messages that wal2json is told to
// drop) until the server's insert position passes `target`, at most
// kMaxWalPushBytes. Best effort: a failure only leaves the fence's window
// open until the server's own writes pass it.
void PushWalPast(const PostgresSourceOptions& opt, const StopSignal& stop,
                 uint64_t target) {
  constexpr uint64_t kMaxWalPushBytes = uint64_t{256} << 20;
  constexpr uint64_t kChunkBytes = uint64_t{16} << 20;
  PgConn conn = ConnectPg(opt.conninfo, false, opt.connect_timeout_seconds);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    LogWarn("cannot push the WAL past the fence; its window stays open",
            {{"error", ExplainPgError(PgError(conn.get()))}});
    return;
  }
  uint64_t pushed = 0;
  while (!stop.raised()) {
    std::string err;
    PgResult r = PgQuery(conn.get(), "SELECT pg_current_wal_insert_lsn()::text",
                         {}, &err, &stop, std::chrono::seconds(30));
    if (!r || PQntuples(r.get()) != 1) {
      LogWarn("cannot push the WAL past the fence; its window stays open",
              {{"error", err}});
      return;
    }
    uint64_t insert = ParseLsn(PQgetvalue(r.get(), 0, 0)).value_or(0);
    if (insert > target) {
      LogInfo("pushed the WAL past the fence",
              {{"insert_lsn", FormatLsn(insert)}, {"bytes", pushed}});
      return;
    }
    if (pushed >= kMaxWalPushBytes) {
      LogWarn(
          "the fence is too far ahead to push the WAL past it; new "
          "resourceVersions stay in it until the server's writes pass it",
          {{"insert_lsn", FormatLsn(insert)}, {"fence_to", FormatLsn(target)}});
      return;
    }
    const uint64_t chunk = std::min(kChunkBytes, target - insert + 1);
    PgResult e = PgQuery(
        conn.get(),
        "SELECT pg_logical_emit_message(false, "
        "'walwatch.clusterpedia.io/wal-push', repeat('x', $1::int))",
        {std::to_string(chunk)}, &err, &stop, std::chrono::seconds(60));
    if (!e || PQresultStatus(e.get()) != PGRES_TUPLES_OK) {
      LogWarn("cannot push the WAL past the fence; its window stays open",
              {{"error", e ? PgResultError(e.get()) : err}});
      return;
    }
    pushed += chunk;
  }
}

}  // namespace

std::string PostgresSource::RecreateSlot(ChangeReceiver* receiver) {
  PgConn conn;
  SlotState slot;
  if (std::string err = ReadSlotOnNewConnection(opt_, slot_spec_, stop_, &conn, &slot);
      !err.empty()) {
    return err;
  }
  if (slot.exists && slot.wal_status != "lost") return "";  // came back
  if (slot.exists) {
    if (std::string err = DropSlot(conn.get(), opt_.slot, &stop_);
        !err.empty()) {
      return err;
    }
  }
  slot_recreation_pending_ = true;
  server_wal_before_recreation_ =
      highest_server_wal_ ? highest_server_wal_() : 0;
  if (std::string err = CreateSlot(conn.get(), opt_.slot, slot_spec_, &stop_);
      !err.empty()) {
    return err;
  }
  return FinishSlotRecreation(receiver);
}

std::string PostgresSource::FinishSlotRecreation(ChangeReceiver* receiver) {
  PgConn conn;
  SlotState slot;
  if (std::string err = ReadSlotOnNewConnection(opt_, slot_spec_, stop_, &conn, &slot);
      !err.empty()) {
    return err;
  }
  if (!slot.exists || slot.confirmed_flush == 0) {
    // Not made after all: the next START_REPLICATION fails, and it is made
    // again.
    slot_recreation_pending_ = false;
    return "";
  }
  // As at startup: a transaction with an xid at or above xmax, read after
  // the slot's position, commits after it.
  uint64_t next_xid = 0;
  if (std::string err = ReadNextXid(conn.get(), stop_, &next_xid); !err.empty()) {
    return err;
  }
  slot_recreation_pending_ = false;
  // The recreation reports what the history lost: a change of timeline
  // found on the way needs no check of its own.
  timeline_changed_from_ = 0;
  receiver->stats()->SlotRecreated(NowUnixMicros());
  const uint64_t new_floor = slot.confirmed_flush - 1;
  const uint64_t old_server_wal = server_wal_before_recreation_;
  const uint64_t served = receiver->served_rv();
  // Below what this walwatch served, or what the server had written before
  // the slot was created (which another replica may have served): the
  // history went back.
  if (slot.confirmed_flush < std::max(served + 1, old_server_wal)) {
    ResetHistory(receiver, new_floor, next_xid, old_server_wal);
    return "";
  }
  uint64_t barrier = std::max(new_floor, served + 1);
  LogError("the replication slot was lost and has been recreated; every "
           "watcher must relist",
           {{"slot", opt_.slot}, {"resume_after", FormatLsn(barrier)}});
  receiver->Gap(barrier);
  return "";
}

std::string PostgresSource::CheckTimelineChange(ChangeReceiver* receiver) {
  const uint32_t from = timeline_changed_from_;
  const uint64_t old_end = old_timeline_end_;
  const uint64_t served = receiver->served_rv();
  // WAL before old_end is on both timelines: RVs below it name the same
  // commits on the new server. walwatch passed at most served, so nothing
  // it gave out is ambiguous if served < old_end: a failover slot that
  // the standby held in step (synchronized_standby_slots) ends here.
  if (old_end != 0 && served < old_end) {
    LogInfo("PostgreSQL is on a new timeline (a failover) whose history "
            "holds everything walwatch served; the stream goes on with no "
            "relist",
            {{"slot", opt_.slot},
             {"old_timeline", static_cast<uint64_t>(from)},
             {"new_timeline", static_cast<uint64_t>(timeline_)},
             {"old_timeline_end", FormatLsn(old_end)},
             {"served_up_to", FormatLsn(served)},
             {"slot_position", FormatLsn(slot_confirmed_flush_)}});
    timeline_changed_from_ = 0;
    return "";
  }
  PgConn conn = ConnectPg(opt_.conninfo, false, opt_.connect_timeout_seconds);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return "cannot connect: " + ExplainPgError(PgError(conn.get()));
  }
  uint64_t next_xid = 0;
  if (std::string err = ReadNextXid(conn.get(), stop_, &next_xid); !err.empty()) {
    return err;
  }
  timeline_changed_from_ = 0;
  // The server resumes after the slot's position, which a standby's copy
  // of the slot holds at or below the fork.
  uint64_t resume = slot_confirmed_flush_;
  if (old_end != 0) resume = std::min(resume, old_end);
  LogError("PostgreSQL is on a new timeline (a failover) that left the old "
           "one before what walwatch served: the standby was behind (the "
           "slot is not a failover slot, or the primary did not wait for "
           "the standby: synchronized_standby_slots)",
           {{"slot", opt_.slot},
            {"old_timeline", static_cast<uint64_t>(from)},
            {"new_timeline", static_cast<uint64_t>(timeline_)},
            {"old_timeline_end",
             old_end == 0 ? std::string("unknown") : FormatLsn(old_end)},
            {"served_up_to", FormatLsn(served)}});
  ResetHistory(receiver, resume > 0 ? resume - 1 : 0, next_xid,
               highest_server_wal_ ? highest_server_wal_() : 0);
  return "";
}

void PostgresSource::ResetHistory(ChangeReceiver* receiver,
                                  uint64_t new_floor, uint64_t next_xid,
                                  uint64_t old_server_wal) {
  // Another replica may have served up to the old server's WAL position
  // (as last polled), the old server may have written past even that, and
  // a list may have read there: fence a margin beyond all of it.
  constexpr uint64_t kFenceMargin = uint64_t{16} << 20;
  const uint64_t old_current = receiver->served_rv();
  const uint64_t seen =
      std::max({old_current, receiver->stats()->server_wal_end.load(),
                last_received_, old_server_wal});
  const uint64_t fence_hi = seen + kFenceMargin;
  LogError(
      "PostgreSQL's WAL is behind what walwatch has served (a failover to a "
      "server that was behind, or another server at the same address); "
      "every watcher must relist, and resourceVersions in the fence are "
      "refused from now on",
      {{"slot", opt_.slot},
       {"new_slot_position", FormatLsn(new_floor)},
       {"served_up_to", FormatLsn(old_current)},
       {"fence_from", FormatLsn(new_floor + 1)},
       {"fence_to", FormatLsn(fence_hi)}});
  // The sink's reset and the xid the handoff classifies from go together.
  handoff_->ResetHistory(next_xid, [&] {
    receiver->HistoryReset(new_floor, fence_hi, kNoRvCeiling);
  });
  xid_reference_ = next_xid;
  last_received_ = 0;
  PushWalPast(opt_, stop_, fence_hi);
}

}  // namespace walwatch
