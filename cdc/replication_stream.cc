#include "cdc/replication_stream.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/event_builder.h"
#include "cdc/postgres/lsn.h"
#include "cdc/model/event_sink.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/model/wire_arena.h"
#include "cdc/postgres/pg_checks.h"
#include "cdc/postgres/pg_conn.h"
#include "cdc/postgres/pg_handoff.h"
#include "cdc/postgres/transaction_assembler.h"
#include "cdc/postgres/wal2json_decoder.h"

namespace walwatch {

namespace {

// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
constexpr int64_t kPgEpochOffsetMicros = 946684800LL * 1000000;

uint64_t ReadBe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void WriteBe64(char* p, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    p[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
}

std::string QuoteLiteral(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += '\'';
    q += c;
  }
  return q + "'";
}

bool SlotIsGone(const std::string& error) {
  return error.find("has been invalidated") != std::string::npos ||
         (error.find("replication slot") != std::string::npos &&
          error.find("does not exist") != std::string::npos);
}

// The arena the log's events are built in, or null (heap) if the options say
// so or the system has no memfd.
std::unique_ptr<WireArena> MakeWireArena(const ReplicationOptions& opt) {
  if (!opt.events_in_arena) return nullptr;
  std::string error;
  std::unique_ptr<WireArena> arena = WireArena::Create(&error);
  if (!arena) {
    LogWarn("events stay on the heap and are copied to each watcher",
            {{"error", error}});
  }
  return arena;
}

}  // namespace

struct ReplicationStream::Impl {
  Impl(ReplicationOptions o, ResourceCatalog* c, PgHandoff* h,
       ReplicationStats* s, std::atomic<bool>* streaming)
      : opt(std::move(o)),
        catalog(c),
        handoff(h),
        stats(s),
        streaming(streaming),
        decoder(opt.mapping),
        assembler(opt.max_transaction_bytes, 0),
        arena(MakeWireArena(opt)),
        builder(arena.get(), &FormatLsn),
        wake_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Impl() {
    if (wake_fd >= 0) close(wake_fd);
  }

  const ReplicationOptions opt;
  ResourceCatalog* const catalog;
  PgHandoff* const handoff;
  ReplicationStats* const stats;
  std::atomic<bool>* const streaming;
  Wal2JsonDecoder decoder;
  TransactionAssembler assembler;
  // Declared before the builder, which allocates from it.
  std::unique_ptr<WireArena> arena;
  EventBuilder builder;
  Wal2JsonRecord record;
  Transaction txn;
  EventBuilder::Result built;

  PgConn repl;
  EventSink* log = nullptr;
  uint64_t last_received = 0;
  // The highest flush position sent. The window's limit in WAL moves with
  // last_received, which starts again from 0 on each connection, so
  // FlushPosition() may fall back; the position sent never does (older
  // PostgreSQL 15 minors let a slot's confirmed_flush retreat below its
  // restart_lsn, and what lies between would then never be re-sent).
  uint64_t flush_sent = 0;
  // The slot's confirmed_flush_lsn, read on the replication connection just
  // before START_REPLICATION (0 if it could not be read).
  uint64_t slot_confirmed_flush = 0;
  Clock::time_point next_status;
  const int wake_fd;  // an eventfd: wakes the poll loop for a keepalive
  // Stop(): ends the poll loop, the backoff wait and START_REPLICATION.
  StopSignal stop;
  std::atomic<bool> keepalive_wanted{false};
  bool start_failed_after_connect = false;
  // The SQLSTATE of the last START_REPLICATION error ("" if none, or if the
  // connection failed before an answer).
  std::string start_sqlstate;
  uint64_t xid_reference = 0;  // a recent full xid, to widen 32-bit ones

  uint64_t WidenXid(uint32_t xid);

