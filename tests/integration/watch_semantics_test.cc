// Kubernetes watch semantics through walwatch's socket, one test per
// behaviour (watchserver/PROTOCOL.md): where a watch starts (RV unset, "0", N,
// WatchList, the list handoff), bookmarks, timeoutSeconds, label and field
// selectors and their errors, the fresh-RV endpoint, the 410 that ends a
// watcher that does not read, and real clients (kubectl, curl) on it.
// Real PostgreSQL 15 + wal2json + the walwatch binary.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A pod in cluster c1 with the given labels (the seed rows live in cluster
// "seed", so /clusters/c1 paths see only what a test writes).
ModelObjectSpec LabeledPod(const std::string& name,
                           std::map<std::string, std::string> labels,
                           const std::string& ns = "default",
                           const std::string& cluster = "c1") {
  return ModelObjectSpec{Pod(cluster, ns, name), std::move(labels)};
}

// What a watcher receives for `spec` in an event with resourceVersion rv.
nlohmann::json ExpectedObject(const ModelObjectSpec& spec, uint64_t rv) {
  nlohmann::json o = spec.Object();
  o["metadata"]["resourceVersion"] = std::to_string(rv);
  o["metadata"]["annotations"][kMemberRvAnnotation] = spec.row.member_rv;
  return o;
}

std::string Names(const std::vector<WatchEvent>& events) {
  std::string s;
  for (const auto& e : events) {
    if (!s.empty()) s += " ";
    s += e.type + ":" + (e.type == "BOOKMARK" ? std::to_string(e.rv()) : e.name());
  }
  return "[" + s + "]";
}

std::set<std::string> NamesOf(const std::vector<WatchEvent>& events,
                              const std::string& type) {
  std::set<std::string> names;
  for (const auto& e : events) {
    if (e.type == type) names.insert(e.name());
  }
  return names;
}

bool IsInitialEventsEnd(const WatchEvent& e) {
  return e.type == "BOOKMARK" &&
         e.object.value("/metadata/annotations/k8s.io~1initial-events-end"_json_pointer,
                        std::string()) == "true";
}


class WatchSemanticsTest : public WalwatchTest {
 protected:
  // Opens `target` (a full request target) and checks for a 200 stream
  // (a state: retried while it cannot be handed off exactly yet).
  ::testing::AssertionResult Open(WatchClient& watch, const std::string& target) {
    auto r = watch.OpenState(ww_->socket_path(), target, In(kEventWait));
    if (!r) return r;
    if (watch.status() != 200) {
      return ::testing::AssertionFailure()
             << "GET " << target << ": HTTP " << watch.status() << " "
             << watch.body();
    }
    return ::testing::AssertionSuccess();
  }

  // Reads events until the stream ends (success) or `deadline`.
  ::testing::AssertionResult ReadToEnd(WatchClient& watch,
                                       std::vector<WatchEvent>* out,
                                       Clock::time_point deadline) {
    for (;;) {
      WatchEvent e;
      switch (watch.Next(&e, deadline)) {
        case WatchClient::Result::kEvent:
          out->push_back(std::move(e));
          continue;
        case WatchClient::Result::kEnd:
          return ::testing::AssertionSuccess();
        case WatchClient::Result::kTimeout:
          return ::testing::AssertionFailure()
                 << "watch " << watch.target()
                 << ": the stream did not end before the deadline; got "
                 << Names(*out);
        case WatchClient::Result::kError:
          return ::testing::AssertionFailure()
                 << "watch " << watch.target() << ": " << watch.error()
                 << "; got " << Names(*out);
      }
    }
  }

  // Reads until a non-BOOKMARK event named `name` (included).
  ::testing::AssertionResult ReadUntil(WatchClient& watch, const std::string& name,
                                       std::vector<WatchEvent>* out) {
    auto deadline = In(kEventWait);
    for (;;) {
      WatchEvent e;
      auto r = watch.NextEvent(&e, deadline);
      if (!r) return r << "; waiting for " << name << ", got " << Names(*out);
      bool found = e.type != "BOOKMARK" && e.name() == name;
      out->push_back(std::move(e));
      if (found) return ::testing::AssertionSuccess();
    }
  }

  // The commit LSN of the transaction that wrote xid.
  uint64_t Commit(uint64_t xid) { return observer().CommitLsn(xid); }

  // A transaction on a table walwatch does not stream; returns its commit.
  uint64_t WriteOtherTable() {
    db().Exec("CREATE TABLE IF NOT EXISTS walwatch_it_other (x int)");
    uint64_t xid = std::stoull(db().QueryValue(
        "INSERT INTO walwatch_it_other VALUES (1) "
        "RETURNING pg_current_xact_id()::text"));
    return Commit(xid);
  }

