// The row-to-event rules on PostgreSQL (support/row_events_cases.h says
// what they are; mariadb_row_events_test.cc runs the same cases on
// MariaDB): real PostgreSQL + wal2json and the walwatch binary, watched
// through its socket. The RVs are commit LSNs in decimal.
#include <gtest/gtest.h>

#include "tests/integration/support/pg_model_database.h"
#include "tests/integration/support/row_events_cases.h"

namespace walwatch::itest {
namespace {

class RowEventsTest : public PgModelDatabaseTest {};

TEST_F(RowEventsTest, InsertUpdateDeleteGiveAddedModifiedDeleted) {
  InsertUpdateDeleteGiveAddedModifiedDeleted(*this);
}

TEST_F(RowEventsTest, NamedGroupResourceAndClusterScopedPaths) {
  NamedGroupResourceAndClusterScopedPaths(*this);
}

TEST_F(RowEventsTest, ANewUidIsDeletedThenAdded) {
  ANewUidIsDeletedThenAdded(*this);
}

TEST_F(RowEventsTest, EventRecordingGivesNoEvent) {
  EventRecordingGivesNoEvent(*this);
}

TEST_F(RowEventsTest, ConcurrentTransactionsArriveInCommitOrder) {
  ConcurrentTransactionsArriveInCommitOrder(*this);
}

TEST_F(RowEventsTest, AClustersRemovalOf5000RowsIsOneTransaction) {
  AClustersRemovalOf5000RowsIsOneTransaction(*this);
}

TEST_F(RowEventsTest, WatchSeesOnlyItsResourceNamespaceAndCluster) {
  WatchSeesOnlyItsResourceNamespaceAndCluster(*this);
}

TEST_F(RowEventsTest, SelectorsNamespacesAndClustersFilter) {
  SelectorsNamespacesAndClustersFilter(*this);
}

TEST_F(RowEventsTest, BookmarksCarryTheKindOfAResourceOnlyTheTableHolds) {
  BookmarksCarryTheKindOfAResourceOnlyTheTableHolds(*this);
}

}  // namespace
}  // namespace walwatch::itest
