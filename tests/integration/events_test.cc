// Row changes in `resources` become the watch events a client receives:
// type, object bytes, resourceVersion, and what must produce no event.
// Real PostgreSQL + wal2json + the walwatch binary, through its socket.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

class EventsTest : public WalwatchTest {};

// The harness's own LSN arithmetic, which every RV check relies on.
TEST(IntegrationSupport, LsnTextToDecimalResourceVersion) {
  EXPECT_EQ(ParseLsn("0/1558570"), 22381936u);
  EXPECT_EQ(ParseLsn("1/0"), uint64_t{1} << 32);
  EXPECT_EQ(FormatLsn(22381936), "0/1558570");
  EXPECT_THROW(ParseLsn("01558570"), PgError);
}

std::string RandomHex(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  static const char kHex[] = "0123456789abcdef";
  std::string s(n, '0');
  for (auto& c : s) c = kHex[rng() % 16];
  return s;
}

TEST_F(EventsTest, InsertUpdateDeleteGiveAddedModifiedDeleted) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));

  Resource pod = Pod("c1", "default", "p1");
  pod.member_rv = "4711";
  uint64_t x_insert = InsertRow(db(), pod);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  uint64_t c_insert = observer().CommitLsn(x_insert);
  EXPECT_TRUE(WireStartsWith(e, "ADDED"));
  EXPECT_EQ(e.type, "ADDED");
  EXPECT_EQ(e.rv(), c_insert) << "RV must be the commit LSN "
                              << FormatLsn(c_insert) << " in decimal";
  EXPECT_EQ(e.member_rv(), "4711");
  EXPECT_EQ(e.object, pod.Expected(c_insert)) << e.raw;

  Resource modified = pod;
  modified.member_rv = "4712";
  modified.spec["nodeName"] = "node-2";
  uint64_t x_update = UpdateRow(db(), modified);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  uint64_t c_update = observer().CommitLsn(x_update);
  EXPECT_TRUE(WireStartsWith(e, "MODIFIED"));
  EXPECT_EQ(e.rv(), c_update);
  EXPECT_GT(c_update, c_insert);
  EXPECT_EQ(e.object, modified.Expected(c_update)) << e.raw;

  uint64_t x_delete = DeleteRow(db(), modified);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  uint64_t c_delete = observer().CommitLsn(x_delete);
  EXPECT_TRUE(WireStartsWith(e, "DELETED"));
  EXPECT_EQ(e.rv(), c_delete);
  // The last full object, not just the key.
  EXPECT_EQ(e.object, modified.Expected(c_delete)) << e.raw;
}

// A write to a quiet table reaches watchers as soon as walwatch has read it,
// not when the next message (a keepalive, the next write, or walwatch's own
// status timer, here 29 s away) wakes the replication loop.
TEST_F(EventsTest, ALoneWriteIsDeliveredWithoutWaitingForTheNextMessage) {
  auto o = DefaultOptions();
  o.extra_args = {"--status-interval", "29s"};
  auto* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  for (int i = 0; i < 3; ++i) {
    InsertRow(db(), Pod("c1", "default", "alone-" + std::to_string(i)));
    WatchEvent e;
    ASSERT_TRUE(watch.NextEvent(&e, In(std::chrono::seconds(10))))
        << "write " << i << " was not delivered within 10 s";
    EXPECT_EQ(e.name(), "alone-" + std::to_string(i));
  }
}

TEST_F(EventsTest, NamedGroupResourceAndClusterScopedPaths) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww,
                        "/clusters/c1/apis/apps/v1/namespaces/ns-a/deployments"));
  Resource d = Deployment("c1", "ns-a", "d1");
  d.member_rv = "99";
  uint64_t x = InsertRow(db(), d);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  uint64_t c = observer().CommitLsn(x);
  EXPECT_EQ(e.type, "ADDED");
  EXPECT_EQ(e.object, d.Expected(c)) << e.raw;
  EXPECT_EQ(e.object.value("apiVersion", ""), "apps/v1");
}

