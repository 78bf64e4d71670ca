// Events arrive in commit order, whole transactions at a time, with the
// resourceVersion rule of DESIGN.md: in a transaction of n events, events
// 1..n-1 carry the previous transaction's commit LSN and event n its own.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

class OrderingTest : public WalwatchTest {};

void ExpectNonDecreasingRvs(const std::vector<WatchEvent>& events) {
  for (size_t i = 1; i < events.size(); ++i) {
    ASSERT_LE(events[i - 1].rv(), events[i].rv())
        << "RV decreased at event " << i << ":\n" << Describe(events);
  }
}

TEST_F(OrderingTest, InterleavedTransactionsArriveInCommitOrder) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));

  PgConnection a = Connect(), b = Connect();
  a.Exec("BEGIN");
  b.Exec("BEGIN");
  InsertRow(a, Pod("c1", "default", "a1"));
  InsertRow(b, Pod("c1", "default", "b1"));
  InsertRow(a, Pod("c1", "default", "a2"));
  InsertRow(b, Pod("c1", "default", "b2"));
  uint64_t xa = CurrentXid(a), xb = CurrentXid(b);
  b.Exec("COMMIT");  // b started second and commits first
  a.Exec("COMMIT");

  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadEvents(watch, 4, &got, In(kEventWait))) << Describe(got);
  std::vector<std::string> names;
  for (const auto& e : got) names.push_back(e.name());
  EXPECT_EQ(names, (std::vector<std::string>{"b1", "b2", "a1", "a2"}))
      << Describe(got);
  ExpectNonDecreasingRvs(got);
  ExpectTransactionRvs(observer(), xb, got, 0, 2);
  ExpectTransactionRvs(observer(), xa, got, 2, 2);
  EXPECT_EQ(observer().PreviousCommitLsn(xa), observer().CommitLsn(xb));
}

TEST_F(OrderingTest, MultiRowTransactionIsWholeWithCommitLsnLast) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  // A transaction before, so "previous commit" is one walwatch has seen.
  uint64_t x_before = InsertRow(db(), Pod("c1", "default", "before"));

  Resource m1 = Pod("c1", "default", "m1"), m2 = Pod("c1", "default", "m2"),
           m3 = Pod("c1", "default", "m3");
  db().Exec("BEGIN");
  InsertRow(db(), m1);
  InsertRow(db(), m2);
  InsertRow(db(), m3);
  Resource m1b = m1;
  m1b.member_rv = "101";
  m1b.spec["nodeName"] = "node-7";
  UpdateRow(db(), m1b);
  DeleteRow(db(), m2);
  uint64_t x = CurrentXid(db());
  db().Exec("COMMIT");
  uint64_t x_after = InsertRow(db(), Pod("c1", "default", "after"));

  // One event per object, at its first change, with its net change: m1's
  // insert and update are one ADDED of its last state; m2's insert and
  // delete are nothing (watchserver/PROTOCOL.md, "Rows to events").
  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadEvents(watch, 4, &got, In(kEventWait))) << Describe(got);
  std::vector<std::string> seq;
  for (const auto& e : got) seq.push_back(e.type + " " + e.name());
  EXPECT_EQ(seq, (std::vector<std::string>{"ADDED before", "ADDED m1",
                                           "ADDED m3", "ADDED after"}))
      << Describe(got);
  ExpectNonDecreasingRvs(got);
  EXPECT_EQ(got[0].rv(), observer().CommitLsn(x_before));
  EXPECT_EQ(observer().PreviousCommitLsn(x), observer().CommitLsn(x_before))
      << "precondition: no other transaction between";
  ExpectTransactionRvs(observer(), x, got, 1, 2);
  EXPECT_EQ(got[3].rv(), observer().CommitLsn(x_after));
  // Objects within the transaction carry the event's RV too.
  EXPECT_EQ(got[1].object, m1b.Expected(got[1].rv()));
  EXPECT_EQ(got[2].object, m3.Expected(got[2].rv()));
}

TEST_F(OrderingTest, RemovingAClusterDeletesAll5000WithFullObjects) {
  constexpr int kRows = 5000;
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/clusters/doomed/api/v1/pods"));

  // One statement, 5000 rows, objects derived from a template pod.
  auto expected = [](int i) {
    return Pod("doomed", "ns", "p-" + std::to_string(i));
  };
  Resource tmpl = expected(0);
  uint64_t x_insert = std::stoull(db().QueryValue(
      "WITH ins AS (INSERT INTO resources (\"group\", version, resource, "
      "kind, cluster, namespace, name, owner_uid, uid, resource_version, "
      "object, created_at, synced_at) "
      "SELECT '', 'v1', 'pods', 'Pod', 'doomed', 'ns', 'p-' || i, '', "
      "'uid-doomed-ns-p-' || i, '100', "
      "jsonb_set(jsonb_set($1::jsonb, '{metadata,name}', to_jsonb('p-' || i)),"
      " '{metadata,uid}', to_jsonb('uid-doomed-ns-p-' || i)), now(), now() "
      "FROM generate_series(1, $2::int) AS i RETURNING 1) "
      "SELECT pg_current_xact_id()::text FROM ins LIMIT 1",
      {tmpl.Object().dump(), std::to_string(kRows)}));
  // Another cluster's pods stay.
  InsertRow(db(), Pod("kept", "ns", "p-1"));

  std::vector<WatchEvent> added;
  ASSERT_TRUE(ReadEvents(watch, kRows, &added, In(std::chrono::seconds(60))));
  ExpectTransactionRvs(observer(), x_insert, added, 0, kRows);

  uint64_t x_delete = std::stoull(db().QueryValue(
      "WITH del AS (DELETE FROM resources WHERE cluster = 'doomed' "
      "RETURNING 1) SELECT pg_current_xact_id()::text FROM del LIMIT 1"));
  ASSERT_EQ(observer().ChangeCount(x_delete), static_cast<size_t>(kRows));
  Resource marker = Pod("doomed", "ns", "marker");
  InsertRow(db(), marker);

  std::vector<WatchEvent> deleted;
  ASSERT_TRUE(ReadEvents(watch, kRows, &deleted, In(std::chrono::seconds(60))));
  std::set<std::string> names;
  for (int i = 0; i < kRows; ++i) {
    const auto& e = deleted[i];
    ASSERT_EQ(e.type, "DELETED") << "event " << i << ": " << e.raw.substr(0, 300);
    int n = std::stoi(e.name().substr(2));
    ASSERT_EQ(e.object, expected(n).Expected(e.rv()))
        << "event " << i << " is not the full last object: " << e.raw;
    names.insert(e.name());
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kRows));
  ExpectNonDecreasingRvs(deleted);
  ExpectTransactionRvs(observer(), x_delete, deleted, 0, kRows);
  WatchEvent next;
  ASSERT_TRUE(watch.NextEvent(&next, In(kEventWait)));
  EXPECT_EQ(next.name(), "marker") << "more than 5000 events: " << next.raw;
}

}  // namespace
}  // namespace walwatch::itest
