// The seam between the randomized model test and the reflector-style
// consumer test (model_run.h, reflector_run.h) and the database they run
// on: PostgreSQL (pg_model_database.h) or MariaDB (mariadb_model_database.h).
// The tests' logic is written once against these three interfaces:
//
//  * ModelSql: one connection, written to in the database's SQL dialect as
//    Clusterpedia's internalstorage writes (GORM's statements), and read as
//    an APIServer lists (the list query, and the handoff that gives a list
//    its exact RV).
//  * EventWitness: the database's own log (the WAL, the binlog) read beside
//    walwatch, to check that a 410 Expired lost an event.
//  * ModelDatabase: the database of the running test: its connections, its
//    witness, and walwatch started on it.
//
// Errors of SQL throw std::runtime_error (PgError is one).
//
// Thread safety: a ModelSql belongs to one thread at a time; ModelDatabase's
// methods are for the test's thread; EventWitness says its own.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_DATABASE_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_DATABASE_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tests/integration/support/event_witness.h"
#include "tests/integration/support/model.h"
#include "tests/integration/support/walwatch_process.h"

namespace walwatch::itest {

class ModelSql {
 public:
  virtual ~ModelSql() = default;

  virtual void Begin() = 0;
  virtual void Commit() = 0;
  virtual void Rollback() = 0;

  // GORM's INSERT of spec.row with spec.Object() as `object`.
  virtual void Insert(const ModelObjectSpec& spec) = 0;
  // GORM's UPDATE of the row with spec.row's key (cluster, group, version,
  // resource, namespace, name); throws if there is none.
  virtual void Update(const ModelObjectSpec& spec) = 0;
  // GORM's DELETE of the row with r's key; throws if there is none.
  virtual void Delete(const Resource& r) = 0;
  // Clusterpedia's event recording (the events columns only) on the row of
  // r.cluster and r.uid; throws if there is none.
  virtual void RecordKubeEvent(const Resource& r,
                               const std::string& reason) = 0;
  // Deletes the rows of `cluster` (of `resource` only, if given): a member
  // cluster's removal. Returns how many.
  virtual size_t RemoveCluster(const std::string& cluster,
                               const ModelResource* resource = nullptr) = 0;

  // The resourceVersion walwatch gives the commit of the transaction this
  // connection committed last (an autocommit write, or COMMIT after
  // writes): what that transaction's last event carries, its earlier ones
  // one less. Throws std::runtime_error if it cannot be told (no write yet,
  // or, on PostgreSQL, before walwatch was started on the database).
  virtual uint64_t LastCommitRv() = 0;

  // The row with r's key, if any.
  struct Row {
    std::string uid;
    std::string object;  // the `object` column's JSON text
  };
  virtual std::optional<Row> Find(const Resource& r) = 0;

  // The rows of `filter` now, as QueryModelState reads them.
  virtual ModelState State(const ModelFilter& filter) = 0;

  // An APIServer's list of `filter` and walwatch's handoff RV for it: the
  // database's consistent snapshot, its rows, then
  // GET /walwatch/v1/handoff with what names the snapshot (PROTOCOL.md,
  // "Lists from SQL"); a new snapshot on 409, 410 and 504, until
  // `deadline`. Watching from out->rv then gives exactly the changes after
  // out->state.
  virtual ::testing::AssertionResult ListWithHandoff(
      const std::string& socket_path, const ModelFilter& filter,
      ListedState* out, Clock::time_point deadline) = 0;
};

class ModelDatabase {
 public:
  virtual ~ModelDatabase() = default;

  // "PostgreSQL" or "MariaDB", for the summaries.
  virtual std::string ModelDatabaseName() const = 0;
  // A new connection to the test's database.
  virtual std::unique_ptr<ModelSql> ConnectModelSql() = 0;
  // A witness that reads the database's log from now on.
  virtual std::unique_ptr<EventWitness> StartEventWitness() = 0;
  // Options for a walwatch on the test's database (its own socket); the
  // caller adds its own.
  virtual WalwatchOptions ModelWalwatchOptions() = 0;
  // Starts walwatch and waits until it is ready; null (and a failure) if it
  // is not. It is stopped when the test ends.
  virtual WalwatchProcess* StartModelWalwatch(WalwatchOptions options) = 0;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_DATABASE_H_
