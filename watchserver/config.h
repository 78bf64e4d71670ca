// walwatch's configuration: command-line flags, each also settable through an
// environment variable WALWATCH_<FLAG_IN_UPPER_SNAKE_CASE>.
//
// Contract:
//  * A flag given on the command line wins over its environment variable; an
//    environment variable wins over the built-in default. An environment
//    variable set to the empty string counts as unset, and WALWATCH_* names
//    that are not flags are ignored (Kubernetes injects WALWATCH_PORT and the
//    like for a Service named walwatch).
//  * Flags are written `--flag value` or `--flag=value`; a boolean flag is
//    `--flag` or `--flag=true|false`.
//  * Durations: `500ms`, `30s`, `10m`, `1h`, `1h30m` (units h, m, s, ms, each
//    at most once, largest first), or a bare integer meaning seconds.
//    Sizes: plain bytes, or a suffix Ki Mi Gi Ti (powers of 1024) or
//    k K M G T (powers of 1000), e.g. `256Mi`, `100M`.
//  * Errors are returned as one line of text naming the flag, for example
//    `invalid value "x" for --max-log-bytes: expected a size such as 256Mi`.
//
// Where it lives: the Config and ParseConfig and ConfigToJson here
// (config.cc); the flags themselves, one table of them, in config_flags.h;
// the syntaxes of their values in config_values.h; the masking of secrets in
// conninfo_redaction.h; HelpText in config_help.cc.
//
// Thread safety: the functions are pure (they read only their arguments), so
// any thread may call them. A Config is a plain value.
#ifndef WALWATCH_WATCHSERVER_CONFIG_H_
#define WALWATCH_WATCHSERVER_CONFIG_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cdc/base/logging.h"

namespace walwatch {

struct Config {
  // Which database's log walwatch reads: PostgreSQL's WAL through a logical
  // replication slot (--conninfo, --slot, --plugin), or a MySQL/MariaDB
  // binlog (--mysql-conninfo, --server-id).
  enum class Source { kPostgres, kMysql };
  Source source = Source::kPostgres;

  // PostgreSQL.
  // libpq connection string, key=value or a postgresql:// URI. Empty means
  // libpq's PG* environment variables, as in psql.
  std::string conninfo;
  // Logical replication slot; matches [a-z0-9_]{1,63}.
  std::string slot = "walwatch";
  std::string slot_from;  // --slot-from's text, as given (slot holds the name)
  // The output plugin the slot decodes with: wal2json (format-version 2),
  // or pgoutput with a publication of the mapped table.
  enum class Plugin { kWal2Json, kPgoutput };
  Plugin plugin = Plugin::kWal2Json;
  // pgoutput's publication; empty: named as the slot.
  std::string publication;
  // pgoutput's protocol version, 1 to 4; 0: the highest the server offers.
  int pgoutput_protocol = 0;
  // Create the slot as a failover slot (PostgreSQL 17 and later), which the
  // server syncs to standbys that have sync_replication_slots on.
  bool slot_failover = false;
  // Table-mapping JSON file. Empty means the built-in Clusterpedia resources
  // mapping.
  std::string mapping_path;
  // How often standby status updates are sent: in (0, 30s).
  std::chrono::milliseconds status_interval{std::chrono::seconds(1)};
  // A replication connection silent for this long is dead: reconnect.
  std::chrono::milliseconds replication_timeout{std::chrono::seconds(60)};
  // Time allowed to connect to PostgreSQL: at least 1s. libpq's
  // connect_timeout is whole seconds, so round up when passing it on.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};

