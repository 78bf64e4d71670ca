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

// One worker's connection and tools. Used by its own thread only.
class StateService::Worker {
 public:
  Worker(const StateServiceOptions& o, EventSink* log,
         const PgHandoff* handoff,
         const std::function<void()>& request_keepalive,
         const StopSignal* stop)
      : options_(o),
        log_(log),
        handoff_(handoff),
        request_keepalive_(request_keepalive),
        stop_(stop) {}

  void ReadState(const StateQuery& q, InitialStateStream* stream);
  void HandoffRv(const std::string& snapshot_text, uint64_t insert_lsn,
                 const RvCallback& done, const Wanted& wanted);
  void FreshRv(const RvCallback& done, const Wanted& wanted);

 private:
  bool Connect(std::string* error);
  PgResult Query(const std::string& sql, const std::vector<std::string>& params,
                 std::string* error);
  bool ReadInsertLsn(uint64_t* lsn, std::string* error);
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

  const StateServiceOptions& options_;
  EventSink* const log_;
  const PgHandoff* const handoff_;
  const std::function<void()>& request_keepalive_;
  const StopSignal* const stop_;
  PgConn conn_;
  uint64_t wal_block_size_ = 8192;
  uint64_t wal_segment_size_ = 16u << 20;
  EventBuilder builder_;
};

bool StateService::Worker::Connect(std::string* error) {
  if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) return true;
  conn_ = ConnectPg(options_.conninfo, false, options_.connect_timeout_seconds);
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