  // GETs `target`, which must be answered by a Status with `code` and
  // `reason`; returns it (an empty object, with a failure, if it is not).
  nlohmann::json ExpectStatus(const std::string& target, int code,
                              const std::string& reason) {
    HttpResponse r = HttpGet(ww_->socket_path(), target, In(kEventWait));
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, code) << r.body;
    auto status = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_TRUE(status.is_object()) << r.body;
    if (!status.is_object()) return nlohmann::json::object();
    EXPECT_EQ(status.value("kind", ""), "Status") << r.body;
    EXPECT_EQ(status.value("reason", ""), reason) << r.body;
    EXPECT_EQ(status.value("code", 0), code) << r.body;
    return status;
  }

  // Asserts a 400 BadRequest Status whose message contains `needle`.
  void ExpectBadRequest(const std::string& target, const std::string& needle) {
    SCOPED_TRACE("GET " + target);
    auto status = ExpectStatus(target, 400, "BadRequest");
    EXPECT_NE(status.value("message", "").find(needle), std::string::npos)
        << "the message should name '" << needle << "': " << status.dump();
  }

  void StartDefault() {
    ww_ = StartWalwatch();
    ASSERT_NE(ww_, nullptr);
  }

  // The initial state for RV unset / "0": ADDED events for exactly
  // `want` (any order), all at one RV at or past `last_commit`, then live
  // events after it.
  void CheckInitialThenLive(const std::string& rv_param) {
    ASSERT_NO_FATAL_FAILURE(StartDefault());
    std::vector<ModelObjectSpec> pods = {
        LabeledPod("a", {{"app", "web"}}), LabeledPod("b", {}),
        LabeledPod("c", {{"app", "db"}}, "other")};
    uint64_t last_xid = 0;
    for (const auto& p : pods) last_xid = InsertModelRow(db(), p);
    InsertModelRow(db(), LabeledPod("elsewhere", {}, "default", "c2"));
    uint64_t last_commit = Commit(last_xid);

    WatchClient watch;
    ASSERT_TRUE(Open(watch, "/clusters/c1/api/v1/pods?watch=1" + rv_param));
    std::vector<WatchEvent> initial;
    ASSERT_TRUE(ReadEvents(watch, pods.size(), &initial, In(kEventWait)))
        << Names(initial);
    std::map<std::string, const WatchEvent*> by_name;
    for (const auto& e : initial) {
      EXPECT_EQ(e.type, "ADDED") << e.raw;
      EXPECT_TRUE(by_name.emplace(e.name(), &e).second) << "twice: " << e.raw;
      EXPECT_GE(e.rv(), last_commit)
          << "an initial event's RV must cover the rows it lists: " << e.raw;
      EXPECT_EQ(e.rv(), initial[0].rv()) << "initial events at one RV";
    }
    for (const auto& p : pods) {
      ASSERT_TRUE(by_name.count(p.row.name)) << p.row.name << " missing from "
                                             << Names(initial);
      const WatchEvent& e = *by_name[p.row.name];
      EXPECT_EQ(e.object, ExpectedObject(p, e.rv()));
    }
    // Then live, and nothing listed comes again.
    auto live = LabeledPod("d", {{"app", "web"}});
    uint64_t c_live = Commit(InsertModelRow(db(), live));
    WatchEvent e;
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
    EXPECT_EQ(e.type, "ADDED");
    EXPECT_EQ(e.name(), "d") << e.raw;
    EXPECT_EQ(e.rv(), c_live);
    EXPECT_EQ(e.object, ExpectedObject(live, c_live));
    EXPECT_GE(e.rv(), initial[0].rv());
  }

  WalwatchProcess* ww_ = nullptr;
};

// --- Where a watch starts --------------------------------------------------

TEST_F(WatchSemanticsTest, UnsetResourceVersionGivesCurrentStateThenLive) {
  CheckInitialThenLive("");
}

TEST_F(WatchSemanticsTest, ResourceVersionZeroGivesCurrentStateThenLive) {
  CheckInitialThenLive("&resourceVersion=0");
}

TEST_F(WatchSemanticsTest, ResourceVersionNGivesOnlyChangesAfterN) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  uint64_t c_a = Commit(InsertModelRow(db(), LabeledPod("a", {})));
  auto b = LabeledPod("b", {});
  uint64_t c_b = Commit(InsertModelRow(db(), b));
  WatchClient watch;
  ASSERT_TRUE(Open(watch, "/clusters/c1/api/v1/pods?watch=1&resourceVersion=" +
                              std::to_string(c_a)));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "ADDED");
  EXPECT_EQ(e.name(), "b") << "only what committed after " << c_a << ": " << e.raw;
  EXPECT_EQ(e.object, ExpectedObject(b, c_b));
  uint64_t c_c = Commit(InsertModelRow(db(), LabeledPod("c", {})));
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "c");
  EXPECT_EQ(e.rv(), c_c);
}

TEST_F(WatchSemanticsTest, WatchListGivesStateThenAnnotatedBookmarkThenLive) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  std::vector<ModelObjectSpec> pods = {LabeledPod("a", {}), LabeledPod("b", {}),
                                       LabeledPod("c", {})};
  uint64_t last_xid = 0;
  for (const auto& p : pods) last_xid = InsertModelRow(db(), p);
  uint64_t last_commit = Commit(last_xid);

  std::set<std::string> state = {"a", "b", "c"};
  for (std::string rv : {"", "&resourceVersion=0"}) {
    SCOPED_TRACE("resourceVersion param '" + rv + "'");
    WatchClient watch;
    ASSERT_TRUE(Open(watch,
                     "/clusters/c1/api/v1/pods?watch=1&sendInitialEvents=true&"
                     "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true" +
                         rv));
    std::vector<WatchEvent> got;
    auto deadline = In(kEventWait);
    while (got.empty() || !IsInitialEventsEnd(got.back())) {
      WatchEvent e;
      ASSERT_TRUE(watch.NextEvent(&e, deadline)) << Names(got);
      got.push_back(std::move(e));
    }
    const WatchEvent end = got.back();
    got.pop_back();
    EXPECT_EQ(NamesOf(got, "ADDED"), state) << Names(got);
    EXPECT_EQ(got.size(), state.size()) << "only the state before the bookmark: "
                                        << Names(got);
    for (const auto& e : got) {
      EXPECT_LE(e.rv(), end.rv()) << e.raw;
      for (const auto& p : pods) {
        if (p.row.name == e.name()) {
          EXPECT_EQ(e.object, ExpectedObject(p, e.rv()));
        }
      }
    }
    // The bookmark: the watched kind, only metadata.resourceVersion and the
    // annotation, at an RV that covers the listed rows.
    EXPECT_GE(end.rv(), last_commit);
    EXPECT_EQ(end.object.value("kind", ""), "Pod") << end.raw;
    EXPECT_EQ(end.object.value("apiVersion", ""), "v1") << end.raw;
    EXPECT_EQ(end.object["metadata"],
              (nlohmann::json{{"resourceVersion", std::to_string(end.rv())},
                              {"annotations",
                               {{kInitialEventsEndAnnotation, "true"}}}}))
        << end.raw;
    // Then live.
    std::string name = "live" + std::to_string(rv.size());
    uint64_t c_live = Commit(InsertModelRow(db(), LabeledPod(name, {})));
    state.insert(name);
    WatchEvent e;
    do {
      ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
      EXPECT_FALSE(IsInitialEventsEnd(e)) << "a second end bookmark";
    } while (e.type == "BOOKMARK");
    EXPECT_EQ(e.type, "ADDED");
    EXPECT_EQ(e.name(), name);
    EXPECT_EQ(e.rv(), c_live);
  }
}

