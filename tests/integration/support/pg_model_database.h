// The model and reflector tests' database seam (model_database.h) on
// PostgreSQL: GORM's SQL through libpq (harness.h's statements), lists in
// a REPEATABLE READ snapshot handed off with pg_current_snapshot() and
// pg_current_wal_insert_lsn(), the WAL read by a wal2json slot of the
// test's own (WalWitness), and walwatch on the test's database.
//
// Thread safety: as model_database.h says.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_MODEL_DATABASE_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_MODEL_DATABASE_H_

#include <memory>
#include <optional>
#include <string>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model_database.h"
#include "tests/integration/support/wal_witness.h"

namespace walwatch::itest {

class PgModelSql : public ModelSql {
 public:
  explicit PgModelSql(const std::string& conninfo) : conn_(conninfo) {}

  void Begin() override { conn_.Exec("BEGIN"); }
  void Commit() override { conn_.Exec("COMMIT"); }
  void Rollback() override { conn_.Exec("ROLLBACK"); }
  void Insert(const ModelObjectSpec& spec) override;
  void Update(const ModelObjectSpec& spec) override;
  void Delete(const Resource& r) override;
  void RecordKubeEvent(const Resource& r, const std::string& reason) override;
  size_t RemoveCluster(const std::string& cluster,
                       const ModelResource* resource) override;
  std::optional<Row> Find(const Resource& r) override;
  ModelState State(const ModelFilter& filter) override;
  ::testing::AssertionResult ListWithHandoff(
      const std::string& socket_path, const ModelFilter& filter,
      ListedState* out, Clock::time_point deadline) override;

 private:
  PgConnection conn_;
};

// A WalwatchTest that is the model tests' database.
class PgModelDatabaseTest : public WalwatchTest, public ModelDatabase {
 protected:
  std::string ModelDatabaseName() const override { return "PostgreSQL"; }
  std::unique_ptr<ModelSql> ConnectModelSql() override {
    return std::make_unique<PgModelSql>(Conninfo());
  }
  std::unique_ptr<EventWitness> StartEventWitness() override {
    return std::make_unique<WalWitness>(Conninfo(), UniqueName("witness"));
  }
  WalwatchOptions ModelWalwatchOptions() override { return DefaultOptions(); }
  WalwatchProcess* StartModelWalwatch(WalwatchOptions options) override {
    return StartWalwatch(std::move(options));
  }
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_MODEL_DATABASE_H_
