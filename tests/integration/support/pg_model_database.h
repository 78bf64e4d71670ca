// The model and reflector tests' database seam (model_database.h) on
// PostgreSQL: GORM's SQL through libpq (harness.h's statements), lists in
// a REPEATABLE READ snapshot handed off with pg_current_snapshot() and
// pg_current_wal_insert_lsn(), the WAL read by a wal2json slot of the
// test's own (WalWitness), and walwatch on the test's database.
//
// Thread safety: as model_database.h says.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_MODEL_DATABASE_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_MODEL_DATABASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model_database.h"
#include "tests/integration/support/wal_witness.h"

namespace walwatch::itest {

class PgModelSql : public ModelSql {
 public:
  // `commit_lsn` gives a committed transaction's commit LSN from its xid
  // (CommitObserver::CommitLsn); without it, LastCommitRv throws.
  explicit PgModelSql(
      const std::string& conninfo,
      std::function<uint64_t(uint64_t xid)> commit_lsn = nullptr)
      : conn_(conninfo), commit_lsn_(std::move(commit_lsn)) {}

  void Begin() override {
    conn_.Exec("BEGIN");
    committed_xid_ = last_xid_;
  }
  void Commit() override { conn_.Exec("COMMIT"); }
  void Rollback() override {
    conn_.Exec("ROLLBACK");
    last_xid_ = committed_xid_;
  }
  void Insert(const ModelObjectSpec& spec) override;
  void Update(const ModelObjectSpec& spec) override;
  void Delete(const Resource& r) override;
  void RecordKubeEvent(const Resource& r, const std::string& reason) override;
  size_t RemoveCluster(const std::string& cluster,
                       const ModelResource* resource) override;
  uint64_t LastCommitRv() override;
  std::optional<Row> Find(const Resource& r) override;
  ModelState State(const ModelFilter& filter) override;
  ::testing::AssertionResult ListWithHandoff(
      const std::string& socket_path, const ModelFilter& filter,
      ListedState* out, Clock::time_point deadline) override;

 private:
  PgConnection conn_;
  std::function<uint64_t(uint64_t)> commit_lsn_;
  uint64_t last_xid_ = 0;       // of the last write (0: none)
  uint64_t committed_xid_ = 0;  // last_xid_ at BEGIN, for ROLLBACK
};

// A WalwatchTest that is the model tests' database.
class PgModelDatabaseTest : public WalwatchTest, public ModelDatabase {
 protected:
  std::string ModelDatabaseName() const override { return "PostgreSQL"; }
  std::unique_ptr<ModelSql> ConnectModelSql() override {
    return std::make_unique<PgModelSql>(Conninfo(), [this](uint64_t xid) {
      // The commit observer is made when walwatch is first started.
      if (!started_) {
        throw std::runtime_error("LastCommitRv before walwatch was started");
      }
      return observer().CommitLsn(xid);
    });
  }
  std::unique_ptr<EventWitness> StartEventWitness() override {
    return std::make_unique<WalWitness>(Conninfo(), UniqueName("witness"));
  }
  WalwatchOptions ModelWalwatchOptions() override { return DefaultOptions(); }
  WalwatchProcess* StartModelWalwatch(WalwatchOptions options) override {
    started_ = true;
    return StartWalwatch(std::move(options));
  }

 private:
  bool started_ = false;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_MODEL_DATABASE_H_
