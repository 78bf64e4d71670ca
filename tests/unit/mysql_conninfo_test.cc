// --mysql-conninfo: key=value pairs with MySQL's option names.
#include "cdc/mysql/mysql_conninfo.h"

#include <gtest/gtest.h>

#include <string>

namespace walwatch::mysql {
namespace {

TEST(MysqlConninfo, ReadsEveryKey) {
  MysqlConnParams p;
  ASSERT_EQ(ParseMysqlConninfo(
                "host=db.example port=3307 user=walwatch password='a b\\'c' "
                "database=clusterpedia ssl-mode=verify_identity "
                "ssl-ca=/ca.crt ssl-cert=/c.crt ssl-key=/c.key",
                &p),
            "");
  EXPECT_EQ(p.host, "db.example");
  EXPECT_EQ(p.port, 3307u);
  EXPECT_EQ(p.user, "walwatch");
  EXPECT_EQ(p.password, "a b'c");
  EXPECT_EQ(p.database, "clusterpedia");
  EXPECT_EQ(p.tls, MysqlConnParams::Tls::kVerify);
  EXPECT_EQ(p.tls_ca, "/ca.crt");
  EXPECT_EQ(p.tls_cert, "/c.crt");
  EXPECT_EQ(p.tls_key, "/c.key");
}

TEST(MysqlConninfo, DefaultsAndTheSocket) {
  MysqlConnParams p;
  ASSERT_EQ(ParseMysqlConninfo("socket=/run/mysqld/mysqld.sock user=w "
                               "dbname=cp",
                               &p),
            "");
  EXPECT_EQ(p.host, "");
  EXPECT_EQ(p.port, 3306u);
  EXPECT_EQ(p.socket, "/run/mysqld/mysqld.sock");
  EXPECT_EQ(p.database, "cp");
  EXPECT_EQ(p.tls, MysqlConnParams::Tls::kDisabled);
  ASSERT_EQ(ParseMysqlConninfo("database=cp ssl-mode=REQUIRED", &p), "");
  EXPECT_EQ(p.tls, MysqlConnParams::Tls::kRequired);
}

// Each error names the key at fault, never a value: a password must not
// reach a log line through it.
TEST(MysqlConninfo, ErrorsNameTheKeyNotTheValue) {
  MysqlConnParams p;
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {
           Case{"host=db user=w password=secret-1", "database is required"},
           Case{"database=cp port=0", "port"},
           Case{"database=cp port=70000", "port"},
           Case{"database=cp ssl-mode=PREFERRED", "ssl-mode"},
           Case{"database=cp ssl-mode=VERIFY_CA", "VERIFY_IDENTITY"},
           Case{"database=cp ssl-mode=VERIFY_IDENTITY", "ssl-ca"},
           Case{"database=cp ssl-cert=/c.crt", "ssl-key"},
           Case{"database=cp ssl-cert=/c.crt ssl-key=/c.key", "ssl-mode"},
           Case{"database=cp ssl-ca=/ca.crt ssl-mode=DISABLED", "ssl-mode"},
           Case{"database=cp passwrd=secret-1", "unknown key \"passwrd\""},
           Case{"database=cp password='secret-1", "cannot parse"},
       }) {
    const std::string err = ParseMysqlConninfo(c.text, &p);
    EXPECT_NE(err.find(c.says), std::string::npos) << c.text << ": " << err;
    EXPECT_EQ(err.find("secret-1"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace walwatch::mysql
