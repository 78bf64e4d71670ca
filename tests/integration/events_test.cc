// Row changes in `resources` become the watch events a client receives,
// where PostgreSQL differs from other databases (TOAST-omitted columns,
// wal2json's stream and walwatch's status timer), and what a watch request
// gets at the HTTP level. The row-to-event rules every database shares are
// support/row_events_cases.h's (row_events_test.cc here).
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