// The apiserver's answer to options its validateWatchOptions rejects:
// 422 Invalid on ListOptions.meta.k8s.io, with a cause per error.
TEST_F(WatchSemanticsTest, SendInitialEventsNeedsResourceVersionMatch) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  struct Case {
    std::string target;
    std::vector<std::string> cause_messages;
  };
  const std::vector<Case> cases = {
      {"/api/v1/pods?watch=1&sendInitialEvents=true",
       {"Forbidden: sendInitialEvents requires setting resourceVersionMatch "
        "to NotOlderThan"}},
      {"/api/v1/pods?watch=1&resourceVersionMatch=NotOlderThan",
       {"Forbidden: resourceVersionMatch is forbidden for watch unless "
        "sendInitialEvents is provided"}},
      {"/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
       {"Forbidden: sendInitialEvents requires setting resourceVersionMatch "
        "to NotOlderThan",
        "Unsupported value: \"Exact\": supported values: \"NotOlderThan\""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("GET " + c.target);
    auto status = ExpectStatus(c.target, 422, "Invalid");
    const std::string body = status.dump();
    EXPECT_EQ(status.value("message", "").rfind(
                  "ListOptions.meta.k8s.io \"\" is invalid: ", 0),
              0u)
        << body;
    ASSERT_TRUE(status.contains("details")) << body;
    const auto& details = status["details"];
    EXPECT_EQ(details.value("group", ""), "meta.k8s.io") << body;
    EXPECT_EQ(details.value("kind", ""), "ListOptions") << body;
    ASSERT_TRUE(details.contains("causes")) << body;
    ASSERT_EQ(details["causes"].size(), c.cause_messages.size()) << body;
    for (size_t i = 0; i < c.cause_messages.size(); ++i) {
      const auto& cause = details["causes"][i];
      EXPECT_EQ(cause.value("message", ""), c.cause_messages[i]) << body;
      EXPECT_EQ(cause.value("field", ""), "resourceVersionMatch") << body;
    }
  }
}

// sendInitialEvents=false, RV unset: no state, the events after an RV at
// least as new as the database when the request came.
TEST_F(WatchSemanticsTest, SendInitialEventsFalseStartsAtTheMostRecentRv) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  InsertModelRow(db(), LabeledPod("before", {}));
  uint64_t c_other = WriteOtherTable();
  WatchClient watch;
  ASSERT_TRUE(Open(watch,
                   "/clusters/c1/api/v1/pods?watch=1&sendInitialEvents=false&"
                   "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&"
                   "timeoutSeconds=3"));
  auto after = LabeledPod("after", {});
  uint64_t c_after = Commit(InsertModelRow(db(), after));
  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadToEnd(watch, &got, In(seconds(15))));
  ASSERT_EQ(got.size(), 2u) << "the live ADDED, then the final bookmark: "
                            << Names(got);
  EXPECT_EQ(got[0].type, "ADDED");
  EXPECT_EQ(got[0].object, ExpectedObject(after, c_after));
  EXPECT_EQ(got[1].type, "BOOKMARK");
  EXPECT_FALSE(IsInitialEventsEnd(got[1]));
  EXPECT_GE(got[1].rv(), c_after);
  EXPECT_GT(c_after, c_other);
}

// --- Bookmarks and timeouts -------------------------------------------------

TEST_F(WatchSemanticsTest, BookmarkArrivesJustBeforeTheTimeout) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  uint64_t c = Commit(InsertModelRow(db(), LabeledPod("a", {})));
  WatchClient watch;
  auto opened = Clock::now();
  ASSERT_TRUE(Open(watch, "/clusters/c1/api/v1/pods?watch=1&resourceVersion=" +
                              std::to_string(c) +
                              "&allowWatchBookmarks=true&timeoutSeconds=3"));
  std::vector<WatchEvent> got;
  std::vector<double> arrived;  // seconds after the request
  auto seconds_since_open = [&] {
    return std::chrono::duration<double>(Clock::now() - opened).count();
  };
  auto deadline = In(seconds(15));
  for (;;) {
    WatchEvent e;
    auto r = watch.Next(&e, deadline);
    if (r == WatchClient::Result::kEnd) break;
    ASSERT_EQ(r, WatchClient::Result::kEvent)
        << watch.error() << "; got " << Names(got);
    arrived.push_back(seconds_since_open());
    got.push_back(std::move(e));
  }
  double took = seconds_since_open();
  EXPECT_GE(took, 2.9) << "timeoutSeconds=3 ended the stream early";
  EXPECT_LE(took, 8.0) << "timeoutSeconds=3 ended the stream late";
  ASSERT_EQ(got.size(), 1u) << "one bookmark, just before the end: " << Names(got);
  const WatchEvent& b = got[0];
  EXPECT_EQ(b.type, "BOOKMARK") << b.raw;
  EXPECT_GE(arrived[0], 2.5) << "the bookmark came long before the end";
  EXPECT_GE(b.rv(), c) << b.raw;
  EXPECT_EQ(b.object,
            (nlohmann::json{{"kind", "Pod"},
                            {"apiVersion", "v1"},
                            {"metadata", {{"resourceVersion", std::to_string(b.rv())}}}}))
      << "a bookmark carries the kind and only metadata.resourceVersion";
  EXPECT_EQ(b.raw,
            "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":"
            "\"v1\",\"metadata\":{\"resourceVersion\":\"" +
                std::to_string(b.rv()) + "\"}}}")
      << "the apiserver's field order";
}

TEST_F(WatchSemanticsTest, NoBookmarkWithoutAllowWatchBookmarks) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  uint64_t c = Commit(InsertModelRow(db(), LabeledPod("a", {})));
  WatchClient watch;
  ASSERT_TRUE(Open(watch, "/clusters/c1/api/v1/pods?watch=1&resourceVersion=" +
                              std::to_string(c) + "&timeoutSeconds=3"));
  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadToEnd(watch, &got, In(seconds(15))));
  EXPECT_TRUE(got.empty()) << Names(got);
}

