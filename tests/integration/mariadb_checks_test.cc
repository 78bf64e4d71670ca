// The MySQL/MariaDB startup checks against a real MariaDB: each wrong
// setting, missing grant, missing table or column and clashing server id
// is refused with its one line naming the fix, and a good server passes.
//
// These tests change global settings, so ctest runs them one at a time on
// a server of their own (tests/CMakeLists.txt: fixture mariadb_exclusive,
// resource lock); each restores what it changed.
#include <gtest/gtest.h>

#include <string>

#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/mysql_checks.h"
#include "tests/integration/support/mariadb.h"

namespace walwatch::itest {
namespace {

using mysql::MysqlCheckOptions;
using mysql::MysqlConnection;

constexpr const char* kDb = "checks_cp";

class MysqlChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &TestMariaDb();
    ASSERT_EQ(CreateClusterpediaDatabase(*server_, kDb), "");
    ASSERT_EQ(RootExec(*server_,
                       "SET GLOBAL binlog_format = 'ROW';\n"
                       "SET GLOBAL binlog_row_image = 'FULL';\n"
                       "SET GLOBAL binlog_row_metadata = 'FULL';\n"
                       "SET GLOBAL binlog_expire_logs_seconds = 0;"),
              "");
    // A new session of the password account after the globals are set.
    ASSERT_EQ(conn_.Connect(
                  server_->Tcp(server_->pw_user, server_->pw_password, kDb)),
              "");
  }

  void TearDown() override {
    EXPECT_EQ(RootExec(*server_,
                       "SET GLOBAL binlog_format = 'ROW';\n"
                       "SET GLOBAL binlog_row_image = 'FULL';\n"
                       "SET GLOBAL binlog_row_metadata = 'FULL';\n"
                       "SET GLOBAL binlog_expire_logs_seconds = 0;"),
              "");
  }

  MysqlCheckOptions Options() const {
    MysqlCheckOptions o;
    o.database = kDb;
    o.table = "resources";
    o.columns = MappedColumns();
    o.json_column = "object";
    o.server_id = mysql::DeriveServerId("walwatch-0");
    o.replay_window = std::chrono::hours(24);
    return o;
  }

  const MariaDbServer* server_ = nullptr;
  MysqlConnection conn_;
};

TEST_F(MysqlChecksTest, AGoodServerPasses) {
  std::vector<std::string> warnings;
  EXPECT_EQ(mysql::RunStartupChecks(&conn_, Options(), &warnings), "");
  EXPECT_TRUE(warnings.empty());
}

TEST_F(MysqlChecksTest, StatementFormatIsRefused) {
  ASSERT_EQ(RootExec(*server_, "SET GLOBAL binlog_format = 'MIXED'"), "");
  std::string line = mysql::CheckBinlogFormat(&conn_);
  EXPECT_NE(line.find("binlog_format is MIXED"), std::string::npos) << line;
  EXPECT_NE(line.find("fix: SET GLOBAL binlog_format = ROW"), std::string::npos)
      << line;
  std::vector<std::string> warnings;
  EXPECT_EQ(mysql::RunStartupChecks(&conn_, Options(), &warnings), line);
}

TEST_F(MysqlChecksTest, AMinimalRowImageIsRefused) {
  ASSERT_EQ(RootExec(*server_, "SET GLOBAL binlog_row_image = 'MINIMAL'"), "");
  std::string line = mysql::CheckBinlogRowImage(&conn_);
  EXPECT_NE(line.find("binlog_row_image is MINIMAL"), std::string::npos)
      << line;
  EXPECT_NE(line.find("fix: SET GLOBAL binlog_row_image = FULL"),
            std::string::npos)
      << line;
  ASSERT_EQ(RootExec(*server_, "SET GLOBAL binlog_row_image = 'NOBLOB'"), "");
  EXPECT_NE(mysql::CheckBinlogRowImage(&conn_).find("NOBLOB"),
            std::string::npos);
}

