#include "tests/integration/support/mariadb_walwatch.h"

#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "cdc/mysql/binlog_reader.h"

namespace walwatch::itest {

namespace {

using mysql::BinlogPosition;
using mysql::QuoteIdentifier;

// A string literal for SQL (the object's JSON, names), escaped as
// mysql_real_escape_string does for utf8mb4.
std::string Lit(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    switch (c) {
      case '\0':
        out += "\\0";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\x1a':
        out += "\\Z";
        break;
      default:
        out += c;
    }
  }
  return out + "'";
}

// The test's name, lower case, for its database and server ids.
std::string TestName() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return name;
}

// GORM's six-key WHERE of an UPDATE or DELETE.
std::string KeyWhere(const Resource& r) {
  return " WHERE `cluster` = " + Lit(r.cluster) +
         " AND `group` = " + Lit(r.group) +
         " AND `version` = " + Lit(r.version) +
         " AND `resource` = " + Lit(r.resource) +
         " AND `namespace` = " + Lit(r.ns) + " AND `name` = " + Lit(r.name);
}

}  // namespace

std::string InsertSql(const std::string& database, const Resource& r) {
  return InsertSql(database, r, r.Object().dump());
}

std::string InsertSql(const std::string& database, const Resource& r,
                      const std::string& object_json) {
  return "INSERT INTO " + QuoteIdentifier(database) +
         ".`resources` (`group`, `version`, `resource`, `kind`, `cluster`, "
         "`namespace`, `name`, `owner_uid`, `uid`, `resource_version`, "
         "`object`, `created_at`, `synced_at`) VALUES (" +
         Lit(r.group) + ", " + Lit(r.version) + ", " + Lit(r.resource) + ", " +
         Lit(r.kind) + ", " + Lit(r.cluster) + ", " + Lit(r.ns) + ", " +
         Lit(r.name) + ", '', " + Lit(r.uid) + ", " + Lit(r.member_rv) + ", " +
         Lit(object_json) + ", NOW(3), NOW(3))";
}

std::string UpdateSql(const std::string& database, const Resource& r) {
  return UpdateSql(database, r, r.Object().dump());
}

std::string UpdateSql(const std::string& database, const Resource& r,
                      const std::string& object_json) {
  return "UPDATE " + QuoteIdentifier(database) +
         ".`resources` SET `created_at` = NOW(3), `object` = " +
         Lit(object_json) +
         ", `owner_uid` = '', `resource_version` = " + Lit(r.member_rv) +
         ", `uid` = " + Lit(r.uid) + ", `synced_at` = NOW(3)" + KeyWhere(r);
}

std::string DeleteSql(const std::string& database, const Resource& r) {
  return "DELETE FROM " + QuoteIdentifier(database) + ".`resources`" +
         KeyWhere(r);
}

std::string RecordKubeEventSql(const std::string& database, const Resource& r,
                               const std::string& reason) {
  const std::string path = Lit("$." + reason);
  return "UPDATE " + QuoteIdentifier(database) +
         ".`resources` SET `events` = JSON_SET(COALESCE(`events`, '{}'), " +
         path + ", JSON_OBJECT('reason', " + Lit(reason) +
         ", 'count', 1)), `event_resource_versions` = "
         "JSON_SET(COALESCE(`event_resource_versions`, '{}'), " +
         path + ", '7') WHERE `cluster` = " + Lit(r.cluster) +
         " AND `uid` = " + Lit(r.uid);
}

BinlogWriter::BinlogWriter(const MariaDbServer& server,
                           const std::string& database)
    : db_(database) {
  if (std::string err = conn_.Connect(server.Root(database)); !err.empty()) {
    throw std::runtime_error(err);
  }
}

BinlogPosition BinlogWriter::End() {
  BinlogPosition end;
  mysql::BinlogStatus s = mysql::ReadBinlogEnd(&conn_, &end);
  if (!s.ok()) throw std::runtime_error(s.message);
  return end;
}

void BinlogWriter::Run(const std::string& sql) {
  if (std::string err = conn_.Query(sql); !err.empty()) {
    throw std::runtime_error(err + " [" + sql.substr(0, 200) + "]");
  }
}

uint64_t BinlogWriter::Exec(const std::string& sql) {
  const BinlogPosition before = End();
  Run(sql);
  return CommitOf(before);
}

uint64_t BinlogWriter::Transaction(const std::vector<std::string>& statements) {
  const BinlogPosition before = End();
  Run("BEGIN");
  for (const std::string& s : statements) Run(s);
  Run("COMMIT");
  return CommitOf(before);
}

