#include "tests/integration/support/row_events_cases.h"

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/support/watch_rows.h"

namespace walwatch::itest {

namespace {

// `r` as ModelSql writes it: its object exactly r.Object(), labels and all.
ModelObjectSpec Spec(const Resource& r) {
  ModelObjectSpec spec{r, {}};
  for (const auto& [k, v] : r.labels.items()) {
    spec.labels[k] = v.get<std::string>();
  }
  return spec;
}

// Autocommit writes; each returns the commit RV walwatch gives it.
uint64_t Insert(ModelSql& sql, const Resource& r) {
  sql.Insert(Spec(r));
  return sql.LastCommitRv();
}
uint64_t Update(ModelSql& sql, const Resource& r) {
  sql.Update(Spec(r));
  return sql.LastCommitRv();
}
uint64_t Delete(ModelSql& sql, const Resource& r) {
  sql.Delete(r);
  return sql.LastCommitRv();
}

::testing::AssertionResult OpenWatch(WatchClient& watch,
                                     const WalwatchProcess& walwatch,
                                     const std::string& path) {
  return OpenWatchOn(watch, walwatch.socket_path(), path, std::nullopt);
}

// Most cases' start: walwatch on the model database, a SQL connection, and
// a watch of `path`, opened before any write.
struct Watched {
  WalwatchProcess* ww = nullptr;
  std::unique_ptr<ModelSql> sql;
  WatchClient watch;
};
void StartWatching(ModelDatabase& db, const std::string& path, Watched* w) {
  w->ww = db.StartModelWalwatch(db.ModelWalwatchOptions());
  ASSERT_NE(w->ww, nullptr);
  w->sql = db.ConnectModelSql();
  ASSERT_TRUE(OpenWatch(w->watch, *w->ww, path));
}

}  // namespace

void InsertUpdateDeleteGiveAddedModifiedDeleted(ModelDatabase& db) {
  Watched w;
  ASSERT_NO_FATAL_FAILURE(StartWatching(db, "/api/v1/pods", &w));
  auto& [ww, sql, watch] = w;

  Resource pod = Pod("c1", "default", "p1");
  pod.member_rv = "4711";
  const uint64_t c_insert = Insert(*sql, pod);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "ADDED"));
  EXPECT_EQ(e.type, "ADDED");
  EXPECT_EQ(e.rv(), c_insert) << "the RV must be the commit's, " << c_insert;
  EXPECT_EQ(e.member_rv(), "4711");
  EXPECT_EQ(e.object, pod.Expected(c_insert)) << e.raw;

  Resource modified = pod;
  modified.member_rv = "4712";
  modified.spec["nodeName"] = "node-2 \"é\"";
  const uint64_t c_update = Update(*sql, modified);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "MODIFIED"));
  EXPECT_EQ(e.rv(), c_update);
  EXPECT_GT(c_update, c_insert);
  EXPECT_EQ(e.object, modified.Expected(c_update)) << e.raw;

  const uint64_t c_delete = Delete(*sql, modified);
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "DELETED"));
  EXPECT_EQ(e.rv(), c_delete);
  // The last full object (the old row), not just the key.
  EXPECT_EQ(e.object, modified.Expected(c_delete)) << e.raw;
}

void NamedGroupResourceAndClusterScopedPaths(ModelDatabase& db) {
  Watched w;
  ASSERT_NO_FATAL_FAILURE(StartWatching(
      db, "/clusters/c1/apis/apps/v1/namespaces/ns-a/deployments", &w));
  auto& [ww, sql, watch] = w;
  Resource d = Deployment("c1", "ns-a", "d1");
  d.member_rv = "99";
  const uint64_t c = Insert(*sql, d);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "ADDED");
  EXPECT_EQ(e.object, d.Expected(c)) << e.raw;
  EXPECT_EQ(e.object.value("apiVersion", ""), "apps/v1");
}

