// The startup checks' pure parts; the checks against a server are in
// tests/integration/mariadb_checks_test.cc.
#include "cdc/mysql/mysql_checks.h"

#include <gtest/gtest.h>

namespace walwatch::mysql {
namespace {

TEST(MysqlChecks, DerivedServerIdsAreHighAndStable) {
  uint32_t a = DeriveServerId("walwatch-0");
  EXPECT_EQ(a, DeriveServerId("walwatch-0"));
  EXPECT_NE(a, DeriveServerId("walwatch-1"));
  EXPECT_GE(a, 0x80000000u);
  EXPECT_GE(DeriveServerId(""), 0x80000000u);
}

TEST(MysqlChecks, MysqlBefore8026IsRefusedAndMariaDbIsNot) {
  for (const char* ok : {"8.0.26", "8.0.36", "8.4.3", "9.1.0", "8.0.40-31",
                         "10.11.19-MariaDB-0+deb12u1", "11.4.2-MariaDB",
                         "5.5.5-10.6.18-MariaDB", ""}) {
    EXPECT_EQ(CheckServerVersionString(ok), "") << ok;
  }
  for (const char* old : {"8.0.25", "8.0.19-10", "5.7.44-log", "8.0.0"}) {
    const std::string line = CheckServerVersionString(old);
    EXPECT_NE(line.find(std::string("MySQL ") + old), std::string::npos)
        << line;
    EXPECT_NE(line.find("fix: MySQL 8.0.26 or later"), std::string::npos)
        << line;
  }
}

}  // namespace
}  // namespace walwatch::mysql
