// demo_store.h's ConnectPostgres: the collector's statements as GORM renders
// them on PostgreSQL (map keys sorted, so WHERE is cluster, group, name,
// namespace, resource, version), through libpq.
#include <libpq-fe.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "tests/tools/demo_store.h"

namespace demo {

namespace {

struct PGresultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, PGresultDeleter>;

// The statements, as GORM renders them on PostgreSQL.
const char* const kInsertSQL =
    "INSERT INTO \"resources\" "
    "(\"group\",\"version\",\"resource\",\"kind\",\"cluster\",\"namespace\","
    "\"name\",\"owner_uid\",\"uid\",\"resource_version\",\"object\",\"events\","
    "\"event_resource_versions\","
    "\"created_at\",\"synced_at\",\"deleted_at\") VALUES "
    "($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,NULL,NULL,$12,$13,$14) "
    "RETURNING \"id\"";

const char* const kUpdateSQL =
    "UPDATE \"resources\" SET "
    "\"created_at\"=$1,\"object\"=$2,\"owner_uid\"=$3,\"resource_version\"=$4,"
    "\"uid\"=$5,\"synced_at\"=$6 WHERE \"resources\".\"cluster\" = $7 AND "
    "\"resources\".\"group\" = $8 AND "
    "\"resources\".\"name\" = $9 AND \"resources\".\"namespace\" = $10 AND "
    "\"resources\".\"resource\" = $11 AND "
    "\"resources\".\"version\" = $12";

// With a deletionTimestamp the collector also sets deleted_at (sorted in).
const char* const kUpdateDeletingSQL =
    "UPDATE \"resources\" SET "
    "\"created_at\"=$1,\"deleted_at\"=$2,\"object\"=$3,\"owner_uid\"=$4,"
    "\"resource_version\"=$5,\"uid\"=$6,\"synced_at\"=$7 WHERE "
    "\"resources\".\"cluster\" = $8 AND "
    "\"resources\".\"group\" = $9 AND \"resources\".\"name\" = $10 AND "
    "\"resources\".\"namespace\" = $11 AND "
    "\"resources\".\"resource\" = $12 AND \"resources\".\"version\" = $13";

const char* const kEventSQL =
    "UPDATE \"resources\" SET "
    "\"event_resource_versions\"=JSONB_SET(COALESCE(event_resource_versions, "
    "'{}'), "
    "$1, $2, true),\"events\"=JSONB_SET(COALESCE(events, '{}'), $3, $4, true) "
    "WHERE "
    "\"resources\".\"cluster\" = $5 AND \"resources\".\"uid\" = $6";

const char* const kDeleteSQL =
    "DELETE FROM \"resources\" WHERE \"resources\".\"cluster\" = $1 AND "
    "\"resources\".\"group\" = $2 AND "
    "\"resources\".\"name\" = $3 AND \"resources\".\"namespace\" = $4 AND "
    "\"resources\".\"resource\" = $5 AND "
    "\"resources\".\"version\" = $6";

const char* const kDeleteClusterSQL =
    "DELETE FROM \"resources\" WHERE \"resources\".\"cluster\" = $1";

std::string first_line(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t nl = s.find('\n');
  if (nl != std::string::npos) s = s.substr(0, nl);
  return s;
}

// timestamptz as UTC text, microseconds.
std::string sql_time(TimePoint tp) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(tp);
  auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(tp - secs).count();
  std::time_t t = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char base[40];
  std::strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s.%06lld+00", base,
                static_cast<long long>(us));
  return buf;
}

class PostgresStore : public Store {
 public:
  explicit PostgresStore(PGconn* c) : conn_(c) {}
  ~PostgresStore() override { PQfinish(conn_); }

  StoreResult Insert(const Row& r) override {
    std::string created = sql_time(r.created_at),
                synced = sql_time(r.synced_at);
    std::string deleted = r.deleted_at ? sql_time(*r.deleted_at) : "";
    return Exec(kInsertSQL,
                {&r.group, &r.version, &r.resource, &r.kind, &r.cluster, &r.ns,
                 &r.name, &r.owner_uid, &r.uid, &r.resource_version, &r.object,
                 &created, &synced, r.deleted_at ? &deleted : nullptr});
  }

  StoreResult Update(const Row& r) override {
    std::string created = sql_time(r.created_at),
                synced = sql_time(r.synced_at);
    if (r.deleted_at) {
      std::string deleted = sql_time(*r.deleted_at);
      return Exec(kUpdateDeletingSQL,
                  {&created, &deleted, &r.object, &r.owner_uid,
                   &r.resource_version, &r.uid, &synced, &r.cluster, &r.group,
                   &r.name, &r.ns, &r.resource, &r.version});
    }
    return Exec(kUpdateSQL,
                {&created, &r.object, &r.owner_uid, &r.resource_version, &r.uid,
                 &synced, &r.cluster, &r.group, &r.name, &r.ns, &r.resource,
                 &r.version});
  }

  StoreResult RecordEvent(const std::string& cluster, const std::string& uid,
                          const std::string& rv_key, uint64_t rv,
                          const std::string& event_uid,
                          const std::string& event_json) override {
    // JSONB_SET paths, as text[] literals: {<ns/name>} and {<event uid>};
    // the RV's digits are a JSON number.
    std::string rv_path = "{" + rv_key + "}";
    std::string rv_value = std::to_string(rv);
    std::string ev_path = "{" + event_uid + "}";
    return Exec(kEventSQL,
                {&rv_path, &rv_value, &ev_path, &event_json, &cluster, &uid});
  }

  StoreResult Delete(const Row& r) override {
    return Exec(kDeleteSQL, {&r.cluster, &r.group, &r.name, &r.ns, &r.resource,
                             &r.version});
  }

  StoreResult DeleteCluster(const std::string& cluster) override {
    return Exec(kDeleteClusterSQL, {&cluster});
  }

  bool connected() override { return PQstatus(conn_) == CONNECTION_OK; }

  // Runs one parameterized statement (NULL entries are SQL NULLs).
  StoreResult Exec(const char* sql,
                   const std::vector<const std::string*>& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const std::string* p : params)
      values.push_back(p ? p->c_str() : nullptr);
    Result r(PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, 0));
    ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    StoreResult out;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      out.ok = true;
      out.rows = std::strtoull(PQcmdTuples(r.get()), nullptr, 10);
      if (st == PGRES_TUPLES_OK && PQntuples(r.get()) > 0)
        out.id = PQgetvalue(r.get(), 0, 0);
      return out;
    }
    const char* code =
        r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    out.duplicate = code != nullptr && std::string(code) == "23505";
    out.error =
        first_line(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_));
    if (out.error.empty()) out.error = first_line(PQerrorMessage(conn_));
    return out;
  }

 private:
  PGconn* conn_;
};

}  // namespace

std::unique_ptr<Store> ConnectPostgres(const std::string& conninfo,
                                       std::string* error) {
  const char* keys[] = {"fallback_application_name", "dbname", nullptr};
  const char* vals[] = {"walwatch_demo_writer", conninfo.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, vals, /*expand_dbname=*/1);
  if (!conn || PQstatus(conn) != CONNECTION_OK) {
    *error = conn ? first_line(PQerrorMessage(conn)) : "out of memory";
    PQfinish(conn);
    return nullptr;
  }
  auto store = std::make_unique<PostgresStore>(conn);
  // Timestamps are sent as UTC text; keep the session's interpretation fixed.
  StoreResult r = store->Exec("SET TimeZone = 'UTC'", {});
  if (!r.ok) {
    *error = r.error;
    return nullptr;
  }
  return store;
}

}  // namespace demo
