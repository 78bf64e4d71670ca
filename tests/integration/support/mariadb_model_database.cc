#include "tests/integration/support/mariadb_model_database.h"

#include <chrono>
#include <stdexcept>
#include <utility>

#include "cdc/mysql/mysql_checks.h"

namespace walwatch::itest {

namespace {

// The mapped columns' places in MappedColumns().
constexpr size_t kResourceColumn = 2;
constexpr size_t kClusterColumn = 4;

std::string ValueText(const mysql::BinlogValue& v) {
  return v.is_null ? std::string() : v.text;
}

}  // namespace

// ---------------------------------------------------------------------------
// MariaDbModelSql

MariaDbModelSql::MariaDbModelSql(const MariaDbServer& server,
                                 const std::string& database)
    : db_(database) {
  if (std::string err = conn_.Connect(server.Root(database)); !err.empty()) {
    throw std::runtime_error(err);
  }
  if (mysql::BinlogStatus s = mysql::ReadBinlogEnd(&conn_, &search_from_);
      !s.ok()) {
    throw std::runtime_error("the binlog's end: " + s.message);
  }
}

uint64_t MariaDbModelSql::LastCommitRv() {
  const std::string gtid = LastGtid(conn_);
  if (gtid != last_gtid_) {
    search_from_ = FindCommit(conn_, gtid, search_from_);
    last_gtid_ = gtid;
    last_commit_ = RvOf(&conn_, search_from_);
  }
  return last_commit_;
}

void MariaDbModelSql::Run(const std::string& sql) {
  if (std::string err = conn_.Query(sql); !err.empty()) {
    throw std::runtime_error(err + " [" + sql.substr(0, 200) + "]");
  }
}

uint64_t MariaDbModelSql::ChangedRows() {
  std::optional<std::string> n;
  if (std::string err = conn_.QueryValue("SELECT ROW_COUNT()", &n);
      !err.empty() || !n) {
    throw std::runtime_error("ROW_COUNT(): " + err);
  }
  return std::stoull(*n);
}

uint64_t MariaDbModelSql::Count(const std::string& where) {
  std::optional<std::string> n;
  if (std::string err = conn_.QueryValue(
          "SELECT COUNT(*) FROM `resources` WHERE " + where, &n);
      !err.empty() || !n) {
    throw std::runtime_error("COUNT(*): " + err);
  }
  return std::stoull(*n);
}

std::string MariaDbModelSql::KeyWhere(const Resource& r) {
  return "`cluster` = " + conn_.Quote(r.cluster) +
         " AND `group` = " + conn_.Quote(r.group) +
         " AND `version` = " + conn_.Quote(r.version) +
         " AND `resource` = " + conn_.Quote(r.resource) +
         " AND `namespace` = " + conn_.Quote(r.ns) +
         " AND `name` = " + conn_.Quote(r.name);
}

void MariaDbModelSql::Insert(const ModelObjectSpec& spec) {
  Run(InsertSql(db_, spec.row, spec.Object().dump()));
}

// MariaDB reports the rows an UPDATE changed, not those it matched (the
// connection does not ask for CLIENT_FOUND_ROWS), so "none changed" is
// told from "none there" by looking.
void MariaDbModelSql::Update(const ModelObjectSpec& spec) {
  Run(UpdateSql(db_, spec.row, spec.Object().dump()));
  if (ChangedRows() == 0 && Count(KeyWhere(spec.row)) == 0) {
    throw std::runtime_error("Update: no row " + spec.row.name);
  }
}

void MariaDbModelSql::Delete(const Resource& r) {
  Run(DeleteSql(db_, r));
  if (ChangedRows() == 0) throw std::runtime_error("Delete: no row " + r.name);
}

void MariaDbModelSql::RecordKubeEvent(const Resource& r,
                                      const std::string& reason) {
  Run(RecordKubeEventSql(db_, r, reason));
  if (ChangedRows() == 0 && Count("`cluster` = " + conn_.Quote(r.cluster) +
                                  " AND `uid` = " + conn_.Quote(r.uid)) == 0) {
    throw std::runtime_error("RecordKubeEvent: no row " + r.name);
  }
}

size_t MariaDbModelSql::RemoveCluster(const std::string& cluster,
                                      const ModelResource* resource) {
  std::string sql =
      "DELETE FROM `resources` WHERE `cluster` = " + conn_.Quote(cluster);
  if (resource != nullptr) {
    sql += " AND `group` = " + conn_.Quote(resource->group) +
           " AND `version` = " + conn_.Quote(resource->version) +
           " AND `resource` = " + conn_.Quote(resource->resource);
  }
  Run(sql);
  return ChangedRows();
}

std::optional<ModelSql::Row> MariaDbModelSql::Find(const Resource& r) {
  mysql::MysqlRows rows;
  const std::string sql =
      "SELECT `uid`, `object` FROM `resources` WHERE " + KeyWhere(r);
  if (std::string err = conn_.Query(sql, &rows); !err.empty()) {
    throw std::runtime_error(err + " [" + sql.substr(0, 200) + "]");
  }
  if (rows.rows.empty() || !rows.rows[0][0] || !rows.rows[0][1]) {
    return std::nullopt;
  }
  return Row{*rows.rows[0][0], *rows.rows[0][1]};
}

ModelState MariaDbModelSql::State(const ModelFilter& filter) {
  std::string sql =
      "SELECT `cluster`, `namespace`, `name`, `object` FROM `resources` "
      "WHERE `group` = " +
      conn_.Quote(filter.resource.group) +
      " AND `version` = " + conn_.Quote(filter.resource.version) +
      " AND `resource` = " + conn_.Quote(filter.resource.resource);
  if (!filter.cluster.empty()) {
    sql += " AND `cluster` = " + conn_.Quote(filter.cluster);
  }
  if (!filter.ns.empty()) {
    sql += " AND `namespace` = " + conn_.Quote(filter.ns);
  }
  mysql::MysqlRows rows;
  if (std::string err = conn_.Query(sql, &rows); !err.empty()) {
    throw std::runtime_error(err + " [" + sql.substr(0, 200) + "]");
  }
  ModelState state;
  for (const auto& row : rows.rows) {
    AddListedRow(
        &state, filter,
        {row[0].value_or(""), row[1].value_or(""), row[2].value_or("")},
        row[3].value_or("null"));
  }
  return state;
}

// PROTOCOL.md, "The handoff on MySQL/MariaDB": the snapshot and its binlog
// position under one lock, so the RV is exact and never a 409.
::testing::AssertionResult MariaDbModelSql::ListWithHandoff(
    const std::string& socket_path, const ModelFilter& filter, ListedState* out,
    Clock::time_point deadline) {
  std::string last_answer;
  out->attempts = 0;
  while (Clock::now() < deadline) {
    ++out->attempts;
    Run("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    Run("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY");
    try {
      mysql::MysqlRows status;
      if (std::string err =
              conn_.Query("SHOW STATUS LIKE 'binlog_snapshot_%'", &status);
          !err.empty()) {
        throw std::runtime_error(err);
      }
      out->snapshot.clear();
      out->insert_lsn.clear();
      for (const auto& r : status.rows) {
        if (r[0] == "Binlog_snapshot_file") out->snapshot = r[1].value_or("");
        if (r[0] == "Binlog_snapshot_position") {
          out->insert_lsn = r[1].value_or("");
        }
      }
      out->state = State(filter);
      Run("COMMIT");
    } catch (...) {
      conn_.Query("ROLLBACK");
      throw;
    }
    if (out->snapshot.empty() || out->insert_lsn.empty()) {
      return ::testing::AssertionFailure()
             << "no Binlog_snapshot_file/_position in the snapshot";
    }
    int status = 0;
    std::string body;
    auto r = GetRvEndpoint(
        socket_path,
        "/walwatch/v1/handoff?binlogFile=" + QueryEscape(out->snapshot) +
            "&binlogPosition=" + QueryEscape(out->insert_lsn),
        &out->rv, &status, &body, deadline);
    if (r) return r;
    // 410: older than walwatch's log; 504: walwatch had not reached the
    // position yet. A new snapshot serves both (PROTOCOL.md's table).
    if (status != 410 && status != 504) {
      return r << " (attempt " << out->attempts << ")";
    }
    last_answer = body;
  }
  return ::testing::AssertionFailure()
         << "handoff for " << filter.ToString() << " still refused after "
         << out->attempts << " snapshots: " << last_answer;
}

// ---------------------------------------------------------------------------
// BinlogWitness

namespace {

mysql::BinlogReaderOptions WitnessOptions(const std::string& database,
                                          uint32_t server_id) {
  mysql::BinlogReaderOptions o;
  o.database = database;
  o.table = "resources";
  o.columns = MappedColumns();
  o.server_id = server_id;
  // Heartbeats move the witness's position on while nothing is written,
  // so that CatchUp sees the end reached.
  o.heartbeat_period = std::chrono::milliseconds(200);
  o.silence_timeout = std::chrono::seconds(30);
  return o;
}

}  // namespace

BinlogWitness::BinlogWitness(const MariaDbServer& server,
                             const std::string& database, uint32_t server_id)
    : reader_(server.Root(), WitnessOptions(database, server_id)) {
  if (std::string err = conn_.Connect(server.Root()); !err.empty()) {
    throw std::runtime_error(err);
  }
  mysql::BinlogPosition end;
  mysql::BinlogStatus s = mysql::ReadBinlogEnd(&conn_, &end);
  if (s.ok()) s = reader_.Open(end);
  if (!s.ok()) {
    throw std::runtime_error(std::string("binlog witness: ") +
                             mysql::BinlogErrorKindName(s.kind) + ": " +
                             s.message);
  }
  history_ = mysql::HistoryOfVersion(RvOf(&conn_, end));
  read_to_ = RvOf(&conn_, end);
  thread_ = std::thread([this] { Loop(); });
}

BinlogWitness::~BinlogWitness() { Stop(); }

void BinlogWitness::Stop() {
  reader_.Interrupt();
  if (thread_.joinable()) thread_.join();
}

void BinlogWitness::Loop() {
  for (;;) {
    mysql::BinlogItem item;
    mysql::BinlogStatus s = reader_.Next(&item);
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      if (s.kind != mysql::BinlogErrorKind::kStopped) {
        error_ =
            std::string(mysql::BinlogErrorKindName(s.kind)) + ": " + s.message;
      }
      ended_ = true;
      read_.notify_all();
      return;
    }
    std::optional<uint64_t> at;
    if (item.type == mysql::BinlogItem::Type::kTransaction) {
      Record(item.transaction);
      at = mysql::BinlogVersion(history_, item.transaction.commit);
    } else {
      at = mysql::BinlogVersion(history_, item.position);
    }
    if (at && *at > read_to_) {
      read_to_ = *at;
      read_.notify_all();
    }
  }
}

// With mu_ held.
void BinlogWitness::Record(const mysql::BinlogTransaction& t) {
  if (t.changes.empty()) return;
  std::set<std::string> keys;
  auto note = [&](const std::vector<mysql::BinlogValue>& row) {
    if (row.size() <= kClusterColumn) return;
    keys.insert(ValueText(row[kResourceColumn]) + "|" +
                ValueText(row[kClusterColumn]));
  };
  for (const mysql::BinlogRowChange& c : t.changes) {
    switch (c.kind) {
      case mysql::BinlogRowChange::Kind::kInsert:
        note(c.after);
        break;
      case mysql::BinlogRowChange::Kind::kDelete:
        note(c.before);
        break;
      case mysql::BinlogRowChange::Kind::kUpdate:
        // Only the mapped columns are read: a difference is an event.
        if (c.before != c.after) {
          note(c.before);
          note(c.after);
        }
        break;
    }
  }
  std::optional<uint64_t> commit = mysql::BinlogVersion(history_, t.commit);
  if (keys.empty() || !commit) return;
  ++transactions_;
  for (const std::string& key : keys) commits_[key].insert(*commit);
}

void BinlogWitness::CatchUp() {
  mysql::BinlogPosition end;
  mysql::BinlogStatus s = mysql::ReadBinlogEnd(&conn_, &end);
  if (!s.ok()) throw std::runtime_error("binlog witness: " + s.message);
  const uint64_t target = RvOf(&conn_, end);
  {
    std::unique_lock<std::mutex> lock(mu_);
    read_.wait_for(lock, std::chrono::seconds(120),
                   [&] { return read_to_ >= target || ended_; });
    if (error_.empty() && read_to_ < target) {
      error_ =
          "did not reach the binlog's end " + end.ToString() + " within 120 s";
    }
  }
  Stop();
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.empty()) throw std::runtime_error("binlog witness: " + error_);
}

bool BinlogWitness::Witnessed(const std::string& resource,
                              const std::string& cluster, uint64_t r,
                              uint64_t f) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string prefix = resource + "|";
  for (auto it = commits_.lower_bound(prefix);
       it != commits_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    if (!cluster.empty() && it->first != prefix + cluster) continue;
    auto c = it->second.upper_bound(r);
    if (c != it->second.end() && *c <= f) return true;
  }
  return false;
}

size_t BinlogWitness::transactions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return transactions_;
}

// ---------------------------------------------------------------------------
// MariaDbModelDatabaseTest

std::unique_ptr<EventWitness> MariaDbModelDatabaseTest::StartEventWitness() {
  return std::make_unique<BinlogWitness>(
      server(), database(), mysql::DeriveServerId("witness-" + database()));
}

}  // namespace walwatch::itest
