#include "tests/integration/support/mariadb.h"

#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace walwatch::itest {

namespace {

std::string ReadFileTrimmed(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)),
                std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

MariaDbServer FromDir(const std::string& dir) {
  MariaDbServer s;
  s.dir = dir;
  s.socket = dir + "/mariadbd.sock";
  std::string port = ReadFileTrimmed(dir + "/port");
  if (port.empty())
    throw std::runtime_error("no MariaDB sandbox in " + dir +
                             " (no port file)");
  s.port = static_cast<unsigned>(std::stoul(port));
  return s;
}

std::string Sandbox(const std::string& verb, const std::string& dir,
                    const std::string& extra) {
  std::string cmd;
  if (!extra.empty()) cmd += "MARIADB_SANDBOX_EXTRA='" + extra + "' ";
  cmd += std::string(WALWATCH_SOURCE_DIR) + "/tests/tools/mariadb-sandbox.sh " +
         verb + " " + dir + " >/dev/null 2>" + dir + ".log";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    return "mariadb-sandbox.sh " + verb + " " + dir +
           " failed: " + ReadFileTrimmed(dir + ".log");
  }
  std::remove((dir + ".log").c_str());
  return "";
}

std::string MakeTempDir() {
  char tmpl[] = "/tmp/walwatch-my.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// Splits a script at ";" line ends; drops pieces that hold only comments.
std::vector<std::string> Statements(const std::string& sql) {
  std::vector<std::string> out;
  std::istringstream in(sql);
  std::string line, current;
  bool content = false;
  while (std::getline(in, line)) {
    std::string trimmed = line;
    while (!trimmed.empty() &&
           (trimmed.back() == ' ' || trimmed.back() == '\r'))
      trimmed.pop_back();
    size_t first = trimmed.find_first_not_of(' ');
    bool comment =
        first == std::string::npos || trimmed.compare(first, 2, "--") == 0;
    current += line + "\n";
    if (!comment) content = true;
    if (!trimmed.empty() && trimmed.back() == ';') {
      if (content) out.push_back(current.substr(0, current.rfind(';')));
      current.clear();
      content = false;
    }
  }
  if (content) out.push_back(current);
  return out;
}

std::unique_ptr<PrivateMariaDb>& OwnSandbox() {
  static std::unique_ptr<PrivateMariaDb> own;
  return own;
}

}  // namespace

mysql::MysqlConnParams MariaDbServer::Root(const std::string& database) const {
  mysql::MysqlConnParams p;
  p.socket = socket;
  p.user = "root";
  p.database = database;
  return p;
}

mysql::MysqlConnParams MariaDbServer::Tcp(const std::string& user,
                                          const std::string& password,
                                          const std::string& database) const {
  mysql::MysqlConnParams p;
  p.host = host;
  p.port = port;
  p.user = user;
  p.password = password;
  p.database = database;
  return p;
}

pid_t MariaDbServer::Pid() const {
  if (dir.empty()) return 0;
  std::string pid = ReadFileTrimmed(dir + "/mariadbd.pid");
  return pid.empty() ? 0 : static_cast<pid_t>(std::stol(pid));
}

const MariaDbServer& TestMariaDb() {
  static const MariaDbServer server = [] {
    if (const char* dir = std::getenv("WALWATCH_TEST_MYDIR");
        dir != nullptr && *dir) {
      return FromDir(dir);
    }
    if (const char* sock = std::getenv("WALWATCH_TEST_MYSOCKET");
        sock != nullptr && *sock) {
      MariaDbServer s;
      s.socket = sock;
      if (const char* port = std::getenv("WALWATCH_TEST_MYPORT")) {
        s.port = static_cast<unsigned>(std::stoul(port));
      }
      return s;
    }
    OwnSandbox() = std::make_unique<PrivateMariaDb>();
    std::atexit([] { OwnSandbox().reset(); });
    return OwnSandbox()->server();
  }();
  return server;
}

