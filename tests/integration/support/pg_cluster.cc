#include "tests/integration/support/pg_cluster.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "tests/integration/support/pg.h"
#include "tests/integration/support/walwatch_process.h"

namespace walwatch::itest {

namespace {

// initdb and pg_ctl refuse to run as root.
std::vector<std::string> AsPostgres(std::vector<std::string> argv) {
  if (geteuid() != 0) return argv;
  argv.insert(argv.begin(), {"runuser", "-u", "postgres", "--"});
  return argv;
}

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

void RunOrThrow(const std::vector<std::string>& argv) {
  auto r = RunCommand(argv, std::chrono::seconds(90));
  if (!r.exited || r.exit_code != 0) {
    throw std::runtime_error("command failed (" + r.Describe() +
                             "): " + Join(argv) + "\n" + r.output);
  }
}

}  // namespace

std::string_view ShutdownName(PgCluster::Shutdown mode) {
  return mode == PgCluster::Shutdown::kFast ? "fast" : "immediate";
}

PgCluster::PgCluster(Options options) {
  const char* bin = std::getenv("WALWATCH_TEST_PGBIN");
  bin_ = bin && *bin ? bin : "/usr/lib/postgresql/15/bin";
  char tmpl[] = "/tmp/walwatch-pg.XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  if (geteuid() == 0) {
    struct passwd* pw = getpwnam("postgres");
    if (!pw) throw std::runtime_error("running as root but no postgres user");
    if (chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      throw std::runtime_error("chown " + dir_ + " failed");
    }
  }
  try {
    std::vector<std::string> initdb = {bin_ + "/initdb", "-D", dir_ + "/data",
                                       "-A", "trust", "-U", "postgres",
                                       "--no-sync"};
    initdb.insert(initdb.end(), options.initdb_args.begin(),
                  options.initdb_args.end());
    RunOrThrow(AsPostgres(initdb));
    // PostgreSQL 15.19+ (Debian 12's 15.20 security update) lets only the
    // output plugins listed in output_plugin_libraries be used; older 15.x
    // refuse to start with the setting (tests/tools/pg-sandbox.sh does the
    // same).
    auto describe =
        RunCommand(AsPostgres({bin_ + "/postgres", "--describe-config"}),
                   std::chrono::seconds(30));
    bool has_plugin_list =
        describe.output.find("\noutput_plugin_libraries\t") !=
        std::string::npos;
    std::ofstream conf(dir_ + "/data/postgresql.conf", std::ios::app);
    conf << "\n# walwatch test cluster\n"
         << "listen_addresses = ''\n"
         << "port = 5432\n"
         << "unix_socket_directories = '" << dir_ << "'\n"
         << "fsync = off\n"
         << "wal_level = logical\n"
         << "max_replication_slots = 16\n"
         << "max_wal_senders = 16\n"
         << "max_connections = 50\n"
         << "shared_buffers = 64MB\n";
    if (has_plugin_list) {
      conf << "output_plugin_libraries = 'pgoutput, test_decoding, wal2json'\n";
    }
    conf << "# the test's own\n";
    for (const auto& s : options.settings) conf << s << "\n";
    conf.close();
    if (!conf) throw std::runtime_error("cannot write postgresql.conf");
    if (!options.hba.empty()) {
      std::ofstream hba(dir_ + "/data/pg_hba.conf", std::ios::trunc);
      for (const auto& line : options.hba) hba << line << "\n";
      hba.close();
      if (!hba) throw std::runtime_error("cannot write pg_hba.conf");
    }
    RunOrThrow(PgCtl({"-l", dir_ + "/log", "-w", "-t", "60", "start"}));
  } catch (const std::exception& e) {
    std::string log = LogText();
    // pg_ctl may have given up waiting on a postmaster that did start.
    RunCommand(PgCtl({"-m", "immediate", "-w", "-t", "30", "stop"}),
               std::chrono::seconds(40));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw std::runtime_error(std::string(e.what()) + "\nserver log:\n" + log);
  }
  started_ = true;
}

PgCluster::~PgCluster() {
  if (started_) {
    RunCommand(PgCtl({"-m", "immediate", "-w", "-t", "30", "stop"}),
               std::chrono::seconds(40));
  }
  std::error_code ec;
  const char* keep = std::getenv("WALWATCH_TEST_KEEP_LOGS");
  if (::testing::Test::HasFailure() || (keep && *keep == '1')) {
    std::filesystem::remove_all(dir_ + "/data", ec);
    std::fprintf(stderr, "PostgreSQL cluster log kept in %s/log\n",
                 dir_.c_str());
    return;
  }
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> PgCluster::PgCtl(std::vector<std::string> args) const {
  std::vector<std::string> argv = {bin_ + "/pg_ctl", "-D", dir_ + "/data"};
  argv.insert(argv.end(), args.begin(), args.end());
  return AsPostgres(argv);
}

std::string PgCluster::Conninfo(const std::string& dbname) const {
  return "host=" + dir_ + " port=5432 dbname=" + dbname + " user=postgres";
}

std::string PgCluster::SocketPath() const { return dir_ + "/.s.PGSQL.5432"; }

void PgCluster::Restart(Shutdown mode) {
  RunOrThrow(PgCtl({"-l", dir_ + "/log", "-m", std::string(ShutdownName(mode)),
                    "-w", "-t", "30", "restart"}));
}

void PgCluster::Stop(Shutdown mode) {
  RunOrThrow(PgCtl(
      {"-m", std::string(ShutdownName(mode)), "-w", "-t", "30", "stop"}));
}

void PgCluster::Start() {
  RunOrThrow(PgCtl({"-l", dir_ + "/log", "-w", "-t", "30", "start"}));
}

std::string PgCluster::LogText() const {
  try {
    return ReadFileOrThrow(dir_ + "/log");
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace walwatch::itest