TEST_F(EventsTest, UidChangeGivesDeletedOldThenAddedNew) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));

  Resource old_pod = Pod("c1", "default", "p1");
  old_pod.uid = "11111111-1111-1111-1111-111111111111";
  InsertRow(db(), old_pod);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  ASSERT_EQ(e.type, "ADDED");

  // Collector coalescing: Deleted then Added becomes one UPDATE, new uid.
  Resource new_pod = old_pod;
  new_pod.uid = "22222222-2222-2222-2222-222222222222";
  new_pod.member_rv = "500";
  new_pod.spec["nodeName"] = "node-9";
  uint64_t x = UpdateRow(db(), new_pod);
  uint64_t c = observer().CommitLsn(x);

  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadEvents(watch, 2, &got, In(kEventWait)));
  const WatchEvent& deleted = got[0];
  const WatchEvent& added = got[1];
  EXPECT_EQ(deleted.type, "DELETED");
  EXPECT_EQ(added.type, "ADDED");
  EXPECT_TRUE(WireStartsWith(deleted, "DELETED"));
  EXPECT_TRUE(WireStartsWith(added, "ADDED"));
  // Two events of one transaction (two objects: the uid differs): the first
  // carries commit - 1, the last this transaction's commit.
  ExpectTransactionRvs(observer(), x, got, 0, 2);
  EXPECT_EQ(deleted.object, old_pod.Expected(deleted.rv())) << deleted.raw;
  EXPECT_EQ(added.object, new_pod.Expected(c)) << added.raw;
  EXPECT_EQ(deleted.member_rv(), "100");
  EXPECT_EQ(added.member_rv(), "500");
}

TEST_F(EventsTest, EventRecordingUpdateGivesNoEvent) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));

  Resource pod = Pod("c1", "default", "p1");
  InsertRow(db(), pod);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  ASSERT_EQ(e.name(), "p1");

  uint64_t x_record = RecordKubeEvent(db(), pod, "Scheduled");
  // The update really reached the stream as a change of this table.
  ASSERT_EQ(observer().ChangeCount(x_record), 1u);

  Resource marker = Pod("c1", "default", "marker");
  uint64_t x_marker = InsertRow(db(), marker);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "ADDED") << e.raw;
  EXPECT_EQ(e.name(), "marker")
      << "the event-recording update produced an event: " << e.raw;
  EXPECT_EQ(e.rv(), observer().CommitLsn(x_marker));
}