TEST_F(WatchSemanticsTest, BookmarkRvMovesWhileTheWatchedResourceIsIdle) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  uint64_t c = Commit(InsertModelRow(db(), LabeledPod("a", {})));
  std::string from = "&resourceVersion=" + std::to_string(c) +
                     "&allowWatchBookmarks=true&timeoutSeconds=5";
  // Two idle pod watches: one sees only a write to another table, the
  // other also a write to another resource (deployments).
  WatchClient other_table, other_resource;
  ASSERT_TRUE(Open(other_table, "/clusters/c1/api/v1/pods?watch=1" + from));
  uint64_t c_table = WriteOtherTable();
  ASSERT_TRUE(Open(other_resource, "/clusters/c1/api/v1/pods?watch=1" + from));
  uint64_t c_deploy = Commit(InsertRow(db(), Deployment("c1", "default", "d")));
  ASSERT_GT(c_table, c);
  ASSERT_GT(c_deploy, c_table);
  uint64_t fresh = 0;
  ASSERT_TRUE(GetFreshRv(ww_->socket_path(), &fresh, In(kEventWait)));

  for (auto [watch, want] : {std::pair{&other_table, c_table},
                             std::pair{&other_resource, c_deploy}}) {
    SCOPED_TRACE(watch->target());
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadToEnd(*watch, &got, In(seconds(20))));
    ASSERT_FALSE(got.empty()) << "no bookmark";
    for (const auto& e : got) EXPECT_EQ(e.type, "BOOKMARK") << e.raw;
    EXPECT_GE(got.back().rv(), want)
        << "the last bookmark must carry an RV past the idle-time commit "
        << want << " (fresh RV " << fresh << "): " << Names(got);
  }
}

TEST_F(WatchSemanticsTest, TimeoutSecondsEndsTheStream) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  for (int timeout : {1, 2}) {
    WatchClient watch;
    auto opened = Clock::now();
    ASSERT_TRUE(Open(watch, "/api/v1/pods?watch=1&timeoutSeconds=" +
                                std::to_string(timeout)));
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadToEnd(watch, &got, In(seconds(15))));
    double took = std::chrono::duration<double>(Clock::now() - opened).count();
    EXPECT_GE(took, timeout - 0.3);
    EXPECT_LE(took, timeout + 5.0);
  }
}

// --- Selectors ---------------------------------------------------------------

// Watches each selector from RV c (before the rows) with a 3 s timeout; the
// last bookmark proves walwatch passed the writes; the ADDED names must be
// exactly the expected ones.
TEST_F(WatchSemanticsTest, LabelSelectorEachOperator) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  uint64_t start = WriteOtherTable();
  const std::map<std::string, std::map<std::string, std::string>> pods = {
      {"web-prod", {{"app", "web"}, {"env", "prod"}}},
      {"db", {{"app", "db"}}},
      {"cache-dev", {{"app", "cache"}, {"env", "dev"}}},
      {"bare", {}},
  };
  const std::vector<std::pair<std::string, std::set<std::string>>> cases = {
      {"app=web", {"web-prod"}},
      {"app==db", {"db"}},
      {"app!=web", {"db", "cache-dev", "bare"}},
      {"app in (web,db)", {"web-prod", "db"}},
      {"app notin (web,db)", {"cache-dev", "bare"}},
      {"env", {"web-prod", "cache-dev"}},
      {"!env", {"db", "bare"}},
      {"app,env!=prod", {"db", "cache-dev"}},
      {"app in (web, cache),!env", {}},
      {"", {"web-prod", "db", "cache-dev", "bare"}},
  };
  std::vector<std::unique_ptr<WatchClient>> watches;
  for (const auto& [selector, want] : cases) {
    watches.push_back(std::make_unique<WatchClient>());
    ASSERT_TRUE(Open(*watches.back(),
                     "/clusters/c1/api/v1/pods?watch=1&allowWatchBookmarks=true&"
                     "timeoutSeconds=4&resourceVersion=" +
                         std::to_string(start) + "&labelSelector=" +
                         QueryEscape(selector)));
  }
  uint64_t last = 0;
  for (const auto& [name, labels] : pods) {
    last = Commit(InsertModelRow(db(), LabeledPod(name, labels)));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("labelSelector=" + cases[i].first);
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadToEnd(*watches[i], &got, In(seconds(20))));
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got.back().type, "BOOKMARK") << Names(got);
    EXPECT_GE(got.back().rv(), last) << "walwatch had not passed the writes";
    EXPECT_EQ(NamesOf(got, "ADDED"), cases[i].second) << Names(got);
  }
}

// The apiserver's cacher: an update that makes an object leave a label
// selection is a DELETED for that watcher, one that makes it enter is an
// ADDED; one that keeps it inside is a MODIFIED.
TEST_F(WatchSemanticsTest, LabelChangeEntersAndLeavesTheSelection) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  auto pod = LabeledPod("p", {{"app", "db"}});
  uint64_t c0 = Commit(InsertModelRow(db(), pod));
  std::string from = "/clusters/c1/api/v1/pods?watch=1&resourceVersion=" +
                     std::to_string(c0) + "&labelSelector=";
  WatchClient web, db_watch, any_app;
  ASSERT_TRUE(Open(web, from + QueryEscape("app=web")));
  ASSERT_TRUE(Open(db_watch, from + QueryEscape("app=db")));
  ASSERT_TRUE(Open(any_app, from + QueryEscape("app")));
  auto old_pod = pod;
  pod.labels["app"] = "web";
  pod.row.member_rv = "101";
  uint64_t c1 = Commit(UpdateModelRow(db(), pod));
  InsertModelRow(db(), LabeledPod("marker", {{"app", "web"}}));
  // Mark the end for the app=db watch too.
  InsertModelRow(db(), LabeledPod("marker-db", {{"app", "db"}}));

  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadUntil(web, "marker", &got));
  ASSERT_EQ(got.size(), 2u) << Names(got);
  EXPECT_EQ(got[0].type, "ADDED") << "entering app=web: " << got[0].raw;
  EXPECT_EQ(got[0].object, ExpectedObject(pod, c1));

  got.clear();
  ASSERT_TRUE(ReadUntil(db_watch, "marker-db", &got));
  ASSERT_EQ(got.size(), 2u) << Names(got);
  EXPECT_EQ(got[0].type, "DELETED") << "leaving app=db: " << got[0].raw;
  EXPECT_EQ(got[0].name(), "p");
  // The apiserver sends the previous object at the event's RV.
  EXPECT_EQ(got[0].object, ExpectedObject(old_pod, c1));

  got.clear();
  ASSERT_TRUE(ReadUntil(any_app, "marker", &got));
  ASSERT_GE(got.size(), 2u) << Names(got);
  EXPECT_EQ(got[0].type, "MODIFIED") << got[0].raw;
  EXPECT_EQ(got[0].object, ExpectedObject(pod, c1));
}

