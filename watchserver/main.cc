// walwatch: PostgreSQL logical replication (wal2json or pgoutput), or a MySQL/MariaDB
// binlog, to Kubernetes watch streams on a Unix socket. main wires the
// pieces together:
//
//   the database's change source (--source: cdc/postgres/postgres.h or
//   cdc/mysql/mariadb.h, a Database)
//     -> ReplicationStream (its own thread) -> EventLog -> HttpServer sessions
//                                                         (io_context threads)
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "cdc/base/logging.h"
#include "cdc/change_source.h"
#include "cdc/database.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/mysql/mariadb.h"
#include "cdc/mysql/mysql_checks.h"
#include "cdc/mysql/mysql_conninfo.h"
#include "cdc/postgres/postgres.h"
#include "cdc/replication_stream.h"
#include "cdc/state_workers.h"
#include "schema/table_mapping.h"
#include "watchserver/config.h"
#include "watchserver/event_log.h"
#include "watchserver/http_server.h"
#include "watchserver/kinds_file.h"
#include "watchserver/metric_hooks.h"
#include "watchserver/metrics.h"
#include "watchserver/ops_server.h"
#include "watchserver/watch_cli.h"

extern char** environ;

namespace walwatch {
namespace {

// Until the io_context's signal_set takes SIGTERM and SIGINT (once serving),
// they stop the startup cleanly: waiting for a slot held by another
// walsender can last minutes. ReplicationStream::Stop is async-signal-safe
// (an atomic store and a write to an eventfd).
std::atomic<ReplicationStream*> g_starting_stream{nullptr};  // lock-free
extern "C" void OnStartupSignal(int sig) {
  if (ReplicationStream* stream = g_starting_stream.load()) stream->Stop();
  // A second signal kills, whatever startup is blocked in.
  signal(sig, SIG_DFL);
}

// Installs OnStartupSignal for `stream` while alive; restores the default
// disposition when destroyed (before `stream` is: declare it after).
class StartupSignals {
 public:
  explicit StartupSignals(ReplicationStream* stream) {
    g_starting_stream = stream;
    struct sigaction action = {};
    action.sa_handler = OnStartupSignal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  }
  ~StartupSignals() { Release(); }
  // From here on the asio signal_set owns the signals.
  void Release() { g_starting_stream = nullptr; }
  StartupSignals(const StartupSignals&) = delete;
  StartupSignals& operator=(const StartupSignals&) = delete;
};

int Fatal(const std::string& msg) {
  LogError(msg);
  return 1;
}

std::string LoadMapping(const Config& config, TableMapping* mapping) {
  if (config.mapping_path.empty()) {
    *mapping = DefaultTableMapping();
    return "";
  }
  std::ifstream in(config.mapping_path);
  if (!in) return "cannot read --mapping file " + config.mapping_path;
  std::stringstream text;
  text << in.rdbuf();
  std::string err = ParseTableMapping(text.str(), mapping);
  if (!err.empty()) return "--mapping " + config.mapping_path + ": " + err;
  return "";
}

// Raises the soft open-file limit to the hard one, as Go's runtime does
// (systemd and many container runtimes start processes at a soft 1024,
// well under the hard limit), and returns the soft limit in force.
uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY) return uint64_t{1} << 20;
  return limit.rlim_cur;
}

// --max-connections, with auto resolved: the open-file limit less the
// descriptors walwatch keeps for itself: up to 64 of the metrics server's
// connections (OpsServer), up to 16 refusals being answered
// (ServerContext::kMaxRefusing), its PostgreSQL connections (replication,
// the slot monitor, one per state worker), the event file, the listeners,
// epoll, timers and the rest, with room to spare. At least half of a small
// limit goes to connections.
size_t MaxConnections(const Config& config, uint64_t open_files) {
  const uint64_t reserved = 128 + static_cast<uint64_t>(config.state_workers);
  if (config.max_connections != 0) {
    if (config.max_connections + reserved > open_files) {
      LogWarn("--max-connections leaves walwatch too few file descriptors of "
              "the open-file limit: watchers could starve its PostgreSQL "
              "connections; raise the limit (LimitNOFILE=, ulimit -n)",
              {{"max_connections",
                static_cast<uint64_t>(config.max_connections)},
               {"open_file_limit", open_files},
               {"reserved", reserved}});
    }
    return config.max_connections;
  }
  return static_cast<size_t>(
      open_files > 2 * reserved ? open_files - reserved : open_files / 2);
}

