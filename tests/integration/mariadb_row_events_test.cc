// The row-to-event rules on MariaDB (support/row_events_cases.h says what
// they are; row_events_test.cc runs the same cases on PostgreSQL): the
// server ctest starts, a database per test, and `walwatch --source mysql`
// watched through its socket. The RVs are binlog positions (file number *
// 10^10 + the commit event's end).
#include <gtest/gtest.h>

#include "tests/integration/support/mariadb_model_database.h"
#include "tests/integration/support/row_events_cases.h"

namespace walwatch::itest {
namespace {

class MariaDbRowEventsTest : public MariaDbModelDatabaseTest {};

TEST_F(MariaDbRowEventsTest, InsertUpdateDeleteGiveAddedModifiedDeleted) {
  InsertUpdateDeleteGiveAddedModifiedDeleted(*this);
}

TEST_F(MariaDbRowEventsTest, NamedGroupResourceAndClusterScopedPaths) {
  NamedGroupResourceAndClusterScopedPaths(*this);
}

TEST_F(MariaDbRowEventsTest, ANewUidIsDeletedThenAdded) {
  ANewUidIsDeletedThenAdded(*this);
}

TEST_F(MariaDbRowEventsTest, EventRecordingGivesNoEvent) {
  EventRecordingGivesNoEvent(*this);
}

TEST_F(MariaDbRowEventsTest, ConcurrentTransactionsArriveInCommitOrder) {
  ConcurrentTransactionsArriveInCommitOrder(*this);
}

TEST_F(MariaDbRowEventsTest, AClustersRemovalOf5000RowsIsOneTransaction) {
  AClustersRemovalOf5000RowsIsOneTransaction(*this);
}

TEST_F(MariaDbRowEventsTest, WatchSeesOnlyItsResourceNamespaceAndCluster) {
  WatchSeesOnlyItsResourceNamespaceAndCluster(*this);
}

TEST_F(MariaDbRowEventsTest, SelectorsNamespacesAndClustersFilter) {
  SelectorsNamespacesAndClustersFilter(*this);
}

TEST_F(MariaDbRowEventsTest,
       BookmarksCarryTheKindOfAResourceOnlyTheTableHolds) {
  BookmarksCarryTheKindOfAResourceOnlyTheTableHolds(*this);
}

}  // namespace
}  // namespace walwatch::itest
