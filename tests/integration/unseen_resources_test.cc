// Watches of resources the table holds no row of (issue 18, part 1), from
// the consumer's side: an APIServer opens its watches when it starts, before
// a collector has written a row of every resource, after a cluster was
// removed, or after walwatch restarted on an emptied resource. Each such
// watch must stream (200), deliver the resource's events as soon as rows
// arrive, and carry the right kind in its bookmarks and WatchList end
// marker: the table's, else the --kinds file's, else the built-in table's
// (watchserver/PROTOCOL.md, "Kinds").
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

constexpr char kInitialEventsEnd[] = "k8s.io/initial-events-end";

// A namespaced custom resource, as Clusterpedia stores a CR.
Resource Custom(const std::string& resource, const std::string& kind,
                const std::string& cluster, const std::string& name) {
  Resource r;
  r.group = "example.com";
  r.version = "v1";
  r.resource = resource;
  r.kind = kind;
  r.cluster = cluster;
  r.ns = "default";
  r.name = name;
  r.uid = "uid-" + cluster + "-" + resource + "-" + name;
  r.spec = {{"size", 1}};
  return r;
}

class UnseenResourcesTest : public WalwatchTest {
 protected:
  // foobars.example.com is declared: a guess from the plural would say
  // "Foobar".
  std::string WriteKindsFile() {
    std::string path = TempPath("kinds.json");
    std::ofstream(path) << R"([{"group":"example.com","version":"v1",)"
                           R"("resource":"foobars","kind":"FooBar"}])";
    return path;
  }

  // A walwatch on the test's (empty, unless the test wrote rows) table, with
  // the kinds file and bookmarks every second. `slot` reuses a slot (a
  // restart); empty: a new one.
  WalwatchProcess* Start(const std::string& slot = "") {
    WalwatchOptions o = DefaultOptions();
    if (!slot.empty()) o.slot = slot;
    o.extra_args = {"--kinds", WriteKindsFile(), "--bookmark-interval", "1s"};
    WalwatchProcess& p = Launch(std::move(o));
    auto ready = p.WaitReady(std::chrono::seconds(60));
    if (!ready) {
      ADD_FAILURE() << ready.message();
      return nullptr;
    }
    return &p;
  }

  // A WatchList of `path`: 200, no initial events (the table holds no row
  // of it), then the end marker. Returns the marker's object.
  ::testing::AssertionResult OpenEmptyWatchList(WatchClient& watch,
                                                const WalwatchProcess& ww,
                                                const std::string& path,
                                                nlohmann::json* marker) {
    auto opened = watch.OpenState(ww.socket_path(),
                             path +
                                 "?watch=1&sendInitialEvents=true&"
                                 "resourceVersionMatch=NotOlderThan&"
                                 "allowWatchBookmarks=true",
                             In(kEventWait));
    if (!opened) return opened;
    if (watch.status() != 200) {
      return ::testing::AssertionFailure() << "GET " << watch.target()
                                           << ": HTTP " << watch.status()
                                           << " " << watch.body();
    }
    WatchEvent e;
    auto next = watch.NextEvent(&e, In(kEventWait));
    if (!next) return next;
    if (e.type != "BOOKMARK" ||
        e.object["metadata"].value("annotations", nlohmann::json::object())
                .value(kInitialEventsEnd, "") != "true") {
      return ::testing::AssertionFailure()
             << "GET " << watch.target()
             << ": the first event is not the initial-events-end bookmark: "
             << e.raw;
    }
    *marker = e.object;
    return ::testing::AssertionSuccess();
  }

  // Reads until the next bookmark (skipping events), which must come within
  // the deadline (--bookmark-interval is 1s).
  ::testing::AssertionResult NextBookmark(WatchClient& watch,
                                          nlohmann::json* object) {
    const auto deadline = In(kEventWait);
    for (;;) {
      WatchEvent e;
      auto next = watch.NextEvent(&e, deadline);
      if (!next) return next << " (waiting for a bookmark)";
      if (e.type == "BOOKMARK") {
        *object = e.object;
        return ::testing::AssertionSuccess();
      }
    }
  }