TEST_F(MysqlChecksTest, MinimalRowMetadataIsRefused) {
  ASSERT_EQ(RootExec(*server_, "SET GLOBAL binlog_row_metadata = 'MINIMAL'"),
            "");
  std::string line = mysql::CheckBinlogRowMetadata(&conn_);
  EXPECT_NE(line.find("fix: SET GLOBAL binlog_row_metadata = FULL"),
            std::string::npos)
      << line;
}

TEST_F(MysqlChecksTest, BinaryLoggingOffIsRefused) {
  PrivateMariaDb off("skip-log-bin");
  MysqlConnection conn;
  ASSERT_EQ(conn.Connect(off.server().Root()), "");
  std::string line = mysql::CheckBinaryLogging(&conn);
  EXPECT_NE(line.find("binary logging is off"), std::string::npos) << line;
  EXPECT_NE(line.find("fix: set log_bin"), std::string::npos) << line;
  mysql::BinlogPosition end;
  EXPECT_EQ(mysql::ReadBinlogEnd(&conn, &end).kind,
            mysql::BinlogErrorKind::kSettings);
}

TEST_F(MysqlChecksTest, AMissingTableOrColumnIsRefused) {
  std::string line = mysql::CheckTable(&conn_, kDb, "no_such_table",
                                       MappedColumns(), "object");
  EXPECT_NE(line.find("does not exist"), std::string::npos) << line;
  EXPECT_NE(line.find("schema/mysql/clusterpedia.sql"), std::string::npos)
      << line;

  std::vector<std::string> columns = MappedColumns();
  columns.push_back("no_such_column");
  line = mysql::CheckTable(&conn_, kDb, "resources", columns, "object");
  EXPECT_NE(line.find("has no column no_such_column"), std::string::npos)
      << line;

  line = mysql::CheckTable(&conn_, kDb, "resources", MappedColumns(),
                           "created_at");
  EXPECT_NE(line.find("must be JSON"), std::string::npos) << line;
}

TEST_F(MysqlChecksTest, EachMissingGrantIsRefusedByName) {
  ASSERT_EQ(
      RootExec(
          *server_,
          "DROP USER IF EXISTS no_slave@'%', no_client@'%', no_select@'%';\n"
          "CREATE USER no_slave@'%' IDENTIFIED BY 'pw';\n"
          "GRANT REPLICATION CLIENT ON *.* TO no_slave@'%';\n"
          "GRANT SELECT ON checks_cp.resources TO no_slave@'%';\n"
          "CREATE USER no_client@'%' IDENTIFIED BY 'pw';\n"
          "GRANT REPLICATION SLAVE ON *.* TO no_client@'%';\n"
          "GRANT SELECT ON checks_cp.resources TO no_client@'%';\n"
          "CREATE USER no_select@'%' IDENTIFIED BY 'pw';\n"
          "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO "
          "no_select@'%';"),
      "");
  struct Case {
    const char* user;
    const char* expect;
  } cases[] = {
      {"no_slave", "lacks REPLICATION SLAVE"},
      {"no_client", "lacks REPLICATION CLIENT"},
      {"no_select", "may not SELECT from checks_cp.resources"},
  };
  for (const Case& c : cases) {
    MysqlConnection conn;
    ASSERT_EQ(conn.Connect(server_->Tcp(c.user, "pw")), "");
    std::string line = mysql::CheckGrants(&conn, kDb, "resources");
    EXPECT_NE(line.find(c.expect), std::string::npos) << c.user << ": " << line;
    EXPECT_NE(line.find("fix: GRANT"), std::string::npos)
        << c.user << ": " << line;
    EXPECT_NE(line.find("schema/mysql/roles.sql"), std::string::npos) << line;
  }
  // schema/mysql/roles.sql makes an account that passes.
  ASSERT_EQ(RootExec(*server_, "DROP USER IF EXISTS walwatch@'%'"), "");
  std::string cmd = "mariadb --no-defaults --socket=" + server_->socket +
                    " -uroot --init-command=\"SET @walwatch_password='pw2'\" " +
                    kDb + " < " + WALWATCH_SOURCE_DIR +
                    "/schema/mysql/roles.sql";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  MysqlConnection conn;
  ASSERT_EQ(conn.Connect(server_->Tcp("walwatch", "pw2")), "");
  EXPECT_EQ(mysql::CheckGrants(&conn, kDb, "resources"), "");
}