// Clusterpedia's coalescing: a Deleted then Added object is one UPDATE with
// a new uid. Watchers see the old object go and the new one come, in one
// transaction: DELETED at c - 1, ADDED at c.
void ANewUidIsDeletedThenAdded(ModelDatabase& db) {
  Watched w;
  ASSERT_NO_FATAL_FAILURE(StartWatching(db, "/api/v1/pods", &w));
  auto& [ww, sql, watch] = w;

  Resource old_pod = Pod("c1", "default", "p1");
  old_pod.uid = "11111111-1111-1111-1111-111111111111";
  Insert(*sql, old_pod);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  ASSERT_EQ(e.type, "ADDED");

  Resource new_pod = old_pod;
  new_pod.uid = "22222222-2222-2222-2222-222222222222";
  new_pod.member_rv = "500";
  new_pod.spec["nodeName"] = "node-9";
  const uint64_t c = Update(*sql, new_pod);

  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadEvents(watch, 2, &got, In(kEventWait)));
  const WatchEvent& deleted = got[0];
  const WatchEvent& added = got[1];
  EXPECT_EQ(deleted.type, "DELETED");
  EXPECT_EQ(added.type, "ADDED");
  EXPECT_TRUE(WireStartsWith(deleted, "DELETED"));
  EXPECT_TRUE(WireStartsWith(added, "ADDED"));
  // Two events of one transaction (two objects: the uid differs): the first
  // carries c - 1, the last the commit c.
  EXPECT_EQ(deleted.rv(), c - 1);
  EXPECT_EQ(added.rv(), c);
  EXPECT_EQ(deleted.object, old_pod.Expected(c - 1)) << deleted.raw;
  EXPECT_EQ(added.object, new_pod.Expected(c)) << added.raw;
  EXPECT_EQ(deleted.member_rv(), "100");
  EXPECT_EQ(added.member_rv(), "500");
}

// Clusterpedia records Kubernetes events on the row (its events columns);
// the object does not change, and watchers see nothing.
void EventRecordingGivesNoEvent(ModelDatabase& db) {
  Watched w;
  ASSERT_NO_FATAL_FAILURE(StartWatching(db, "/api/v1/pods", &w));
  auto& [ww, sql, watch] = w;

  Resource pod = Pod("c1", "default", "p1");
  uint64_t c_before = Insert(*sql, pod);
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  ASSERT_EQ(e.name(), "p1");

  for (const char* reason : {"Scheduled", "Pulled"}) {
    sql->RecordKubeEvent(pod, reason);
    // The recording really reached the database's log as a commit of its
    // own (LastCommitRv finds it there, or throws).
    const uint64_t c_record = sql->LastCommitRv();
    ASSERT_GT(c_record, c_before) << reason;
    c_before = c_record;
  }

  const uint64_t c_marker = Insert(*sql, Pod("c1", "default", "marker"));
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "ADDED") << e.raw;
  EXPECT_EQ(e.name(), "marker")
      << "the event-recording update produced an event: " << e.raw;
  EXPECT_EQ(e.rv(), c_marker);
}

// Events follow commit order, not the order the changes were made in.
void ConcurrentTransactionsArriveInCommitOrder(ModelDatabase& db) {
  auto* ww = db.StartModelWalwatch(db.ModelWalwatchOptions());
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  auto a = db.ConnectModelSql();
  auto b = db.ConnectModelSql();
  a->Begin();
  b->Begin();
  a->Insert(Spec(Pod("c1", "default", "a1")));
  b->Insert(Spec(Pod("c1", "default", "b1")));
  a->Insert(Spec(Pod("c1", "default", "a2")));
  b->Insert(Spec(Pod("c1", "default", "b2")));
  b->Commit();  // b began second and commits first
  a->Commit();
  const uint64_t c_b = b->LastCommitRv();
  const uint64_t c_a = a->LastCommitRv();
  ASSERT_LT(c_b, c_a);

  std::vector<WatchEvent> events;
  ASSERT_TRUE(ReadEvents(watch, 4, &events, In(kEventWait)));
  std::vector<std::string> names;
  for (const auto& e : events) names.push_back(e.name());
  EXPECT_EQ(names, (std::vector<std::string>{"b1", "b2", "a1", "a2"}))
      << Describe(events);
  // The last event of a transaction carries its commit, the others c - 1.
  EXPECT_EQ(events[0].rv(), c_b - 1) << Describe(events);
  EXPECT_EQ(events[1].rv(), c_b) << Describe(events);
  EXPECT_EQ(events[2].rv(), c_a - 1) << Describe(events);
  EXPECT_EQ(events[3].rv(), c_a) << Describe(events);
}

