#include "cdc/mysql/mariadb_state.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cdc/event_builder.h"
#include "cdc/model/event_sink.h"
#include "cdc/mysql/binlog_position.h"
#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/stop_interrupter.h"

namespace walwatch::mysql {

namespace {

using RvCallback = StateSource::RvCallback;
using Wanted = StateSource::Wanted;

void Answer(const RvCallback& done, int code, const char* reason,
            std::string message) {
  StateError e{code, reason, std::move(message)};
  done(0, &e);
}

// One worker's connection. Used by its own thread only.
class MariaDbStateWorker final : public StateWorker {
 public:
  MariaDbStateWorker(std::shared_ptr<const MariaDbStateOptions> o,
                     EventSink* log, const StopSignal* stop)
      : options_(std::move(o)), log_(log), stop_(stop), interrupter_(stop) {}

  void ReadState(const StateQuery& q, InitialStateStream* stream) override;
  void HandoffRv(const HandoffPosition& at, const RvCallback& done,
                 const Wanted& wanted) override;
  void FreshRv(const RvCallback& done, const Wanted& wanted) override;

 private:
  bool Connect(std::string* error);
  // A query on the worker's connection, interruptible by the pool's stop.
  std::string Query(const std::string& sql, MysqlRows* rows = nullptr);
  // The consistent snapshot's position, in the transaction just begun.
  std::string SnapshotPosition(BinlogPosition* at);
  std::string ServerEnd(BinlogPosition* at);
  bool WaitPassed(uint64_t rv, const Wanted& wanted) {
    return WaitForCurrentRv(log_, rv, options_->catch_up_timeout, *stop_,
                            wanted, nullptr);
  }
  // Whether a watch may start at `rv`: not below the log's floor, in a
  // fence, nor above its ceiling.
  bool Continuable(uint64_t rv) const {
    return log_->Seek(rv).status == EventSink::SeekStatus::kOk;
  }
  // Whether the stream reads the server this worker's connection is on:
  // the same history (BinlogHistory). Not while a failover is followed.
  bool SameServerAsStream() const {
    return BinlogHistoryCeiling(history_) == log_->ceiling_rv();
  }
  // A position on this worker's server, as a version (BinlogVersion).
  std::optional<uint64_t> Version(const BinlogPosition& at,
                                  std::string* why) const {
    return BinlogVersion(history_, at, why);
  }
  void Rollback() { Query("ROLLBACK"); }
  std::string StateSql(const StateQuery& q);