  std::string StartStreaming();
  // Prepare's connection. A server that does not answer, or refuses
  // connections while it starts or shuts down, is retried with backoff for
  // up to kServerDownStartupWait; any other failure (the login, the
  // database) is returned at once.
  std::string ConnectAtStartup(PgConn* conn);
  // Recreates a lost or missing slot (nothing if it came back by itself).
  // From just before the slot is created until FinishSlotRecreation has
  // read it back and acted on it, slot_recreation_pending holds: an answer
  // lost to a dropped connection must not lose the barrier or the reset.
  std::string RecreateSlot();
  bool slot_recreation_pending = false;
  // highest_server_wal() as it was just before the slot was created: what
  // the server had written before the recreation. Read after it, it would
  // include the writes the new slot streams, and a recreation on the same
  // server would be taken for a history that went back.
  uint64_t server_wal_before_recreation = 0;
  // Opens an ordinary connection into *conn and reads the slot.
  std::string ReadSlotOnNewConnection(PgConn* conn, SlotState* slot);
  // Reads the recreated slot (its position, and the xmax read after it)
  // and appends the barrier or resets the history. Clears the pending flag
  // once done; on error it stays, for the next attempt.
  std::string FinishSlotRecreation();
  // The highest WAL position the slot monitor saw on the server (0 if
  // unknown): what other replicas may have served, for the fence.
  std::function<uint64_t()> highest_server_wal;
  enum class StreamEnd { kStopped, kError };
  StreamEnd Stream(std::string* error);
  bool HandleMessage(const char* buf, int len, std::string* error);
  void OnCommit();
  bool SendStatus(bool reply_requested, std::string* error);
  bool SendKeepaliveReply(uint64_t wal_end, std::string* error);
  uint64_t FlushPosition() const;
  bool WaitOrStop(std::chrono::milliseconds delay);
  // Whether the walsender `pid` is alive and busy (not waiting for WAL, for
  // our messages or to write): decoding a large transaction whose changes
  // are all filtered out, which on PostgreSQL 15 sends nothing for as long
  // as it takes. Asked on a connection of its own; false if that fails.
  bool WalsenderBusy(int pid, std::string* state);
  // The slot was recreated at `new_floor`, below what walwatch has served:
  // PostgreSQL's history went back. Resets the log with a fence over the
  // ambiguous RVs, resets the positions that only grow, and pushes the
  // server's WAL past the fence so that new RVs are unambiguous at once.
  void ResetHistory(uint64_t new_floor, uint64_t next_xid,
                    uint64_t old_server_wal);
  // Writes WAL (non-transactional logical messages that wal2json is told
  // to drop) until the server's insert position passes `target`, at most
  // kMaxWalPushBytes. Best effort: a failure only leaves the fence's
  // window open until the server's own writes pass it.
  void PushWalPast(uint64_t target);
};

bool ReplicationStream::Impl::WalsenderBusy(int pid, std::string* state) {
  if (pid <= 0) return false;
  // A live server answers at once; a partitioned one must not delay the
  // reconnect by more than a few seconds.
  constexpr int kSideSeconds = 5;
  PgConn side = ConnectPg(opt.conninfo, /*replication=*/false,
                          std::min(opt.connect_timeout_seconds, kSideSeconds));
  if (PQstatus(side.get()) != CONNECTION_OK) return false;
  std::string err;
  // A walsender waits on these while it streams; busy, it waits on none
  // or on its spill files (ReorderBuffer*). Its own role may see them.
  PgResult r = PgQuery(
      side.get(),
      "SELECT coalesce(wait_event, '') FROM pg_stat_activity "
      "WHERE pid = $1 AND backend_type = 'walsender' AND coalesce(wait_event, "
      "'') NOT IN ('WalSenderMain', 'WalSenderWaitForWAL', "
      "'WalSenderWriteData')",
      {std::to_string(pid)}, &err, &stop, std::chrono::seconds(kSideSeconds));
  if (!r || PQntuples(r.get()) != 1) return false;
  *state = PQgetvalue(r.get(), 0, 0);
  return true;
}

// How long startup waits for a slot active in another process.
constexpr std::chrono::seconds kSlotBusyStartupWait{150};
// How long startup waits for a server that is down: a database restarted
// with the pod, or failing over, is waited for rather than answered with
// an exit and the kubelet's crash-loop backoff. Within the startupProbe of
// packaging/kubernetes (180 s).
constexpr std::chrono::seconds kServerDownStartupWait{150};

std::string ReplicationStream::Impl::ConnectAtStartup(PgConn* conn) {
  const auto give_up = Clock::now() + kServerDownStartupWait;
  std::chrono::milliseconds delay{500};
  for (int attempt = 1;; ++attempt) {
    *conn = ConnectPg(opt.conninfo, /*replication=*/false,
                      opt.connect_timeout_seconds);
    if (PQstatus(conn->get()) == CONNECTION_OK) return "";
    std::string err =
        "cannot connect to PostgreSQL: " + ExplainPgError(PgError(conn->get()));
    conn->reset();
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
    if (!WaitOrStop(delay)) return "stopped";
    delay = std::min<std::chrono::milliseconds>(delay * 2,
                                                std::chrono::seconds(10));
  }
}

ReplicationStream::ReplicationStream(ReplicationOptions options,
                                     ResourceCatalog* catalog,
                                     PgHandoff* handoff)
    : impl_(std::make_unique<Impl>(std::move(options), catalog, handoff,
                                   &stats_, &streaming_)) {}

ReplicationStream::~ReplicationStream() = default;

std::string ReplicationStream::Impl::StartStreaming() {
  start_failed_after_connect = false;
  start_sqlstate.clear();
  repl = ConnectPg(opt.conninfo, /*replication=*/true,
                   opt.connect_timeout_seconds);
  if (PQstatus(repl.get()) != CONNECTION_OK) {
    std::string err = ExplainPgError(PgError(repl.get()));
    repl.reset();
    return "cannot open the replication connection: " + err;
  }
  // Where the slot stands. walwatch never confirms past current_rv + 1, so
  // a slot further on was moved by someone else; Run checks.
  slot_confirmed_flush = 0;
  {
    std::string err;
    PgResult r = PgExecSimple(
        repl.get(),
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = " + QuoteLiteral(opt.slot),
        &err, &stop, opt.receive_timeout);
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      if (r) err = PgResultError(r.get());
      repl.reset();
      return "cannot read replication slot " + opt.slot + ": " +
             ExplainPgError(err);
    }
    if (PQntuples(r.get()) == 1 && !PQgetisnull(r.get(), 0, 0)) {
      slot_confirmed_flush = ParseLsn(PQgetvalue(r.get(), 0, 0)).value_or(0);
    }
  }
  std::string cmd =
      "START_REPLICATION SLOT " + QuoteIdent(opt.slot) +
      " LOGICAL 0/0 (\"format-version\" '2', \"include-xids\" '1', "
      "\"include-lsn\" '1', \"include-timestamp\" '1', \"include-types\" '0', "
      // No logical decoding messages (pg_logical_emit_message): walwatch
      // has no use for them, and a binary one is not JSON text.
      "\"add-msg-prefixes\" 'walwatch.clusterpedia.io/none', "
      "\"add-tables\" " +
      QuoteLiteral(opt.mapping.QualifiedTable()) + ")";
  std::string err;
  // A server (or a proxy) that stops answering here would otherwise hold
  // walwatch neither streaming nor reconnecting.
  PgResult res = PgExecSimple(repl.get(), cmd, &err, &stop, opt.receive_timeout);
  start_sqlstate.clear();
  if (PQresultStatus(res.get()) != PGRES_COPY_BOTH) {
    if (res) {
      err = PgResultError(res.get());
      const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE);
      if (state != nullptr) start_sqlstate = state;
    }
    if (err.empty()) err = PgError(repl.get());
    err = ExplainPgError(err);
    repl.reset();
    // Only an answer from the server says something about the slot.
    start_failed_after_connect = res != nullptr;
    return "cannot start replication from slot " + opt.slot + ": " + err;
  }
  last_received = 0;
  next_status = Clock::now();
  return "";
}