PgResult StateService::Worker::Query(const std::string& sql,
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

bool StateService::Worker::ReadInsertLsn(uint64_t* lsn, std::string* error) {
  PgResult r = Query("SELECT pg_current_wal_insert_lsn()::text", {}, error);
  if (!r) return false;
  auto v = ParseLsn(PQgetvalue(r.get(), 0, 0));
  if (!v) {
    *error = "bad LSN from pg_current_wal_insert_lsn()";
    return false;
  }
  *lsn = *v;
  return true;
}

bool StateService::Worker::WaitPassed(uint64_t insert_lsn,
                                      const Wanted& wanted) {
  uint64_t target =
      RecordBoundaryBefore(insert_lsn, wal_block_size_, wal_segment_size_);
  if (target == 0) return true;
  struct Signal {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto signal = std::make_shared<Signal>();
  uint64_t id = log_->WaitForRv(target - 1, [signal] {
    std::lock_guard<std::mutex> lock(signal->mu);
    signal->done = true;
    signal->cv.notify_all();
  });
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + options_.catch_up_timeout;
  auto next_nudge = start + std::chrono::milliseconds(200);
  std::unique_lock<std::mutex> lock(signal->mu);
  while (!signal->done) {
    if (stop_->raised() || !wanted()) {
      lock.unlock();
      log_->CancelWaitForRv(id);
      return false;
    }
    if (std::chrono::steady_clock::now() >= next_nudge) {
      lock.unlock();
      NudgeFlush();
      lock.lock();
      next_nudge = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      if (signal->done) break;
    }
    // The walsender reports its position in keepalives; ask for one rather
    // than wait for the next (up to wal_sender_timeout/2 away).
    request_keepalive_();
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      lock.unlock();
      log_->CancelWaitForRv(id);
      return false;
    }
    signal->cv.wait_for(lock, std::min<std::chrono::steady_clock::duration>(
                                  std::chrono::milliseconds(100),
                                  deadline - now));
  }
  return true;
}

void StateService::Worker::NudgeFlush() {
  if (!nudge_conn_ || PQstatus(nudge_conn_.get()) != CONNECTION_OK) {
    nudge_conn_ =
        ConnectPg(options_.conninfo, false, options_.connect_timeout_seconds);
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
  if (!PgQuery(nudge_conn_.get(), "SELECT pg_current_xact_id()", {}, &err,
               stop_)) {
    if (!stop_->raised()) {
      LogWarn("cannot flush the WAL for a handoff", {{"error", err}});
    }
    nudge_conn_.reset();
  }
}

std::string StateService::Worker::StateSql(const StateQuery& q,
                                           std::vector<std::string>* params) {
  const TableMapping& m = options_.mapping;
  std::string sql = "SELECT ";
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    if (i) sql += ", ";
    sql += QuoteIdent(m.columns[i]);
    if (static_cast<MappedField>(i) == MappedField::kObject) sql += "::text";
  }
  sql += " FROM " + QuoteIdent(m.schema) + "." + QuoteIdent(m.table) +
         " WHERE " + QuoteIdent(m.column(MappedField::kGroup)) + " = $1 AND " +
         QuoteIdent(m.column(MappedField::kVersion)) + " = $2 AND " +
         QuoteIdent(m.column(MappedField::kResource)) + " = $3";
  *params = {q.group, q.version, q.resource};
  if (!q.cluster.empty()) {
    params->push_back(q.cluster);
    sql += " AND " + QuoteIdent(m.column(MappedField::kCluster)) + " = $" +
           std::to_string(params->size());
  }
  if (!q.ns.empty()) {
    params->push_back(q.ns);
    sql += " AND " + QuoteIdent(m.column(MappedField::kNamespace)) + " = $" +
           std::to_string(params->size());
  }
  return sql;
}

void StateService::Worker::ReadState(const StateQuery& q,
                                     InitialStateStream* stream) {
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
    if (!Query("LOCK TABLE " + QuoteIdent(options_.mapping.schema) + "." +
                   QuoteIdent(options_.mapping.table) + " IN ACCESS SHARE MODE",
               {}, &err)) {
      Rollback();
      stream->Fail({500, "InternalError", "cannot lock the table: " + err});
      return;
    }
    PgResult r = Query(
        "SELECT pg_current_snapshot()::text, "
        "pg_current_wal_insert_lsn()::text",
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
      if (attempt < options_.max_retries) continue;
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
      if (attempt < options_.max_retries) continue;
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
                        std::to_string(options_.rows_per_fetch) +
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
          v.state = ColumnValue::State::kValue;
          const char* text = PQgetvalue(rows.get(), i, static_cast<int>(f));
          size_t len = PQgetlength(rows.get(), i, static_cast<int>(f));
          v.text.reserve(len + 64);  // simdjson's padding
          v.text.assign(text, len);
        }
      }
      EventBuilder::Result built;
      builder_.BuildAt(txn, h.rv, &built);
      if (!built.errors.empty()) {
        // A state without that row would silently diverge the watcher from
        // the table: fail it, as the stream turns such a transaction into a
        // barrier. The client sees a 500 Status and retries its list.
        for (const std::string& e : built.errors) {
          LogError("a row of the state could not become an event",
                   {{"error", e}});
        }
        Rollback();
        stream->Fail({500, "InternalError",
                      "a row of the table could not become a watch event (" +
                          built.errors.front().substr(0, 200) +
                          "); the initial state would miss it"});
        return;
      }
      if (!built.events.empty() && !stream->Push(std::move(built.events))) {
        Rollback();  // the watcher went away
        return;
      }
    }
    Rollback();  // read-only: nothing to commit
    stream->Finish();
    return;
  }
}

void StateService::Worker::HandoffRv(const std::string& snapshot_text,
                                     uint64_t insert_lsn,
                                     const RvCallback& done,
                                     const Wanted& wanted) {
  HandoffSnapshot snapshot;
  if (!ParseHandoffSnapshot(snapshot_text, &snapshot)) {
    StateError e{400, "BadRequest",
                 "snapshot \"" + snapshot_text.substr(0, 64) +
                     "\" is not pg_current_snapshot()'s xmin:xmax:xip form"};
    done(0, &e);
    return;
  }
  // Without an insertLSN, the server's is the one to wait for. With one
  // the stream has not passed, check it first: one the server has not
  // reached yet was not read with the snapshot, and would hold this reader
  // for --too-large-rv-wait for nothing.
  if (insert_lsn == 0 || insert_lsn > log_->current_rv() + 1) {
    std::string err;
    uint64_t server_lsn = 0;
    if (!Connect(&err) || !ReadInsertLsn(&server_lsn, &err)) {
      StateError e{500, "InternalError", err};
      done(0, &e);
      return;
    }
    if (insert_lsn == 0) {
      insert_lsn = server_lsn;
    } else if (insert_lsn > server_lsn) {
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
      done(h.rv, nullptr);
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

void StateService::Worker::FreshRv(const RvCallback& done,
                                   const Wanted& wanted) {
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

StateService::StateService(StateServiceOptions options, EventSink* log,
                           const PgHandoff* handoff,
                           std::function<void()> request_keepalive)
    : options_(std::move(options)),
      share_(std::max(1, options_.workers / 2)),
      log_(log),
      handoff_(handoff),
      request_keepalive_(std::move(request_keepalive)),
      stop_signal_(std::make_unique<StopSignal>()) {
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    threads_.emplace_back([this] { WorkerLoop(/*rv_only=*/false); });
  }
  threads_.emplace_back([this] { WorkerLoop(/*rv_only=*/true); });
}

StateService::~StateService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_signal_->Raise();
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void StateService::PostRv(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    rv_jobs_.push_back(std::move(job));
  }
  // Every waiter: the one woken must be able to take this lane's job.
  cv_.notify_all();
}

size_t StateService::queued_states() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& entry : clients_) {
    for (const PendingState& p : entry.second.queue) {
      n += !p.stream->cancelled();
    }
  }
  return n;
}