TEST_F(WatchSemanticsTest, FieldSelectorNameNamespaceCluster) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  uint64_t start = WriteOtherTable();
  struct Row {
    std::string cluster, ns, name;
  };
  const std::vector<Row> rows = {{"c1", "default", "a"},
                                 {"c1", "kube-system", "b"},
                                 {"c2", "default", "a"},
                                 {"c2", "kube-system", "c"}};
  const std::vector<std::pair<std::string, std::set<std::string>>> cases = {
      {"metadata.name=a", {"c1/default/a", "c2/default/a"}},
      {"metadata.name!=a", {"c1/kube-system/b", "c2/kube-system/c"}},
      {"metadata.namespace=kube-system", {"c1/kube-system/b", "c2/kube-system/c"}},
      {"metadata.namespace==default,metadata.name=a",
       {"c1/default/a", "c2/default/a"}},
      {"cluster=c2", {"c2/default/a", "c2/kube-system/c"}},
      {"cluster!=c2,metadata.name!=b", {"c1/default/a"}},
      {"metadata.annotations['shadow.clusterpedia.io/cluster-name']=c1",
       {"c1/default/a", "c1/kube-system/b"}},
  };
  std::vector<std::unique_ptr<WatchClient>> watches;
  for (const auto& [selector, want] : cases) {
    watches.push_back(std::make_unique<WatchClient>());
    ASSERT_TRUE(Open(*watches.back(),
                     "/api/v1/pods?watch=1&allowWatchBookmarks=true&"
                     "timeoutSeconds=4&resourceVersion=" +
                         std::to_string(start) + "&fieldSelector=" +
                         QueryEscape(selector)));
  }
  uint64_t last = 0;
  for (const auto& r : rows) {
    last = Commit(InsertModelRow(db(), LabeledPod(r.name, {}, r.ns, r.cluster)));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("fieldSelector=" + cases[i].first);
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadToEnd(*watches[i], &got, In(seconds(20))));
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got.back().type, "BOOKMARK") << Names(got);
    EXPECT_GE(got.back().rv(), last) << "walwatch had not passed the writes";
    std::set<std::string> keys;
    for (const auto& e : got) {
      if (e.type == "ADDED") keys.insert(KeyOfObject(e.object).cluster + "/" +
                                         e.ns() + "/" + e.name());
    }
    EXPECT_EQ(keys, cases[i].second) << Names(got);
  }
}

TEST_F(WatchSemanticsTest, InvalidSelectorIs400NamingTheProblem) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  ExpectBadRequest("/api/v1/pods?watch=1&labelSelector=" + QueryEscape("app in web"),
                   "web");
  ExpectBadRequest("/api/v1/pods?watch=1&labelSelector=" + QueryEscape("app=-bad-"),
                   "-bad-");
  ExpectBadRequest("/api/v1/pods?watch=1&labelSelector=" + QueryEscape("app in (a"),
                   "expected");
  ExpectBadRequest("/api/v1/pods?watch=1&fieldSelector=" +
                       QueryEscape("spec.nodeName=n1"),
                   "spec.nodeName");
  ExpectBadRequest("/api/v1/pods?watch=1&fieldSelector=" + QueryEscape("metadata.name"),
                   "metadata.name");
}

// --- The list handoff and the fresh RV --------------------------------------

// An APIServer lists in SQL (REPEATABLE READ) while a writer is busy, asks
// for the handoff RV and watches from it: list + watch must be exactly the
// database, with no event repeating a listed state or missing.
TEST_F(WatchSemanticsTest, HandoffListPlusWatchIsExactWhileWritersAreBusy) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  ModelFilter filter;
  filter.resource = {"", "v1", "pods", "Pod", true};
  filter.cluster = "c1";
  for (int i = 0; i < 20; ++i) {
    InsertModelRow(db(), LabeledPod("p" + std::to_string(i), {}));
  }

  std::atomic<bool> stop{false};
  std::atomic<size_t> writes{0};
  std::string writer_error;
  std::thread writer([&, conn = Connect()]() mutable {
    std::mt19937 rng(7);
    int member = 1000;
    try {
      while (!stop) {
        int i = static_cast<int>(rng() % 30);
        auto pod = LabeledPod("p" + std::to_string(i), {{"n", std::to_string(member)}});
        pod.row.member_rv = std::to_string(++member);
        bool present = !conn.Query("SELECT 1 FROM resources WHERE cluster = 'c1' "
                                   "AND resource = 'pods' AND name = $1",
                                   {pod.row.name}).empty();
        int op = static_cast<int>(rng() % 10);
        if (rng() % 4 == 0) conn.Exec("BEGIN");
        if (!present) {
          InsertModelRow(conn, pod);
        } else if (op < 5) {
          UpdateModelRow(conn, pod);
        } else if (op < 7) {
          pod.row.uid = "u-" + std::to_string(member);
          UpdateModelRow(conn, pod);
        } else {
          DeleteRow(conn, pod.row);
        }
        conn.Exec("COMMIT");  // a warning outside a transaction
        ++writes;
      }
    } catch (const std::exception& e) {
      writer_error = e.what();
    }
  });

  struct Listed {
    ListedState listed;
    std::unique_ptr<WatchClient> watch;
    WatchModel model;
  };
  std::vector<Listed> lists;
  PgConnection lister = Connect();
  int retries = 0;
  for (int i = 0; i < 12 && writer_error.empty(); ++i) {
    Listed l;
    ASSERT_TRUE(ListWithHandoff(lister, ww_->socket_path(), filter, &l.listed,
                                In(kEventWait)));
    retries += l.listed.attempts - 1;
    l.model = WatchModel(l.listed.state, l.listed.rv, {});
    l.watch = std::make_unique<WatchClient>();
    ASSERT_TRUE(Open(*l.watch, filter.Path() + "?watch=1&resourceVersion=" +
                                   std::to_string(l.listed.rv)));
    lists.push_back(std::move(l));
    std::this_thread::sleep_for(milliseconds(100));
  }
  stop = true;
  writer.join();
  ASSERT_EQ(writer_error, "");
  ASSERT_GT(writes.load(), 20u) << "the writer was not busy";
  InsertModelRow(db(), LabeledPod("marker", {}));
  ModelState expected = QueryModelState(db(), filter);

  for (auto& l : lists) {
    SCOPED_TRACE("list at snapshot " + l.listed.snapshot + " insert LSN " +
                 l.listed.insert_lsn + ", handoff RV " +
                 std::to_string(l.listed.rv) + " (" +
                 std::to_string(l.listed.state.size()) + " rows)");
    auto deadline = In(kEventWait);
    int reported = 0;
    for (;;) {
      WatchEvent e;
      ASSERT_TRUE(l.watch->NextEvent(&e, deadline));
      auto applied = l.model.Apply(e);
      if (!applied && reported++ < 3) ADD_FAILURE() << applied.message();
      if (e.name() == "marker") break;
    }
    EXPECT_TRUE(CompareModelStates(expected, l.model.state(), &l.model));
  }
  std::cout << "[ HANDOFF  ] " << lists.size() << " lists, " << writes
            << " writes, " << retries << " retries (409)" << std::endl;
}