PrivateMariaDb::PrivateMariaDb(const std::string& extra) {
  std::string dir = MakeTempDir();
  std::string err = Sandbox("start", dir, extra);
  if (!err.empty()) {
    Sandbox("stop", dir, "");
    throw std::runtime_error(err);
  }
  server_ = FromDir(dir);
}

PrivateMariaDb::~PrivateMariaDb() {
  // A stopped (SIGSTOP) server must run again to shut down.
  if (pid_t pid = server_.Pid(); pid > 0) kill(pid, SIGCONT);
  Sandbox("stop", server_.dir, "");
}

uint64_t RvOf(mysql::MysqlConnection* conn, const mysql::BinlogPosition& at) {
  uint64_t server_id = 0;
  if (std::string err = mysql::ReadServerId(conn, &server_id); !err.empty()) {
    throw std::runtime_error(err);
  }
  std::string why;
  std::optional<uint64_t> rv =
      mysql::BinlogVersion(mysql::BinlogHistory(server_id), at, &why);
  if (!rv) throw std::runtime_error(why);
  return *rv;
}

std::string RootExec(const MariaDbServer& server, const std::string& sql) {
  mysql::MysqlConnection conn;
  std::string err = conn.Connect(server.Root());
  if (!err.empty()) return err;
  for (const std::string& statement : Statements(sql)) {
    err = conn.Query(statement);
    if (!err.empty()) return err + " [" + statement + "]";
  }
  return "";
}

std::string CreateClusterpediaDatabase(const MariaDbServer& server,
                                       const std::string& database) {
  std::ifstream in(std::string(WALWATCH_SOURCE_DIR) +
                   "/schema/mysql/clusterpedia.sql");
  std::string schema((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
  if (schema.empty()) return "cannot read schema/mysql/clusterpedia.sql";
  std::string db = mysql::QuoteIdentifier(database);
  return RootExec(server,
                  "DROP DATABASE IF EXISTS " + db + ";\nCREATE DATABASE " + db +
                      " CHARACTER SET utf8mb4;\nUSE " + db + ";\n" + schema);
}

std::string InsertPodSql(const std::string& database, const std::string& name,
                         const std::string& uid, const std::string& object) {
  std::string escaped;
  for (char c : object) {
    if (c == '\'' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return "INSERT INTO " + mysql::QuoteIdentifier(database) +
         ".resources (`group`, version, resource, kind, cluster, namespace, "
         "name, uid, "
         "resource_version, object, created_at, synced_at) VALUES ('', 'v1', "
         "'pods', 'Pod', "
         "'c1', 'default', '" +
         name + "', '" + uid + "', '1', '" + escaped + "', NOW(3), NOW(3))";
}

std::vector<std::string> MappedColumns() {
  return {"group",     "version", "resource", "kind",  "cluster",
          "namespace", "name",    "uid",      "object"};
}

std::string ReadUntil(
    mysql::BinlogReader* reader, std::chrono::seconds deadline,
    const std::function<bool(const mysql::BinlogItem&)>& accept) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    mysql::BinlogItem item;
    mysql::BinlogStatus s = reader->Next(&item);
    if (!s.ok()) {
      return std::string("reader: ") + mysql::BinlogErrorKindName(s.kind) +
             ": " + s.message;
    }
    if (accept(item)) return "";
  }
  return "nothing accepted within " + std::to_string(deadline.count()) + " s";
}

std::string NextTableTransaction(mysql::BinlogReader* reader,
                                 std::chrono::seconds deadline,
                                 mysql::BinlogTransaction* out) {
  return ReadUntil(reader, deadline, [&](const mysql::BinlogItem& item) {
    if (item.type != mysql::BinlogItem::Type::kTransaction) return false;
    const auto& t = item.transaction;
    if (t.changes.empty() && t.table_statements.empty() && !t.overflowed)
      return false;
    *out = t;
    return true;
  });
}

}  // namespace walwatch::itest