std::string LastGtid(mysql::MysqlConnection& conn) {
  std::optional<std::string> gtid;
  if (std::string err = conn.QueryValue("SELECT @@last_gtid", &gtid);
      !err.empty() || !gtid || gtid->empty()) {
    throw std::runtime_error("no @@last_gtid: " + err);
  }
  return *gtid;
}

BinlogPosition FindCommit(mysql::MysqlConnection& conn, const std::string& gtid,
                          const BinlogPosition& from) {
  // The GTID event names it ("BEGIN GTID 0-1-6"; a DDL's "GTID 0-1-7"); the
  // transaction ends at its XID or COMMIT, a DDL at its own statement.
  BinlogPosition at = from;
  for (int files = 0; files < 100; ++files) {
    mysql::MysqlRows rows;
    std::string err =
        conn.Query("SHOW BINLOG EVENTS IN " + conn.Quote(at.file) + " FROM " +
                       std::to_string(at.pos),
                   &rows);
    if (!err.empty()) throw std::runtime_error(err);
    bool found = false, grouped = false;
    for (const auto& r : rows.rows) {
      const std::string type = r[2].value_or("");
      const std::string info = r[5].value_or("");
      const uint64_t end = std::stoull(r[4].value_or("0"));
      if (!found) {
        if (type == "Gtid" &&
            (info == "BEGIN GTID " + gtid || info == "GTID " + gtid)) {
          found = true;
          grouped = info.rfind("BEGIN", 0) == 0;
        }
        continue;
      }
      if (type == "Xid" ||
          (type == "Query" && (!grouped || info.rfind("COMMIT", 0) == 0))) {
        return {at.file, end};
      }
    }
    if (found) throw std::runtime_error("the end of " + gtid + " is not there");
    // Rotated meanwhile: the next file.
    const uint64_t next = *mysql::BinlogFileNumber(at.file) + 1;
    std::string number = std::to_string(next);
    const size_t dot = at.file.rfind('.');
    const size_t digits = at.file.size() - dot - 1;
    if (number.size() < digits) number.insert(0, digits - number.size(), '0');
    at = {at.file.substr(0, dot + 1) + number, 4};
  }
  throw std::runtime_error("GTID " + gtid + " not found in the binlog");
}

uint64_t BinlogWriter::CommitOf(const BinlogPosition& before) {
  return RvOf(&conn_, FindCommit(conn_, LastGtid(conn_), before));
}

void MariaDbWalwatchTest::SetUp() {
  server_ = &TestMariaDb();
  db_ = ("w_" + TestName()).substr(0, 64);
  ASSERT_EQ(CreateClusterpediaDatabase(*server_, db_), "");
  writer_ = std::make_unique<BinlogWriter>(*server_, db_);
  char tmpl[] = "/tmp/walwatch-myit.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  tmpdir_ = tmpl;
}

void MariaDbWalwatchTest::TearDown() {
  for (auto& w : walwatches_) w->Stop();
  if (tmpdir_.empty()) return;
  const char* keep = std::getenv("WALWATCH_TEST_KEEP_LOGS");
  if (HasFailure() || (keep && *keep == '1')) {
    std::cerr << "walwatch test files kept in " << tmpdir_ << "\n";
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpdir_, ec);
}

WalwatchOptions MariaDbWalwatchTest::Options(
    const std::vector<std::string>& extra) {
  WalwatchOptions o;
  o.socket_path =
      TempPath("walwatch" + std::to_string(walwatches_.size()) + ".sock");
  o.slot = "walwatch";  // not read: --source mysql
  o.extra_args = {
      "--source",
      "mysql",
      "--mysql-conninfo",
      "host=127.0.0.1 port=" + std::to_string(server_->port) +
          " user=" + server_->pw_user + " password=" + server_->pw_password +
          " database=" + db_,
      "--server-id-from",
      ("ww-" + TestName()).substr(0, 56) + "-" +
          std::to_string(walwatches_.size()),
  };
  bool window = false;
  for (const std::string& e : extra) window |= e == "--replay-window";
  if (!window)
    o.extra_args.insert(o.extra_args.end(), {"--replay-window", "0s"});
  o.extra_args.insert(o.extra_args.end(), extra.begin(), extra.end());
  return o;
}

WalwatchProcess& MariaDbWalwatchTest::Launch(WalwatchOptions options) {
  std::string log = options.socket_path + ".stderr";
  walwatches_.push_back(
      std::make_unique<WalwatchProcess>(std::move(options), log));
  return *walwatches_.back();
}

WalwatchProcess* MariaDbWalwatchTest::StartWalwatch(WalwatchOptions options) {
  WalwatchProcess& p = Launch(std::move(options));
  auto ready = p.WaitReady(std::chrono::seconds(60));
  if (!ready) {
    ADD_FAILURE() << ready.message();
    return nullptr;
  }
  return &p;
}

}  // namespace walwatch::itest