// A watch from the handoff RV P, or after a state at P (RV "0",
// WatchList), must not then receive events with an RV below P: the
// apiserver never does (its cacher even drops them), and a client that
// tracks RVs would see them go back. The transaction right after the
// state here has two events (a uid change: DELETED + ADDED); the first of
// them carries "the position the stream had passed before it".
TEST_F(WatchSemanticsTest, NoEventRvBelowTheStartingStatesRv) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  ModelFilter filter;
  filter.resource = {"", "v1", "pods", "Pod", true};
  filter.cluster = "c1";
  auto pod = LabeledPod("p", {});
  InsertModelRow(db(), pod);
  int round = 0;
  auto uid_change = [&] {
    pod.row.uid = "uid-round-" + std::to_string(++round);
    return Commit(UpdateModelRow(db(), pod));
  };
  auto check = [&](WatchClient& watch, uint64_t start, uint64_t commit) {
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadEvents(watch, 2, &got, In(kEventWait)));
    EXPECT_EQ(got[0].type, "DELETED") << got[0].raw;
    EXPECT_EQ(got[1].type, "ADDED") << got[1].raw;
    EXPECT_EQ(got[1].rv(), commit);
    EXPECT_GE(got[0].rv(), start)
        << "the first event after a state at RV " << start << " carries "
        << got[0].rv() << ": RVs go back";
  };
  {
    SCOPED_TRACE("list + handoff");
    PgConnection lister = Connect();
    lister.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    auto rows = lister.Query(
        "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text");
    QueryModelState(lister, filter);
    lister.Exec("COMMIT");
    uint64_t commit = uid_change();
    uint64_t p = 0;
    ASSERT_TRUE(GetRvEndpoint(ww_->socket_path(),
                              HandoffTarget(*rows[0][0], *rows[0][1]), &p,
                              nullptr, nullptr, In(kEventWait)));
    ASSERT_LT(p, commit);
    WatchClient watch;
    ASSERT_TRUE(Open(watch, filter.Path() + "?watch=1&resourceVersion=" +
                                std::to_string(p)));
    check(watch, p, commit);
  }
  {
    // The uid change is in progress while the list's snapshot is taken,
    // and commits after it.
    SCOPED_TRACE("list + handoff, the next transaction open during the list");
    PgConnection writer = Connect();
    writer.Exec("BEGIN");
    pod.row.uid = "uid-round-" + std::to_string(++round);
    uint64_t xid = UpdateModelRow(writer, pod);
    PgConnection lister = Connect();
    lister.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    auto rows = lister.Query(
        "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text");
    QueryModelState(lister, filter);
    lister.Exec("COMMIT");
    writer.Exec("COMMIT");
    uint64_t commit = Commit(xid);
    uint64_t p = 0;
    ASSERT_TRUE(GetRvEndpoint(ww_->socket_path(),
                              HandoffTarget(*rows[0][0], *rows[0][1]), &p,
                              nullptr, nullptr, In(kEventWait)));
    ASSERT_LT(p, commit);
    WatchClient watch;
    ASSERT_TRUE(Open(watch, filter.Path() + "?watch=1&resourceVersion=" +
                                std::to_string(p)));
    check(watch, p, commit);
  }
  for (std::string mode : {"&resourceVersion=0",
                           "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"}) {
    for (bool open_during_state : {false, true}) {
      SCOPED_TRACE(mode + (open_during_state
                               ? ", the next transaction open during the state"
                               : ""));
      PgConnection writer = Connect();
      uint64_t xid = 0;
      if (open_during_state) {
        // Open (with its WAL written) from before the request until after
        // walwatch has taken the state's snapshot and answered (the header
        // comes after the snapshot): walwatch's wait for the stream to pass
        // the snapshot's insert position has this transaction's WAL in it,
        // and the state must not see it.
        writer.Exec("BEGIN");
        pod.row.uid = "uid-round-" + std::to_string(++round);
        xid = UpdateModelRow(writer, pod);
      }
      WatchClient watch;
      ASSERT_TRUE(Open(watch, filter.Path() + "?watch=1" + mode));
      if (open_during_state) writer.Exec("COMMIT");
      WatchEvent e;
      uint64_t p = 0;
      do {
        ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
        p = std::max(p, e.rv());
      } while (mode.size() > 20 ? !IsInitialEventsEnd(e) : e.name() != "p");
      check(watch, p, open_during_state ? Commit(xid) : uid_change());
    }
  }
}

// A state read (RV "0", WatchList, the handoff) waits until the stream has
// passed the snapshot's WAL insert position. Another session's open write
// transaction (here on another table, idle) has WAL there that nothing
// flushes until it ends: the read must still succeed, as an apiserver's
// list does.
TEST_F(WatchSemanticsTest, StateReadSucceedsWhileAnotherTransactionIsOpen) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  InsertModelRow(db(), LabeledPod("p", {}));
  WriteOtherTable();
  PgConnection idle = Connect();
  idle.Exec("BEGIN");
  idle.Exec("INSERT INTO walwatch_it_other VALUES (2)");
  // walwatch waits --too-large-rv-wait (3 s) before it answers 504; the
  // open transaction is idle for all of it.
  auto asked = Clock::now();
  WatchClient watch;
  ASSERT_TRUE(watch.Open(ww_->socket_path(),
                         "/clusters/c1/api/v1/pods?watch=1&resourceVersion=0",
                         In(kEventWait)));
  EXPECT_EQ(watch.status(), 200)
      << "an idle write transaction elsewhere blocks the state read (its WAL "
         "is not flushed, so the walsender cannot pass the snapshot's insert "
         "LSN); answered after "
      << std::chrono::duration<double>(Clock::now() - asked).count()
      << " s: " << watch.body();
  if (watch.status() == 200) {
    WatchEvent e;
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
    EXPECT_EQ(e.name(), "p");
  }
  // The fresh RV waits for the same position.
  asked = Clock::now();
  uint64_t fresh = 0;
  EXPECT_TRUE(GetFreshRv(ww_->socket_path(), &fresh, In(kEventWait)))
      << "after " << std::chrono::duration<double>(Clock::now() - asked).count()
      << " s";
  idle.Exec("ROLLBACK");
}