// Removing a cluster is one DELETE of thousands of rows: one transaction of
// DELETED events, each with its full old object, all but the last at
// c - 1. Another cluster's watch sees none of it.
void AClustersRemovalOf5000RowsIsOneTransaction(ModelDatabase& db) {
  constexpr int kRows = 5000;
  auto* ww = db.StartModelWalwatch(db.ModelWalwatchOptions());
  ASSERT_NE(ww, nullptr);
  auto sql = db.ConnectModelSql();
  auto pod = [](int i) { return Pod("gone", "ns", "p" + std::to_string(i)); };
  for (int batch = 0; batch < kRows / 500; ++batch) {
    sql->Begin();
    for (int i = batch * 500; i < (batch + 1) * 500; ++i) {
      sql->Insert(Spec(pod(i)));
    }
    sql->Commit();
  }
  Insert(*sql, Pod("stays", "ns", "kept"));
  WatchClient all, gone, stays;
  ASSERT_TRUE(OpenWatch(all, *ww, "/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(gone, *ww, "/clusters/gone/api/v1/pods"));
  ASSERT_TRUE(OpenWatch(stays, *ww, "/clusters/stays/api/v1/pods"));

  ASSERT_EQ(sql->RemoveCluster("gone"), static_cast<size_t>(kRows));
  const uint64_t c = sql->LastCommitRv();
  for (WatchClient* w : {&all, &gone}) {
    SCOPED_TRACE(w->target());
    std::vector<WatchEvent> events;
    ASSERT_TRUE(ReadEvents(*w, kRows, &events, In(std::chrono::seconds(60))));
    size_t not_deleted = 0, not_previous = 0, not_full = 0;
    std::set<std::string> names;
    for (size_t i = 0; i < events.size(); ++i) {
      const WatchEvent& e = events[i];
      not_deleted += e.type != "DELETED";
      not_previous += i + 1 < events.size() && e.rv() != c - 1;
      const std::string name = e.name();
      names.insert(name);
      not_full += name.size() < 2 ||
                  e.object != pod(std::stoi(name.substr(1))).Expected(e.rv());
    }
    EXPECT_EQ(not_deleted, 0u);
    EXPECT_EQ(not_previous, 0u);
    EXPECT_EQ(not_full, 0u) << "DELETED events without their full old object";
    EXPECT_EQ(names.size(), static_cast<size_t>(kRows));
    EXPECT_EQ(events.back().rv(), c);
  }
  const uint64_t c_later = Insert(*sql, Pod("stays", "ns", "later"));
  WatchEvent e;
  ASSERT_TRUE(stays.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "later") << "the other cluster's watch saw " << e.raw;
  EXPECT_EQ(e.rv(), c_later);
  // Nothing more after the removal on the removed cluster's watch: the next
  // event there is a later write of that cluster.
  Insert(*sql, Pod("gone", "ns", "back"));
  ASSERT_TRUE(gone.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "back") << "more than " << kRows << " events: " << e.raw;
}

void WatchSeesOnlyItsResourceNamespaceAndCluster(ModelDatabase& db) {
  auto* ww = db.StartModelWalwatch(db.ModelWalwatchOptions());
  ASSERT_NE(ww, nullptr);
  auto sql = db.ConnectModelSql();
  struct Case {
    std::string path;
    std::vector<std::string> expected;  // names, in order, ending with a marker
    WatchClient watch;
  };
  Case cases[] = {
      {"/api/v1/pods",
       {"p-c1-a", "p-c1-b", "p-c2-a", "end-pod-c1", "end-pod"},
       {}},
      {"/api/v1/namespaces/ns-a/pods", {"p-c1-a", "p-c2-a", "end-pod"}, {}},
      {"/clusters/c2/api/v1/pods", {"p-c2-a", "end-pod"}, {}},
      {"/clusters/c1/api/v1/namespaces/ns-b/pods",
       {"p-c1-b", "end-pod-c1"},
       {}},
      {"/apis/apps/v1/deployments", {"d-c1-a", "d-c2-b", "end-deploy"}, {}},
      {"/clusters/c2/apis/apps/v1/namespaces/ns-b/deployments",
       {"d-c2-b", "end-deploy"},
       {}},
  };
  for (auto& c : cases) ASSERT_TRUE(OpenWatch(c.watch, *ww, c.path));

  sql->Insert(Spec(Pod("c1", "ns-a", "p-c1-a")));
  sql->Insert(Spec(Deployment("c1", "ns-a", "d-c1-a")));
  sql->Insert(Spec(Pod("c1", "ns-b", "p-c1-b")));
  sql->Insert(Spec(Pod("c2", "ns-a", "p-c2-a")));
  sql->Insert(Spec(Deployment("c2", "ns-b", "d-c2-b")));
  // Markers: a reader stops at its last expected name.
  sql->Insert(Spec(Pod("c1", "ns-b", "end-pod-c1")));
  sql->Insert(Spec(Pod("c2", "ns-b", "end-pod")));
  sql->Insert(Spec(Deployment("c2", "ns-b", "end-deploy")));
  // ns-a sees "end-pod" only if it is in ns-a: add one there too.
  sql->Insert(Spec(Pod("c2", "ns-a", "end-pod")));

  for (auto& c : cases) {
    SCOPED_TRACE(c.path);
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadUntilName(c.watch, c.expected.back(), &got, In(kEventWait)))
        << "received so far:\n"
        << Describe(got);
    std::vector<std::string> names;
    for (const auto& e : got) names.push_back(e.name());
    EXPECT_EQ(names, c.expected) << Describe(got);
  }
}

// Label and field selectors, namespaces and clusters.
void SelectorsNamespacesAndClustersFilter(ModelDatabase& db) {
  auto* ww = db.StartModelWalwatch(db.ModelWalwatchOptions());
  ASSERT_NE(ww, nullptr);
  auto sql = db.ConnectModelSql();
  const uint64_t rv = FetchFreshRv(ww->socket_path());
  struct Case {
    std::string target;
    std::vector<std::string> names;
  };
  const std::vector<Case> cases = {
      {WatchTarget("/api/v1/pods", rv) + "&labelSelector=tier%3Dweb",
       {"web-a", "web-b"}},
      {WatchTarget("/api/v1/pods", rv) + "&labelSelector=tier%21%3Dweb",
       {"db-a"}},
      {WatchTarget("/api/v1/pods", rv) +
           "&fieldSelector=metadata.namespace%3Dns-b",
       {"web-b"}},
      {WatchTarget("/api/v1/namespaces/ns-a/pods", rv), {"web-a", "db-a"}},
      {WatchTarget("/clusters/c2/api/v1/pods", rv), {"web-b"}},
      {WatchTarget("/apis/apps/v1/deployments", rv), {"deploy-a"}},
  };
  std::vector<std::unique_ptr<WatchClient>> watches;
  for (const Case& c : cases) {
    watches.push_back(std::make_unique<WatchClient>());
    ASSERT_TRUE(
        watches.back()->Open(ww->socket_path(), c.target, In(kEventWait)));
    ASSERT_EQ(watches.back()->status(), 200) << watches.back()->body();
  }
  Resource web_a = Pod("c1", "ns-a", "web-a");
  web_a.labels = {{"tier", "web"}};
  Resource db_a = Pod("c1", "ns-a", "db-a");
  db_a.labels = {{"tier", "db"}};
  Resource web_b = Pod("c2", "ns-b", "web-b");
  web_b.labels = {{"tier", "web"}};
  for (const Resource& r :
       {web_a, db_a, web_b, Deployment("c1", "ns-a", "deploy-a")}) {
    sql->Insert(Spec(r));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].target);
    std::vector<std::string> got;
    WatchEvent e;
    while (got.size() < cases[i].names.size() &&
           watches[i]->NextEvent(&e, In(kEventWait))) {
      got.push_back(e.name());
    }
    EXPECT_EQ(got, cases[i].names);
  }
}

