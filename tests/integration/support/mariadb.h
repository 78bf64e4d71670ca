// Support for the MariaDB tests: the server a test talks to, root SQL on it,
// Clusterpedia's table in a database of the test's own, and a reader loop
// that waits on conditions against deadlines (never on sleeps).
//
// Which server: ctest starts two sandboxes as fixtures (tests/CMakeLists.txt,
// tests/tools/mariadb-sandbox.sh) and names one in WALWATCH_TEST_MYDIR; a
// server named by WALWATCH_TEST_MYSOCKET (+ _MYPORT) is used as it is; with
// neither (a test binary run by hand), the process starts a sandbox of its
// own and stops it at exit. PrivateMariaDb is a server for one test that
// stops, purges or corrupts it.
//
// Thread safety: for the test's thread.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/mysql_conn.h"

namespace walwatch::itest {

struct MariaDbServer {
  std::string dir;  // the sandbox directory, if the server is one
  std::string socket;
  std::string host = "127.0.0.1";
  unsigned port = 0;
  std::string pw_user = "walwatch_pw";  // password account (mariadb-sandbox.sh)
  std::string pw_password = "walwatch_pw";

  mysql::MysqlConnParams Root(const std::string& database = "") const;
  mysql::MysqlConnParams Tcp(const std::string& user,
                             const std::string& password,
                             const std::string& database = "") const;
  pid_t Pid() const;  // from dir/mariadbd.pid; 0 if unknown
};

// The server for this process's tests (see above). Throws if none can be had.
const MariaDbServer& TestMariaDb();

// A sandbox of the test's own, started now and stopped by the destructor.
// `extra`: MARIADB_SANDBOX_EXTRA, option lines separated by ';'.
class PrivateMariaDb {
 public:
  explicit PrivateMariaDb(const std::string& extra = "");
  ~PrivateMariaDb();
  PrivateMariaDb(const PrivateMariaDb&) = delete;
  PrivateMariaDb& operator=(const PrivateMariaDb&) = delete;
  const MariaDbServer& server() const { return server_; }

 private:
  MariaDbServer server_;
};

// The resourceVersion walwatch gives position `at` of the server `conn` is
// on (mysql::BinlogVersion in the history of its server_id). Throws
// std::runtime_error if the server cannot say, or `at` has no version.
uint64_t RvOf(mysql::MysqlConnection* conn, const mysql::BinlogPosition& at);

// Runs `sql` (one statement, or several separated by ";\n") as root.
// Returns "" or the error.
std::string RootExec(const MariaDbServer& server, const std::string& sql);

// Creates `database` afresh with Clusterpedia's table
// (schema/mysql/clusterpedia.sql). Returns "" or the error.
std::string CreateClusterpediaDatabase(const MariaDbServer& server,
                                       const std::string& database);

// An INSERT of a Clusterpedia row of a Pod named `name`, with `object`.
std::string InsertPodSql(const std::string& database, const std::string& name,
                         const std::string& uid, const std::string& object);

// Columns the reader tests read: the default mapping's, by name.
std::vector<std::string> MappedColumns();

// Reads items until `accept` returns true for one, or the deadline passes.
// Returns "" or why not (an error status, or the deadline).
std::string ReadUntil(
    mysql::BinlogReader* reader, std::chrono::seconds deadline,
    const std::function<bool(const mysql::BinlogItem&)>& accept);

// Reads the next transaction that has changes or table statements (the
// reader sees every transaction on the server, other tests' too).
std::string NextTableTransaction(mysql::BinlogReader* reader,
                                 std::chrono::seconds deadline,
                                 mysql::BinlogTransaction* out);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_MARIADB_H_