TEST_F(WatchSemanticsTest, HandoffErrors) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  ExpectBadRequest("/walwatch/v1/handoff?snapshot=nonsense&insertLSN=0/1",
                   "snapshot");
  ExpectBadRequest("/walwatch/v1/handoff?insertLSN=0/1", "snapshot");
  std::string snap = db().QueryValue("SELECT pg_current_snapshot()::text");
  ExpectBadRequest("/walwatch/v1/handoff?snapshot=" + QueryEscape(snap) +
                       "&insertLSN=xyz",
                   "insertLSN");
  // An insertLSN the server has not reached was not read with the
  // snapshot: refused at once, not waited for (--too-large-rv-wait) with
  // a state reader held.
  auto asked = Clock::now();
  ExpectBadRequest("/walwatch/v1/handoff?snapshot=" + QueryEscape(snap) +
                       "&insertLSN=FFFFFFFF/FFFFFFFF",
                   "ahead of the server's WAL insert position");
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(2))
      << "answered only after the catch-up wait";
}

TEST_F(WatchSemanticsTest, FreshRvCoversTheCommitJustBefore) {
  ASSERT_NO_FATAL_FAILURE(StartDefault());
  for (int i = 0; i < 20; ++i) {
    uint64_t commit = i % 2 ? WriteOtherTable()
                            : Commit(InsertModelRow(
                                  db(), LabeledPod("p" + std::to_string(i), {})));
    uint64_t fresh = 0;
    ASSERT_TRUE(GetFreshRv(ww_->socket_path(), &fresh, In(kEventWait)));
    EXPECT_GE(fresh, commit) << "round " << i << ": fresh RV " << fresh
                             << " is below the commit " << commit
                             << " that finished before the call";
  }
  // And a watch from it starts at once (no 504): it is an RV walwatch has.
  uint64_t fresh = 0;
  ASSERT_TRUE(GetFreshRv(ww_->socket_path(), &fresh, In(kEventWait)));
  WatchClient watch;
  ASSERT_TRUE(Open(watch, "/clusters/c1/api/v1/pods?watch=1&resourceVersion=" +
                              std::to_string(fresh)));
  uint64_t c = Commit(InsertModelRow(db(), LabeledPod("after", {})));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.name(), "after");
  EXPECT_EQ(e.rv(), c);
}

// --- Slow watchers -----------------------------------------------------------

// A watcher that never reads falls more than --max-watcher-backlog behind:
// when it finally reads, it gets a prefix of the events without a gap, then
// the 410 ERROR event, then the end; never a silent skip.
TEST_F(WatchSemanticsTest, WatcherThatDoesNotReadGetsExpired) {
  auto options = DefaultOptions();
  // The backlog bound is never below half of --max-log-bytes (the largest
  // transaction the log keeps): a small log makes it 1 MiB.
  options.extra_args = {"--max-log-bytes", "2Mi", "--max-watcher-backlog",
                        "64Ki"};
  ww_ = StartWalwatch(options);
  ASSERT_NE(ww_, nullptr);
  uint64_t start = WriteOtherTable();
  std::string target = "/clusters/c1/api/v1/pods?watch=1&resourceVersion=" +
                       std::to_string(start);
  // Opened (request sent, header read) and then not read at all.
  WatchClient slow;
  ASSERT_TRUE(Open(slow, target));

  // ~3 MB of events in single-row transactions (each far below the bound),
  // far past the socket buffers and the 1 MiB backlog.
  const int kRows = 2000;
  Resource pod = Pod("c1", "default", "");
  pod.spec["blob"] = std::string(1500, 'x');
  std::vector<Resource> rows;
  std::vector<uint64_t> xids;
  for (int i = 0; i < kRows; ++i) {
    pod.name = "p" + std::to_string(i);
    pod.uid = "uid-" + pod.name;
    xids.push_back(InsertRow(db(), pod));
    rows.push_back(pod);
  }
  // walwatch has taken all of it.
  uint64_t fresh = 0;
  ASSERT_TRUE(GetFreshRv(ww_->socket_path(), &fresh, In(kEventWait)));
  ASSERT_GE(fresh, Commit(xids.back()));

  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadToEnd(slow, &got, In(seconds(30))));
  ASSERT_FALSE(got.empty());
  const WatchEvent last = got.back();
  ASSERT_EQ(last.type, "ERROR") << "the slow watcher's stream must end with a "
                                   "410 ERROR event; it ended after "
                                << got.size() << " events, the last: "
                                << last.raw.substr(0, 300);
  EXPECT_EQ(last.object.value("kind", ""), "Status") << last.raw;
  EXPECT_EQ(last.object.value("code", 0), 410) << last.raw;
  EXPECT_EQ(last.object.value("reason", ""), "Expired") << last.raw;
  got.pop_back();
  EXPECT_LT(got.size(), static_cast<size_t>(kRows))
      << "it was sent everything: the backlog bound did nothing";
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].type, "ADDED") << got[i].raw.substr(0, 300);
    ASSERT_EQ(got[i].name(), rows[i].name) << "events skipped?";
    ASSERT_EQ(got[i].object, rows[i].Expected(Commit(xids[i])));
  }
  std::cout << "[ SLOW     ] the slow watcher got " << got.size() << " of "
            << kRows << " events, then 410" << std::endl;
}

