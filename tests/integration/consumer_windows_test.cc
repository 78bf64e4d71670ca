// The windows a consumer relies on, from an APIServer client's side (HTTP
// watch over walwatch's socket, resumed as client-go's reflector resumes:
// from the last RV received, event or bookmark):
//  * a quiet resource keeps its resume window while a hot one churns the
//    event log (per-resource floors), and the hot one's old RV is 410;
//  * the same per cluster: /clusters/A keeps its window while cluster B of
//    the same resource churns; the all-cluster watch from that RV is 410;
//  * bookmarks and event RVs inside one transaction that walwatch writes in
//    several writes never claim what was not sent: every resume re-sends the
//    transaction whole, nothing is skipped, RVs never decrease;
//  * an initial state (RV=0, WatchList) that cannot include a row is not a
//    200 stream silently lacking it.
// Every wait is a condition against a generous deadline.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model.h"
#include "tests/support/metric_value.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::MetricValue;

// Long enough for a walsender to decode tens of MB on a busy 2-core box.
constexpr seconds kChurnWait{120};

std::string Names(const std::vector<WatchEvent>& events) {
  std::string s;
  for (const auto& e : events) {
    if (!s.empty()) s += " ";
    s += e.type + ":" +
         (e.type == "ADDED" || e.type == "MODIFIED" || e.type == "DELETED"
              ? e.name() + "@"
              : "") +
         std::to_string(e.rv());
  }
  return "[" + s + "]";
}

bool IsInitialEventsEnd(const WatchEvent& e) {
  return e.type == "BOOKMARK" &&
         e.object.value(
             "/metadata/annotations/k8s.io~1initial-events-end"_json_pointer,
             std::string()) == "true";
}

// A Resource row of the core resource configmaps.
Resource ConfigMap(std::string cluster, std::string ns, std::string name) {
  Resource r;
  r.version = "v1";
  r.resource = "configmaps";
  r.kind = "ConfigMap";
  r.cluster = std::move(cluster);
  r.ns = std::move(ns);
  r.name = std::move(name);
  r.uid = "uid-" + r.cluster + "-" + r.ns + "-cm-" + r.name;
  r.spec = {{"data", "x"}};
  return r;
}

class ConsumerWindowsTest : public WalwatchTest {
 protected:
  uint64_t Commit(uint64_t xid) { return observer().CommitLsn(xid); }

  // Options with a small event log, 1s bookmarks and a metrics listener on
  // a free port (metrics_port_).
  WalwatchOptions SmallLogOptions() {
    WalwatchOptions options = DefaultOptions();
    options.max_log_bytes = "4Mi";
    metrics_port_ = FreeLoopbackPort();
    options.metrics_address = "127.0.0.1:" + std::to_string(metrics_port_);
    options.extra_args = {"--bookmark-interval=1s"};
    return options;
  }

  // Inserts `n` pods of ~16 KB each in `cluster`, one autocommit statement
  // each (about 4 times a 4Mi log for n = 1024); returns the commit LSN of
  // the pod in the middle, which the log must have evicted once walwatch
  // has decoded them all.
  uint64_t Churn(const std::string& cluster, int n) {
    Resource hot = Pod(cluster, "hot", "");
    hot.spec["blob"] = std::string(16000, 'h');
    uint64_t middle_xid = 0;
    for (int i = 0; i < n; ++i) {
      hot.name = "hot-" + std::to_string(i);
      hot.uid = "uid-hot-" + cluster + "-" + std::to_string(i);
      uint64_t xid = InsertRow(db(), hot);
      if (i == n / 2) middle_xid = xid;
    }
    return Commit(middle_xid);
  }