TEST_F(EventsTest, ToastOmittedObjectIsTakenFromTheOldRow) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));

  // ~8 KB of random hex: stored out of line, so an UPDATE that leaves it
  // alone omits it from wal2json's `columns`.
  Resource big = Pod("c1", "default", "big");
  big.spec["blob"] = RandomHex(8192, 7);
  uint64_t x_insert = InsertRow(db(), big);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.object, big.Expected(observer().CommitLsn(x_insert)));

  // 1. Only an unmapped column changes: no event.
  uint64_t x_rv = std::stoull(db().QueryValue(
      "UPDATE resources SET resource_version = '101', synced_at = now() "
      "WHERE name = 'big' RETURNING pg_current_xact_id()::text"));
  ASSERT_EQ(observer().UpdateCarriesObject(x_rv), std::vector<bool>{false})
      << "precondition: the object must be TOAST-omitted from the UPDATE";
  Resource marker = Pod("c1", "default", "marker-1");
  InsertRow(db(), marker);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "marker-1")
      << "an update of resource_version alone produced an event: "
      << e.raw.substr(0, 300);

  // 2. `kind` changes, the object does not: MODIFIED with the full object
  // taken from the old tuple (watchserver/PROTOCOL.md, "Rows to events").
  uint64_t x_kind = std::stoull(db().QueryValue(
      "UPDATE resources SET kind = 'PodRenamed', synced_at = now() "
      "WHERE name = 'big' RETURNING pg_current_xact_id()::text"));
  ASSERT_EQ(observer().UpdateCarriesObject(x_kind), std::vector<bool>{false});
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  uint64_t c_kind = observer().CommitLsn(x_kind);
  EXPECT_EQ(e.type, "MODIFIED") << e.raw.substr(0, 300);
  EXPECT_EQ(e.rv(), c_kind);
  EXPECT_EQ(e.object, big.Expected(c_kind)) << "object must be complete";

  // 2b. The namespace column changes, the object does not: the row moved,
  // so DELETED (old) then ADDED (new), both with the full object.
  uint64_t x_ns = std::stoull(db().QueryValue(
      "UPDATE resources SET namespace = 'moved', synced_at = now() "
      "WHERE name = 'big' RETURNING pg_current_xact_id()::text"));
  ASSERT_EQ(observer().UpdateCarriesObject(x_ns), std::vector<bool>{false});
  {
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadEvents(watch, 2, &got, In(kEventWait)));
    EXPECT_EQ(got[0].type, "DELETED") << got[0].raw.substr(0, 300);
    EXPECT_EQ(got[1].type, "ADDED") << got[1].raw.substr(0, 300);
    ExpectTransactionRvs(observer(), x_ns, got, 0, 2);
    EXPECT_EQ(got[0].object, big.Expected(got[0].rv()));
    EXPECT_EQ(got[1].object, big.Expected(observer().CommitLsn(x_ns)));
  }

  // 3. The uid changes, the object does not: DELETED then ADDED, both full.
  uint64_t x_uid = std::stoull(db().QueryValue(
      "UPDATE resources SET uid = 'uid-renewed', synced_at = now() "
      "WHERE name = 'big' RETURNING pg_current_xact_id()::text"));
  ASSERT_EQ(observer().UpdateCarriesObject(x_uid), std::vector<bool>{false});
  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadEvents(watch, 2, &got, In(kEventWait)));
  EXPECT_EQ(got[0].type, "DELETED");
  EXPECT_EQ(got[1].type, "ADDED");
  ExpectTransactionRvs(observer(), x_uid, got, 0, 2);
  EXPECT_EQ(got[0].object, big.Expected(got[0].rv()));
  // Only the uid column changed; the object (and its metadata.uid) did not.
  EXPECT_EQ(got[1].object, big.Expected(observer().CommitLsn(x_uid)));

  // 4. DELETE of the out-of-line object: DELETED with all of it.
  uint64_t x_delete = std::stoull(db().QueryValue(
      "DELETE FROM resources WHERE name = 'big' "
      "RETURNING pg_current_xact_id()::text"));
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "DELETED");
  EXPECT_EQ(e.object, big.Expected(observer().CommitLsn(x_delete)));
}

TEST_F(EventsTest, WatchSeesOnlyItsResourceNamespaceAndCluster) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  struct Case {
    std::string path;
    std::vector<std::string> expected;  // names, in order, ending with a marker
    WatchClient watch;
  };
  Case cases[] = {
      {"/api/v1/pods",
       {"p-c1-a", "p-c1-b", "p-c2-a", "end-pod-c1", "end-pod"}, {}},
      {"/api/v1/namespaces/ns-a/pods", {"p-c1-a", "p-c2-a", "end-pod"}, {}},
      {"/clusters/c2/api/v1/pods", {"p-c2-a", "end-pod"}, {}},
      {"/clusters/c1/api/v1/namespaces/ns-b/pods", {"p-c1-b", "end-pod-c1"}, {}},
      {"/apis/apps/v1/deployments", {"d-c1-a", "d-c2-b", "end-deploy"}, {}},
      {"/clusters/c2/apis/apps/v1/namespaces/ns-b/deployments",
       {"d-c2-b", "end-deploy"}, {}},
  };
  for (auto& c : cases) ASSERT_TRUE(OpenWatch(c.watch, *ww, c.path));

  InsertRow(db(), Pod("c1", "ns-a", "p-c1-a"));
  InsertRow(db(), Deployment("c1", "ns-a", "d-c1-a"));
  InsertRow(db(), Pod("c1", "ns-b", "p-c1-b"));
  InsertRow(db(), Pod("c2", "ns-a", "p-c2-a"));
  InsertRow(db(), Deployment("c2", "ns-b", "d-c2-b"));
  // Markers: a reader stops at its last expected name.
  InsertRow(db(), Pod("c1", "ns-b", "end-pod-c1"));
  InsertRow(db(), Pod("c2", "ns-b", "end-pod"));
  InsertRow(db(), Deployment("c2", "ns-b", "end-deploy"));
  // ns-a sees "end-pod" only if it is in ns-a: add one there too.
  InsertRow(db(), Pod("c2", "ns-a", "end-pod"));

  for (auto& c : cases) {
    SCOPED_TRACE(c.path);
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadUntilName(c.watch, c.expected.back(), &got, In(kEventWait)))
        << "received so far:\n" << Describe(got);
    std::vector<std::string> names;
    for (const auto& e : got) names.push_back(e.name());
    EXPECT_EQ(names, c.expected) << Describe(got);
  }
}