// The kinds of the resources already in the table come from the table at
// startup, not from the stream: walwatch reads nothing of the row written
// before it started, yet its bookmarks carry the row's kind, which no guess
// from the plural would give.
void BookmarksCarryTheKindOfAResourceOnlyTheTableHolds(ModelDatabase& db) {
  Resource r;
  r.group = "example.com";
  r.version = "v1";
  r.resource = "foobazes";
  r.kind = "FooBazThing";
  r.cluster = "c1";
  r.ns = "default";
  r.name = "one";
  r.uid = "uid-foobaz-one";
  db.ConnectModelSql()->Insert(Spec(r));
  WalwatchOptions options = db.ModelWalwatchOptions();
  options.extra_args.push_back("--bookmark-interval");
  options.extra_args.push_back("1s");
  auto* ww = db.StartModelWalwatch(std::move(options));
  ASSERT_NE(ww, nullptr);
  nlohmann::json bookmark;
  ASSERT_TRUE(FirstBookmarkOn(ww->socket_path(),
                              "/apis/example.com/v1/foobazes", &bookmark));
  EXPECT_EQ(bookmark.value("kind", ""), "FooBazThing") << bookmark;
  EXPECT_EQ(bookmark.value("apiVersion", ""), "example.com/v1") << bookmark;
}

}  // namespace walwatch::itest