// The entry point of the database --source names: the one place that
// tells the databases apart.
std::string MakeDatabase(const Config& config, const TableMapping& mapping,
                         size_t max_transaction_bytes, ResourceCatalog* catalog,
                         std::unique_ptr<Database>* out) {
  const int connect_timeout_seconds =
      static_cast<int>((config.connect_timeout.count() + 999) / 1000);
  if (config.source == Config::Source::kPostgres) {
    PostgresOptions o;
    o.source.conninfo = config.conninfo;
    o.source.slot = config.slot;
    o.source.pgoutput = config.plugin == Config::Plugin::kPgoutput;
    o.source.publication = config.publication;
    o.source.pgoutput_protocol = config.pgoutput_protocol;
    o.source.slot_failover = config.slot_failover;
    o.source.receive_timeout = config.replication_timeout;
    o.source.connect_timeout_seconds = connect_timeout_seconds;
    o.source.max_transaction_bytes = max_transaction_bytes;
    o.source.mapping = mapping;
    o.state_workers = config.state_workers;
    o.catch_up_timeout = config.too_large_rv_wait;
    o.retained_warn_bytes = config.retained_wal_warn_bytes;
    *out = std::make_unique<Postgres>(std::move(o), catalog);
    return "";
  }
  mysql::MariaDbOptions o;
  if (config.mysql_conninfo.empty()) {
    return "--source mysql needs --mysql-conninfo (or "
           "WALWATCH_MYSQL_CONNINFO), e.g. \"host=db user=walwatch "
           "password=... database=clusterpedia\"";
  }
  if (std::string e =
          mysql::ParseMysqlConninfo(config.mysql_conninfo, &o.source.conn);
      !e.empty()) {
    return "--mysql-conninfo: " + e;
  }
  if (config.server_id_from.empty() && config.server_id == 0) {
    return "--source mysql needs walwatch's own server id as a replica: "
           "--server-id N, or --server-id-from walwatch-$(POD_NAME) to derive "
           "one per pod";
  }
  o.source.server_id = config.server_id_from.empty()
                           ? config.server_id
                           : mysql::DeriveServerId(config.server_id_from);
  o.source.replica_host = config.server_id_from.empty()
                              ? "walwatch-" + std::to_string(config.server_id)
                              : config.server_id_from;
  o.source.conn.connect_timeout_s =
      static_cast<unsigned>(connect_timeout_seconds);
  o.source.mapping = mapping;
  o.source.heartbeat_period = config.status_interval;
  o.source.silence_timeout =
      std::chrono::seconds((config.replication_timeout.count() + 999) / 1000);
  o.source.replay_window = config.replay_window;
  o.source.replay_window_bytes = config.replay_window_bytes;
  o.source.max_transaction_bytes = max_transaction_bytes;
  o.state_workers = config.state_workers;
  o.catch_up_timeout = config.too_large_rv_wait;
  LogInfo("MySQL/MariaDB replica identity",
          {{"server_id", static_cast<uint64_t>(o.source.server_id)},
           {"registered_as", o.source.replica_host},
           {"server", mysql::DescribeParams(o.source.conn)}});
  *out = std::make_unique<mysql::MariaDb>(std::move(o), catalog);
  return "";
}