TEST_F(EventsTest, FreshResourceVersionStartsFromNow) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient first;
  ASSERT_TRUE(OpenWatch(first, *ww, "/api/v1/pods"));
  InsertRow(db(), Pod("c1", "default", "before"));
  WatchEvent e;
  ASSERT_TRUE(first.NextEvent(&e, In(kEventWait)));  // walwatch has it now
  ASSERT_EQ(e.name(), "before");

  WatchClient later;
  ASSERT_TRUE(OpenWatch(later, *ww, "/api/v1/pods"));
  InsertRow(db(), Pod("c1", "default", "after"));
  ASSERT_TRUE(later.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "after") << "a watch from a fresh RV got an event "
                                  "from before it started: " << e.raw;
}

TEST_F(EventsTest, NonResourcePathIs404AndBadResourceVersionIs400) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  {
    // A resource the table holds no row of streams (unseen_resources_test).
    WatchClient watch;
    ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/secrets"));
  }
  {
    WatchClient watch;
    ASSERT_TRUE(watch.Open(ww->socket_path(), "/apis/example.com/v1?watch=1",
                           In(kEventWait)));
    EXPECT_EQ(watch.status(), 404) << watch.body();
    EXPECT_EQ(watch.content_type().rfind("application/json", 0), 0u);
    auto status = nlohmann::json::parse(watch.body(), nullptr, false);
    ASSERT_TRUE(status.is_object()) << watch.body();
    EXPECT_EQ(status.value("kind", ""), "Status");
    EXPECT_EQ(status.value("status", ""), "Failure");
    EXPECT_EQ(status.value("code", 0), 404);
  }
  for (std::string rv : {"abc", "-1", "12x", "99999999999999999999999"}) {
    SCOPED_TRACE("resourceVersion=" + rv);
    WatchClient watch;
    ASSERT_TRUE(watch.Open(ww->socket_path(),
                           "/api/v1/pods?watch=1&resourceVersion=" + rv,
                           In(kEventWait)));
    EXPECT_EQ(watch.status(), 400) << watch.body();
    auto status = nlohmann::json::parse(watch.body(), nullptr, false);
    ASSERT_TRUE(status.is_object()) << watch.body();
    EXPECT_EQ(status.value("kind", ""), "Status");
    EXPECT_EQ(status.value("code", 0), 400);
  }
}

TEST_F(EventsTest, TimeoutSecondsEndsTheStreamCleanly) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(watch.Open(ww->socket_path(),
                         "/api/v1/pods?watch=1&timeoutSeconds=1&"
                         "resourceVersion=" + std::to_string(FreshRv(*ww)),
                         In(kEventWait)));
  ASSERT_EQ(watch.status(), 200) << watch.body();
  InsertRow(db(), Pod("c1", "default", "p1"));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "p1");
  // The final chunk, not a dropped connection (ExpectEnd tells them apart).
  EXPECT_TRUE(watch.ExpectEnd(In(std::chrono::seconds(10))));
}

TEST_F(EventsTest, ResourceVersionFromTheFutureIs504) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  uint64_t x = InsertRow(db(), Pod("c1", "default", "p1"));
  uint64_t future = observer().CommitLsn(x) + (uint64_t{1} << 40);
  WatchClient watch;
  ASSERT_TRUE(watch.Open(ww->socket_path(),
                         WatchTarget("/api/v1/pods", future),
                         In(kEventWait)));
  EXPECT_EQ(watch.status(), 504) << watch.body();
  auto status = nlohmann::json::parse(watch.body(), nullptr, false);
  ASSERT_TRUE(status.is_object()) << watch.body();
  EXPECT_EQ(status.value("kind", ""), "Status");
  EXPECT_EQ(status.value("code", 0), 504);
  EXPECT_EQ(status.value("/details/causes/0/reason"_json_pointer, std::string()),
            "ResourceVersionTooLarge")
      << watch.body();
}

}  // namespace
}  // namespace walwatch::itest