  // Waits until the event log's floor (walwatch_event_log_floor_rv) is at or
  // past `rv`: everything up to rv has been evicted.
  ::testing::AssertionResult WaitForLogFloor(uint64_t rv) {
    auto deadline = In(kChurnWait);
    std::string scrape;
    while (Clock::now() < deadline) {
      scrape = ScrapeMetrics(metrics_port_, In(seconds(10)));
      std::optional<double> floor =
          MetricValue(scrape, "walwatch_event_log_floor_rv");
      if (floor && *floor >= static_cast<double>(rv)) {
        return ::testing::AssertionSuccess();
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return ::testing::AssertionFailure()
           << "the event log's floor did not reach " << rv << " within "
           << kChurnWait.count() << "s; last scrape's floor: "
           << MetricValue(scrape, "walwatch_event_log_floor_rv").value_or(-1);
  }

  // Opens a watch on `target` (a full request target); it must be a 200.
  ::testing::AssertionResult Open(WatchClient& watch, const WalwatchProcess& ww,
                                  const std::string& target) {
    auto r = watch.Open(ww.socket_path(), target, In(kEventWait));
    if (!r) return r;
    if (watch.status() != 200) {
      return ::testing::AssertionFailure() << "GET " << target << ": HTTP "
                                           << watch.status() << " "
                                           << watch.body();
    }
    return ::testing::AssertionSuccess();
  }

  // Reads until an ADDED/MODIFIED/DELETED event named `name` (included);
  // an ERROR event or the end of the stream fails at once.
  static ::testing::AssertionResult ReadUntil(WatchClient& watch,
                                              const std::string& name,
                                              std::vector<WatchEvent>* out,
                                              seconds wait = kEventWait) {
    auto deadline = In(wait);
    for (;;) {
      WatchEvent e;
      auto r = watch.NextEvent(&e, deadline);
      if (!r) {
        return r << "; " << watch.target() << " waiting for " << name
                 << ", got " << Names(*out);
      }
      if (e.type == "ERROR") {
        return ::testing::AssertionFailure()
               << watch.target() << ": ERROR while waiting for " << name
               << ": " << e.raw << "; got before: " << Names(*out);
      }
      const bool found = e.type != "BOOKMARK" && e.name() == name;
      out->push_back(std::move(e));
      if (found) return ::testing::AssertionSuccess();
    }
  }

  // The first event of `watch` must be the 410 Expired ERROR, then the end.
  static void ExpectExpiredThenEnd(WatchClient& watch) {
    SCOPED_TRACE(watch.target());
    WatchEvent e;
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
    EXPECT_EQ(e.type, "ERROR") << e.raw.substr(0, 300);
    EXPECT_EQ(e.object.value("kind", ""), "Status") << e.raw.substr(0, 300);
    EXPECT_EQ(e.object.value("reason", ""), "Expired") << e.raw.substr(0, 300);
    EXPECT_EQ(e.object.value("code", 0), 410) << e.raw.substr(0, 300);
    EXPECT_TRUE(watch.ExpectEnd(In(kEventWait)));
  }

  int metrics_port_ = 0;
};

// --- 1. A quiet resource survives a hot one ---------------------------------
//
// Fails if the log's eviction of other resources' events expires a quiet
// resource: the open deployments watch ending with 410, or Seek(rv) of a
// resumed deployments watch judged against the log's global floor instead
// of the resource's own (EventLog::Seek(rv, selection) / ExpiredLocked
// ignoring the per-resource index). Fails the other way if floors are
// ignored altogether: the pods watch from the old RV would not get 410.
TEST_F(ConsumerWindowsTest, QuietResourceSurvivesAHotOne) {
  WalwatchProcess* ww = StartWalwatch(SmallLogOptions());
  ASSERT_NE(ww, nullptr);
  ASSERT_NE(metrics_port_, 0);

  // The client lists-and-watches deployments (RV=0: the state, then live).
  WatchClient open;
  ASSERT_TRUE(Open(open, *ww,
                   "/apis/apps/v1/deployments?watch=1&resourceVersion=0&"
                   "allowWatchBookmarks=true"));
  const uint64_t c_quiet =
      Commit(InsertRow(db(), Deployment("c1", "default", "quiet")));
  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadUntil(open, "quiet", &got));
  const uint64_t last_rv = got.back().rv();
  ASSERT_EQ(last_rv, c_quiet) << Names(got);

  // Pods churn about four times the log's budget.
  const uint64_t c_evicted = Churn("c1", 1024);
  ASSERT_GT(c_evicted, last_rv);
  ASSERT_TRUE(WaitForLogFloor(c_evicted));

  // A client that lost its connection resumes from its last RV: 200, and
  // nothing but the next deployment (bookmarks aside).
  WatchClient resumed;
  ASSERT_TRUE(Open(resumed, *ww,
                   "/apis/apps/v1/deployments?watch=1&allowWatchBookmarks=true&"
                   "resourceVersion=" +
                       std::to_string(last_rv)));
  // The hot resource's old RV is gone.
  WatchClient pods;
  ASSERT_TRUE(Open(pods, *ww,
                   "/api/v1/pods?watch=1&resourceVersion=" +
                       std::to_string(last_rv)));
  ASSERT_NO_FATAL_FAILURE(ExpectExpiredThenEnd(pods));

  const uint64_t c_next =
      Commit(InsertRow(db(), Deployment("c1", "default", "next")));
  for (WatchClient* w : {&open, &resumed}) {
    SCOPED_TRACE(w->target());
    std::vector<WatchEvent> events;
    ASSERT_TRUE(ReadUntil(*w, "next", &events));
    EXPECT_EQ(events.back().rv(), c_next);
    EXPECT_EQ(events.back().type, "ADDED");
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      EXPECT_EQ(events[i].type, "BOOKMARK")
          << "only bookmarks before 'next': " << Names(events);
      EXPECT_GE(events[i].rv(), last_rv) << Names(events);
    }
  }
}

