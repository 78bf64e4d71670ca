// The randomized model test on MariaDB (support/model_run.h says what it
// does and its WALWATCH_MODEL_* knobs; model_test.cc runs it on
// PostgreSQL): watchers with random selectors, namespaces, clusters and
// start modes (RV unset, 0, mid-stream, WatchList, and an APIServer's own
// list handed off with its snapshot's binlog file and position) read
// `walwatch --source mysql` while writers run random Clusterpedia-shaped
// statements; when the writers stop, every watcher's state must equal the
// SQL query of its filter.
//
// Sized for make test on a loaded 2-core machine: 30 s of writing unless
// WALWATCH_MODEL_SECONDS says otherwise.
#include <gtest/gtest.h>

#include "tests/integration/support/mariadb_model_database.h"
#include "tests/integration/support/model_run.h"

namespace walwatch::itest {
namespace {

class MariaDbModelTest : public MariaDbModelDatabaseTest {};

TEST_F(MariaDbModelTest, RandomWatchersAgreeWithSqlAfterRandomWrites) {
  ModelConfig defaults;
  defaults.seconds = 30;
  RunRandomModel(*this, ModelConfig::FromEnvironment(defaults));
}

}  // namespace
}  // namespace walwatch::itest
