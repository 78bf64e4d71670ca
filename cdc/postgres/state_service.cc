#include "cdc/postgres/state_service.h"

#include <optional>

#include "cdc/base/logging.h"
#include "cdc/event_builder.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_handoff.h"
#include "cdc/model/event_sink.h"
#include "cdc/postgres/pg_checks.h"
#include "cdc/postgres/pg_conn.h"

namespace walwatch {

uint64_t RecordBoundaryBefore(uint64_t insert_lsn, uint64_t wal_block_size,
                              uint64_t wal_segment_size) {
  constexpr uint64_t kShortPageHeader = 24;  // SizeOfXLogShortPHD
  constexpr uint64_t kLongPageHeader = 40;   // SizeOfXLogLongPHD
  if (wal_block_size == 0 || wal_segment_size == 0) return insert_lsn;
  uint64_t in_page = insert_lsn % wal_block_size;
  bool segment_start = insert_lsn % wal_segment_size == in_page;
  if ((in_page == kShortPageHeader && !segment_start) ||
      (in_page == kLongPageHeader && segment_start)) {
    return insert_lsn - in_page;
  }
  return insert_lsn;
}

namespace {

// Where the server's WAL ends, as text: on a primary its insert position; on
// a standby (from PostgreSQL 16 on, walwatch can decode there) the end of
// what it replayed, which is all a snapshot taken there can see and all its
// walsenders can decode.
constexpr const char* kWalPositionSql =
    "(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
    "ELSE pg_current_wal_insert_lsn() END)::text";

// One worker's connection and tools. Used by its own thread only.
class PgStateWorker final : public StateWorker {
 public:
  PgStateWorker(std::shared_ptr<const StateServiceOptions> o, EventSink* log,
                const PgHandoff* handoff,
                std::function<void()> request_keepalive, const StopSignal* stop)
      : options_(std::move(o)),
        log_(log),
        handoff_(handoff),
        request_keepalive_(std::move(request_keepalive)),
        stop_(stop) {}

  void ReadState(const StateQuery& q, InitialStateStream* stream) override;
  void HandoffRv(const HandoffPosition& at, const StateSource::RvCallback& done,
                 const StateSource::Wanted& wanted) override;
  void FreshRv(const StateSource::RvCallback& done,
               const StateSource::Wanted& wanted) override;

 private:
  using RvCallback = StateSource::RvCallback;
  using Wanted = StateSource::Wanted;
  bool Connect(std::string* error);
  PgResult Query(const std::string& sql, const std::vector<std::string>& params,
                 std::string* error);
  // The server's WAL position (kWalPositionSql); with `in_recovery`, also
  // whether the server is a standby.
  bool ReadInsertLsn(uint64_t* lsn, std::string* error,
                     bool* in_recovery = nullptr);
  // Waits until the stream has passed every record begun before insert_lsn;
  // false on timeout, on stop, or once `wanted` says nobody waits any more.
  bool WaitPassed(uint64_t insert_lsn, const Wanted& wanted);
  // Commits a tiny transaction with an xid on a second connection: its
  // commit flushes the WAL before it, which an idle open transaction may
  // have left unflushed, and the walsender decodes only flushed WAL.
  void NudgeFlush();
  PgConn nudge_conn_;
  void Rollback() {
    std::string ignored;
    Query("ROLLBACK", {}, &ignored);
  }
  std::string StateSql(const StateQuery& q, std::vector<std::string>* params);

