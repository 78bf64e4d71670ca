// libpq helpers for walwatch's integration tests, which run against a real
// PostgreSQL (tests/tools/pg-sandbox.sh: Debian's 15 with wal2json, or 16 to
// 18 from tests/tools/install-pg-npm.sh, which have pgoutput only), never a
// mock.
//
//  * PgConnection: one libpq connection; every failure throws PgError whose
//    what() names the statement and the server's message (gtest reports an
//    exception escaping a test body as a failure, with that text).
//  * CommitObserver: a second slot (wal2json, or pgoutput where the server
//    has no wal2json or WALWATCH_TEST_OBSERVER_PLUGIN=pgoutput) that tells a
//    test the commit LSN of each transaction, in commit order, to check
//    resourceVersions exactly.
//  * PgDatabaseTest: a fixture giving every test its own database with
//    schema/clusterpedia.sql applied, dropped afterwards with its slots.
//
// A private cluster of a test's own is support/pg_cluster.h's PgCluster.
//
// Thread safety: none of these may be shared between threads.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

struct pg_conn;  // PGconn; libpq-fe.h stays out of this header.

namespace walwatch::itest {

class PgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "0/1558570" -> 22381936. Throws PgError on malformed text.
uint64_t ParseLsn(std::string_view text);
std::string FormatLsn(uint64_t lsn);

// Reads a whole file; throws std::runtime_error naming the path.
std::string ReadFileOrThrow(const std::string& path);

using PgRow = std::vector<std::optional<std::string>>;  // NULL -> nullopt

class PgConnection {
 public:
  // Connects; throws PgError with libpq's message and the conninfo.
  explicit PgConnection(const std::string& conninfo);
  ~PgConnection();
  PgConnection(PgConnection&&) noexcept;
  PgConnection& operator=(PgConnection&&) noexcept;

  // Runs one or more statements without parameters (PQexec).
  void Exec(const std::string& sql);
  // Runs one statement with text parameters ($1, $2, ...); returns its rows.
  std::vector<PgRow> Query(const std::string& sql,
                           const std::vector<std::string>& params = {});
  // Exactly one row with one non-NULL column, else throws.
  std::string QueryValue(const std::string& sql,
                         const std::vector<std::string>& params = {});

  int BackendPid() const;
  const std::string& conninfo() const { return conninfo_; }

 private:
  struct Deleter {
    void operator()(pg_conn* conn) const;
  };
  std::unique_ptr<pg_conn, Deleter> conn_;
  std::string conninfo_;
};

// The shared test server, from WALWATCH_TEST_PGHOST / WALWATCH_TEST_PGPORT.
struct PgServer {
  std::string host;  // socket directory
  std::string port;
  // "host=.. port=.. dbname=<dbname> user=postgres"
  std::string Conninfo(const std::string& dbname) const;
};
// nullopt if either variable is unset or empty.
std::optional<PgServer> PgServerFromEnvironment();
// The failure text for that case: names `make test`.
extern const char kMissingPgServerMessage[];

// Watches commits with its own slot (SQL interface): wal2json, or pgoutput
// (with publications of its own) where the server has no wal2json; its
// records reach the handler as wal2json format-version 2 either way. Create
// it before the writes it should see; it sees every transaction of its
// database that the decoder emits, in commit order, as walwatch's slot does.
class CommitObserver {
 public:
  // Creates logical slot `slot` on `conn`'s database.
  CommitObserver(PgConnection* conn, std::string slot);

  struct Commit {
    uint32_t xid;
    uint64_t lsn;  // start of the commit record: walwatch's commit LSN
  };
  // Consumes what the slot has decoded so far; with `max_changes`, at most
  // about that many records (whole transactions: PostgreSQL stops at a
  // commit past the limit). Returns the number of records consumed.
  size_t Poll(size_t max_changes = 0);
  // Called with every record Poll consumes (wal2json format-version 2, one
  // JSON object), in order, before Poll's own bookkeeping of it.
  void SetRecordHandler(std::function<void(const std::string& record)> handler) {
    handler_ = std::move(handler);
  }
  // Commit LSN of transaction `xid` (only its low 32 bits count); polls
  // first if needed. Throws if the transaction has not been decoded.
  uint64_t CommitLsn(uint64_t xid);
  // Commit LSN of the transaction just before `xid` in commit order.
  uint64_t PreviousCommitLsn(uint64_t xid);
  // Number of insert/update/delete changes decoded for `xid`, and whether
  // each UPDATE of `xid` carried the `object` column (false: TOAST-omitted).
  size_t ChangeCount(uint64_t xid);
  std::vector<bool> UpdateCarriesObject(uint64_t xid);
  const std::vector<Commit>& commits() const { return commits_; }

 private:
  size_t IndexOf(uint64_t xid);
  PgConnection* conn_;
  std::string slot_;
  std::vector<Commit> commits_;
  std::map<uint32_t, size_t> changes_;
  std::map<uint32_t, std::vector<bool>> update_has_object_;
  std::function<void(const std::string&)> handler_;
};

// Fixture: a fresh database per test, named after the test, with
// schema/clusterpedia.sql applied (SetUp fails, never skips, without a
// server). TearDown runs the registered cleanups (newest first: stop walwatch
// before its slot goes), terminates the database's walsenders, drops its
// slots, then drops the database.
class PgDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Database name, unique per test and process; also a valid slot prefix.
  const std::string& dbname() const { return dbname_; }
  const PgServer& server() const { return server_; }
  // Conninfo walwatch gets: host=H port=P dbname=D user=postgres.
  std::string Conninfo() const { return server_.Conninfo(dbname_); }
  // A connection to the test database, owned by the fixture.
  PgConnection& db() { return *db_; }
  // A new connection to the test database (for concurrent transactions).
  PgConnection Connect() const { return PgConnection(Conninfo()); }
  // A connection to the `postgres` database (admin work).
  PgConnection& admin() { return *admin_; }
  // Unique name with `suffix` for a slot, socket, etc. of this test.
  std::string UniqueName(const std::string& suffix) const;

  void AddCleanup(std::function<void()> cleanup);

  // Subclasses may turn off applying the schema (a table-missing test).
  virtual bool ApplySchema() const { return true; }

 private:
  PgServer server_;
  std::string dbname_;
  std::unique_ptr<PgConnection> admin_;
  std::unique_ptr<PgConnection> db_;
  std::vector<std::function<void()>> cleanups_;
  bool created_ = false;
};

// Path of the schema file tests apply.
std::string SchemaPath();

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_H_