StateService::Clients::iterator StateService::NextStateClientLocked() {
  auto it = clients_.upper_bound(last_client_);
  for (size_t n = clients_.size(); n > 0; --n) {
    if (it == clients_.end()) it = clients_.begin();
    std::deque<PendingState>& queue = it->second.queue;
    while (!queue.empty() && queue.front().stream->cancelled()) {
      queue.pop_front();
    }
    if (queue.empty() && it->second.running == 0) {
      it = clients_.erase(it);  // nothing left of this client
      continue;
    }
    if (!queue.empty() && it->second.running < share_) return it;
    ++it;
  }
  return clients_.end();
}

void StateService::WorkerLoop(bool rv_only) {
  Worker worker(options_, log_, handoff_, request_keepalive_,
                stop_signal_.get());
  for (;;) {
    Job job;
    std::optional<PendingState> state;
    {
      std::unique_lock<std::mutex> lock(mu_);
      Clients::iterator next = clients_.end();
      cv_.wait(lock, [&] {
        if (stopping_ || !rv_jobs_.empty()) return true;
        if (rv_only) return false;
        next = NextStateClientLocked();
        return next != clients_.end();
      });
      if (stopping_) return;
      if (!rv_jobs_.empty()) {
        job = std::move(rv_jobs_.front());
        rv_jobs_.pop_front();
      } else {
        state = std::move(next->second.queue.front());
        next->second.queue.pop_front();
        ++next->second.running;
        last_client_ = next->first;
      }
    }
    if (!state) {
      job(worker);
      continue;
    }
    worker.ReadState(state->query, state->stream.get());
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = clients_.find(state->query.client);
      if (--it->second.running == 0 && it->second.queue.empty()) {
        clients_.erase(it);
      }
    }
    // The client's share has room again: a worker waiting may take its
    // next state.
    cv_.notify_all();
  }
}

void StateService::ReadState(const StateQuery& query,
                             std::shared_ptr<InitialStateStream> stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    clients_[query.client].queue.push_back({query, std::move(stream)});
  }
  cv_.notify_all();
}

// A request whose session gave up while it was queued (walwatch lagging,
// clients timing out and asking again) is skipped, so that it does not hold
// a worker that a live one needs.
void StateService::HandoffRv(const HandoffPosition& at, RvCallback done,
                             Wanted wanted) {
  if (at.binlog()) {
    StateError e{
        400, "BadRequest",
        "this walwatch reads PostgreSQL: give snapshot "
        "(pg_current_snapshot()) and insertLSN, not a binlog position"};
    done(0, &e);
    return;
  }
  PostRv([snapshot = at.snapshot, insert_lsn = at.insert_lsn, done,
          wanted](Worker& w) {
    if (wanted()) w.HandoffRv(snapshot, insert_lsn, done, wanted);
  });
}
void StateService::FreshRv(RvCallback done, Wanted wanted) {
  PostRv([done, wanted](Worker& w) {
    if (wanted()) w.FreshRv(done, wanted);
  });
}

}  // namespace walwatch