  // Reads until an event of `type` for `name`, which must come.
  ::testing::AssertionResult NextEventOf(WatchClient& watch,
                                         const std::string& type,
                                         const std::string& name,
                                         WatchEvent* out) {
    const auto deadline = In(kEventWait);
    for (;;) {
      auto next = watch.NextEvent(out, deadline);
      if (!next) return next << " (waiting for " << type << " " << name << ")";
      if (out->type == "BOOKMARK") continue;
      if (out->type == type && out->name() == name) {
        return ::testing::AssertionSuccess();
      }
      return ::testing::AssertionFailure()
             << "expected " << type << " " << name << ", got " << out->raw;
    }
  }
};

#define EXPECT_KIND(object, want_kind, want_api_version)          \
  do {                                                             \
    EXPECT_EQ((object).value("kind", ""), want_kind) << (object);  \
    EXPECT_EQ((object).value("apiVersion", ""), want_api_version)  \
        << (object);                                               \
  } while (0)

// (1) A resource with no row: the watch streams, its marker and bookmarks
// carry the built-in, declared or guessed kind; its first row arrives as
// ADDED, and from then on the bookmarks carry the row's kind.
TEST_F(UnseenResourcesTest, AWatchOfAResourceWithNoRowStreamsItsFirstRow) {
  WalwatchProcess* ww = Start();
  ASSERT_NE(ww, nullptr);

  const struct {
    std::string path, kind, api_version;
  } kUnseen[] = {
      {"/api/v1/pods", "Pod", "v1"},
      {"/clusters/c1/apis/batch/v1/namespaces/default/cronjobs", "CronJob",
       "batch/v1"},
      {"/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice",
       "discovery.k8s.io/v1"},
      {"/apis/example.com/v1/foobars", "FooBar", "example.com/v1"},
      // Known to nothing: guessed from the plural (PROTOCOL.md, "Kinds").
      {"/apis/example.com/v1/gizmos", "Gizmo", "example.com/v1"},
  };
  for (const auto& u : kUnseen) {
    SCOPED_TRACE(u.path);
    WatchClient list;
    nlohmann::json marker;
    ASSERT_TRUE(OpenEmptyWatchList(list, *ww, u.path, &marker));
    EXPECT_KIND(marker, u.kind, u.api_version);
    nlohmann::json bookmark;
    ASSERT_TRUE(NextBookmark(list, &bookmark));
    EXPECT_KIND(bookmark, u.kind, u.api_version);
    WatchClient plain;  // from a fresh RV, no initial state
    ASSERT_TRUE(OpenWatch(plain, *ww, u.path));
  }

  // The rows arrive: each open watch gets its ADDED.
  WatchClient pods, foobars, gizmos;
  nlohmann::json marker;
  ASSERT_TRUE(OpenEmptyWatchList(pods, *ww, "/api/v1/pods", &marker));
  ASSERT_TRUE(
      OpenEmptyWatchList(foobars, *ww, "/apis/example.com/v1/foobars", &marker));
  ASSERT_TRUE(
      OpenEmptyWatchList(gizmos, *ww, "/apis/example.com/v1/gizmos", &marker));
  EXPECT_KIND(marker, "Gizmo", "example.com/v1");
  InsertRow(db(), Pod("c1", "default", "first-pod"));
  InsertRow(db(), Custom("foobars", "FooBar", "c1", "first-foobar"));
  // The table's kind is not the guess: the row's kind wins from now on.
  InsertRow(db(), Custom("gizmos", "GizMo", "c1", "first-gizmo"));
  WatchEvent e;
  ASSERT_TRUE(NextEventOf(pods, "ADDED", "first-pod", &e));
  EXPECT_KIND(e.object, "Pod", "v1");
  ASSERT_TRUE(NextEventOf(foobars, "ADDED", "first-foobar", &e));
  EXPECT_KIND(e.object, "FooBar", "example.com/v1");
  ASSERT_TRUE(NextEventOf(gizmos, "ADDED", "first-gizmo", &e));
  EXPECT_KIND(e.object, "GizMo", "example.com/v1");
  nlohmann::json bookmark;
  ASSERT_TRUE(NextBookmark(pods, &bookmark));
  EXPECT_KIND(bookmark, "Pod", "v1");
  ASSERT_TRUE(NextBookmark(gizmos, &bookmark));
  EXPECT_KIND(bookmark, "GizMo", "example.com/v1");

  // A path that is not a resource path is still a 404.
  for (std::string target : {"/apis/example.com/v1?watch=1",
                             "/api/v1/namespaces/default?watch=1",
                             "/apis?watch=1"}) {
    SCOPED_TRACE(target);
    WatchClient w;
    ASSERT_TRUE(w.Open(ww->socket_path(), target, In(kEventWait)));
    EXPECT_EQ(w.status(), 404) << w.body();
  }
}