uint64_t ReplicationStream::Impl::WidenXid(uint32_t xid) {
  // Transactions in the stream are within 2^31 of each other (PostgreSQL's
  // wraparound protection), so the nearest 64-bit value is the right one.
  uint64_t candidate = (xid_reference & ~uint64_t{0xFFFFFFFF}) | xid;
  if (candidate > xid_reference + (uint64_t{1} << 31)) {
    if (candidate >= (uint64_t{1} << 32)) candidate -= uint64_t{1} << 32;
  } else if (candidate + (uint64_t{1} << 31) < xid_reference) {
    candidate += uint64_t{1} << 32;
  }
  xid_reference = std::max(xid_reference, candidate);
  return candidate;
}

std::string ReplicationStream::Prepare(StartPosition* start) {
  Impl& m = *impl_;
  PgConn conn;
  if (std::string err = m.ConnectAtStartup(&conn); !err.empty()) return err;
  if (std::string err = CheckDatabase(conn.get(), m.opt.mapping, &m.stop); !err.empty()) {
    return err;
  }
  SlotState slot;
  if (std::string err = ReadSlot(conn.get(), m.opt.slot, &slot, &m.stop); !err.empty()) {
    return err;
  }
  if (slot.exists && slot.wal_status == "lost") {
    LogWarn("replication slot was invalidated; dropping and recreating it",
            {{"slot", m.opt.slot}});
    if (std::string err = DropSlot(conn.get(), m.opt.slot, &m.stop); !err.empty()) {
      return err;
    }
    stats_.SlotRecreated(NowUnixMicros());
    slot.exists = false;
  }
  if (!slot.exists) {
    if (std::string err = CreateSlot(conn.get(), m.opt.slot, &m.stop); !err.empty()) {
      return err;
    }
    if (std::string err = ReadSlot(conn.get(), m.opt.slot, &slot, &m.stop);
        !err.empty()) {
      return err;
    }
    LogInfo("created replication slot",
            {{"slot", m.opt.slot},
             {"confirmed_flush_lsn", FormatLsn(slot.confirmed_flush)}});
  }
  // Read after the slot's position: a transaction with an xid at or above
  // xmax started later, so it commits after the position.
  std::string err;
  PgResult snap = PgQuery(conn.get(), "SELECT pg_current_snapshot()::text", {},
                          &err, &m.stop);
  if (!snap) return "cannot read pg_current_snapshot(): " + err;
  size_t colon = std::string(PQgetvalue(snap.get(), 0, 0)).find(':');
  start->next_xid = std::stoull(
      std::string(PQgetvalue(snap.get(), 0, 0)).substr(colon + 1));
  m.xid_reference = start->next_xid;
  m.handoff->SetClassifiableFromXid(start->next_xid);
  if (std::string e = LoadCatalog(conn.get(), m.opt.mapping, m.catalog, &m.stop);
      !e.empty()) {
    return e;
  }
  conn.reset();
  // The server sends every transaction whose commit record starts at or
  // after confirmed_flush, so the stream continues after confirmed_flush-1.
  start->floor_rv = slot.confirmed_flush > 0 ? slot.confirmed_flush - 1 : 0;
  m.assembler.set_last_commit_lsn(start->floor_rv);
  // 55006: the slot is active in another process. After a node was lost,
  // that is the previous walwatch's walsender, which lives on until
  // wal_sender_timeout ends it (or TCP gives up on its client): wait for
  // it rather than exit into a crash-loop backoff. A second walwatch with
  // the same slot name keeps it for good, and is told so in the end.
  const auto give_up = std::chrono::steady_clock::now() + kSlotBusyStartupWait;
  for (int attempt = 1;; ++attempt) {
    std::string err = m.StartStreaming();
    if (err.empty()) break;
    if (m.start_sqlstate != "55006" ||
        std::chrono::steady_clock::now() >= give_up) {
      if (m.start_sqlstate == "55006") {
        err += " (still active after " +
               std::to_string(kSlotBusyStartupWait.count()) +
               " s: is another walwatch using the same slot name?)";
      }
      return err;
    }
    LogWarn("the replication slot is active in another process; waiting for "
            "it to end (a previous walwatch's walsender lives until "
            "wal_sender_timeout)",
            {{"slot", m.opt.slot}, {"attempt", attempt}, {"error", err}});
    if (!m.WaitOrStop(std::chrono::seconds(2))) return "stopped";
  }
  // The slot was read before this walsender held it. While another one
  // held it (the previous walwatch's, above), that process could still
  // confirm and move it: the server now sends from the moved position, and
  // a floor from the first read would claim transactions nobody will see.
  // Held now, the slot moves only by this stream's feedback: read it again.
  {
    PgConn again;
    SlotState now;
    if (std::string err = m.ConnectAtStartup(&again); !err.empty()) return err;
    if (std::string err = ReadSlot(again.get(), m.opt.slot, &now, &m.stop);
        !err.empty()) {
      return err;
    }
    if (now.exists && now.confirmed_flush > slot.confirmed_flush) {
      LogWarn("the replication slot moved while walwatch waited for it; the "
              "log starts after the moved position",
              {{"slot", m.opt.slot},
               {"read_at_start", FormatLsn(slot.confirmed_flush)},
               {"confirmed_flush_lsn", FormatLsn(now.confirmed_flush)}});
      slot.confirmed_flush = now.confirmed_flush;
      start->floor_rv = slot.confirmed_flush - 1;
      m.assembler.set_last_commit_lsn(start->floor_rv);
    }
  }
  LogInfo("streaming",
          {{"slot", m.opt.slot},
           {"table", m.opt.mapping.QualifiedTable()},
           {"from", FormatLsn(slot.confirmed_flush)}});
  return "";
}