int Main(int argc, char** argv) {
  Config config;
  std::string err = ParseConfig(argc, argv, environ, &config);
  if (!err.empty()) {
    std::cerr << "walwatch: " << err << "\n";
    return 2;
  }
  if (config.help) {
    std::cout << HelpText();
    return 0;
  }
  SetLogLevel(config.log_level);
  LogInfo("starting walwatch",
          {LogField::Raw("config", ConfigToJson(config))});
  const uint64_t open_files = RaiseOpenFileLimit();
  const size_t max_connections = MaxConnections(config, open_files);
  LogInfo("connections", {{"max_connections",
                           static_cast<uint64_t>(max_connections)},
                          {"open_file_limit", open_files}});

  // One transaction may hold at most half the log, so that it fits beside
  // what watchers are still reading.
  const size_t max_transaction_bytes = config.max_log_bytes / 2;
  TableMapping mapping;
  if (std::string e = LoadMapping(config, &mapping); !e.empty()) {
    return Fatal(e);
  }

  ReplicationOptions repl_options;
  repl_options.status_interval = config.status_interval;
  repl_options.receive_timeout = config.replication_timeout;
  repl_options.replay_window = config.replay_window;
  repl_options.replay_window_bytes = config.replay_window_bytes;
  repl_options.events_in_arena = config.sendfile;
  repl_options.wake_interval = config.wake_interval;
  repl_options.wake_interval_auto = config.wake_interval_auto;

  ResourceCatalog catalog;
  if (!config.kinds_path.empty()) {
    std::vector<DeclaredKind> declared;
    if (std::string e = LoadKindsFile(config.kinds_path, &declared);
        !e.empty()) {
      return Fatal(e);
    }
    for (const DeclaredKind& d : declared) catalog.Declare(d.gvr, d.kind);
    LogInfo("declared kinds loaded",
            {{"kinds", config.kinds_path},
             {"resources", static_cast<uint64_t>(declared.size())}});
  }
  std::unique_ptr<Database> database_owner;
  if (std::string e = MakeDatabase(config, mapping, max_transaction_bytes,
                                   &catalog, &database_owner);
      !e.empty()) {
    return Fatal(e);
  }
  Database& database = *database_owner;
  ReplicationStream replication(repl_options, database.source(), &catalog);
  StartupSignals startup_signals(&replication);
  ReplicationStream::StartPosition start;
  std::string prepared = replication.Prepare(&start);
  if (replication.stop_requested()) {
    LogInfo("stopped before streaming");
    return 0;
  }
  if (!prepared.empty()) return Fatal(prepared);
  EventLog log(config.max_log_bytes, start.floor_rv, start.ceiling_rv);
  std::unique_ptr<StateWorkerPool> state_service =
      database.Start(&log, [&replication] { replication.RequestPosition(); });
  StateWorkerPool& state = *state_service;
  const ServerMonitor& monitor = database.monitor();

  Metrics metrics;
  RegisterReplicationMetrics(&metrics, replication, log, monitor);
  const std::string db_name = database.source()->database();
  auto ready = [&]() -> std::string {
    if (!replication.streaming()) return "not streaming from " + db_name;
    if (!monitor.server_position_known()) {
      return std::string(monitor.log_name()) + " position not read yet";
    }
    uint64_t lag = monitor.LagBytes(replication.stats().decoded_lsn.load());
    if (lag > config.ready_max_lag_bytes) {
      return "catching up: " + std::to_string(lag) + " bytes of " +
             monitor.log_name() + " behind";
    }
    return "";
  };

  boost::asio::io_context io;
  HttpServerOptions http_options;
  http_options.socket_path = config.socket_path;
  http_options.socket_mode = config.socket_mode;
  http_options.peers.uids.assign(config.allow_uids.begin(),
                                 config.allow_uids.end());
  http_options.peers.gids.assign(config.allow_gids.begin(),
                                 config.allow_gids.end());
  http_options.tcp_listen = config.tcp_listen;
  http_options.too_large_rv_wait = config.too_large_rv_wait;
  http_options.initial_state_timeout = config.initial_state_timeout;
  http_options.initial_state_stall_timeout =
      config.initial_state_stall_timeout;
  http_options.initial_state_min_rate = config.initial_state_min_rate;
  http_options.bookmark_interval = config.bookmark_interval;
  // A watcher must be able to take the largest transaction the log keeps
  // in one go without being called slow.
  http_options.max_backlog_bytes = config.max_watcher_backlog_bytes;
  if (http_options.max_backlog_bytes < max_transaction_bytes) {
    LogWarn("--max-watcher-backlog raised to half of --max-log-bytes, the "
            "largest transaction the log keeps",
            {{"max_watcher_backlog",
              static_cast<uint64_t>(max_transaction_bytes)}});
    http_options.max_backlog_bytes = max_transaction_bytes;
  }
  http_options.state = &state;
  http_options.metrics = &metrics;
  http_options.max_connections = max_connections;
  http_options.max_connection_buffer_bytes =
      config.max_connection_buffer_bytes;
  HttpServer server(io, log, catalog, http_options, ready);
  if (std::string e = server.Start(); !e.empty()) return Fatal(e);
  RegisterServingMetrics(&metrics, &server, &state, max_connections,
                         config.max_connection_buffer_bytes);
  OpsServer ops(io, metrics, ready);
  if (!config.metrics_address.empty()) {
    if (std::string e = ops.Start(config.metrics_address); !e.empty()) {
      return Fatal(e);
    }
  }
  LogInfo("serving", {{"socket", config.socket_path},
                      {"resume_after_rv", start.floor_rv}});

  std::thread replication_thread([&] { replication.Run(&log); });

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    LogInfo("shutting down", {{"signal", sig}});
    server.Stop();
    ops.Stop();
    replication.Stop();
  });
  // The signal_set has replaced the startup handler. A signal that came
  // after Prepare and before it only stopped the stream: shut down the same
  // way.
  startup_signals.Release();
  if (replication.stop_requested()) raise(SIGTERM);

  std::vector<std::thread> threads;
  for (int i = 1; i < config.http_threads; ++i) {
    threads.emplace_back([&io] { RunHandlers(io); });
  }
  RunHandlers(io);
  for (auto& t : threads) t.join();
  replication.Stop();
  replication_thread.join();
  database.Stop();
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace walwatch

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc > 1 && std::string(argv[1]) == "watch") {
    return walwatch::RunWatchCli(argc - 1, argv + 1, std::cout, std::cerr);
  }
  if (argc > 1 && std::string(argv[1]) == "slots") {
    return walwatch::RunSlotsCli(argc - 1, argv + 1, std::cout, std::cerr);
  }
  return walwatch::Main(argc, argv);
}
