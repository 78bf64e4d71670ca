// The consumer's test (issue 18, part 6) on PostgreSQL: many clients written
// the way client-go's reflector works (list, watch with bookmarks and
// timeoutSeconds, resume from the last RV, relist on 410) read walwatch
// while Clusterpedia-shaped writers run, one hot resource overrunning a
// small --max-log-bytes; every client's state must equal SQL and every 410
// Expired must be witnessed by the WAL (a wal2json slot of the test's own).
// support/reflector_run.h says what is checked and its WALWATCH_REFLECTOR_*
// knobs; mariadb_reflector_test.cc runs the same on MariaDB.
#include <gtest/gtest.h>

#include "tests/integration/support/pg_model_database.h"
#include "tests/integration/support/reflector_run.h"

namespace walwatch::itest {
namespace {

class ReflectorTest : public PgModelDatabaseTest {};

TEST_F(ReflectorTest, ReflectorsAgreeWithSqlUnderAHotResource) {
  RunReflectors(*this, ReflectorConfig::FromEnvironment());
}

}  // namespace
}  // namespace walwatch::itest