// --- 2. A cluster-scoped watch keeps its window ------------------------------
//
// Fails if a cluster's window is the resource's (pair floors ignored:
// Seek(rv, {pods, A}) judged by the pods floor), so cluster B's churn
// expires A's resume; or if the open /clusters/A watch is ended by B's
// churn (410 Expired, or the slow-client backlog counting B's bytes against
// a watch that has nothing to send). Fails the other way if the all-cluster
// pods watch is judged by A's floor: its resume must be 410.
TEST_F(ConsumerWindowsTest, ClusterScopedWatchKeepsItsWindowWhileAnotherChurns) {
  WalwatchProcess* ww = StartWalwatch(SmallLogOptions());
  ASSERT_NE(ww, nullptr);
  ASSERT_NE(metrics_port_, 0);

  WatchClient open;
  ASSERT_TRUE(Open(open, *ww,
                   "/clusters/A/api/v1/pods?watch=1&allowWatchBookmarks=true&"
                   "resourceVersion=" +
                       std::to_string(FreshRv(*ww))));
  const uint64_t c_a1 = Commit(InsertRow(db(), Pod("A", "default", "a1")));
  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadUntil(open, "a1", &got));
  const uint64_t last_rv = got.back().rv();
  ASSERT_EQ(last_rv, c_a1) << Names(got);

  const uint64_t c_evicted = Churn("B", 1024);
  ASSERT_TRUE(WaitForLogFloor(c_evicted));

  WatchClient resumed;
  ASSERT_TRUE(Open(resumed, *ww,
                   "/clusters/A/api/v1/pods?watch=1&allowWatchBookmarks=true&"
                   "resourceVersion=" +
                       std::to_string(last_rv)));
  for (const std::string path : {"/api/v1/pods", "/clusters/B/api/v1/pods"}) {
    WatchClient old;
    ASSERT_TRUE(Open(old, *ww,
                     path + "?watch=1&resourceVersion=" +
                         std::to_string(last_rv)));
    ASSERT_NO_FATAL_FAILURE(ExpectExpiredThenEnd(old));
  }

  const uint64_t c_a2 = Commit(InsertRow(db(), Pod("A", "default", "a2")));
  std::vector<WatchEvent> live, again;
  ASSERT_TRUE(ReadUntil(open, "a2", &live));
  ASSERT_TRUE(ReadUntil(resumed, "a2", &again));
  for (const auto* events : {&live, &again}) {
    EXPECT_EQ(events->back().rv(), c_a2);
    for (size_t i = 0; i + 1 < events->size(); ++i) {
      EXPECT_EQ((*events)[i].type, "BOOKMARK")
          << "cluster A had nothing but a2 after " << last_rv << ": "
          << Names(*events);
    }
  }
  // Exact: the resumed watch got the very line the open one did.
  EXPECT_EQ(again.back().raw, live.back().raw);
}