// (2) A resource whose rows were all deleted: a new watch still streams,
// with the kind its rows had, and gets the next row.
TEST_F(UnseenResourcesTest, AnEmptiedResourceStillStreams) {
  WalwatchProcess* ww = Start();
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/apis/example.com/v1/gizmos"));
  Resource a = Custom("gizmos", "GizMo", "c1", "a");
  Resource b = Custom("gizmos", "GizMo", "c2", "b");
  InsertRow(db(), a);
  InsertRow(db(), b);
  WatchEvent e;
  ASSERT_TRUE(NextEventOf(watch, "ADDED", "a", &e));
  ASSERT_TRUE(NextEventOf(watch, "ADDED", "b", &e));
  db().Exec("DELETE FROM resources WHERE resource = 'gizmos'");
  // One statement, one transaction: its two DELETEDs, in the table's order.
  std::vector<std::string> deleted;
  while (deleted.size() < 2) {
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
    if (e.type == "BOOKMARK") continue;
    EXPECT_EQ(e.type, "DELETED") << e.raw;
    deleted.push_back(e.name());
  }
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(db().QueryValue(
                "SELECT count(*) FROM resources WHERE resource = 'gizmos'"),
            "0");

  // New watches of the emptied resource: 200, nothing in the state, and the
  // kind the table's rows had (walwatch has seen it).
  WatchClient list;
  nlohmann::json marker;
  ASSERT_TRUE(
      OpenEmptyWatchList(list, *ww, "/apis/example.com/v1/gizmos", &marker));
  EXPECT_KIND(marker, "GizMo", "example.com/v1");
  WatchClient plain;
  ASSERT_TRUE(OpenWatch(plain, *ww, "/clusters/c1/apis/example.com/v1/gizmos"));
  Resource c = Custom("gizmos", "GizMo", "c1", "c");
  InsertRow(db(), c);
  ASSERT_TRUE(NextEventOf(list, "ADDED", "c", &e));
  ASSERT_TRUE(NextEventOf(plain, "ADDED", "c", &e));
  ASSERT_TRUE(NextEventOf(watch, "ADDED", "c", &e));
}