  // Serving.
  // Unix socket path; at most 107 bytes (sizeof sockaddr_un::sun_path - 1).
  std::string socket_path = "/run/walwatch/walwatch.sock";
  // Permission bits given to the socket file, at most 07777.
  mode_t socket_mode = 0660;
  // JSON file of resources' kinds (watchserver/kinds_file.h), for the
  // bookmarks of resources the table holds no row of. Empty: none.
  std::string kinds_path;
  // Optional loopback TCP listener for kubectl, as given: "127.0.0.1:8080",
  // "[::1]:8080". Empty means no TCP listener. When set, tcp_listen_address
  // holds the numeric address without brackets ("127.0.0.1", "::1") and
  // tcp_listen_port the port (1..65535).
  std::string tcp_listen;
  std::string tcp_listen_address;
  uint16_t tcp_listen_port = 0;
  // Unix socket peers allowed (SO_PEERCRED), by uid or primary gid. Both
  // empty: anyone who can open the socket file.
  std::vector<uint32_t> allow_uids;
  std::vector<uint32_t> allow_gids;
  // Threads running the HTTP io_context: 1..64. One by default: on two
  // cores shared with the database and the clients, a second thread on the
  // same io_context costs more in hand-offs than it adds (BENCHMARKS.md,
  // 2026-12-03 09:20).
  int http_threads = 1;
  // How long a watch or list with a resourceVersion ahead of the stream waits
  // for the stream to catch up before it is answered "too large".
  std::chrono::milliseconds too_large_rv_wait{std::chrono::seconds(3)};
  std::chrono::milliseconds initial_state_timeout{std::chrono::minutes(5)};
  // How long a state reader waits on a full queue before the watch ends
  // with 410 and the reader is free again: 0 (none) or at least 1s.
  std::chrono::milliseconds initial_state_stall_timeout{
      std::chrono::seconds(20)};
  // Bytes per second a client must take of its initial state while the
  // reader waits for it (HttpServerOptions::initial_state_min_rate).
  uint64_t initial_state_min_rate = uint64_t{1} << 20;
  // How often a watch that allows bookmarks gets one (less up to 5% of
  // jitter): at least 1s.
  std::chrono::milliseconds bookmark_interval{std::chrono::seconds(60)};
  // How long a wake of watchers holds the next (ReplicationOptions::
  // WakeHold): "auto" (wake_interval_auto: 10 us per watch of the resources
  // the wake changed, at most wake_interval, 10ms) or a fixed 0 to 1s (0:
  // no hold).
  std::chrono::milliseconds wake_interval{10};
  bool wake_interval_auto = true;
  // Events of the log are sent with sendfile(2) from a memfd (WireArena);
  // false: from the heap, copied into each socket.
  bool sendfile = true;

  // Most unsent event bytes a watcher may fall behind the log's tail
  // before it is ended with 410 (a slow watcher): at least 64Ki.
  size_t max_watcher_backlog_bytes = size_t{128} << 20;
  // Most client connections open at once (HttpServerOptions::
  // max_connections); 0: auto, from the open-file limit (main.cc).
  size_t max_connections = 0;
  // Most bytes of request buffers and stalled watchers' pending writes, all
  // connections together (HttpServerOptions::max_connection_buffer_bytes):
  // at least 4Mi.
  size_t max_connection_buffer_bytes = size_t{128} << 20;
  // Prometheus /metrics and /healthz, /livez, /readyz, on TCP
  // ("HOST:PORT"). Empty: not served.
  std::string metrics_address = "127.0.0.1:9187";
  // /readyz fails while PostgreSQL's WAL is more than this ahead of what
  // walwatch has decoded.
  uint64_t ready_max_lag_bytes = uint64_t{16} << 20;

  // PostgreSQL, continued.
  // Threads (each with a connection) that read initial states and answer
  // handoffs: 1..64.
  int state_workers = 4;
  // A warning is logged when the slot retains more WAL than this.
  uint64_t retained_wal_warn_bytes = uint64_t{1} << 30;

  // MySQL/MariaDB.
  // key=value connection string (cdc/mysql/mysql_conninfo.h), checked by
  // main: parsing it here would put its password into error messages.
  std::string mysql_conninfo;
  // walwatch's server id as a replica: given (server_id), or derived from
  // --server-id-from's text (server_id_from, as given; main derives it).
  uint32_t server_id = 0;
  std::string server_id_from;

  // Event log.
  // Memory budget of the event log in bytes: at least 1Mi.
  size_t max_log_bytes = size_t{256} << 20;
  // After a restart, the slot re-sends the transactions of this window, so
  // watches with an RV inside it continue without a 410. Longer windows keep
  // more WAL on the server.
  std::chrono::milliseconds replay_window{std::chrono::minutes(10)};
  // ... and at most this many bytes of WAL: the slot is held back no further
  // than this behind the newest position received.
  uint64_t replay_window_bytes = uint64_t{512} << 20;

  // Logging.
  LogLevel log_level = LogLevel::kInfo;

  // --help was given: the caller prints HelpText() and exits 0. When it is
  // set the other fields may not have been read yet.
  bool help = false;
};

// Reads the flags in argv[1..argc-1], then the WALWATCH_* variables in `envp`
// (a null-terminated array of "NAME=value" strings, like `environ`; may be
// null), over the defaults above. Returns "" on success, else a one-line
// error and leaves *out unspecified. Stops at --help with out->help set.
std::string ParseConfig(int argc, const char* const* argv,
                        const char* const* envp, Config* out);

// The --help text: usage, then every flag under its heading (PostgreSQL,
// Serving, Event log, Logging) with its default and environment variable
// (config_help.cc).
std::string HelpText();

// The effective configuration as one JSON object keyed by flag name, values
// written as they would be on the command line, for the startup log. Any
// password in the conninfo is replaced by "********" (RedactConninfo,
// conninfo_redaction.h).
std::string ConfigToJson(const Config& config);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_CONFIG_H_
