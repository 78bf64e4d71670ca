// MariaDbFaultTest: the fault suite's script (support/fault_fixture.h:
// one writer, five watchers, every write checked exactly once and in order,
// and the watchers' states against SQL) on MariaDB, for
// tests/integration/mariadb_fault_test.cc. FaultTest's hooks are MariaDB's
// here: the writer writes GORM's MySQL statements (MariaDbFaultStore), a
// marker is the commit position of a row inserted into fault_marker, the
// expected states are SELECTs, and walwatch runs with --source mysql
// (directly, or through FaultTest::proxy_ to the server's Unix socket).
//
// Which server: the one the tests share (support/mariadb.h: ctest's
// `mariadb` fixture), where the test has a database of its own; or, for a
// test that stops, crashes or purges it, a private one (PrivateMariaDb)
// that the test may shut down, kill and start again on the same data; and
// for a failover, a second private one that the test switches to.
//
// FaultTest's PostgreSQL-only helpers (StartCluster, Begin, the slot and
// walsender helpers, ExpectANewRowArrives) are not for these tests.
//
// Thread safety: the test's thread only (MariaDbFaultStore: one thread at a
// time, as FaultWriter uses it).
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_FAULT_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_FAULT_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cdc/mysql/mysql_conn.h"
#include "tests/integration/support/fault.h"
#include "tests/integration/support/fault_fixture.h"
#include "tests/integration/support/mariadb.h"

namespace walwatch::itest {

// FaultWriter's statements on MySQL/MariaDB: GORM's, one autocommit
// statement each, as root on `database`. Throws std::runtime_error on an
// error.
class MariaDbFaultStore : public FaultStore {
 public:
  MariaDbFaultStore(const MariaDbServer& server, const std::string& database);

  void Insert(const Row& row) override;
  bool Update(const Row& row) override;
  bool Delete(const Row& row) override;
  bool RecordEvent(const Row& row, const std::string& reason,
                   const std::string& value) override;
  std::optional<std::string> StoredSeq(const Row& row) override;

 private:
  // Runs `sql`; returns the rows it changed (ROW_COUNT()).
  uint64_t Change(const std::string& sql);
  std::string Where(const Row& row);

  mysql::MysqlConnection conn_;
};

class MariaDbFaultTest : public FaultTest {
 protected:
  void TearDown() override;

  // The server and this test's database (`fault` on a private server,
  // f_<test> on the shared one), prepared as FaultTest::PrepareDatabase
  // prepares PostgreSQL's: Clusterpedia's table with a seed pod and
  // deployment, fault_marker and other_table. `extra`: the private
  // server's option lines (PrivateMariaDb).
  void StartServer(bool private_server, const std::string& extra = "");
  // StartServer(private_server), LaunchWalwatch(s), StartTraffic().
  void BeginOnMariaDb(const Scenario& s, bool private_server = false);
  // For a failover: a second private server (`extra`: its option lines,
  // e.g. another server_id) with this test's database prepared as
  // StartServer prepares it. After StartServer.
  void StartOtherServer(const std::string& extra);
  const MariaDbServer& other_server() const { return other_->server(); }
  // From now on server() is the other server: the writers StartWriter
  // makes, Marker, SqlState, Sql and the server helpers below act on it.
  void SwitchToOtherServer();

  // FaultTest's hooks. walwatch: --source mysql as the password account
  // over TCP (or through the proxy), metrics served, a server id of the
  // test's own; s.cluster and s.conninfo are not read.
  void LaunchWalwatch(const Scenario& s) override;
  uint64_t Marker() override;
  ModelState SqlState(const WatchFilter& f) override;
  FaultStoreFactory WriterStore() override;

  const MariaDbServer& server() const { return *server_; }
  const std::string& database() const { return db_; }
  // Root SQL on this test's database (statements separated by ";\n");
  // fails the test on an error.
  void Sql(const std::string& sql);
  // The single value of a query, as root ("" for NULL or no row).
  std::string SqlValue(const std::string& sql);

  // The private server: a clean shutdown (mariadb-admin shutdown), a
  // crash (SIGKILL of mariadbd), each waited for until the process is
  // gone; and a start on the same data directory and port, waited for
  // until it answers.
  ::testing::AssertionResult ShutDownServer();
  ::testing::AssertionResult KillServer();
  ::testing::AssertionResult StartServerAgain();

  // FLUSH BINARY LOGS, then PURGE BINARY LOGS TO the new file until the
  // server keeps no older one (it keeps a file until its binlog checkpoint
  // has passed it). Returns the file kept.
  ::testing::AssertionResult PurgeAllButTheCurrentBinlog(std::string* kept);

 private:
  // Clusterpedia's table with a seed pod and deployment, fault_marker and
  // other_table, in database db_ on `server`.
  void PrepareDatabase(const MariaDbServer& server);
  // Sql on `server`.
  void SqlOn(const MariaDbServer& server, const std::string& sql);

  std::unique_ptr<PrivateMariaDb> private_;
  std::unique_ptr<PrivateMariaDb> other_;
  const MariaDbServer* server_ = nullptr;
  std::string db_;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_FAULT_H_