uint64_t ReplicationStream::Impl::FlushPosition() const {
  // Confirm up to the oldest transaction of the replay window, so that a
  // restart re-sends it; with nothing to keep, everything seen so far.
  uint64_t everything = log->current_rv() + 1;
  int64_t since = NowUnixMicros() -
                  std::chrono::duration_cast<std::chrono::microseconds>(
                      opt.replay_window)
                      .count();
  uint64_t oldest = log->OldestCommitSince(since);
  if (oldest == 0) return everything;
  // The window's limit in WAL: no further back than replay_window_bytes
  // behind the newest position, at the first transaction committed there.
  uint64_t newest = std::max(last_received, log->current_rv());
  if (newest <= opt.replay_window_bytes ||
      oldest >= newest - opt.replay_window_bytes) {
    return oldest;
  }
  // Seek, not Read: the transactions of a batch not yet woken for are not
  // readable, but they are in the log, and a restart must replay them.
  EventSink::SeekResult seek = log->Seek(newest - opt.replay_window_bytes - 1);
  if (seek.status != EventSink::SeekStatus::kOk) return oldest;
  if (seek.commit_lsn == 0) return everything;  // nothing that recent
  return std::max(oldest, seek.commit_lsn);
}

bool ReplicationStream::Impl::SendStatus(bool reply_requested,
                                         std::string* error) {
  uint64_t flush = std::max(FlushPosition(), flush_sent);
  char msg[34];
  msg[0] = 'r';
  WriteBe64(msg + 1, std::max(last_received, flush));  // write
  WriteBe64(msg + 9, flush);                           // flush
  WriteBe64(msg + 17, flush);                          // apply
  WriteBe64(msg + 25, NowUnixMicros() - kPgEpochOffsetMicros);
  msg[33] = reply_requested ? 1 : 0;
  if (PQputCopyData(repl.get(), msg, sizeof(msg)) <= 0 ||
      PQflush(repl.get()) != 0) {
    *error = "cannot send a standby status update: " + PgError(repl.get());
    return false;
  }
  flush_sent = flush;
  stats->confirmed_lsn = flush;
  next_status = Clock::now() + opt.status_interval;
  return true;
}

// A reply to a keepalive that asked for one: write = the walsender's
// position, flush = 0 (invalid, so the slot is not moved). A walsender that
// is shutting down waits until the standby reports its sent position, and
// the timed updates hold flush back to the replay window, so without this a
// fast shutdown of PostgreSQL would wait for walwatch forever.
bool ReplicationStream::Impl::SendKeepaliveReply(uint64_t wal_end,
                                                 std::string* error) {
  char msg[34];
  msg[0] = 'r';
  WriteBe64(msg + 1, wal_end);  // write
  WriteBe64(msg + 9, 0);        // flush: invalid
  WriteBe64(msg + 17, 0);       // apply: invalid
  WriteBe64(msg + 25, NowUnixMicros() - kPgEpochOffsetMicros);
  msg[33] = 0;
  if (PQputCopyData(repl.get(), msg, sizeof(msg)) <= 0 ||
      PQflush(repl.get()) != 0) {
    *error = "cannot answer a keepalive: " + PgError(repl.get());
    return false;
  }
  return true;
}

