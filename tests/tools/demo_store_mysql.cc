// demo_store.h's ConnectMysql: the collector's statements as GORM renders
// them with its mysql dialect (gorm.io/driver/mysql: `quoted` identifiers,
// map keys sorted, so WHERE is cluster, group, name, namespace, resource,
// version), sent as Go's MySQL driver sends a statement with arguments: a
// server-side prepared statement (COM_STMT_PREPARE, then COM_STMT_EXECUTE).
// MySQL has no RETURNING: the new id comes from the OK packet.
#include <mysql.h>
#include <mysqld_error.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cdc/mysql/mysql_conn.h"
#include "cdc/mysql/mysql_conninfo.h"
#include "tests/tools/demo_store.h"

namespace demo {

namespace {

const char* const kInsertSQL =
    "INSERT INTO `resources` (`group`,`version`,`resource`,`kind`,`cluster`,"
    "`namespace`,`name`,`owner_uid`,`uid`,`resource_version`,`object`,"
    "`events`,`event_resource_versions`,`created_at`,`synced_at`,`deleted_at`)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

const char* const kUpdateSQL =
    "UPDATE `resources` SET `created_at`=?,`object`=?,`owner_uid`=?,"
    "`resource_version`=?,`uid`=?,`synced_at`=? WHERE `resources`.`cluster` = "
    "? AND `resources`.`group` = ? AND `resources`.`name` = ? AND "
    "`resources`.`namespace` = ? AND `resources`.`resource` = ? AND "
    "`resources`.`version` = ?";

// With a deletionTimestamp the collector also sets deleted_at (sorted in).
const char* const kUpdateDeletingSQL =
    "UPDATE `resources` SET `created_at`=?,`deleted_at`=?,`object`=?,"
    "`owner_uid`=?,`resource_version`=?,`uid`=?,`synced_at`=? WHERE "
    "`resources`.`cluster` = ? AND `resources`.`group` = ? AND "
    "`resources`.`name` = ? AND `resources`.`namespace` = ? AND "
    "`resources`.`resource` = ? AND `resources`.`version` = ?";

// JSON_SET with a '$."key"' path; the event as JSON (JSON_EXTRACT of the
// text: MariaDB has no CAST AS JSON), the RV as a number.
const char* const kEventSQL =
    "UPDATE `resources` SET `event_resource_versions`=JSON_SET(COALESCE("
    "`event_resource_versions`, '{}'), ?, ?),`events`=JSON_SET(COALESCE("
    "`events`, '{}'), ?, JSON_EXTRACT(?, '$')) WHERE `resources`.`cluster` = "
    "? AND `resources`.`uid` = ?";

const char* const kDeleteSQL =
    "DELETE FROM `resources` WHERE `resources`.`cluster` = ? AND "
    "`resources`.`group` = ? AND `resources`.`name` = ? AND "
    "`resources`.`namespace` = ? AND `resources`.`resource` = ? AND "
    "`resources`.`version` = ?";

const char* const kDeleteClusterSQL =
    "DELETE FROM `resources` WHERE `resources`.`cluster` = ?";

// datetime(3): UTC text, milliseconds.
std::string sql_time(TimePoint tp) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(tp);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(tp - secs).count();
  std::time_t t = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char base[40];
  std::strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s.%03lld", base, static_cast<long long>(ms));
  return buf;
}

// A JSON path to the top-level key `key`.
std::string json_path(const std::string& key) {
  std::string path = "$.\"";
  for (char c : key) {
    if (c == '"' || c == '\\') path.push_back('\\');
    path.push_back(c);
  }
  return path + "\"";
}

// One statement parameter: text, a number, or NULL.
struct Param {
  const std::string* text = nullptr;
  bool is_number = false;
  unsigned long long number = 0;

  static Param Text(const std::string& s) { return Param{&s}; }
  static Param Null() { return Param{}; }
  static Param Number(uint64_t n) { return Param{nullptr, true, n}; }
};

class MysqlStore : public Store {
 public:
  ~MysqlStore() override {
    for (auto& kv : statements_) mysql_stmt_close(kv.second);
  }

  walwatch::mysql::MysqlConnection& conn() { return conn_; }

  StoreResult Insert(const Row& r) override {
    std::string created = sql_time(r.created_at);
    std::string synced = sql_time(r.synced_at);
    std::string deleted = r.deleted_at ? sql_time(*r.deleted_at) : "";
    return Exec(
        kInsertSQL,
        {Param::Text(r.group), Param::Text(r.version), Param::Text(r.resource),
         Param::Text(r.kind), Param::Text(r.cluster), Param::Text(r.ns),
         Param::Text(r.name), Param::Text(r.owner_uid), Param::Text(r.uid),
         Param::Text(r.resource_version), Param::Text(r.object), Param::Null(),
         Param::Null(), Param::Text(created), Param::Text(synced),
         r.deleted_at ? Param::Text(deleted) : Param::Null()});
  }

