// PgCluster: a throwaway PostgreSQL 15 cluster with wal2json, private to one
// test, for what the shared server (tests/tools/pg-sandbox.sh) cannot do:
// settings that are per server (wal_level, synchronous_standby_names, small
// WAL segments, another encoding), restarts and crashes, and WAL switches
// that other tests must not see. The fault suite and the startup-error and
// claims tests all start theirs through it.
//
// The cluster lives in its own directory under /tmp: data/, the server log
// (log) and the Unix socket (port 5432, no TCP). Every pg_ctl step waits
// (-w) with a bound and throws std::runtime_error carrying the tool's output
// on failure. The server binaries come from WALWATCH_TEST_PGBIN (default
// /usr/lib/postgresql/15/bin); when the test runs as root they run as the
// `postgres` user, which then owns the directory.
//
// Thread safety: for one thread (the test's).
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_CLUSTER_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_CLUSTER_H_

#include <string>
#include <string_view>
#include <vector>

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

  // initdb, then start. On failure throws std::runtime_error with the
  // tool's output and the server log, and leaves nothing behind.
  explicit PgCluster(Options options = {});
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
  // The server log so far ("" if unreadable).
  std::string LogText() const;

 private:
  std::vector<std::string> PgCtl(std::vector<std::string> args) const;
  std::string dir_;
  std::string bin_;
  bool started_ = false;
};

// "fast" or "immediate": pg_ctl's name for `mode`.
std::string_view ShutdownName(PgCluster::Shutdown mode);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_PG_CLUSTER_H_