void ReplicationStream::Impl::OnCommit() {
  ++stats->transactions;
  txn.full_xid = WidenXid(txn.xid);
  stats->last_commit_time_us = txn.commit_time_us;
  auto barrier = [&](const char* why) {
    LogWarn(why, {{"xid", static_cast<uint64_t>(txn.xid)},
                  {"commit_lsn", FormatLsn(txn.commit_lsn)}});
    log->AppendBarrier(txn.commit_lsn, txn.full_xid);
    ++stats->barriers;
  };
  if (txn.truncated) {
    return barrier("the table was truncated; every watcher must relist");
  }
  if (txn.overflowed && !txn.touched_unknown) {
    // Only the watches of what it changed must relist (a cluster's removal
    // ends the watches of that cluster and of every cluster, not others').
    std::vector<EventSink::Selection> touched;
    touched.reserve(txn.touched.size());
    for (const auto& [group, version, resource, cluster] : txn.touched) {
      touched.push_back(
          {EventSink::ResourceKey(group, version, resource), cluster});
    }
    LogWarn("a transaction is larger than --max-log-bytes allows; the "
            "watches of the resources it changed must relist",
            {{"xid", static_cast<uint64_t>(txn.xid)},
             {"commit_lsn", FormatLsn(txn.commit_lsn)},
             {"resources_and_clusters", static_cast<uint64_t>(touched.size())}});
    log->AppendLoss(txn.commit_lsn, txn.full_xid, txn.commit_time_us, touched);
    ++stats->barriers;
    return;
  }
  if (txn.overflowed) {
    return barrier(
        "a transaction is larger than --max-log-bytes allows, and some of "
        "its rows lack the resource columns; every watcher must relist");
  }
  if (txn.broken) {
    return barrier(
        "a transaction has a record that could not be decoded; every "
        "watcher must relist");
  }
  if (txn.changes.empty()) {
    log->AdvanceCurrentRv(txn.commit_lsn);
    return;
  }
  built.events.clear();
  built.errors.clear();
  built.unchanged_updates = 0;
  builder.Build(txn, &built);
  stats->unchanged_updates += built.unchanged_updates;
  for (const std::string& err : built.errors) {
    ++stats->row_errors;
    LogError("a row could not become a watch event", {{"error", err}});
  }
  if (!built.errors.empty()) {
    // Its event is missing: the other events alone would silently diverge
    // every watcher from the table.
    built.events.clear();
    return barrier(
        "a transaction has a row that could not become a watch event; every "
        "watcher must relist");
  }
  if (built.events.empty()) {
    log->AdvanceCurrentRv(txn.commit_lsn);
    return;
  }
  for (const EventPtr& e : built.events) {
    switch (e->type) {
      case EventType::kAdded: ++stats->events_added; break;
      case EventType::kModified: ++stats->events_modified; break;
      case EventType::kDeleted: ++stats->events_deleted; break;
    }
    catalog->Add({std::string(e->group()), std::string(e->version()),
                  std::string(e->resource())},
                 std::string(e->kind()));
  }
  switch (log->AppendTransaction(txn.commit_lsn, std::move(built.events))) {
    case EventSink::AppendResult::kAppended:
      break;
    case EventSink::AppendResult::kTooLarge:
      ++stats->barriers;
      LogWarn("a transaction's events are larger than --max-log-bytes; "
              "the watches of the resources it changed must relist",
              {{"xid", static_cast<uint64_t>(txn.xid)},
               {"commit_lsn", FormatLsn(txn.commit_lsn)}});
      break;
    case EventSink::AppendResult::kOutOfOrder: {
      // A bug: re-sent transactions are dropped before they get here.
      // Watchers that passed its commit LSN never saw it: every RV up to
      // the current one becomes too old, and they relist.
      const uint64_t current = log->current_rv();
      ++stats->barriers;
      LogError("a transaction arrived below the current resourceVersion; "
               "every watcher must relist",
               {{"xid", static_cast<uint64_t>(txn.xid)},
                {"commit_lsn", FormatLsn(txn.commit_lsn)},
                {"current_rv", FormatLsn(current)}});
      log->AppendBarrier(current, txn.full_xid);
      break;
    }
  }
}

bool ReplicationStream::Impl::HandleMessage(const char* buf, int len,
                                            std::string* error) {
  switch (buf[0]) {
    case 'w': {
      if (len < 25) {
        *error = "short XLogData message";
        return false;
      }
      uint64_t data_start = ReadBe64(buf + 1);
      stats->server_wal_end = ReadBe64(buf + 9);
      stats->received_lsn = data_start;
      if (data_start > stats->decoded_lsn) stats->decoded_lsn = data_start;
      stats->bytes_received += len;
      last_received = std::max(last_received, data_start);
      std::string_view payload(buf + 25, len - 25);
      std::string err = decoder.Decode(payload, &record);
      if (!err.empty()) {
        // Counted and logged with its position; a message that is not
        // wal2json v2 cannot be turned into an event. Inside a transaction
        // it may have been a change of the table: the transaction ends as
        // a barrier.
        ++stats->decode_errors;
        LogError("cannot decode a wal2json message",
                 {{"lsn", FormatLsn(data_start)},
                  {"error", err},
                  {"message", payload.substr(0, 256)}});
        assembler.MarkBroken();
        return true;
      }
      TransactionAssembler::Outcome outcome;
      err = assembler.Feed(record, &txn, &outcome);
      if (!err.empty()) {
        *error = "out-of-order wal2json stream: " + err;
        return false;
      }
      if (outcome == TransactionAssembler::Outcome::kCommitted) {
        OnCommit();
      } else if (outcome == TransactionAssembler::Outcome::kDuplicate) {
        ++stats->duplicate_transactions;
      }
      return true;
    }
    case 'k': {
      if (len < 18) {
        *error = "short keepalive message";
        return false;
      }
      uint64_t wal_end = ReadBe64(buf + 1);
      stats->server_wal_end = wal_end;
      // A keepalive's walEnd is where the walsender has decoded to: every
      // commit record before it has been sent, and the next one starts at
      // or after it. Between transactions, the stream has passed walEnd-1.
      if (!assembler.in_transaction() && wal_end > stats->decoded_lsn) {
        stats->decoded_lsn = wal_end;
      }
      if (!assembler.in_transaction() && wal_end > 0 &&
          wal_end - 1 > log->current_rv()) {
        log->AdvanceCurrentRv(wal_end - 1);
        assembler.set_last_commit_lsn(
            std::max(assembler.last_commit_lsn(), wal_end - 1));
      }
      if (buf[17]) return SendKeepaliveReply(wal_end, error);
      return true;
    }
    default:
      LogWarn("unknown replication message", {{"type", std::string(1, buf[0])}});
      return true;
  }
}