// (3) walwatch restarts after the last row of a resource was deleted: it
// finds no row of it in the table, and still serves it with the right kind
// where one can be known (built in, declared).
TEST_F(UnseenResourcesTest, ARestartAfterTheLastRowWasDeletedStillStreams) {
  WalwatchProcess* first = Start();
  ASSERT_NE(first, nullptr);
  const std::string slot = first->options().slot;
  WatchClient pods, gizmos;
  ASSERT_TRUE(OpenWatch(pods, *first, "/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(gizmos, *first, "/apis/example.com/v1/gizmos"));
  Resource pod = Pod("c1", "default", "last-pod");
  Resource foobar = Custom("foobars", "FooBar", "c1", "last-foobar");
  Resource gizmo = Custom("gizmos", "GizMo", "c1", "last-gizmo");
  for (const Resource* r : {&pod, &foobar, &gizmo}) InsertRow(db(), *r);
  for (const Resource* r : {&pod, &foobar, &gizmo}) DeleteRow(db(), *r);
  WatchEvent e;
  ASSERT_TRUE(NextEventOf(pods, "ADDED", "last-pod", &e));
  ASSERT_TRUE(NextEventOf(pods, "DELETED", "last-pod", &e));
  // The gizmo's DELETED is the last write: once a watch has it, the first
  // walwatch has streamed everything.
  ASSERT_TRUE(NextEventOf(gizmos, "ADDED", "last-gizmo", &e));
  ASSERT_TRUE(NextEventOf(gizmos, "DELETED", "last-gizmo", &e));
  ASSERT_EQ(db().QueryValue("SELECT count(*) FROM resources"), "0");
  first->Stop();

  struct Expected {
    std::string path;
    std::vector<std::string> kinds;  // any of them
  };
  auto check = [&](WalwatchProcess& ww, const std::vector<Expected>& cases) {
    for (const Expected& u : cases) {
      SCOPED_TRACE(u.path);
      WatchClient list;
      nlohmann::json marker;
      ASSERT_TRUE(OpenEmptyWatchList(list, ww, u.path, &marker));
      EXPECT_NE(std::find(u.kinds.begin(), u.kinds.end(),
                          marker.value("kind", "")),
                u.kinds.end())
          << marker;
      nlohmann::json bookmark;
      ASSERT_TRUE(NextBookmark(list, &bookmark));
      EXPECT_EQ(bookmark.value("kind", ""), marker.value("kind", ""))
          << bookmark;
      EXPECT_EQ(bookmark.value("apiVersion", ""),
                marker.value("apiVersion", ""));
    }
  };

  // The same slot, as a systemd restart: the table has no row of any of
  // them.
  WalwatchProcess* second = Start(slot);
  ASSERT_NE(second, nullptr);
  check(*second, {
      {"/api/v1/pods", {"Pod"}},                     // built in
      {"/apis/example.com/v1/foobars", {"FooBar"}},  // declared
      // Neither: the slot may send the deleted rows' transactions again
      // (--replay-window), and walwatch sees the kind in them; else the
      // kind went with the last row, and a guess is what is left
      // (PROTOCOL.md, "Kinds": declare such resources).
      {"/apis/example.com/v1/gizmos", {"GizMo", "Gizmo"}},
  });
  if (HasFatalFailure()) return;
  WatchClient after;
  ASSERT_TRUE(OpenWatch(after, *second, "/api/v1/pods"));
  InsertRow(db(), Pod("c1", "default", "next-pod"));
  ASSERT_TRUE(NextEventOf(after, "ADDED", "next-pod", &e));
  EXPECT_KIND(e.object, "Pod", "v1");
  DeleteRow(db(), Pod("c1", "default", "next-pod"));
  ASSERT_TRUE(NextEventOf(after, "DELETED", "next-pod", &e));
  second->Stop();

  // A new slot, as a new pod with --slot-from: nothing of the past is sent
  // again, so the undeclared resource's kind can only be guessed.
  WalwatchProcess* third = Start();
  ASSERT_NE(third, nullptr);
  check(*third, {
      {"/api/v1/pods", {"Pod"}},
      {"/apis/example.com/v1/foobars", {"FooBar"}},
      {"/apis/example.com/v1/gizmos", {"Gizmo"}},
  });
}

// (4) The kinds of the resources the table holds when walwatch starts come
// from the table (LoadCatalog), not from the stream: a new slot sends none
// of those rows, yet each resource's bookmarks carry its rows' kind, which
// no guess from the plural gives. Resources of the core group, of groups
// and versions on either side of each other, and with rows in several
// clusters: the startup query steps from one (group, version, resource) to
// the next through the index, and must not skip one.
TEST_F(UnseenResourcesTest, TheKindsOfTheTablesResourcesAreKnownAtStartup) {
  const struct {
    std::string group, version, resource, kind, path;
  } kInTable[] = {
      {"", "v1", "thingamajigs", "ThingaMaJig", "/api/v1/thingamajigs"},
      {"a.example.com", "v1", "gizmos", "GizMoA",
       "/apis/a.example.com/v1/gizmos"},
      {"example.com", "v1", "gizmos", "GizMo", "/apis/example.com/v1/gizmos"},
      {"example.com", "v1", "widgetses", "WidGet",
       "/apis/example.com/v1/widgetses"},
      {"example.com", "v1beta1", "gizmos", "GizMoBeta",
       "/apis/example.com/v1beta1/gizmos"},
      {"z.example.io", "v2", "doodads", "DooDad", "/apis/z.example.io/v2/doodads"},
  };
  int uid = 0;
  for (const auto& t : kInTable) {
    for (const char* cluster : {"c1", "c2", "c3"}) {
      Resource r = Custom(t.resource, t.kind, cluster, "one");
      r.group = t.group;
      r.version = t.version;
      r.uid = "uid-kinds-" + std::to_string(++uid);
      InsertRow(db(), r);
    }
  }
  WalwatchProcess* ww = Start();
  ASSERT_NE(ww, nullptr);
  for (const auto& t : kInTable) {
    SCOPED_TRACE(t.path);
    nlohmann::json bookmark;
    ASSERT_TRUE(FirstBookmarkOn(ww->socket_path(), t.path, &bookmark));
    EXPECT_KIND(bookmark, t.kind,
                t.group.empty() ? t.version : t.group + "/" + t.version);
  }
}

}  // namespace
}  // namespace walwatch::itest