// --- 3. Bookmarks inside a split transaction ---------------------------------
//
// One transaction T of 600 pods (~1.7 MB of events: several writes of at
// most 256 events / 256 KiB each). Clients are cut off after k events, or
// read slowly (a pause longer than the bookmark interval, while walwatch's
// write is stuck on the full socket) so that a bookmark falls between two
// writes inside T, and are cut right after it. Each resumes from the last
// RV it received. Fails if a bookmark inside T claims T's commit (or
// anything at or past it) while T's rest is unsent (EventLog::ResumeRvAt
// returning the next event's RV mid-transaction): the resume then skips
// T's rest. Fails too if T's earlier events carry c(T), if a resume does
// not re-send T from its start, or if RVs decrease along a stream.
TEST_F(ConsumerWindowsTest, BookmarksInsideASplitTransactionNeverSkipIt) {
  WalwatchOptions options = DefaultOptions();
  options.extra_args = {"--bookmark-interval=1s"};
  WalwatchProcess* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);

  const uint64_t c_before =
      Commit(InsertRow(db(), Pod("c1", "default", "before")));
  constexpr int kPods = 600;
  std::vector<std::string> t_names;
  Resource pod = Pod("c1", "default", "");
  pod.spec["blob"] = std::string(2500, 't');
  db().Exec("BEGIN");
  for (int i = 0; i < kPods; ++i) {
    pod.name = "t-" + std::to_string(i);
    pod.uid = "uid-t-" + std::to_string(i);
    InsertRow(db(), pod);
    t_names.push_back(pod.name);
  }
  const uint64_t x_t = CurrentXid(db());
  db().Exec("COMMIT");
  const uint64_t c_t = Commit(x_t);
  const uint64_t c_after =
      Commit(InsertRow(db(), Pod("c1", "default", "after")));
  ASSERT_GT(c_t, c_before);

  enum class Cut { kAfterEvents, kAtBookmarkAfterSlowRead };
  struct Step {
    size_t k;  // events read in this session before the cut (or the pause)
    Cut cut;
  };
  const std::vector<std::vector<Step>> chains = {
      {{1, Cut::kAfterEvents}},
      {{1, Cut::kAtBookmarkAfterSlowRead}},
      {{90, Cut::kAfterEvents}, {200, Cut::kAtBookmarkAfterSlowRead}},
      {{256, Cut::kAfterEvents}, {257, Cut::kAfterEvents}},
      {{300, Cut::kAtBookmarkAfterSlowRead}, {599, Cut::kAfterEvents}},
      {{600, Cut::kAfterEvents}},
  };
  size_t bookmarks_inside_t = 0;
  for (size_t c = 0; c < chains.size(); ++c) {
    SCOPED_TRACE("chain " + std::to_string(c));
    uint64_t last_rv = c_before;
    std::map<std::string, int> received;  // name -> times
    bool done = false;
    for (size_t s = 0; s <= chains[c].size() && !done; ++s) {
      const bool final_session = s == chains[c].size();
      SCOPED_TRACE("session " + std::to_string(s) + " from rv " +
                   std::to_string(last_rv));
      WatchClient w;
      ASSERT_TRUE(Open(w, *ww,
                       "/clusters/c1/api/v1/pods?watch=1&"
                       "allowWatchBookmarks=true&resourceVersion=" +
                           std::to_string(last_rv)));
      std::vector<WatchEvent> got;  // this session's, bookmarks included
      size_t t_events = 0;
      uint64_t stream_rv = last_rv;
      bool paused = false;
      auto deadline = In(seconds(60));
      for (;;) {
        WatchEvent e;
        ASSERT_TRUE(w.NextEvent(&e, deadline)) << Names(got);
        ASSERT_NE(e.type, "ERROR") << e.raw << "; after " << Names(got);
        EXPECT_GE(e.rv(), stream_rv)
            << "RVs decrease along the stream: " << e.type << " " << e.name()
            << " after " << Names(got);
        stream_rv = std::max(stream_rv, e.rv());
        last_rv = e.rv();
        got.push_back(e);
        if (e.type == "BOOKMARK") {
          if (t_events > 0 && t_events < t_names.size()) {
            ++bookmarks_inside_t;
            // The client has only part of T: resuming from this bookmark
            // must give T's rest, so it cannot be at or past c(T).
            EXPECT_LT(e.rv(), c_t)
                << "a bookmark after " << t_events << " of T's " << kPods
                << " events claims T's commit " << c_t;
          }
          if (paused) break;  // cut right after the bookmark
          continue;
        }
        ASSERT_EQ(e.type, "ADDED") << e.raw.substr(0, 300);
        ++received[e.name()];
        if (e.name() == "after") {
          EXPECT_EQ(e.rv(), c_after);
          EXPECT_EQ(t_events == 0 || t_events == t_names.size(), true)
              << "'after' arrived with T cut at " << t_events;
          done = true;
          break;
        }
        // A session gets T from its start, in order, or not at all.
        ASSERT_LT(t_events, t_names.size()) << e.name() << " after all of T";
        ASSERT_EQ(e.name(), t_names[t_events])
            << "T must come whole from its start; got " << e.name()
            << " as its event " << t_events;
        ++t_events;
        if (t_events < t_names.size()) {
          EXPECT_GE(e.rv(), c_before) << e.name();
          EXPECT_LT(e.rv(), c_t) << e.name() << ": only T's last event "
                                 << "carries T's commit";
        } else {
          EXPECT_EQ(e.rv(), c_t) << e.name();
        }
        if (final_session || paused || t_events != chains[c][s].k) continue;
        if (chains[c][s].cut == Cut::kAfterEvents) break;
        // A slow client: it stops reading for longer than the bookmark
        // interval (its socket fills and walwatch's write waits), then goes
        // on until the bookmark that comes between two writes.
        std::this_thread::sleep_for(milliseconds(2500));
        paused = true;
      }
    }
    ASSERT_TRUE(done) << "the chain never reached 'after'";
    EXPECT_EQ(received.count("before"), 0u);
    EXPECT_EQ(received["after"], 1);
    size_t missing = 0;
    std::string first_missing;
    for (const std::string& name : t_names) {
      if (received.count(name) == 0 && missing++ == 0) first_missing = name;
    }
    EXPECT_EQ(missing, 0u) << "pods of T never received, first "
                           << first_missing;
  }
  // The slow clients' pauses put at least one bookmark inside T; without
  // one, this test could not see a bookmark that claims T's rest.
  EXPECT_GE(bookmarks_inside_t, 1u);
}