  StoreResult Update(const Row& r) override {
    std::string created = sql_time(r.created_at);
    std::string synced = sql_time(r.synced_at);
    std::vector<Param> keys = {Param::Text(r.cluster),  Param::Text(r.group),
                               Param::Text(r.name),     Param::Text(r.ns),
                               Param::Text(r.resource), Param::Text(r.version)};
    std::vector<Param> params = {Param::Text(created)};
    std::string deleted;
    if (r.deleted_at) {
      deleted = sql_time(*r.deleted_at);
      params.push_back(Param::Text(deleted));
    }
    for (const std::string* s : std::initializer_list<const std::string*>{
             &r.object, &r.owner_uid, &r.resource_version, &r.uid, &synced}) {
      params.push_back(Param::Text(*s));
    }
    params.insert(params.end(), keys.begin(), keys.end());
    return Exec(r.deleted_at ? kUpdateDeletingSQL : kUpdateSQL, params);
  }

  StoreResult RecordEvent(const std::string& cluster, const std::string& uid,
                          const std::string& rv_key, uint64_t rv,
                          const std::string& event_uid,
                          const std::string& event_json) override {
    std::string rv_path = json_path(rv_key);
    std::string ev_path = json_path(event_uid);
    return Exec(kEventSQL, {Param::Text(rv_path), Param::Number(rv),
                            Param::Text(ev_path), Param::Text(event_json),
                            Param::Text(cluster), Param::Text(uid)});
  }

  StoreResult Delete(const Row& r) override {
    return Exec(kDeleteSQL, {Param::Text(r.cluster), Param::Text(r.group),
                             Param::Text(r.name), Param::Text(r.ns),
                             Param::Text(r.resource), Param::Text(r.version)});
  }

  StoreResult DeleteCluster(const std::string& cluster) override {
    return Exec(kDeleteClusterSQL, {Param::Text(cluster)});
  }

  bool connected() override {
    return conn_.handle() != nullptr && mysql_ping(conn_.handle()) == 0;
  }

 private:
  // Prepares `sql` once (the statements are few), binds and executes it.
  StoreResult Exec(const char* sql, const std::vector<Param>& params) {
    StoreResult out;
    MYSQL_STMT*& stmt = statements_[sql];
    if (stmt == nullptr) {
      stmt = mysql_stmt_init(conn_.handle());
      if (stmt == nullptr) {
        out.error = mysql_error(conn_.handle());
        return out;
      }
      if (mysql_stmt_prepare(stmt, sql, std::strlen(sql)) != 0) {
        out.error = mysql_stmt_error(stmt);
        mysql_stmt_close(stmt);
        stmt = nullptr;
        return out;
      }
    }
    std::vector<MYSQL_BIND> binds(params.size());
    std::vector<unsigned long> lengths(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      MYSQL_BIND& b = binds[i];
      std::memset(&b, 0, sizeof b);
      const Param& p = params[i];
      if (p.text != nullptr) {
        b.buffer_type = MYSQL_TYPE_STRING;
        b.buffer = const_cast<char*>(p.text->data());
        b.buffer_length = p.text->size();
        lengths[i] = p.text->size();
        b.length = &lengths[i];
      } else if (p.is_number) {
        b.buffer_type = MYSQL_TYPE_LONGLONG;
        b.buffer = const_cast<unsigned long long*>(&p.number);
        b.is_unsigned = 1;
      } else {
        b.buffer_type = MYSQL_TYPE_NULL;
      }
    }
    if (mysql_stmt_bind_param(stmt, binds.data()) != 0 ||
        mysql_stmt_execute(stmt) != 0) {
      out.duplicate = mysql_stmt_errno(stmt) == ER_DUP_ENTRY;
      out.error = mysql_stmt_error(stmt);
      return out;
    }
    out.ok = true;
    out.rows = mysql_stmt_affected_rows(stmt);
    if (sql == kInsertSQL) out.id = std::to_string(mysql_stmt_insert_id(stmt));
    return out;
  }

  walwatch::mysql::MysqlConnection conn_;
  std::map<const char*, MYSQL_STMT*> statements_;
};

}  // namespace

std::unique_ptr<Store> ConnectMysql(const std::string& conninfo,
                                    std::string* error) {
  walwatch::mysql::MysqlConnParams params;
  *error = walwatch::mysql::ParseMysqlConninfo(conninfo, &params);
  if (!error->empty()) return nullptr;
  auto store = std::make_unique<MysqlStore>();
  *error = store->conn().Connect(params);
  if (!error->empty()) return nullptr;
  // datetime(3) values are sent as UTC text; NOW() and friends agree.
  *error = store->conn().Query("SET time_zone = '+00:00'");
  if (!error->empty()) return nullptr;
  return store;
}

}  // namespace demo