// SIGTERM while a watcher's socket is full (it stopped reading, but is not
// far enough behind for a 410): its write can never finish, so walwatch
// gives it a short grace, closes it, and exits 0 well before the 30 s after
// which a stalled write closes a connection at other times.
TEST_F(WatchSemanticsTest, SigtermClosesAWatcherWhoseSocketIsFull) {
  ww_ = StartWalwatch(DefaultOptions());
  ASSERT_NE(ww_, nullptr);
  uint64_t start = WriteOtherTable();
  WatchClient slow;
  ASSERT_TRUE(Open(slow, "/clusters/c1/api/v1/pods?watch=1&resourceVersion=" +
                             std::to_string(start)));
  // ~3 MB of events: far past the socket buffers, far below the backlog
  // bound (128 MiB).
  Resource pod = Pod("c1", "default", "");
  pod.spec["blob"] = std::string(1500, 'x');
  uint64_t last_xid = 0;
  for (int i = 0; i < 2000; ++i) {
    pod.name = "full-" + std::to_string(i);
    pod.uid = "uid-" + pod.name;
    last_xid = InsertRow(db(), pod);
  }
  uint64_t fresh = 0;
  ASSERT_TRUE(GetFreshRv(ww_->socket_path(), &fresh, In(kEventWait)));
  ASSERT_GE(fresh, Commit(last_xid));

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(ww_->pid(), SIGTERM), 0);
  auto status = ww_->WaitExit(seconds(10));
  ASSERT_TRUE(status.has_value())
      << "walwatch did not exit within 10 s of SIGTERM with a full socket";
  EXPECT_TRUE(status->exited && status->exit_code == 0) << status->Describe();
  std::cout << "[ SHUTDOWN ] exited "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - t0)
                   .count()
            << " ms after SIGTERM with a full socket" << std::endl;
  // What the watcher gets when it reads at last: a prefix of the events,
  // in order, and no final chunk (the connection was closed under it).
  std::vector<WatchEvent> got;
  WatchClient::Result end;
  for (;;) {
    WatchEvent e;
    end = slow.Next(&e, In(seconds(10)));
    if (end != WatchClient::Result::kEvent) break;
    got.push_back(std::move(e));
  }
  EXPECT_EQ(end, WatchClient::Result::kError)
      << (end == WatchClient::Result::kEnd
              ? "the stream ended with the final chunk: the socket was not "
                "full, so the case was not tested"
              : "the stream did not end within 10 s of walwatch's exit");
  std::cout << "[ SHUTDOWN ] the full socket's reader got " << got.size()
            << " events, then: " << slow.error() << std::endl;
  ASSERT_FALSE(got.empty()) << "not even the events in the socket buffers";
  EXPECT_LT(got.size(), 2000u) << "every event arrived: the socket was not full";
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].name(), "full-" + std::to_string(i));
  }
}

// --- Real clients ------------------------------------------------------------

TEST_F(WatchSemanticsTest, KubectlAndCurlWithSelectorAndBookmarks) {
  if (!OnPath("kubectl")) GTEST_SKIP() << kNoKubectl;
  int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  auto options = DefaultOptions();
  options.tcp_listen = "127.0.0.1:" + std::to_string(port);
  ww_ = StartWalwatch(options);
  ASSERT_NE(ww_, nullptr);
  InsertModelRow(db(), LabeledPod("x1", {{"app", "x"}}));
  InsertModelRow(db(), LabeledPod("y1", {{"app", "y"}}));

  const std::string kubeconfig = WriteKubeconfig(port);
  const std::string path =
      "/api/v1/pods?watch=1&labelSelector=app%3Dx&allowWatchBookmarks=true&"
      "timeoutSeconds=10";
  // Each prints the initial state (x1) first; then x2 arrives live, within
  // both streams' timeoutSeconds=10, which count from each request. So
  // kubectl, slow to start on a loaded machine, starts first and has printed
  // its first line before curl starts: each window then holds only curl's
  // start, two inserts and their delivery, never kubectl's start.
  auto deadline = In(kEventWait);
  std::vector<std::vector<std::string>> lines(2), events(2);
  ChildProcess kubectl({{"kubectl", "--kubeconfig", kubeconfig,
                         "--request-timeout", "30s", "get", "--raw", path},
                        TempPath("kubectl.stderr"),
                        true,
                        {"HOME=" + TempPath(""), "KUBECONFIG="}});
  auto first = kubectl.ReadStdoutLine(deadline);
  ASSERT_TRUE(first.has_value()) << "kubectl printed nothing; "
                                 << kubectl.StderrText();
  lines[0].push_back(*first);
  const auto kubectl_streaming = Clock::now();
  ChildProcess curl({{"curl", "-sSN", "--fail", "--max-time", "30",
                      "--unix-socket", ww_->socket_path(), "http://localhost" + path},
                     TempPath("curl.stderr"),
                     true,
                     {}});
  first = curl.ReadStdoutLine(deadline);
  ASSERT_TRUE(first.has_value()) << "curl printed nothing; " << curl.StderrText();
  lines[1].push_back(*first);
  ChildProcess* clients[] = {&kubectl, &curl};
  InsertModelRow(db(), LabeledPod("y2", {{"app", "y"}}));
  InsertModelRow(db(), LabeledPod("x2", {{"app", "x"}}));
  const auto x2_inserted = Clock::now();
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i ? "curl" : "kubectl");
    auto end = In(seconds(30));
    while (auto line = clients[i]->ReadStdoutLine(end)) lines[i].push_back(*line);
    auto status = clients[i]->WaitExit(seconds(10));
    ASSERT_TRUE(status.has_value()) << "still running after timeoutSeconds=10";
    EXPECT_TRUE(status->exited && status->exit_code == 0)
        << status->Describe() << "\n" << clients[i]->StderrText();
    std::vector<std::string> types, names;
    for (const auto& l : lines[i]) {
      auto e = nlohmann::json::parse(l, nullptr, false);
      ASSERT_TRUE(e.is_object()) << l;
      types.push_back(e.value("type", ""));
      if (e.value("type", "") != "BOOKMARK") {
        names.push_back(e["object"]["metadata"].value("name", ""));
        events[i].push_back(l);
      }
    }
    EXPECT_EQ(names, (std::vector<std::string>{"x1", "x2"}))
        << "x2 was inserted "
        << std::chrono::duration<double>(x2_inserted - kubectl_streaming).count()
        << " s after kubectl's stream began, and must arrive within its "
           "timeoutSeconds=10";
    ASSERT_FALSE(types.empty());
    EXPECT_EQ(types.back(), "BOOKMARK") << "a bookmark just before the timeout";
  }
  // Bookmarks carry the RV of the moment, and each watch's initial state its
  // own handoff RV; the live events are the same bytes.
  ASSERT_EQ(events[0].size(), 2u);
  ASSERT_EQ(events[1].size(), 2u);
  EXPECT_EQ(events[0][1], events[1][1])
      << "kubectl and curl must print the same live events";
}

}  // namespace
}  // namespace walwatch::itest