ReplicationStream::Impl::StreamEnd ReplicationStream::Impl::Stream(
    std::string* error) {
  PGconn* conn = repl.get();
  auto last_message = Clock::now();
  bool waiting_for_busy_walsender = false;
  // Wakes the watchers once per read from the socket (see BeginBatch), and
  // at least every kWakeEvery messages during a long burst.
  constexpr int kWakeEvery = 256;
  // Watchers are woken as a batch ends, and on every way out.
  class Batch {
   public:
    explicit Batch(EventSink* log) : log_(log) {}
    ~Batch() { End(); }
    void Begin() {
      if (!open_) log_->BeginBatch();
      open_ = true;
    }
    // Returns how many watches the batch concerned (EventSink::EndBatch).
    size_t End() {
      size_t woken = open_ ? log_->EndBatch() : 0;
      open_ = false;
      return woken;
    }
    bool open() const { return open_; }

   private:
    EventSink* const log_;
    bool open_ = false;
  };
  // After a wake, the next one waits for the hold (see wake_interval).
  // A batch ends after kWakeEvery messages even while a wake is held, so
  // that a hold never keeps more than that from the watchers.
  Batch batch(log);
  Clock::time_point last_wake;
  Clock::duration hold{0};
  int handled = 0;  // messages since the batch began
  auto woke = [&](size_t watchers) {
    last_wake = Clock::now();
    hold = opt.WakeHold(watchers);
    handled = 0;
  };
  for (;;) {
    batch.Begin();
    for (;;) {
      char* buf = nullptr;
      int n = PQgetCopyData(conn, &buf, /*async=*/1);
      if (n > 0) {
        last_message = Clock::now();
        waiting_for_busy_walsender = false;
        bool ok = HandleMessage(buf, n, error);
        PQfreemem(buf);
        if (!ok) return StreamEnd::kError;
        if (++handled >= kWakeEvery) {
          woke(batch.End());
          batch.Begin();
        }
        // A large transaction arrives as a long run of messages: keep
        // reporting status while it does.
        if (Clock::now() >= next_status && !SendStatus(true, error)) {
          return StreamEnd::kError;
        }
        if (stop.raised()) return StreamEnd::kStopped;
        continue;
      }
      if (n == 0) break;
      if (n == -1) {
        PgResult res(PQgetResult(conn));
        if (res && PQresultStatus(res.get()) == PGRES_COMMAND_OK) {
          // A walsender ends COPY cleanly only when PostgreSQL shuts down
          // (after walwatch has reported the last position it was sent).
          *error = "the server ended the replication stream cleanly "
                   "(PostgreSQL is shutting down)";
        } else {
          std::string why = res ? PgResultError(res.get()) : "";
          if (why.empty()) why = PgError(conn);
          *error = "the server ended the replication stream: " +
                   ExplainPgError(why);
        }
        return StreamEnd::kError;
      }
      *error = ExplainPgError(PgError(conn));
      return StreamEnd::kError;
    }
    // Wake the watchers now, not after the wait below: the events of this
    // read would otherwise wait for the next message (up to a status
    // interval, 1 s, when the table goes quiet). Unless the last wake was
    // less than the hold ago: then the wait below ends when it has passed,
    // and the watchers are woken with whatever came meanwhile.
    const Clock::time_point wake_due = last_wake + hold;
    if (Clock::now() >= wake_due) woke(batch.End());
    if (stop.raised()) return StreamEnd::kStopped;
    if (keepalive_wanted.exchange(false) && !SendStatus(true, error)) {
      return StreamEnd::kError;
    }
    auto now = Clock::now();
    if (now - last_message > opt.receive_timeout) {
      // Silence from a walsender that is working is not a partition:
      // reconnecting would only make a new walsender decode the same
      // transaction again, as silently, for ever.
      std::string state;
      if (WalsenderBusy(PQbackendPID(conn), &state)) {
        if (!waiting_for_busy_walsender) {
          LogInfo(
              "the walsender sends nothing while it decodes a large "
              "transaction of other tables; waiting for it",
              {{"walsender_pid", PQbackendPID(conn)},
               {"wait_event", state},
               {"silent_seconds",
                static_cast<uint64_t>(
                    std::chrono::duration_cast<std::chrono::seconds>(
                        now - last_message)
                        .count())}});
          waiting_for_busy_walsender = true;
        }
        ++stats->busy_walsender_waits;
        last_message = now;  // another receive timeout before asking again
        continue;
      }
      *error = "no message from the server for " +
               std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                  now - last_message)
                                  .count()) +
               " s (a silent network partition?)";
      return StreamEnd::kError;
    }
    if (now >= next_status) {
      // Ask for a keepalive each time: its walEnd moves the current RV and
      // the known-decoded position while the table is idle.
      if (!SendStatus(true, error)) return StreamEnd::kError;
      now = Clock::now();
    }
    // Until the next status update or, with a wake held, until the hold
    // ends: ppoll, whose timeout is not rounded up to a millisecond as
    // poll's would be (a hold may be a few microseconds; the timer slack,
    // 50 us by default, still applies).
    Clock::duration timeout = std::max<Clock::duration>(
        next_status - now + std::chrono::milliseconds(1), Clock::duration{0});
    if (batch.open()) {
      timeout = std::clamp<Clock::duration>(wake_due - now, Clock::duration{0},
                                            timeout);
    }
    const auto timeout_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
    const timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
                      static_cast<long>(timeout_ns % 1000000000)};
    pollfd fds[3] = {{PQsocket(conn), POLLIN, 0},
                     {wake_fd, POLLIN, 0},
                     {stop.fd(), POLLIN, 0}};
    int r = ppoll(fds, 3, &ts, nullptr);
    if (r < 0 && errno != EINTR) {
      *error = std::string("ppoll: ") + std::strerror(errno);
      return StreamEnd::kError;
    }
    if (stop.raised()) return StreamEnd::kStopped;
    if (fds[1].revents) {
      uint64_t count;
      ssize_t n = read(wake_fd, &count, sizeof(count));
      (void)n;
    }
    if (fds[0].revents && !PQconsumeInput(conn)) {
      *error = ExplainPgError(PgError(conn));
      return StreamEnd::kError;
    }
  }
}

