// The randomized model test on PostgreSQL (support/model_run.h says what it
// does and its WALWATCH_MODEL_* knobs; mariadb_model_test.cc runs it on
// MariaDB): many watchers with random filters and start modes read walwatch
// while writer threads run random Clusterpedia-shaped statements; when the
// writers stop and every watcher has caught up, each watcher's state,
// rebuilt from its events alone, must equal what PostgreSQL holds for the
// same filter.
//
// The ModelChecker tests at the top prove, without PostgreSQL, that the
// checker catches a dropped and a doubled event.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model.h"
#include "tests/integration/support/model_run.h"
#include "tests/integration/support/pg_model_database.h"

namespace walwatch::itest {
namespace {

// ---------------------------------------------------------------------------
// The checker, without PostgreSQL

// An event as walwatch sends it for an object stored with member RV `member`.
WatchEvent MakeEvent(const std::string& type, const std::string& name,
                     const std::string& uid, uint64_t rv,
                     const std::string& member, int replicas = 1) {
  ModelObjectSpec spec{Pod("c1", "default", name), {{"app", "web"}}};
  spec.row.uid = uid;
  spec.row.member_rv = member;
  spec.row.spec = {{"replicas", replicas}};
  nlohmann::json object = spec.Object();
  object["metadata"]["resourceVersion"] = std::to_string(rv);
  object["metadata"]["annotations"][kMemberRvAnnotation] = member;
  WatchEvent e;
  e.type = type;
  e.object = object;
  e.raw = nlohmann::json{{"type", type}, {"object", object}}.dump();
  return e;
}

WatchEvent MakeBookmark(uint64_t rv, bool initial_end = false) {
  WatchEvent e;
  e.type = "BOOKMARK";
  e.object = {{"kind", "Pod"},
              {"apiVersion", "v1"},
              {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
  if (initial_end) {
    e.object["metadata"]["annotations"] = {{kInitialEventsEndAnnotation, "true"}};
  }
  e.raw = nlohmann::json{{"type", "BOOKMARK"}, {"object", e.object}}.dump();
  return e;
}

// The stored state the events of ScriptedEvents() lead to.
ModelState StoredState(const std::vector<WatchEvent>& events) {
  ModelState state;
  for (const auto& e : events) {
    ObjectKey key = KeyOfObject(e.object);
    if (e.type == "DELETED") {
      state.erase(key);
    } else if (e.type != "BOOKMARK") {
      state[key] = ModelObjectFromStored(NormalizeWatchedObject(e.object));
    }
  }
  return state;
}

std::vector<WatchEvent> ScriptedEvents() {
  return {MakeEvent("ADDED", "a", "ua", 10, "1"),
          MakeEvent("ADDED", "b", "ub", 11, "1"),
          MakeBookmark(11),
          MakeEvent("MODIFIED", "a", "ua", 12, "2", 2),
          MakeEvent("DELETED", "b", "ub", 13, "1"),
          MakeEvent("DELETED", "a", "ua", 13, "2", 2),  // uid change:
          MakeEvent("ADDED", "a", "ua2", 14, "3", 3),   // one transaction
          MakeEvent("MODIFIED", "a", "ua2", 15, "4", 4)};
}

// Applies `events`; returns the failures.
std::vector<std::string> ApplyAll(WatchModel& model,
                                  const std::vector<WatchEvent>& events) {
  std::vector<std::string> failures;
  for (const auto& e : events) {
    auto r = model.Apply(e);
    if (!r) failures.push_back(r.message());
  }
  return failures;
}

TEST(ModelChecker, AcceptsTheStreamSqlWouldGive) {
  auto events = ScriptedEvents();
  WatchModel model;
  EXPECT_TRUE(ApplyAll(model, events).empty());
  EXPECT_TRUE(CompareModelStates(StoredState(events), model.state(), &model));
  EXPECT_EQ(model.last_rv(), 15u);
  EXPECT_EQ(model.events(), 7u);
  EXPECT_EQ(model.bookmarks(), 1u);
}

TEST(ModelChecker, DetectsADroppedEvent) {
  auto events = ScriptedEvents();
  ModelState expected = StoredState(events);
  for (size_t drop = 0; drop < events.size(); ++drop) {
    if (events[drop].type == "BOOKMARK") continue;
    SCOPED_TRACE("dropped event " + std::to_string(drop));
    auto stream = events;
    stream.erase(stream.begin() + drop);
    WatchModel model;
    auto failures = ApplyAll(model, stream);
    auto compared = CompareModelStates(expected, model.state(), &model);
    EXPECT_TRUE(!failures.empty() || !compared)
        << "a dropped " << events[drop].type << " went unnoticed";
  }
  // The final state alone shows the last MODIFIED missing, and says which
  // object and how.
  auto stream = events;
  stream.pop_back();
  WatchModel model;
  EXPECT_TRUE(ApplyAll(model, stream).empty());
  auto compared = CompareModelStates(expected, model.state(), &model);
  ASSERT_FALSE(compared);
  EXPECT_NE(std::string(compared.message()).find("c1/default/a"),
            std::string::npos)
      << compared.message();
  EXPECT_NE(std::string(compared.message()).find("memberRV=4"),
            std::string::npos)
      << compared.message();
}

TEST(ModelChecker, DetectsADoubledEvent) {
  auto events = ScriptedEvents();
  for (size_t twice = 0; twice < events.size(); ++twice) {
    if (events[twice].type == "BOOKMARK") continue;
    SCOPED_TRACE("doubled event " + std::to_string(twice));
    auto stream = events;
    stream.insert(stream.begin() + twice + 1, events[twice]);
    WatchModel model;
    EXPECT_FALSE(ApplyAll(model, stream).empty())
        << "a doubled " << events[twice].type << " went unnoticed";
  }
}

TEST(ModelChecker, DetectsDecreasingRvAndErrorEvents) {
  WatchModel model;
  EXPECT_TRUE(model.Apply(MakeEvent("ADDED", "a", "ua", 10, "1")));
  EXPECT_FALSE(model.Apply(MakeBookmark(9)));
  WatchEvent error;
  error.type = "ERROR";
  error.object = {{"kind", "Status"}, {"code", 410}};
  EXPECT_FALSE(model.Apply(error));
}

TEST(ModelChecker, ToleratesTheTransactionAResumeRepeats) {
  // Resumed from RV 13, received with the DELETED of a uid change: the
  // transaction comes again from its start, its first event carrying 13.
  auto events = ScriptedEvents();
  WatchModel full;
  ApplyAll(full, {events.begin(), events.begin() + 6});
  WatchModel resumed(full.state(), 13, {true, 13, false});
  EXPECT_TRUE(ApplyAll(resumed, {events.begin() + 5, events.end()}).empty());
  EXPECT_TRUE(CompareModelStates(StoredState(events), resumed.state()));
  // Strict everywhere, the repeat is reported.
  WatchModel strict(full.state(), 13, {true, 0, false});
  EXPECT_FALSE(ApplyAll(strict, {events.begin() + 5, events.end()}).empty());
}

TEST(ModelChecker, WatchListWantsOnlyAddedBeforeTheEndBookmark) {
  WatchModel ok({}, 0, {true, 0, true});
  EXPECT_TRUE(ok.Apply(MakeEvent("ADDED", "a", "ua", 10, "1")));
  EXPECT_TRUE(ok.Apply(MakeBookmark(10, true)));
  EXPECT_TRUE(ok.Apply(MakeEvent("MODIFIED", "a", "ua", 12, "2")));
  EXPECT_TRUE(ok.initial_events_end());
  EXPECT_EQ(ok.events_before_initial_end(), 1u);

  WatchModel bad({}, 0, {true, 0, true});
  EXPECT_TRUE(bad.Apply(MakeEvent("ADDED", "a", "ua", 10, "1")));
  EXPECT_FALSE(bad.Apply(MakeEvent("MODIFIED", "a", "ua", 12, "2")));
}

TEST(ModelChecker, FilterSelectsLikeTheApiserver) {
  ModelFilter f;
  f.resource = {"", "v1", "pods", "Pod", true};
  auto object = [](std::map<std::string, std::string> labels) {
    ModelObjectSpec s{Pod("c1", "ns", "n"), std::move(labels)};
    return s.Object();
  };
  ObjectKey key{"c1", "ns", "n"};
  f.label_selector = "app in (web, db),!env";
  EXPECT_TRUE(f.Matches(key, object({{"app", "db"}})));
  EXPECT_FALSE(f.Matches(key, object({{"app", "db"}, {"env", "x"}})));
  EXPECT_FALSE(f.Matches(key, object({{"app", "cache"}})));
  f.label_selector = "tier!=front";
  EXPECT_TRUE(f.Matches(key, object({})));
  f.label_selector = "";
  f.field_selector = "metadata.name!=n,cluster=c1";
  EXPECT_FALSE(f.Matches(key, object({})));
  f.field_selector = "metadata.namespace==ns,cluster=c1";
  EXPECT_TRUE(f.Matches(key, object({})));
  f.cluster = "c2";
  EXPECT_FALSE(f.Matches(key, object({})));
  EXPECT_EQ(f.Path(), "/clusters/c2/api/v1/pods");
  EXPECT_EQ(f.SelectorQuery(),
            "&fieldSelector=metadata.namespace%3D%3Dns%2Ccluster%3Dc1");
}

// ---------------------------------------------------------------------------
// The randomized test (support/model_run.h), on PostgreSQL

class ModelTest : public PgModelDatabaseTest {};

TEST_F(ModelTest, RandomWatchersAgreeWithSqlAfterRandomWrites) {
  RunRandomModel(*this, ModelConfig::FromEnvironment());
}

}  // namespace
}  // namespace walwatch::itest
