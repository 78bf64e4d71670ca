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

}  // namespace
}  // namespace walwatch::mysql