bool ReplicationStream::Impl::WaitOrStop(std::chrono::milliseconds delay) {
  auto deadline = Clock::now() + delay;
  while (!stop.raised()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) return true;
    pollfd fd = {stop.fd(), POLLIN, 0};
    poll(&fd, 1, static_cast<int>(left.count()));
  }
  return false;
}

void ReplicationStream::Impl::ResetHistory(uint64_t new_floor,
                                           uint64_t next_xid,
                                           uint64_t old_server_wal) {
  // Another replica may have served up to the old server's WAL position
  // (as last polled), the old server may have written past even that, and
  // a list may have read there: fence a margin beyond all of it.
  constexpr uint64_t kFenceMargin = uint64_t{16} << 20;
  const uint64_t old_current = log->current_rv();
  const uint64_t seen = std::max({old_current, stats->server_wal_end.load(),
                                  last_received, old_server_wal});
  const uint64_t fence_hi = seen + kFenceMargin;
  LogError(
      "PostgreSQL's WAL is behind what walwatch has served (a failover to a "
      "server that was behind, or another server at the same address); "
      "every watcher must relist, and resourceVersions in the fence are "
      "refused from now on",
      {{"slot", opt.slot},
       {"new_slot_position", FormatLsn(new_floor)},
       {"served_up_to", FormatLsn(old_current)},
       {"fence_from", FormatLsn(new_floor + 1)},
       {"fence_to", FormatLsn(fence_hi)}});
  handoff->ResetHistory(next_xid,
                        [&] { log->ResetHistory(new_floor, fence_hi); });
  xid_reference = next_xid;
  ++stats->barriers;
  ++stats->history_resets;
  // Positions of the old history, which only ever grow: the new history's
  // transactions below them must not be taken for ones already seen, nor a
  // flush past the new server's WAL be confirmed to it.
  assembler.set_last_commit_lsn(new_floor);
  flush_sent = 0;
  last_received = 0;
  stats->received_lsn = 0;
  stats->decoded_lsn = new_floor;
  stats->server_wal_end = 0;
  stats->confirmed_lsn = 0;
  PushWalPast(fence_hi);
}

