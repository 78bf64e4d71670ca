#include "tests/integration/support/mariadb_fault.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <thread>

#include "tests/integration/support/mariadb_walwatch.h"
#include "tests/integration/support/watch_client.h"

namespace walwatch::itest {

using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

// The current test's name, lower case, without the parameter's slash.
std::string TestName() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name) {
    c = std::isalnum(static_cast<unsigned char>(c))
            ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
            : '_';
  }
  return name;
}

// `prefix` + the test's name, at most `max` characters: a long name keeps
// its start and ends with a hash of the whole, so that two tests' names
// (parameters differ at the end) stay apart.
std::string NameOfTest(const std::string& prefix, size_t max) {
  std::string name = prefix + TestName();
  if (name.size() <= max) return name;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(name));
  return name.substr(0, max - 17) + "_" + hash;
}

// Whether process `pid` is gone (or a zombie nobody reaped yet).
bool ProcessGone(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return true;
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ||
         stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

::testing::AssertionResult WaitGone(pid_t pid, seconds timeout) {
  const auto deadline = In(timeout);
  while (!ProcessGone(pid)) {
    if (Clock::now() > deadline) {
      return ::testing::AssertionFailure()
             << "mariadbd " << pid << " still runs after " << timeout.count()
             << " s";
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

// --- MariaDbFaultStore ------------------------------------------------------

MariaDbFaultStore::MariaDbFaultStore(const MariaDbServer& server,
                                     const std::string& database) {
  mysql::MysqlConnParams p = server.Root(database);
  p.read_timeout_s = 30;
  if (std::string err = conn_.Connect(p); !err.empty()) {
    throw std::runtime_error(err);
  }
}

uint64_t MariaDbFaultStore::Change(const std::string& sql) {
  if (std::string err = conn_.Query(sql); !err.empty()) {
    throw std::runtime_error(err);
  }
  std::optional<std::string> n;
  if (std::string err = conn_.QueryValue("SELECT ROW_COUNT()", &n);
      !err.empty()) {
    throw std::runtime_error(err);
  }
  return std::stoull(n.value_or("0"));
}

std::string MariaDbFaultStore::Where(const Row& r) {
  return " WHERE `cluster` = " + conn_.Quote(r.cluster) +
         " AND `group` = " + conn_.Quote(r.group) +
         " AND `version` = " + conn_.Quote(r.version) +
         " AND `resource` = " + conn_.Quote(r.resource) +
         " AND `namespace` = " + conn_.Quote(r.ns) +
         " AND `name` = " + conn_.Quote(r.name);
}

void MariaDbFaultStore::Insert(const Row& r) {
  // Without owner_uid, as FaultWriter's PostgreSQL INSERT.
  Change(
      "INSERT INTO `resources` (`group`, `version`, `resource`, `kind`, "
      "`cluster`, `namespace`, `name`, `uid`, `resource_version`, `object`, "
      "`created_at`, `synced_at`) VALUES (" +
      conn_.Quote(r.group) + ", " + conn_.Quote(r.version) + ", " +
      conn_.Quote(r.resource) + ", " + conn_.Quote(r.kind) + ", " +
      conn_.Quote(r.cluster) + ", " + conn_.Quote(r.ns) + ", " +
      conn_.Quote(r.name) + ", " + conn_.Quote(r.uid) + ", " +
      conn_.Quote(std::to_string(r.seq)) + ", " + conn_.Quote(r.object) +
      ", NOW(3), NOW(3))");
}

bool MariaDbFaultStore::Update(const Row& r) {
  // Every update changes the object (its spec.seq), so the rows changed
  // are the rows matched.
  return Change("UPDATE `resources` SET `created_at` = NOW(3), `object` = " +
                conn_.Quote(r.object) +
                ", `resource_version` = " + conn_.Quote(std::to_string(r.seq)) +
                ", `uid` = " + conn_.Quote(r.uid) + ", `synced_at` = NOW(3)" +
                Where(r)) == 1;
}

bool MariaDbFaultStore::Delete(const Row& r) {
  return Change("DELETE FROM `resources`" + Where(r)) == 1;
}

bool MariaDbFaultStore::RecordEvent(const Row& r, const std::string& reason,
                                    const std::string& value) {
  // Each value is new (a write's number): the row changes.
  const std::string path = conn_.Quote("$." + reason);
  return Change(
             "UPDATE `resources` SET `events` = "
             "JSON_SET(COALESCE(`events`, '{}'), " +
             path + ", " + conn_.Quote(value) +
             "), `event_resource_versions` = "
             "JSON_SET(COALESCE(`event_resource_versions`, '{}'), " +
             path + ", " + conn_.Quote(value) +
             ") WHERE `cluster` = " + conn_.Quote(r.cluster) +
             " AND `uid` = " + conn_.Quote(r.uid)) == 1;
}

std::optional<std::string> MariaDbFaultStore::StoredSeq(const Row& r) {
  mysql::MysqlRows rows;
  if (std::string err = conn_.Query(
          "SELECT JSON_VALUE(`object`, '$.spec.seq') FROM `resources`" +
              Where(r),
          &rows);
      !err.empty()) {
    throw std::runtime_error(err);
  }
  if (rows.rows.empty()) return std::nullopt;
  return rows.rows[0][0].value_or("");
}

// --- MariaDbFaultTest -------------------------------------------------------

void MariaDbFaultTest::TearDown() {
  FaultTest::TearDown();
  if (server_ != nullptr && !private_ && !HasFailure()) {
    RootExec(*server_,
             "DROP DATABASE IF EXISTS " + mysql::QuoteIdentifier(db_));
  }
  other_.reset();
  private_.reset();
}

void MariaDbFaultTest::StartServer(bool private_server,
                                   const std::string& extra) {
  if (private_server) {
    private_ = std::make_unique<PrivateMariaDb>(extra);
    server_ = &private_->server();
    db_ = "fault";
  } else {
    server_ = &TestMariaDb();
    db_ = NameOfTest("f_", 64);
  }
  ASSERT_NO_FATAL_FAILURE(PrepareDatabase(*server_));
}

void MariaDbFaultTest::StartOtherServer(const std::string& extra) {
  ASSERT_NE(server_, nullptr) << "StartServer first";
  other_ = std::make_unique<PrivateMariaDb>(extra);
  ASSERT_NO_FATAL_FAILURE(PrepareDatabase(other_->server()));
}

void MariaDbFaultTest::SwitchToOtherServer() {
  ASSERT_NE(other_, nullptr) << "StartOtherServer first";
  server_ = &other_->server();
}

void MariaDbFaultTest::PrepareDatabase(const MariaDbServer& server) {
  ASSERT_EQ(CreateClusterpediaDatabase(server, db_), "");
  const std::string seed =
      "{\"apiVersion\":\"%A\",\"kind\":\"%K\",\"metadata\":{\"name\":\"%N\","
      "\"namespace\":\"seed\",\"uid\":\"uid-%N\",\"resourceVersion\":\"1\","
      "\"annotations\":{\"shadow.clusterpedia.io/cluster-name\":\"seed\"}}}";
  auto object = [&](const std::string& api, const std::string& kind,
                    const std::string& name) {
    std::string s = seed;
    for (auto [from, to] : {std::pair<std::string, std::string>{"%A", api},
                            {"%K", kind},
                            {"%N", name}}) {
      for (size_t at = s.find(from); at != std::string::npos;
           at = s.find(from)) {
        s.replace(at, from.size(), to);
      }
    }
    return s;
  };
  ASSERT_NO_FATAL_FAILURE(SqlOn(
      server,
      "CREATE TABLE fault_marker (id bigint AUTO_INCREMENT PRIMARY KEY);\n"
      "CREATE TABLE other_table (id bigint AUTO_INCREMENT PRIMARY KEY, "
      "payload JSON);\n"
      "INSERT INTO resources (`group`, version, resource, kind, cluster, "
      "namespace, name, uid, resource_version, object, created_at, "
      "synced_at) VALUES ('', 'v1', 'pods', 'Pod', 'seed', 'seed', "
      "'seed-pod', 'uid-seed-pod', '1', '" +
          object("v1", "Pod", "seed-pod") +
          "', NOW(3), NOW(3)), ('apps', 'v1', 'deployments', 'Deployment', "
          "'seed', 'seed', 'seed-deploy', 'uid-seed-deploy', '1', '" +
          object("apps/v1", "Deployment", "seed-deploy") +
          "', NOW(3), NOW(3))"));
}

void MariaDbFaultTest::BeginOnMariaDb(const Scenario& s, bool private_server) {
  ASSERT_NO_FATAL_FAILURE(StartServer(private_server));
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(s));
  ASSERT_NO_FATAL_FAILURE(StartTraffic());
}

void MariaDbFaultTest::LaunchWalwatch(const Scenario& s) {
  scenario_ = s;
  WalwatchOptions o;
  o.slot = "walwatch";  // not read: --source mysql
  o.socket_path = tmpdir_ + "/ww.sock";
  o.log_level = "info";
  unsigned port = server_->port;
  if (s.through_proxy) {
    proxy_ = std::make_unique<TcpProxy>(server_->socket);
    port = static_cast<unsigned>(proxy_->port());
  }
  metrics_port_ = FreeLoopbackPort();
  ASSERT_NE(metrics_port_, 0) << "no free loopback port for /metrics";
  o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port_);
  o.extra_args = {
      "--source",
      "mysql",
      "--mysql-conninfo",
      "host=127.0.0.1 port=" + std::to_string(port) +
          " user=" + server_->pw_user + " password=" + server_->pw_password +
          " database=" + db_,
      "--server-id-from",
      NameOfTest("wwf-", 60),
  };
  o.extra_args.insert(o.extra_args.end(), s.walwatch_args.begin(),
                      s.walwatch_args.end());
  o.max_log_bytes = s.max_log_bytes;
  ww_options_ = o;
  ww_ = Launch(std::move(o));
  ASSERT_NE(ww_, nullptr);
}

uint64_t MariaDbFaultTest::Marker() {
  BinlogWriter marker(*server_, db_);
  return marker.Exec("INSERT INTO fault_marker () VALUES ()");
}

ModelState MariaDbFaultTest::SqlState(const WatchFilter& f) {
  const ModelFilter filter = ToModelFilter(f);
  mysql::MysqlConnection conn;
  if (std::string err = conn.Connect(server_->Root(db_)); !err.empty()) {
    throw std::runtime_error(err);
  }
  std::string sql =
      "SELECT `cluster`, `namespace`, `name`, `object` FROM `resources` "
      "WHERE `group` = " +
      conn.Quote(filter.resource.group) +
      " AND `version` = " + conn.Quote(filter.resource.version) +
      " AND `resource` = " + conn.Quote(filter.resource.resource);
  if (!f.cluster.empty()) sql += " AND `cluster` = " + conn.Quote(f.cluster);
  if (!f.ns.empty()) sql += " AND `namespace` = " + conn.Quote(f.ns);
  mysql::MysqlRows rows;
  if (std::string err = conn.Query(sql, &rows); !err.empty()) {
    throw std::runtime_error(err);
  }
  ModelState state;
  for (const auto& row : rows.rows) {
    ObjectKey key{row[0].value_or(""), row[1].value_or(""),
                  row[2].value_or("")};
    nlohmann::json object = nlohmann::json::parse(row[3].value_or("null"));
    if (!(KeyOfObject(object) == key)) {
      throw std::runtime_error(
          "row " + key.ToString() +
          " holds an object of another key: " + KeyOfObject(object).ToString());
    }
    if (!filter.Matches(key, object)) continue;
    state.emplace(std::move(key), ModelObjectFromStored(std::move(object)));
  }
  return state;
}

FaultStoreFactory MariaDbFaultTest::WriterStore() {
  return [server = *server_, db = db_]() -> std::unique_ptr<FaultStore> {
    return std::make_unique<MariaDbFaultStore>(server, db);
  };
}

void MariaDbFaultTest::Sql(const std::string& sql) { SqlOn(*server_, sql); }

void MariaDbFaultTest::SqlOn(const MariaDbServer& server,
                             const std::string& sql) {
  ASSERT_EQ(
      RootExec(server, "USE " + mysql::QuoteIdentifier(db_) + ";\n" + sql), "");
}

std::string MariaDbFaultTest::SqlValue(const std::string& sql) {
  mysql::MysqlConnection conn;
  std::optional<std::string> value;
  std::string err = conn.Connect(server_->Root(db_));
  if (err.empty()) err = conn.QueryValue(sql, &value);
  EXPECT_EQ(err, "") << sql;
  return value.value_or("");
}

::testing::AssertionResult MariaDbFaultTest::ShutDownServer() {
  const pid_t pid = server_->Pid();
  if (pid <= 0) return ::testing::AssertionFailure() << "no mariadbd pid";
  CommandResult r = RunCommand(
      {"mariadb-admin", "--no-defaults", "--socket=" + server_->socket,
       "-uroot", "--connect-timeout=10", "shutdown"},
      seconds(60));
  if (!r.exited || r.exit_code != 0) {
    return ::testing::AssertionFailure()
           << "mariadb-admin shutdown: " << r.Describe() << " " << r.output;
  }
  return WaitGone(pid, seconds(60));
}

::testing::AssertionResult MariaDbFaultTest::KillServer() {
  const pid_t pid = server_->Pid();
  if (pid <= 0) return ::testing::AssertionFailure() << "no mariadbd pid";
  if (kill(pid, SIGKILL) != 0) {
    return ::testing::AssertionFailure() << "kill(" << pid << ", SIGKILL)";
  }
  return WaitGone(pid, seconds(30));
}

::testing::AssertionResult MariaDbFaultTest::StartServerAgain() {
  const std::string dir = server_->dir;
  // As mariadb-sandbox.sh starts it: detached, as the mysql user when root.
  std::string cmd = "(cd / && exec setsid ";
  if (geteuid() == 0)
    cmd += "setpriv --reuid=mysql --regid=mysql --init-groups -- ";
  const char* mariadbd = std::getenv("WALWATCH_MARIADBD");
  cmd += std::string(mariadbd && *mariadbd ? mariadbd : "/usr/sbin/mariadbd") +
         " --defaults-file=" + dir + "/my.cnf) </dev/null >>" + dir +
         "/log/mariadbd.log 2>&1 &";
  if (std::system(cmd.c_str()) != 0) {
    return ::testing::AssertionFailure() << "cannot run: " << cmd;
  }
  const auto deadline = In(seconds(120));
  std::string err;
  while (Clock::now() < deadline) {
    mysql::MysqlConnection conn;
    err = conn.Connect(server_->Root());
    if (err.empty()) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(milliseconds(50));
  }
  return ::testing::AssertionFailure()
         << "mariadbd in " << dir << " did not answer within 120 s: " << err;
}

::testing::AssertionResult MariaDbFaultTest::PurgeAllButTheCurrentBinlog(
    std::string* kept) {
  mysql::MysqlConnection conn;
  std::string err = conn.Connect(server_->Root());
  if (err.empty()) err = conn.Query("FLUSH BINARY LOGS");
  mysql::MysqlRows status;
  if (err.empty()) err = conn.Query("SHOW MASTER STATUS", &status);
  if (!err.empty()) return ::testing::AssertionFailure() << err;
  const std::string current = status.rows.at(0).at(0).value_or("");
  const auto deadline = In(seconds(60));
  std::string oldest;
  while (Clock::now() < deadline) {
    err = conn.Query("PURGE BINARY LOGS TO " + conn.Quote(current));
    mysql::MysqlRows logs;
    if (err.empty()) err = conn.Query("SHOW BINARY LOGS", &logs);
    if (!err.empty()) return ::testing::AssertionFailure() << err;
    oldest = logs.rows.at(0).at(0).value_or("");
    if (oldest == current) {
      *kept = current;
      return ::testing::AssertionSuccess();
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return ::testing::AssertionFailure()
         << "the server still keeps " << oldest << " before " << current;
}

}  // namespace walwatch::itest