TEST_F(MysqlChecksTest, ServerIdsThatClashAreRefused) {
  std::string line = mysql::CheckServerId(&conn_, 0, "");
  EXPECT_NE(line.find("server id is 0"), std::string::npos) << line;
  line = mysql::CheckServerId(&conn_, 1, "");  // the sandbox's own server_id
  EXPECT_NE(line.find("is the server's own server_id"), std::string::npos)
      << line;
  EXPECT_EQ(mysql::CheckServerId(&conn_, mysql::DeriveServerId("walwatch-0"),
                                 "walwatch-0"),
            "");
}

TEST_F(MysqlChecksTest, AReplicaThatRegisteredHoldsItsServerId) {
  // A reader that registers (replica_host) shows in SHOW SLAVE HOSTS, which
  // only an account with REPLICATION MASTER ADMIN (MariaDB) may read.
  mysql::BinlogReaderOptions o;
  o.database = kDb;
  o.table = "resources";
  o.columns = MappedColumns();
  o.server_id = mysql::DeriveServerId("walwatch-a");
  o.replica_host = "walwatch-a";
  mysql::BinlogReader reader(server_->Root(), o);
  MysqlConnection root;
  ASSERT_EQ(root.Connect(server_->Root()), "");
  mysql::BinlogPosition end;
  ASSERT_TRUE(mysql::ReadBinlogEnd(&root, &end).ok());
  mysql::BinlogStatus s = reader.Open(end);
  ASSERT_TRUE(s.ok()) << s.message;

  // Open() registers before it asks for the dump: no wait.
  std::string line = mysql::CheckServerId(&root, o.server_id, "walwatch-b");
  EXPECT_NE(line.find("is taken by walwatch-a"), std::string::npos) << line;
  EXPECT_EQ(mysql::CheckServerId(&root, o.server_id, "walwatch-a"), "");
  // The password account may not read SHOW SLAVE HOSTS: nothing to say.
  EXPECT_EQ(mysql::CheckServerId(&conn_, o.server_id, "walwatch-b"), "");
}

TEST_F(MysqlChecksTest, ShortRetentionWarnsNamingTheSetting) {
  std::string warning;
  EXPECT_EQ(
      mysql::CheckBinlogRetention(&conn_, std::chrono::hours(2), &warning), "");
  EXPECT_EQ(warning, "");  // 0: never purged automatically

  ASSERT_EQ(RootExec(*server_, "SET GLOBAL binlog_expire_logs_seconds = 3600"),
            "");
  EXPECT_EQ(
      mysql::CheckBinlogRetention(&conn_, std::chrono::hours(2), &warning), "");
  EXPECT_NE(warning.find("binlog_expire_logs_seconds (1 h)"), std::string::npos)
      << warning;
  EXPECT_NE(warning.find("replay window (2 h)"), std::string::npos) << warning;
  EXPECT_NE(warning.find("fix: SET GLOBAL binlog_expire_logs_seconds = 7200"),
            std::string::npos)
      << warning;
  EXPECT_EQ(
      mysql::CheckBinlogRetention(&conn_, std::chrono::minutes(30), &warning),
      "");
  EXPECT_EQ(warning, "");

  std::vector<std::string> warnings;
  MysqlCheckOptions o = Options();
  o.replay_window = std::chrono::hours(2);
  EXPECT_EQ(mysql::RunStartupChecks(&conn_, o, &warnings), "");
  ASSERT_EQ(warnings.size(), 1u);
}

}  // namespace
}  // namespace walwatch::itest
