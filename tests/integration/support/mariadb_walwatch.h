// walwatch on MariaDB for the integration tests: Clusterpedia's writes as
// its MySQL driver makes them (one autocommit statement each, GORM's SQL),
// each returning its commit's binlog position as the resourceVersion a
// watcher must see, and MariaDbWalwatchTest, a fixture that runs
// `walwatch --source mysql` on the test's own database of the server the
// tests share (support/mariadb.h), through its socket.
//
// Thread safety: for the test's thread.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_WALWATCH_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_WALWATCH_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cdc/mysql/binlog_position.h"
#include "cdc/mysql/mysql_conn.h"
#include "tests/integration/support/mariadb.h"
#include "tests/integration/support/walwatch_process.h"
#include "tests/integration/support/watch_client.h"
#include "tests/integration/support/watch_rows.h"

namespace walwatch::itest {

// GORM's statements on MySQL for `database`.resources; `object_json` is the
// object column's text (r.Object() unless given).
std::string InsertSql(const std::string& database, const Resource& r);
std::string InsertSql(const std::string& database, const Resource& r,
                      const std::string& object_json);
std::string UpdateSql(const std::string& database, const Resource& r);
std::string UpdateSql(const std::string& database, const Resource& r,
                      const std::string& object_json);
std::string DeleteSql(const std::string& database, const Resource& r);
// Clusterpedia's event recording: the events columns only.
std::string RecordKubeEventSql(const std::string& database, const Resource& r,
                               const std::string& reason);

// The GTID of the transaction `conn` committed last (@@last_gtid); throws
// std::runtime_error if it has committed none.
std::string LastGtid(mysql::MysqlConnection& conn);
// Where transaction `gtid` ends in the binlog (its XID or COMMIT event, a
// DDL's own statement), searched from `from` on, across rotations. Throws
// std::runtime_error if it is not there.
mysql::BinlogPosition FindCommit(mysql::MysqlConnection& conn,
                                 const std::string& gtid,
                                 const mysql::BinlogPosition& from);

// A root connection to the test's database that writes and tells where
// each write committed. Throws std::runtime_error on an SQL error.
class BinlogWriter {
 public:
  BinlogWriter(const MariaDbServer& server, const std::string& database);

  // One autocommit statement; returns the BinlogVersion of its commit.
  uint64_t Exec(const std::string& sql);
  // The statements as one transaction; returns its commit's version.
  uint64_t Transaction(const std::vector<std::string>& statements);
  // A statement whose commit position does not matter (no GTID needed).
  void Run(const std::string& sql);

  uint64_t Insert(const Resource& r) { return Exec(InsertSql(db_, r)); }
  uint64_t Update(const Resource& r) { return Exec(UpdateSql(db_, r)); }
  uint64_t Delete(const Resource& r) { return Exec(DeleteSql(db_, r)); }
  uint64_t RecordKubeEvent(const Resource& r, const std::string& reason) {
    return Exec(RecordKubeEventSql(db_, r, reason));
  }

  const std::string& database() const { return db_; }
  mysql::MysqlConnection& conn() { return conn_; }

 private:
  // Where the transaction this connection committed last ends, searching
  // the binlog from `before` on (SHOW BINLOG EVENTS).
  uint64_t CommitOf(const mysql::BinlogPosition& before);
  mysql::BinlogPosition End();

  const std::string db_;
  mysql::MysqlConnection conn_;
};

class MariaDbWalwatchTest : public ::testing::Test {
 protected:
  void SetUp() override;
  // Stops the walwatches; removes the test's files unless it failed (or
  // WALWATCH_TEST_KEEP_LOGS=1).
  void TearDown() override;

  const MariaDbServer& server() const { return *server_; }
  const std::string& database() const { return db_; }
  BinlogWriter& writer() { return *writer_; }
  std::string TempPath(const std::string& name) const {
    return tmpdir_ + "/" + name;
  }

  // A walwatch on this test's database: its own socket, a server id of its
  // own (--server-id-from), --replay-window 0s unless `extra` says
  // otherwise.
  WalwatchOptions Options(const std::vector<std::string>& extra = {});
  // Starts walwatch; it is stopped when the test ends.
  WalwatchProcess& Launch(WalwatchOptions options);
  // Launch, then wait until /readyz answers 200; null (and a failure) if
  // it does not.
  WalwatchProcess* StartWalwatch(WalwatchOptions options);
  WalwatchProcess* StartWalwatch() { return StartWalwatch(Options()); }

  // As WalwatchTest's (watch_rows.h).
  uint64_t FreshRv(const WalwatchProcess& walwatch) {
    return FetchFreshRv(walwatch.socket_path());
  }
  ::testing::AssertionResult OpenWatch(WatchClient& watch,
                                       const WalwatchProcess& walwatch,
                                       const std::string& path,
                                       std::optional<uint64_t> rv = {}) {
    return OpenWatchOn(watch, walwatch.socket_path(), path, rv);
  }

 private:
  const MariaDbServer* server_ = nullptr;
  std::string db_;
  std::string tmpdir_;
  std::unique_ptr<BinlogWriter> writer_;
  std::vector<std::unique_ptr<WalwatchProcess>> walwatches_;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_WALWATCH_H_