  const std::shared_ptr<const StateServiceOptions> options_;
  EventSink* const log_;
  const PgHandoff* const handoff_;
  const std::function<void()> request_keepalive_;
  const StopSignal* const stop_;
  PgConn conn_;
  uint64_t wal_block_size_ = 8192;
  uint64_t wal_segment_size_ = 16u << 20;
  EventBuilder builder_;
};

bool PgStateWorker::Connect(std::string* error) {
  // A connection kept from an earlier request may have died with the
  // server since (a restart): that is not this request's failure.
  if (PgIdleConnAlive(conn_.get())) return true;
  conn_ =
      ConnectPg(options_->conninfo, false, options_->connect_timeout_seconds);
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    *error = "cannot connect to PostgreSQL: " +
             ExplainPgError(PgError(conn_.get()));
    conn_.reset();
    return false;
  }
  PgResult r = PgQuery(conn_.get(),
                       "SELECT current_setting('wal_block_size'), setting "
                       "FROM pg_settings WHERE name = 'wal_segment_size'",
                       {}, error, stop_);
  if (!r) {
    conn_.reset();
    return false;
  }
  wal_block_size_ = std::stoull(PQgetvalue(r.get(), 0, 0));
  wal_segment_size_ = std::stoull(PQgetvalue(r.get(), 0, 1));
  return true;
}

PgResult PgStateWorker::Query(const std::string& sql,
                              const std::vector<std::string>& params,
                              std::string* error) {
  PgResult r = PgQuery(conn_.get(), sql, params, error, stop_);
  // A broken connection, or one whose answer is still on the way (stopped).
  if (!r && (PQstatus(conn_.get()) != CONNECTION_OK ||
             PQtransactionStatus(conn_.get()) == PQTRANS_ACTIVE)) {
    conn_.reset();
  }
  return r;
}

bool PgStateWorker::ReadInsertLsn(uint64_t* lsn, std::string* error,
                                  bool* in_recovery) {
  PgResult r = Query(std::string("SELECT ") + kWalPositionSql +
                         ", pg_is_in_recovery()",
                     {}, error);
  if (!r) return false;
  if (in_recovery != nullptr) {
    *in_recovery = std::string_view(PQgetvalue(r.get(), 0, 1)) == "t";
  }
  auto v = ParseLsn(PQgetvalue(r.get(), 0, 0));
  if (!v) {
    *error = "bad LSN from the server's WAL position";
    return false;
  }
  *lsn = *v;
  return true;
}

bool PgStateWorker::WaitPassed(uint64_t insert_lsn, const Wanted& wanted) {
  uint64_t target =
      RecordBoundaryBefore(insert_lsn, wal_block_size_, wal_segment_size_);
  if (target == 0) return true;
  auto next_nudge = Clock::now() + std::chrono::milliseconds(200);
  return WaitForCurrentRv(
      log_, target - 1, options_->catch_up_timeout, *stop_, wanted, [&] {
        if (Clock::now() >= next_nudge) {
          NudgeFlush();
          next_nudge = Clock::now() + std::chrono::seconds(1);
        }
        // The walsender reports its position in
        // keepalives; ask for one rather than wait for
        // the next (up to wal_sender_timeout/2 away).
        request_keepalive_();
      });
}

void PgStateWorker::NudgeFlush() {
  if (!PgIdleConnAlive(nudge_conn_.get())) {
    nudge_conn_ =
        ConnectPg(options_->conninfo, false, options_->connect_timeout_seconds);
    if (PQstatus(nudge_conn_.get()) != CONNECTION_OK) {
      nudge_conn_.reset();
      return;
    }
    // The nudge needs its commit flushed here, not on a synchronous
    // standby: with synchronous_standby_names set and the standby slow or
    // gone, waiting for it would hold this worker indefinitely.
    std::string err;
    if (!PgQuery(nudge_conn_.get(),
                 "SELECT set_config('synchronous_commit', 'local', false), "
                 "set_config('statement_timeout', '10s', false)",
                 {}, &err, stop_)) {
      nudge_conn_.reset();
      return;
    }
  }
  std::string err;
  // A standby writes no WAL of its own (and cannot assign an xid): what it
  // replayed is on its disk already.
  if (!PgQuery(nudge_conn_.get(),
               "SELECT CASE WHEN pg_is_in_recovery() THEN NULL "
               "ELSE pg_current_xact_id() END",
               {}, &err,
               stop_)) {
    if (!stop_->raised()) {
      LogWarn("cannot flush the WAL for a handoff", {{"error", err}});
    }
    nudge_conn_.reset();
  }
}

std::string PgStateWorker::StateSql(const StateQuery& q,
                                    std::vector<std::string>* params) {
  const TableMapping& m = options_->mapping;
  params->clear();
  return StateSelectSql(
      m, QuoteIdent(m.schema) + "." + QuoteIdent(m.table), q, "::text",
      [](const std::string& name) { return QuoteIdent(name); },
      [params](const std::string& v) {
        params->push_back(v);
        return "$" + std::to_string(params->size());
      });
}

void PgStateWorker::ReadState(const StateQuery& q, InitialStateStream* stream) {
  std::string err;
  for (int attempt = 1;; ++attempt) {
    if (stream->cancelled()) return;
    if (!Connect(&err)) {
      stream->Fail({500, "InternalError", err});
      return;
    }
    if (!Query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", {}, &err)) {
      stream->Fail({500, "InternalError", "cannot begin a snapshot: " + err});
      return;
    }
    // Locked before the snapshot is taken (LOCK takes none): an ALTER TABLE
    // that rewrites the table is not MVCC-safe, and committed between the
    // snapshot and the DECLARE below it would leave this snapshot an empty
    // table, with nothing in the stream to say so.
    if (!Query("LOCK TABLE " + QuoteIdent(options_->mapping.schema) + "." +
                   QuoteIdent(options_->mapping.table) +
                   " IN ACCESS SHARE MODE",
               {}, &err)) {
      Rollback();
      stream->Fail({500, "InternalError", "cannot lock the table: " + err});
      return;
    }
    PgResult r = Query(
        std::string("SELECT pg_current_snapshot()::text, ") + kWalPositionSql,
        {}, &err);
    HandoffSnapshot snapshot;
    std::optional<uint64_t> insert_lsn;
    if (r) insert_lsn = ParseLsn(PQgetvalue(r.get(), 0, 1));
    if (!r || !ParseHandoffSnapshot(PQgetvalue(r.get(), 0, 0), &snapshot) ||
        !insert_lsn) {
      Rollback();
      stream->Fail({500, "InternalError", "cannot read the snapshot: " + err});
      return;
    }
    if (!WaitPassed(*insert_lsn, [stream] { return !stream->cancelled(); })) {
      Rollback();
      if (stream->cancelled()) return;  // the watcher went away
      stream->Fail({504, "Timeout",
                    "walwatch has not caught up with the database (insert "
                    "LSN " + FormatLsn(*insert_lsn) + ") in time; retry"});
      return;
    }
    HandoffResult h = handoff_->Classify(*log_, snapshot, *insert_lsn);
    if (h.status == HandoffStatus::kRetry) {
      Rollback();
      if (attempt < options_->max_retries) continue;
      stream->Fail({504, "Timeout",
                    "commit order and snapshot visibility kept disagreeing; "
                    "retry"});
      return;
    }
    if (h.status == HandoffStatus::kExact &&
        h.rv < q.not_older_than) {
      // A transaction at or below N that the stream has passed but the
      // snapshot does not see yet: its backend has not left the ProcArray
      // (for microseconds, or while its commit waits for a synchronous
      // standby). A new snapshot will see it.
      Rollback();
      if (attempt < options_->max_retries) continue;
      stream->Fail({504, "Timeout",
                    "no snapshot sees every transaction up to resourceVersion " +
                        std::to_string(q.not_older_than) + " yet; retry"});
      return;
    }
    if (h.status == HandoffStatus::kExpired) {
      Rollback();
      stream->Fail({410, "Expired",
                    "a transaction running since before walwatch's retained "
                    "log began is still open (snapshot xmin " +
                        std::to_string(snapshot.xmin) +
                        "); the state cannot be handed off exactly yet"});
      return;
    }
    stream->Ready(h.rv);

    std::vector<std::string> params;
    std::string sql = "DECLARE walwatch_state NO SCROLL CURSOR FOR " +
                      StateSql(q, &params);
    if (!Query(sql, params, &err)) {
      Rollback();
      stream->Fail({500, "InternalError", "cannot read the state: " + err});
      return;
    }
    std::string fetch = "FETCH FORWARD " +
                        std::to_string(options_->rows_per_fetch) +
                        " FROM walwatch_state";
    for (;;) {
      PgResult rows = Query(fetch, {}, &err);
      if (!rows) {
        Rollback();
        stream->Fail({500, "InternalError", "cannot read the state: " + err});
        return;
      }
      int n = PQntuples(rows.get());
      if (n == 0) break;
      Transaction txn;
      txn.commit_lsn = h.rv;
      txn.changes.resize(n);
      for (int i = 0; i < n; ++i) {
        RowChange& c = txn.changes[i];
        c.action = RowAction::kInsert;
        c.lsn = 0;
        c.columns.present = true;
        for (size_t f = 0; f < kMappedFieldCount; ++f) {
          ColumnValue& v = c.columns.fields[f];
          if (PQgetisnull(rows.get(), i, static_cast<int>(f))) {
            v.state = ColumnValue::State::kNull;
            continue;
          }
          SetStateColumn(&v, PQgetvalue(rows.get(), i, static_cast<int>(f)),
                         PQgetlength(rows.get(), i, static_cast<int>(f)));
        }
      }
      if (!PushStateRows(&builder_, txn, h.rv, stream)) {
        Rollback();  // the watcher went away, or a row failed the state
        return;
      }
    }
    Rollback();  // read-only: nothing to commit
    stream->Finish();
    return;
  }
}

void PgStateWorker::HandoffRv(const HandoffPosition& at, const RvCallback& done,
                              const Wanted& wanted) {
  if (at.binlog()) {
    StateError e{
        400, "BadRequest",
        "this walwatch reads PostgreSQL: give snapshot "
        "(pg_current_snapshot()) and insertLSN, not a binlog position"};
    done(0, &e);
    return;
  }
  const std::string& snapshot_text = at.snapshot;
  uint64_t insert_lsn = at.insert_lsn;
  HandoffSnapshot snapshot;
  if (!ParseHandoffSnapshot(snapshot_text, &snapshot)) {
    StateError e{400, "BadRequest",
                 "snapshot \"" + snapshot_text.substr(0, 64) +
                     "\" is not pg_current_snapshot()'s xmin:xmax:xip form"};
    done(0, &e);
    return;
  }
  // Without an insertLSN, the server's is the one to wait for. With one
  // the stream has not passed, check it first: one a primary has not
  // reached yet was not read with the snapshot, and would hold this reader
  // for --too-large-rv-wait for nothing. A standby (walwatch decoding
  // there) is behind the primary a list may have read on: it is waited
  // for, as any position walwatch has not reached.
  if (insert_lsn == 0 || insert_lsn > log_->current_rv() + 1) {
    std::string err;
    uint64_t server_lsn = 0;
    bool standby = false;
    if (!Connect(&err) || !ReadInsertLsn(&server_lsn, &err, &standby)) {
      StateError e{500, "InternalError", err};
      done(0, &e);
      return;
    }
    if (insert_lsn == 0) {
      insert_lsn = server_lsn;
    } else if (insert_lsn > server_lsn && !standby) {
      StateError e{400, "BadRequest",
                   "insertLSN " + FormatLsn(insert_lsn) +
                       " is ahead of the server's WAL insert position " +
                       FormatLsn(server_lsn) +
                       ": read it with pg_current_snapshot(), in the same "
                       "statement"};
      done(0, &e);
      return;
    }
  }
  if (!WaitPassed(insert_lsn, wanted)) {
    if (!wanted()) return;  // the session gave up on it
    StateError e{504, "Timeout",
                 "walwatch has not caught up with LSN " +
                     FormatLsn(insert_lsn) + " in time; retry"};
    done(0, &e);
    return;
  }
  HandoffResult h = handoff_->Classify(*log_, snapshot, insert_lsn);
  switch (h.status) {
    case HandoffStatus::kExact:
      done({h.rv, h.latest}, nullptr);
      return;
    case HandoffStatus::kRetry: {
      StateError e{409, "Conflict",
                   "commit order and snapshot visibility disagree near this "
                   "snapshot: list again in a new snapshot"};
      done(0, &e);
      return;
    }
    case HandoffStatus::kExpired: {
      StateError e{410, "Expired",
                   "the snapshot is older than walwatch's retained log: list "
                   "again in a new snapshot"};
      done(0, &e);
      return;
    }
  }
}

void PgStateWorker::FreshRv(const RvCallback& done, const Wanted& wanted) {
  std::string err;
  uint64_t lsn = 0;
  if (!Connect(&err) || !ReadInsertLsn(&lsn, &err)) {
    StateError e{500, "InternalError", err};
    done(0, &e);
    return;
  }
  if (!WaitPassed(lsn, wanted)) {
    if (!wanted()) return;  // the session gave up on it
    StateError e{504, "Timeout",
                 "walwatch has not caught up with LSN " + FormatLsn(lsn) +
                     " in time; retry"};
    done(0, &e);
    return;
  }
  done(log_->current_rv(), nullptr);
}

}  // namespace

StateService::StateService(StateServiceOptions options, EventSink* log,
                           const PgHandoff* handoff,
                           std::function<void()> request_keepalive)
    : StateWorkerPool(
          options.workers,
          [o = std::make_shared<const StateServiceOptions>(options), log,
           handoff, request_keepalive = std::move(request_keepalive)](
              const StopSignal* stop) -> std::unique_ptr<StateWorker> {
            return std::make_unique<PgStateWorker>(o, log, handoff,
                                                   request_keepalive, stop);
          }) {}

}  // namespace walwatch
