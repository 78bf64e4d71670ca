// walwatch: PostgreSQL logical replication (wal2json) to Kubernetes watch
// streams on a Unix socket. main wires the pieces together:
//
//   ReplicationStream (its own thread) -> EventLog -> HttpServer sessions
//                                                    (io_context threads)
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "cdc/lsn.h"
#include "cdc/replication_stream.h"
#include "schema/table_mapping.h"
#include "watchserver/config.h"
#include "watchserver/event_log.h"
#include "watchserver/http_server.h"
#include "watchserver/logging.h"
#include "watchserver/resource_catalog.h"

extern char** environ;

namespace walwatch {
namespace {

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
  LogInfo("starting walwatch", {{"config", ConfigToJson(config)}});

  ReplicationOptions repl_options;
  repl_options.conninfo = config.conninfo;
  repl_options.slot = config.slot;
  repl_options.status_interval = config.status_interval;
  repl_options.connect_timeout_seconds = static_cast<int>(
      (config.connect_timeout.count() + 999) / 1000);
  // One transaction may hold at most half the log, so that it fits beside
  // what watchers are still reading.
  repl_options.max_transaction_bytes = config.max_log_bytes / 2;
  if (std::string e = LoadMapping(config, &repl_options.mapping); !e.empty()) {
    return Fatal(e);
  }

  // Block the signals in every thread; the io_context's signal_set takes
  // them.
  ResourceCatalog catalog;
  ReplicationStream replication(repl_options, &catalog);
  ReplicationStream::StartPosition start;
  if (std::string e = replication.Prepare(&start); !e.empty()) {
    return Fatal(e);
  }
  EventLog log(config.max_log_bytes, start.floor_rv);
  log.SetClassifiableFromXid(start.next_xid);

  boost::asio::io_context io;
  HttpServerOptions http_options;
  http_options.socket_path = config.socket_path;
  http_options.socket_mode = config.socket_mode;
  http_options.tcp_listen = config.tcp_listen;
  http_options.too_large_rv_wait = config.too_large_rv_wait;
  HttpServer server(io, log, catalog, http_options,
                    [&replication] { return replication.streaming(); });
  if (std::string e = server.Start(); !e.empty()) return Fatal(e);
  LogInfo("serving", {{"socket", config.socket_path},
                      {"resume_after_rv", start.floor_rv}});

  std::thread replication_thread([&] { replication.Run(&log); });

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    LogInfo("shutting down", {{"signal", sig}});
    server.Stop();
    replication.Stop();
  });

  std::vector<std::thread> threads;
  for (int i = 1; i < config.http_threads; ++i) {
    threads.emplace_back([&io] { io.run(); });
  }
  io.run();
  for (auto& t : threads) t.join();
  replication.Stop();
  replication_thread.join();
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace walwatch

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  return walwatch::Main(argc, argv);
}