  const std::shared_ptr<const MariaDbStateOptions> options_;
  EventSink* const log_;
  const StopSignal* const stop_;
  StopInterrupter interrupter_;
  MysqlConnection conn_;
  // The history of the connection's server (its server_id's).
  uint64_t history_ = 0;
  EventBuilder builder_;
};

bool MariaDbStateWorker::Connect(std::string* error) {
  // A connection kept from an earlier request may have been closed by the
  // server since (a restart): that is not this request's failure.
  if (conn_.connected() && !conn_.IdleConnectionClosed()) return true;
  conn_.Close();
  MysqlConnParams params = options_->conn;
  params.read_timeout_s =
      static_cast<unsigned>(options_->query_timeout.count());
  StopInterrupter::Scope interruptible(&interrupter_,
                                       [this] { conn_.Interrupt(); });
  std::string err = conn_.Connect(params);
  if (err.empty()) {
    err =
        conn_.Query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  }
  uint64_t server_id = 0;
  if (err.empty()) err = ReadServerId(&conn_, &server_id);
  history_ = BinlogHistory(server_id);
  if (!err.empty()) {
    *error = "cannot connect to the MySQL/MariaDB server: " + err;
    conn_.Close();
    return false;
  }
  return true;
}

std::string MariaDbStateWorker::Query(const std::string& sql, MysqlRows* rows) {
  StopInterrupter::Scope interruptible(&interrupter_,
                                       [this] { conn_.Interrupt(); });
  std::string err = conn_.Query(sql, rows);
  // A connection that failed mid-query is of no further use.
  if (!err.empty() && conn_.last_errno() >= 2000) conn_.Close();
  return err;
}

std::string MariaDbStateWorker::SnapshotPosition(BinlogPosition* at) {
  MysqlRows rows;
  if (std::string err = Query("SHOW STATUS LIKE 'binlog_snapshot_%'", &rows);
      !err.empty()) {
    return err;
  }
  std::optional<std::string> file, position;
  for (const auto& r : rows.rows) {
    if (r.size() < 2 || !r[0]) continue;
    if (*r[0] == "Binlog_snapshot_file") file = r[1];
    if (*r[0] == "Binlog_snapshot_position") position = r[1];
  }
  if (!file || !position || file->empty()) {
    return "the server reports no binlog_snapshot_file and "
           "binlog_snapshot_position: initial states and handoffs need "
           "MariaDB's consistent snapshots (MySQL has none; see README)";
  }
  at->file = *file;
  at->pos = std::stoull(*position);
  return "";
}

std::string MariaDbStateWorker::ServerEnd(BinlogPosition* at) {
  StopInterrupter::Scope interruptible(&interrupter_,
                                       [this] { conn_.Interrupt(); });
  BinlogStatus s = ReadBinlogEnd(&conn_, at);
  if (!s.ok()) conn_.Close();
  return s.ok() ? "" : s.message;
}

std::string MariaDbStateWorker::StateSql(const StateQuery& q) {
  const TableMapping& m = options_->mapping;
  return StateSelectSql(
      m,
      QuoteIdentifier(options_->conn.database) + "." + QuoteIdentifier(m.table),
      q, "", [](const std::string& name) { return QuoteIdentifier(name); },
      [this](const std::string& v) { return conn_.Quote(v); });
}

void MariaDbStateWorker::ReadState(const StateQuery& q,
                                   InitialStateStream* stream) {
  std::string err;
  for (int attempt = 1;; ++attempt) {
    if (stream->cancelled()) return;
    if (!Connect(&err)) {
      stream->Fail({500, "InternalError", err});
      return;
    }
    err = Query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY");
    if (!err.empty()) {
      stream->Fail({500, "InternalError", "cannot begin a snapshot: " + err});
      return;
    }
    BinlogPosition at;
    err = SnapshotPosition(&at);
    const std::optional<uint64_t> rv =
        err.empty() ? Version(at, &err) : std::nullopt;
    if (!rv) {
      Rollback();
      stream->Fail({500, "InternalError",
                    "cannot read the snapshot's binlog position: " + err});
      return;
    }
    if (!SameServerAsStream()) {
      Rollback();
      conn_.Close();  // the next attempt connects again
      stream->Fail({504, "Timeout",
                    "the snapshot was taken on another server than the one "
                    "walwatch's stream reads (a failover, not yet followed "
                    "by the stream); retry"});
      return;
    }
    if (!WaitPassed(*rv, [stream] { return !stream->cancelled(); })) {
      Rollback();
      if (stream->cancelled()) return;  // the watcher went away
      stream->Fail({504, "Timeout",
                    "walwatch has not caught up with the database (binlog " +
                        at.ToString() + ") in time; retry"});
      return;
    }
    if (*rv < q.not_older_than) {
      // The watch holds an RV of a transaction this snapshot does not see
      // (from another walwatch ahead of this server?). A new one may.
      Rollback();
      if (attempt < options_->max_retries) continue;
      stream->Fail({504, "Timeout",
                    "no snapshot sees every transaction up to "
                    "resourceVersion " +
                        std::to_string(q.not_older_than) + " yet; retry"});
      return;
    }
    if (!Continuable(*rv)) {
      Rollback();
      stream->Fail({410, "Expired",
                    "the snapshot (binlog " + at.ToString() +
                        ") is older than walwatch's retained log; relist"});
      return;
    }
    stream->Ready(*rv);

    Transaction rows;
    bool ended = false;  // the client went away, or a row failed the state
    StopInterrupter::Scope interruptible(&interrupter_,
                                         [this] { conn_.Interrupt(); });
    err = conn_.QueryEach(
        StateSql(q), options_->rows_per_fetch, [&](const MysqlRows& batch) {
          rows.commit_lsn = *rv;
          rows.changes.clear();
          rows.changes.resize(batch.rows.size());
          for (size_t i = 0; i < batch.rows.size(); ++i) {
            RowChange& c = rows.changes[i];
            c.action = RowAction::kInsert;
            c.lsn = 0;
            c.columns.present = true;
            for (size_t f = 0; f < kMappedFieldCount; ++f) {
              ColumnValue& v = c.columns.fields[f];
              const std::optional<std::string>& value = batch.rows[i][f];
              if (!value) {
                v.state = ColumnValue::State::kNull;
                continue;
              }
              SetStateColumn(&v, value->data(), value->size());
            }
          }
          ended = !PushStateRows(&builder_, rows, *rv, stream);
          return !ended;
        });
    if (ended) return;  // the connection was closed with the result
    if (!err.empty()) {
      conn_.Close();
      stream->Fail({500, "InternalError", "cannot read the state: " + err});
      return;
    }
    Rollback();  // read-only: nothing to commit
    stream->Finish();
    return;
  }
}

void MariaDbStateWorker::HandoffRv(const HandoffPosition& at,
                                   const RvCallback& done,
                                   const Wanted& wanted) {
  if (!at.binlog()) {
    return Answer(done, 400, "BadRequest",
                  "this walwatch reads a MySQL/MariaDB binlog: give "
                  "binlogFile and binlogPosition (binlog_snapshot_file and "
                  "binlog_snapshot_position of the list's consistent "
                  "snapshot), not a PostgreSQL snapshot");
  }
  const BinlogPosition listed{at.binlog_file, at.binlog_position};
  std::string why;
  if (std::string err; !Connect(&err)) {
    return Answer(done, 500, "InternalError", err);
  }
  // The list's server: the one the client names, else this connection's.
  const std::optional<uint64_t> rv =
      at.binlog_server_id
          ? BinlogVersion(BinlogHistory(*at.binlog_server_id), listed, &why)
          : Version(listed, &why);
  if (!rv) return Answer(done, 400, "BadRequest", why);
  if (at.binlog_server_id) {
    if (HistoryOfVersion(*rv) != HistoryOfVersion(log_->ceiling_rv())) {
      return Answer(done, 410, "Expired",
                    "the list was read on server_id " +
                        std::to_string(*at.binlog_server_id) +
                        ", which is not the server walwatch's stream reads "
                        "(a failover): list again");
    }
  } else if (!SameServerAsStream()) {
    // The list's server may be this connection's or the stream's: its
    // position may name either's file and offset. Listed again, it is read
    // where the stream will be.
    conn_.Close();
    return Answer(done, 410, "Expired",
                  "walwatch's stream reads another server than this "
                  "walwatch's connections (a failover): list again");
  }
  // A list known to be of this server needs no fence: its position is
  // this server's.
  if (!at.binlog_server_id && options_->handoff_fence != nullptr &&
      options_->handoff_fence->Contains(*rv)) {
    return Answer(done, 410, "Expired",
                  "binlog position " + listed.ToString() +
                      " may be the server's before the failover walwatch "
                      "followed, read through a connection to it: list "
                      "again, and pass serverId (the list's SELECT "
                      "@@server_id)");
  }
  // One the server has not reached was not read in a snapshot of it, and
  // would hold this worker for --too-large-rv-wait for nothing.
  if (*rv > log_->current_rv()) {
    std::string err;
    BinlogPosition end;
    if (!Connect(&err) || !(err = ServerEnd(&end)).empty()) {
      return Answer(done, 500, "InternalError", err);
    }
    const std::optional<uint64_t> end_rv = Version(end, nullptr);
    if (end_rv && *rv > *end_rv) {
      return Answer(done, 400, "BadRequest",
                    "binlog position " + listed.ToString() +
                        " is ahead of the server's binlog end " +
                        end.ToString() +
                        ": read binlog_snapshot_file and "
                        "binlog_snapshot_position in the list's START "
                        "TRANSACTION WITH CONSISTENT SNAPSHOT");
    }
  }
  if (!WaitPassed(*rv, wanted)) {
    if (!wanted()) return;  // the session gave up on it
    return Answer(done, 504, "Timeout",
                  "walwatch has not caught up with binlog " +
                      listed.ToString() + " in time; retry");
  }
  if (!Continuable(*rv)) {
    return Answer(done, 410, "Expired",
                  "the list (binlog " + listed.ToString() +
                      ") is older than walwatch's retained log: list again "
                      "in a new snapshot");
  }
  // The binlog position moves with other tables' and databases'
  // transactions too: answer the RV of the table's last transaction at or
  // below it, the same state (HeldCommits::StateRv).
  const uint64_t state = log_->CommitsFrom(UINT64_MAX, *rv + 1).StateRv();
  done({state < *rv && Continuable(state) ? state : *rv, *rv}, nullptr);
}

void MariaDbStateWorker::FreshRv(const RvCallback& done, const Wanted& wanted) {
  std::string err;
  BinlogPosition end;
  if (!Connect(&err) || !(err = ServerEnd(&end)).empty()) {
    return Answer(done, 500, "InternalError", err);
  }
  const std::optional<uint64_t> rv = Version(end, &err);
  if (!rv) return Answer(done, 500, "InternalError", err);
  if (!SameServerAsStream()) {
    conn_.Close();
    return Answer(done, 504, "Timeout",
                  "walwatch's stream reads another server than this "
                  "walwatch's connections (a failover, not yet followed by "
                  "the stream); retry");
  }
  if (!WaitPassed(*rv, wanted)) {
    if (!wanted()) return;  // the session gave up on it
    return Answer(done, 504, "Timeout",
                  "walwatch has not caught up with binlog " + end.ToString() +
                      " in time; retry");
  }
  done(log_->current_rv(), nullptr);
}

}  // namespace

MariaDbStateService::MariaDbStateService(MariaDbStateOptions options,
                                         EventSink* log)
    : StateWorkerPool(
          options.workers,
          [o = std::make_shared<const MariaDbStateOptions>(options),
           log](const StopSignal* stop) -> std::unique_ptr<StateWorker> {
            return std::make_unique<MariaDbStateWorker>(o, log, stop);
          }) {}

}  // namespace walwatch::mysql
