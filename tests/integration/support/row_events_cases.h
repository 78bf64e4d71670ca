// The row-to-event rules, written once for every database
// (model_database.h) and seen as an APIServer sees them, through watches
// over walwatch's socket: INSERT, UPDATE and DELETE become ADDED, MODIFIED
// and DELETED (with the old row); a uid change becomes DELETED then ADDED;
// Clusterpedia's event recording gives no event; transactions arrive in
// commit order with the RV rule (the last event of a transaction carries
// its commit c, the earlier ones c - 1); a cluster's removal is one
// transaction; paths, namespaces, clusters and selectors filter; and a
// resource whose rows predate walwatch has the table's kind in bookmarks.
//
// row_events_test.cc runs them on PostgreSQL, mariadb_row_events_test.cc
// on MariaDB, each case a TEST_F of one line. The database-specific cases
// stay beside them (events_test.cc, mariadb_events_test.cc).
//
// Thread safety: for the test's thread. Each case's failures are the
// running test's; a fatal one returns at once.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_ROW_EVENTS_CASES_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_ROW_EVENTS_CASES_H_

#include "tests/integration/support/model_database.h"

namespace walwatch::itest {

void InsertUpdateDeleteGiveAddedModifiedDeleted(ModelDatabase& db);
void NamedGroupResourceAndClusterScopedPaths(ModelDatabase& db);
void ANewUidIsDeletedThenAdded(ModelDatabase& db);
void EventRecordingGivesNoEvent(ModelDatabase& db);
void ConcurrentTransactionsArriveInCommitOrder(ModelDatabase& db);
void AClustersRemovalOf5000RowsIsOneTransaction(ModelDatabase& db);
void WatchSeesOnlyItsResourceNamespaceAndCluster(ModelDatabase& db);
void SelectorsNamespacesAndClustersFilter(ModelDatabase& db);
void BookmarksCarryTheKindOfAResourceOnlyTheTableHolds(ModelDatabase& db);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_ROW_EVENTS_CASES_H_