// --- 4. An initial state with a bad row --------------------------------------
//
// A configmaps row whose object is '[]' (no object) cannot become an event.
// Fails if the initial state skips it (state_service logging the row and
// going on, as before b3b0772): the RV=0 watch and the WatchList would be
// 200 streams whose state lacks the row, and the live configmap written
// after the watch opened would arrive with no error first. Fails the other
// way if one bad row fails other resources' states, or another cluster's.
TEST_F(ConsumerWindowsTest, InitialStateWithARowThatIsNoObjectIsNotSilent) {
  WalwatchProcess* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  // walwatch serves a resource once it has seen a row of it. The bad row
  // is a barrier in the stream (every watcher gets 410): a pods watch's 410
  // says walwatch has decoded the configmaps before it.
  WatchClient decoded;
  ASSERT_TRUE(OpenWatch(decoded, *ww, "/api/v1/pods"));
  InsertRow(db(), ConfigMap("c1", "default", "good"));
  InsertRow(db(), ConfigMap("c2", "default", "elsewhere"));
  Resource bad = ConfigMap("c1", "default", "bad");
  db().Query(
      "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
      "namespace, name, owner_uid, uid, resource_version, object, created_at, "
      "synced_at) VALUES ($1, $2, $3, $4, $5, $6, $7, '', $8, $9, "
      "'[]'::jsonb, now(), now())",
      {bad.group, bad.version, bad.resource, bad.kind, bad.cluster, bad.ns,
       bad.name, bad.uid, bad.member_rv});
  ASSERT_NO_FATAL_FAILURE(ExpectExpiredThenEnd(decoded));
  InsertRow(db(), Pod("c1", "default", "p1"));

  int probes = 0;
  for (const std::string target :
       {"/api/v1/configmaps?watch=1&resourceVersion=0",
        "/api/v1/configmaps?watch=1",
        "/clusters/c1/api/v1/configmaps?watch=1&resourceVersion=0",
        "/api/v1/configmaps?watch=1&sendInitialEvents=true&"
        "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"}) {
    SCOPED_TRACE("GET " + target);
    WatchClient w;
    // Another test's transaction can make the state inexact for a while.
    ASSERT_TRUE(w.OpenState(ww->socket_path(), target, In(kEventWait)));
    if (w.status() != 200) {
      EXPECT_EQ(w.status(), 500) << w.body();
      auto status = nlohmann::json::parse(w.body(), nullptr, false);
      ASSERT_TRUE(status.is_object()) << w.body();
      EXPECT_EQ(status.value("kind", ""), "Status") << w.body();
      EXPECT_EQ(status.value("code", 0), 500) << w.body();
      // The operator can find the row from the message alone.
      EXPECT_NE(status.value("message", "").find("name=bad"),
                std::string::npos)
          << w.body();
      continue;
    }
    // A 200 stream: its state must end in an ERROR with a 500 Status, not
    // go live. A live configmap written now tells a stream that went live.
    const std::string probe = "probe-" + std::to_string(probes++);
    InsertRow(db(), ConfigMap("c1", "default", probe));
    std::vector<WatchEvent> got;
    std::optional<WatchEvent> error;
    auto deadline = In(kEventWait);
    while (!error) {
      WatchEvent e;
      auto r = w.Next(&e, deadline);
      ASSERT_EQ(r, WatchClient::Result::kEvent)
          << "the stream ended or stalled without an ERROR; got "
          << Names(got) << " " << w.error();
      if (e.type == "ERROR") {
        error = e;
        break;
      }
      EXPECT_FALSE(IsInitialEventsEnd(e))
          << "the WatchList state ended without the bad row: " << Names(got);
      ASSERT_NE(e.name(), probe)
          << "the watch went live with a state that lacks the bad row: "
          << Names(got);
      EXPECT_NE(e.name(), "bad") << e.raw;
      got.push_back(std::move(e));
    }
    EXPECT_EQ(error->object.value("kind", ""), "Status") << error->raw;
    EXPECT_EQ(error->object.value("code", 0), 500) << error->raw;
    EXPECT_NE(error->object.value("message", "").find("name=bad"),
              std::string::npos)
        << "the message does not name the row: " << error->raw;
    EXPECT_TRUE(w.ExpectEnd(In(kEventWait)));
  }

  // Other resources' states, and the configmaps of another cluster, stay
  // whole: 200, their rows, then live.
  struct Fine {
    std::string path;
    std::set<std::string> state;
    Resource live;
  };
  std::vector<Fine> fine = {
      {"/api/v1/pods", {"seed-pod", "p1"}, Pod("c1", "default", "p2")},
      {"/apis/apps/v1/deployments", {"seed-deploy"},
       Deployment("c1", "default", "d2")},
      {"/clusters/c2/api/v1/configmaps", {"elsewhere"},
       ConfigMap("c2", "default", "cm2")},
  };
  for (Fine& f : fine) {
    for (const std::string query :
         {"?watch=1&resourceVersion=0",
          "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
          "allowWatchBookmarks=true"}) {
      SCOPED_TRACE("GET " + f.path + query);
      WatchClient w;
      ASSERT_TRUE(Open(w, *ww, f.path + query));
      const bool watch_list = query.find("sendInitialEvents") != std::string::npos;
      std::set<std::string> listed;
      std::vector<WatchEvent> got;
      auto deadline = In(kEventWait);
      while (listed.size() < f.state.size()) {
        WatchEvent e;
        ASSERT_TRUE(w.NextEvent(&e, deadline)) << Names(got);
        ASSERT_EQ(e.type, "ADDED") << e.raw.substr(0, 300);
        listed.insert(e.name());
        got.push_back(std::move(e));
      }
      EXPECT_EQ(listed, f.state) << Names(got);
      if (watch_list) {
        WatchEvent end;
        ASSERT_TRUE(w.NextEvent(&end, deadline)) << Names(got);
        EXPECT_TRUE(IsInitialEventsEnd(end)) << end.raw;
      }
      Resource live = f.live;
      live.name += watch_list ? "-wl" : "-rv0";
      live.uid += watch_list ? "-wl" : "-rv0";
      InsertRow(db(), live);
      std::vector<WatchEvent> rest;
      ASSERT_TRUE(ReadUntil(w, live.name, &rest)) << Names(got);
      f.state.insert(live.name);
    }
  }
}

}  // namespace
}  // namespace walwatch::itest