void ReplicationStream::Impl::PushWalPast(uint64_t target) {
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

std::string ReplicationStream::Impl::ReadSlotOnNewConnection(
    PgConn* conn, SlotState* slot) {
  *conn = ConnectPg(opt.conninfo, false, opt.connect_timeout_seconds);
  if (PQstatus(conn->get()) != CONNECTION_OK) {
    return ExplainPgError(PgError(conn->get()));
  }
  return ReadSlot(conn->get(), opt.slot, slot, &stop);
}

std::string ReplicationStream::Impl::RecreateSlot() {
  PgConn conn;
  SlotState slot;
  if (std::string err = ReadSlotOnNewConnection(&conn, &slot); !err.empty()) {
    return err;
  }
  if (slot.exists && slot.wal_status != "lost") return "";  // came back
  if (slot.exists) {
    if (std::string err = DropSlot(conn.get(), opt.slot, &stop); !err.empty()) {
      return err;
    }
  }
  slot_recreation_pending = true;
  server_wal_before_recreation = highest_server_wal ? highest_server_wal() : 0;
  if (std::string err = CreateSlot(conn.get(), opt.slot, &stop); !err.empty()) {
    return err;
  }
  return FinishSlotRecreation();
}

std::string ReplicationStream::Impl::FinishSlotRecreation() {
  PgConn conn;
  SlotState slot;
  if (std::string err = ReadSlotOnNewConnection(&conn, &slot); !err.empty()) {
    return err;
  }
  if (!slot.exists || slot.confirmed_flush == 0) {
    // Not made after all: the next START_REPLICATION fails, and it is made
    // again.
    slot_recreation_pending = false;
    return "";
  }
  // As at startup: a transaction with an xid at or above xmax, read after
  // the slot's position, commits after it.
  std::string err;
  PgResult snap = PgQuery(conn.get(), "SELECT pg_current_snapshot()::text", {},
                          &err, &stop);
  if (!snap || PQntuples(snap.get()) != 1) {
    return "cannot read pg_current_snapshot(): " + err;
  }
  HandoffSnapshot parsed;
  if (!ParseHandoffSnapshot(PQgetvalue(snap.get(), 0, 0), &parsed)) {
    return "cannot parse pg_current_snapshot()";
  }
  slot_recreation_pending = false;
  stats->SlotRecreated(NowUnixMicros());
  const uint64_t new_floor = slot.confirmed_flush - 1;
  const uint64_t old_server_wal = server_wal_before_recreation;
  // Below what this walwatch served, or what the server had written before
  // the slot was created (which another replica may have served): the
  // history went back.
  if (slot.confirmed_flush < std::max(log->current_rv() + 1, old_server_wal)) {
    ResetHistory(new_floor, parsed.xmax, old_server_wal);
    return "";
  }
  uint64_t barrier = std::max(new_floor, log->current_rv() + 1);
  LogError("the replication slot was lost and has been recreated; every "
           "watcher must relist",
           {{"slot", opt.slot}, {"resume_after", FormatLsn(barrier)}});
  log->AppendBarrier(barrier);
  ++stats->barriers;
  assembler.set_last_commit_lsn(barrier);
  return "";
}

void ReplicationStream::Run(EventSink* log) {
  Impl& m = *impl_;
  m.log = log;
  m.assembler.set_last_commit_lsn(log->current_rv());
  std::mt19937_64 rng(std::random_device{}());
  int attempt = 0;
  while (!m.stop.raised()) {
    if (!m.repl) {
      ++attempt;
      std::chrono::milliseconds base = std::min<std::chrono::milliseconds>(
          m.opt.backoff_max,
          m.opt.backoff_initial * (int64_t{1} << std::min(attempt - 1, 16)));
      std::uniform_real_distribution<double> jitter(0.8, 1.2);
      auto delay = std::chrono::milliseconds(
          static_cast<int64_t>(base.count() * jitter(rng)));
      LogInfo("reconnecting to PostgreSQL",
              {{"attempt", attempt}, {"delay_ms", static_cast<int64_t>(delay.count())}});
      if (!m.WaitOrStop(delay)) break;
      if (m.slot_recreation_pending) {
        // A recreation whose outcome was not read back yet: streaming from
        // the new slot before would lose its barrier or reset.
        if (std::string rerr = m.FinishSlotRecreation(); !rerr.empty()) {
          LogError("cannot read back the recreated replication slot",
                   {{"error", rerr}});
          continue;
        }
      }
      std::string err = m.StartStreaming();
      if (!err.empty()) {
        LogWarn("reconnect failed", {{"attempt", attempt}, {"error", err}});
        // The connection worked but START_REPLICATION did not: look at the
        // slot itself (the message's first line does not say why, and its
        // wording depends on lc_messages).
        if (m.start_failed_after_connect || SlotIsGone(err)) {
          if (std::string rerr = m.RecreateSlot(); !rerr.empty()) {
            LogError("cannot recreate the replication slot", {{"error", rerr}});
          }
        }
        continue;
      }
      ++stats_.reconnects;
      LogInfo("replication resumed", {{"slot", m.opt.slot}, {"attempt", attempt}});
      if (m.slot_confirmed_flush > log->current_rv() + 1) {
        // Moved while walwatch was away (pg_replication_slot_advance, a
        // second consumer, or a slot dropped and created again): the
        // server resumes after confirmed_flush - 1, and what lies before it
        // is gone.
        uint64_t barrier = m.slot_confirmed_flush - 1;
        LogError("the replication slot moved past what walwatch confirmed; "
                 "every watcher must relist",
                 {{"slot", m.opt.slot},
                  {"confirmed_flush_lsn", FormatLsn(m.slot_confirmed_flush)},
                  {"current_rv", FormatLsn(log->current_rv())}});
        log->AppendBarrier(barrier);
        ++stats_.barriers;
        m.assembler.set_last_commit_lsn(barrier);
      }
    }
    streaming_ = true;
    auto started = Clock::now();
    std::string err;
    Impl::StreamEnd end = m.Stream(&err);
    streaming_ = false;
    if (end == Impl::StreamEnd::kStopped) break;
    LogWarn("replication connection lost", {{"error", err}});
    m.repl.reset();
    m.assembler.Reset();
    if (Clock::now() - started > std::chrono::seconds(30)) attempt = 0;
  }
  if (m.repl) {
    std::string err;
    if (m.SendStatus(false, &err)) {
      LogInfo("sent the last status update",
              {{"flush_lsn", FormatLsn(stats_.confirmed_lsn.load())}});
    }
    m.repl.reset();
  }
}

void ReplicationStream::RequestKeepalive() {
  impl_->keepalive_wanted = true;
  uint64_t one = 1;
  ssize_t n = write(impl_->wake_fd, &one, sizeof(one));
  (void)n;
}

void ReplicationStream::Stop() { impl_->stop.Raise(); }

bool ReplicationStream::stop_requested() const { return impl_->stop.raised(); }

void ReplicationStream::SetHighestServerWal(
    std::function<uint64_t()> highest) {
  impl_->highest_server_wal = std::move(highest);
}

}  // namespace walwatch
