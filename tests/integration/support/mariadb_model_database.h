// The model and reflector tests' database seam (model_database.h) on
// MariaDB: GORM's SQL for MySQL (mariadb_walwatch.h's statements) on a
// root connection to the test's own database, lists in a consistent
// snapshot handed off with its binlog file and position (PROTOCOL.md, "The
// handoff on MySQL/MariaDB"), the binlog read by a replica connection of
// the test's own (BinlogWitness, through walwatch's BinlogReader), and
// `walwatch --source mysql` on the test's database.
//
// Thread safety: as model_database.h says.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_MODEL_DATABASE_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_MODEL_DATABASE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/mysql_conn.h"
#include "tests/integration/support/mariadb.h"
#include "tests/integration/support/mariadb_walwatch.h"
#include "tests/integration/support/model_database.h"

namespace walwatch::itest {

class MariaDbModelSql : public ModelSql {
 public:
  // Throws std::runtime_error if it cannot connect.
  MariaDbModelSql(const MariaDbServer& server, const std::string& database);

  void Begin() override { Run("BEGIN"); }
  void Commit() override { Run("COMMIT"); }
  void Rollback() override { Run("ROLLBACK"); }
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
  void Run(const std::string& sql);
  // Rows the last statement changed (ROW_COUNT(): changed, not matched).
  uint64_t ChangedRows();
  // SELECT COUNT(*) FROM resources WHERE `where`.
  uint64_t Count(const std::string& where);
  std::string KeyWhere(const Resource& r);

  const std::string db_;
  mysql::MysqlConnection conn_;
  // LastCommitRv searches the binlog from here: its end when the connection
  // was made, then the end of the commit it found last (last_gtid_'s).
  mysql::BinlogPosition search_from_;
  std::string last_gtid_;
  uint64_t last_commit_ = 0;
};

// The EventWitness of MariaDB: reads the binlog from its end at
// construction on, as a replica with server id `server_id`, and keeps the
// commit RV (BinlogVersion) of each transaction that gave an event of
// `database`.resources, by the rule event_witness.h states.
class BinlogWitness : public EventWitness {
 public:
  // Throws std::runtime_error if the binlog cannot be opened.
  BinlogWitness(const MariaDbServer& server, const std::string& database,
                uint32_t server_id);
  ~BinlogWitness() override;
  BinlogWitness(const BinlogWitness&) = delete;
  BinlogWitness& operator=(const BinlogWitness&) = delete;

  void CatchUp() override;
  bool Witnessed(const std::string& resource, const std::string& cluster,
                 uint64_t r, uint64_t f) const override;
  size_t transactions() const override;

 private:
  void Loop();
  void Record(const mysql::BinlogTransaction& t);
  void Stop();

  mysql::MysqlConnection conn_;  // SHOW MASTER STATUS; CatchUp's thread
  mysql::BinlogReader reader_;   // the reading thread's
  uint64_t history_ = 0;         // the server's (mysql::BinlogHistory)
  mutable std::mutex mu_;
  std::condition_variable read_;
  // "resource|cluster" -> commit RVs of the transactions that gave an event
  // of it.
  std::map<std::string, std::set<uint64_t>> commits_;  // GUARDED_BY(mu_)
  size_t transactions_ = 0;                            // GUARDED_BY(mu_)
  uint64_t read_to_ = 0;  // GUARDED_BY(mu_): everything before it is read
  bool ended_ = false;    // GUARDED_BY(mu_): the reading thread is done
  std::string error_;     // GUARDED_BY(mu_)
  std::thread thread_;
};

// A MariaDbWalwatchTest that is the model tests' database.
class MariaDbModelDatabaseTest : public MariaDbWalwatchTest,
                                 public ModelDatabase {
 protected:
  std::string ModelDatabaseName() const override { return "MariaDB"; }
  std::unique_ptr<ModelSql> ConnectModelSql() override {
    return std::make_unique<MariaDbModelSql>(server(), database());
  }
  std::unique_ptr<EventWitness> StartEventWitness() override;
  WalwatchOptions ModelWalwatchOptions() override { return Options(); }
  WalwatchProcess* StartModelWalwatch(WalwatchOptions options) override {
    return StartWalwatch(std::move(options));
  }
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_MODEL_DATABASE_H_
