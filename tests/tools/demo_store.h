// Where demo_writer writes: Clusterpedia's `resources` table, through the
// statements GORM generates for Clusterpedia's collector in one SQL dialect.
// Every call is one autocommit statement (GORM with SkipDefaultTransaction).
//
//   ConnectPostgres  libpq; GORM's postgres dialect: "quoted" identifiers,
//                    $n parameters, INSERT ... RETURNING "id", JSONB_SET
//                    (demo_store_postgres.cc)
//   ConnectMysql     MariaDB Connector/C; GORM's mysql dialect: `quoted`
//                    identifiers, ? parameters of server-side prepared
//                    statements (as Go's MySQL driver sends them), the id
//                    from the OK packet, JSON_SET (demo_store_mysql.cc)
//
// Thread safety: a store belongs to one thread.
#ifndef WALWATCH_TESTS_TOOLS_DEMO_STORE_H_
#define WALWATCH_TESTS_TOOLS_DEMO_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tests/tools/demo_objects.h"

namespace demo {

// One row of `resources`, as the collector fills it.
struct Row {
  std::string group, version, resource, kind;
  std::string cluster, ns, name;
  std::string owner_uid, uid, resource_version;
  std::string object;  // JSON text
  TimePoint created_at, synced_at;
  std::optional<TimePoint> deleted_at;
};

struct StoreResult {
  bool ok = false;
  bool duplicate = false;  // an INSERT hit the unique index
  uint64_t rows = 0;       // rows the statement changed
  std::string id;          // INSERT: the new row's id
  std::string error;       // one line, when !ok
};

class Store {
 public:
  virtual ~Store() = default;

  // ADDED: the whole row.
  virtual StoreResult Insert(const Row& row) = 0;
  // MODIFIED: created_at, [deleted_at,] object, owner_uid,
  // resource_version, uid, synced_at WHERE the six keys.
  virtual StoreResult Update(const Row& row) = 0;
  // Event recording: event_resource_versions[rv_key] = rv and
  // events[event_uid] = event_json WHERE cluster AND uid; the object is
  // unchanged.
  virtual StoreResult RecordEvent(const std::string& cluster,
                                  const std::string& uid,
                                  const std::string& rv_key, uint64_t rv,
                                  const std::string& event_uid,
                                  const std::string& event_json) = 0;
  // DELETED: WHERE the six keys of `row`.
  virtual StoreResult Delete(const Row& row) = 0;
  // CleanCluster: every row of `cluster`, one statement.
  virtual StoreResult DeleteCluster(const std::string& cluster) = 0;

  virtual bool connected() = 0;
};

// Connect and set up the session. Null and *error (one line) on failure.
std::unique_ptr<Store> ConnectPostgres(const std::string& conninfo,
                                       std::string* error);
std::unique_ptr<Store> ConnectMysql(const std::string& conninfo,
                                    std::string* error);

}  // namespace demo

#endif  // WALWATCH_TESTS_TOOLS_DEMO_STORE_H_
