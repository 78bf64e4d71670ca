// The randomized model test: many watchers with random filters and start
// modes read walwatch while writer threads run random Clusterpedia-shaped
// statements; when the writers stop and every watcher has caught up, each
// watcher's state, rebuilt from its events alone, must equal what
// PostgreSQL holds for the same filter.
//
// Seeded and reproducible in its choices (the interleaving of threads is
// not): WALWATCH_MODEL_SEED (default 20240611), WALWATCH_MODEL_SECONDS
// (writing time, default 60), WALWATCH_MODEL_WATCHERS (24),
// WALWATCH_MODEL_WRITERS (3), WALWATCH_MODEL_CATCHUP_SECONDS (default 300):
// after the writers stop, every watcher must reach the RV of the last write
// (GET /walwatch/v1/freshrv) within that long, through its events or the
// bookmarks walwatch sends every second (--bookmark-interval 1s); the test
// waits for that, not for a fixed time. WALWATCH_MODEL_DROP_EVERY=N makes every
// watcher drop every Nth event, to see the test fail.
// WALWATCH_MODEL_LABEL_CHANGES=0 keeps each object's labels on updates, so
// that no MODIFIED moves an object into or out of a label selection.
//
// The ModelChecker tests at the top prove, without PostgreSQL, that the
// checker catches a dropped and a doubled event.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
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
// The randomized test

struct ModelConfig {
  uint64_t seed = 20240611;
  int seconds = 60;
  int watchers = 24;
  int writers = 3;
  int catchup_seconds = 300;
  int drop_every = 0;
  // 0: updates keep an object's labels, so no object enters or leaves a
  // label selection by a MODIFIED (isolates everything else from that).
  int label_changes = 1;

  static ModelConfig FromEnvironment() {
    ModelConfig c;
    auto get = [](const char* name, auto* value) {
      const char* v = std::getenv(name);
      if (v && *v) *value = static_cast<std::decay_t<decltype(*value)>>(
                       std::stoull(v));
    };
    get("WALWATCH_MODEL_SEED", &c.seed);
    get("WALWATCH_MODEL_SECONDS", &c.seconds);
    get("WALWATCH_MODEL_WATCHERS", &c.watchers);
    get("WALWATCH_MODEL_WRITERS", &c.writers);
    get("WALWATCH_MODEL_CATCHUP_SECONDS", &c.catchup_seconds);
    get("WALWATCH_MODEL_DROP_EVERY", &c.drop_every);
    get("WALWATCH_MODEL_LABEL_CHANGES", &c.label_changes);
    return c;
  }
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int Int(int lo, int hi) {  // [lo, hi]
    return std::uniform_int_distribution<int>(lo, hi)(engine_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(engine_); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Int(0, static_cast<int>(v.size()) - 1))];
  }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// The world the writers write and the watchers select from: small, so
// that keys collide and selectors cut through it.
const std::vector<ModelResource> kResources = {
    {"", "v1", "pods", "Pod", true},
    {"apps", "v1", "deployments", "Deployment", true},
    {"", "v1", "nodes", "Node", false},
};
const std::vector<std::string> kClusters = {"c1", "c2", "c3"};
const std::vector<std::string> kNamespaces = {"ns-a", "ns-b", "ns-c"};
constexpr int kNames = 12;
const std::vector<std::pair<std::string, std::vector<std::string>>> kLabels = {
    {"app", {"web", "db", "cache"}},
    {"tier", {"front", "back"}},
    {"env", {"prod", "dev"}},
};

std::string NameOf(int i) {
  std::ostringstream s;
  s << "n" << std::setw(2) << std::setfill('0') << i;
  return s.str();
}

std::map<std::string, std::string> RandomLabels(Rng& rng) {
  std::map<std::string, std::string> labels;
  for (const auto& [key, values] : kLabels) {
    if (rng.Chance(0.7)) labels[key] = rng.Pick(values);
  }
  return labels;
}

std::string RandomLabelSelector(Rng& rng) {
  std::vector<size_t> keys = {0, 1, 2};
  std::shuffle(keys.begin(), keys.end(), rng.engine());
  int n = rng.Int(1, 2);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const auto& [key, vocabulary] = kLabels[keys[i]];
    auto values = vocabulary;
    values.push_back("none");  // a value no object has
    std::string v1 = rng.Pick(values), v2 = rng.Pick(values);
    std::string req;
    switch (rng.Int(0, 6)) {
      case 0: req = key + "=" + v1; break;
      case 1: req = key + "==" + v1; break;
      case 2: req = key + "!=" + v1; break;
      case 3: req = key + " in (" + v1 + "," + (rng.Chance(0.5) ? " " : "") + v2 + ")"; break;
      case 4: req = key + " notin (" + v1 + ")"; break;
      case 5: req = key; break;
      default: req = "!" + key; break;
    }
    out += (i ? "," : "") + req;
  }
  return out;
}

std::string RandomFieldSelector(Rng& rng, const ModelFilter& f) {
  switch (rng.Int(0, 5)) {
    case 0: return "metadata.name=" + NameOf(rng.Int(0, kNames - 1));
    case 1: return "metadata.name!=" + NameOf(rng.Int(0, kNames - 1));
    case 2: return "cluster=" + rng.Pick(kClusters);
    case 3: return "cluster!=" + rng.Pick(kClusters);
    case 4:
      if (f.resource.namespaced) return "metadata.namespace==" + rng.Pick(kNamespaces);
      return "metadata.namespace=";  // cluster-scoped objects have ""
    default:
      return "metadata.name!=" + NameOf(rng.Int(0, kNames - 1)) +
             ",cluster!=" + rng.Pick(kClusters);
  }
}

ModelFilter RandomFilter(Rng& rng) {
  ModelFilter f;
  f.resource = rng.Pick(kResources);
  if (rng.Chance(0.35)) f.cluster = rng.Pick(kClusters);
  if (f.resource.namespaced && rng.Chance(0.35)) f.ns = rng.Pick(kNamespaces);
  if (rng.Chance(0.7)) f.label_selector = RandomLabelSelector(rng);
  if (rng.Chance(0.25)) f.field_selector = RandomFieldSelector(rng, f);
  return f;
}

// One writer thread: random Clusterpedia-shaped statements on the names it
// owns (name index % writers == its index, so writers rarely block each
// other), plus, for writer 0, rare removals of a whole cluster or of one
// resource of a cluster, which cut through everyone's rows.
class ModelWriter {
 public:
  ModelWriter(int index, int count, const std::string& conninfo, uint64_t seed,
              bool label_changes)
      : index_(index),
        count_(count),
        label_changes_(label_changes),
        conn_(conninfo),
        rng_(seed) {}

  void Run(const std::atomic<bool>& stop) {
    while (!stop) {
      Step();
      std::this_thread::sleep_for(milliseconds(rng_.Int(0, 2)));
    }
  }

  // One autocommit statement, or a multi-row transaction.
  void Step() {
    int dice = rng_.Int(0, 999);
    try {
      if (index_ == 0 && dice < 2) {
        Count("remove-cluster", conn_.Query(
            "DELETE FROM resources WHERE cluster = $1 RETURNING id",
            {rng_.Pick(kClusters)}).size());
      } else if (index_ == 0 && dice < 4) {
        const auto& r = rng_.Pick(kResources);
        Count("remove-resource", conn_.Query(
            "DELETE FROM resources WHERE cluster = $1 AND \"group\" = $2 AND "
            "version = $3 AND resource = $4 RETURNING id",
            {rng_.Pick(kClusters), r.group, r.version, r.resource}).size());
      } else if (dice < 150) {
        Transaction();
      } else {
        WriteOne();
      }
    } catch (const PgError& e) {
      ++errors_;
      if (last_error_.empty()) last_error_ = e.what();
    }
  }

  // Inserts rows until `n` exist for this writer (before the watchers).
  void Populate(int n) {
    for (int i = 0; i < n * 4 && inserted_ < n; ++i) WriteOne();
  }

  const std::map<std::string, size_t>& counts() const { return counts_; }
  size_t errors() const { return errors_; }
  const std::string& last_error() const { return last_error_; }

 private:
  struct Target {
    ModelResource resource;
    std::string cluster, ns, name;
  };

  void Count(const std::string& what, size_t n = 1) { counts_[what] += n; }

  void Transaction() {
    conn_.Exec("BEGIN");
    try {
      int n = rng_.Int(2, 6);
      for (int i = 0; i < n; ++i) WriteOne();
      if (rng_.Chance(0.05)) {
        conn_.Exec("ROLLBACK");
        Count("rolled-back-transaction");
      } else {
        conn_.Exec("COMMIT");
        Count("transaction");
      }
    } catch (...) {
      try {
        conn_.Exec("ROLLBACK");
      } catch (const PgError&) {
      }
      throw;
    }
  }

  Target PickTarget() {
    Target t;
    t.resource = rng_.Pick(kResources);
    t.cluster = rng_.Pick(kClusters);
    if (t.resource.namespaced) t.ns = rng_.Pick(kNamespaces);
    std::vector<int> owned;
    for (int i = index_ % kNames; i < kNames; i += count_) owned.push_back(i);
    t.name = NameOf(rng_.Pick(owned));
    return t;
  }

  ModelObjectSpec NewSpec(const Target& t, const std::string& uid) {
    ModelObjectSpec s;
    Resource& r = s.row;
    r.group = t.resource.group;
    r.version = t.resource.version;
    r.resource = t.resource.resource;
    r.kind = t.resource.kind;
    r.cluster = t.cluster;
    r.ns = t.ns;
    r.name = t.name;
    r.uid = uid;
    r.member_rv = std::to_string(++member_rv_);
    r.spec = {{"replicas", rng_.Int(0, 9)}, {"writer", index_}};
    if (rng_.Chance(0.06)) {
      // Out of line and incompressible: TOAST, so that event-recording
      // updates leave `object` out of the new tuple.
      static const char kAlnum[] =
          "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
      std::string blob(4000, ' ');
      for (char& c : blob) c = kAlnum[rng_.Int(0, 61)];
      r.spec["blob"] = blob;
    }
    s.labels = RandomLabels(rng_);
    return s;
  }

  std::string NewUid() {
    return "u" + std::to_string(index_) + "-" + std::to_string(++uids_);
  }

  // One statement on a random key, chosen by what the key holds now.
  void WriteOne() {
    Target t = PickTarget();
    auto rows = conn_.Query(
        "SELECT uid, object::text FROM resources WHERE cluster = $1 AND "
        "\"group\" = $2 AND version = $3 AND resource = $4 AND "
        "namespace = $5 AND name = $6",
        {t.cluster, t.resource.group, t.resource.version, t.resource.resource,
         t.ns, t.name});
    if (rows.empty()) {
      InsertModelRow(conn_, NewSpec(t, NewUid()));
      ++inserted_;
      return Count("insert");
    }
    std::string uid = *rows[0][0];
    int dice = rng_.Int(0, 99);
    if (dice < 40) {
      ModelObjectSpec s = NewSpec(t, uid);
      if (!label_changes_ || rng_.Chance(0.3)) {  // the same labels
        auto old = nlohmann::json::parse(*rows[0][1]);
        s.labels = old["metadata"]["labels"].get<std::map<std::string, std::string>>();
      }
      UpdateModelRow(conn_, s);
      Count("update");
    } else if (dice < 55) {
      UpdateModelRow(conn_, NewSpec(t, NewUid()));
      Count("update-new-uid");
    } else if (dice < 75) {
      Resource r;
      r.cluster = t.cluster;
      r.uid = uid;
      r.name = t.name;
      RecordKubeEvent(conn_, r, "Reason" + std::to_string(rng_.Int(0, 3)));
      Count("record-event");
    } else {
      ModelObjectSpec s = NewSpec(t, uid);
      DeleteRow(conn_, s.row);
      Count("delete");
    }
  }

  const int index_, count_;
  const bool label_changes_;
  PgConnection conn_;
  Rng rng_;
  std::map<std::string, size_t> counts_;
  size_t errors_ = 0;
  std::string last_error_;
  uint64_t member_rv_ = 1000;
  uint64_t uids_ = 0;
  int inserted_ = 0;
};

enum class StartMode { kUnset, kZero, kMidStream, kWatchList, kHandoff };

const char* ModeName(StartMode m) {
  switch (m) {
    case StartMode::kUnset: return "rv-unset";
    case StartMode::kZero: return "rv-0";
    case StartMode::kMidStream: return "mid-stream";
    case StartMode::kWatchList: return "watchlist";
    case StartMode::kHandoff: return "handoff";
  }
  return "?";
}

// One watcher: its client, its model, and the thread that reads until the
// test has seen it catch up and stops it (the stream must not end before).
struct ModelWatcher {
  int id = 0;
  ModelFilter filter;
  StartMode mode = StartMode::kUnset;
  bool base = false;  // unfiltered, snapshots for mid-stream watchers
  uint64_t start_rv = 0;
  std::string target;
  std::unique_ptr<WatchClient> client = std::make_unique<WatchClient>();
  std::thread thread;

  struct Snapshot {
    uint64_t rv;
    ModelState state;
  };
  std::mutex mu;
  WatchModel model;                  // GUARDED_BY(mu)
  std::deque<Snapshot> snapshots;    // GUARDED_BY(mu)
  std::vector<std::string> failures; // GUARDED_BY(mu)
  bool over = false;                 // GUARDED_BY(mu): the reader is done
  bool ended = false;                // GUARDED_BY(mu): with the final chunk
  size_t dropped = 0;                // GUARDED_BY(mu)

  std::string Describe() const {
    std::ostringstream s;
    s << "w" << std::setw(2) << std::setfill('0') << id << " " << ModeName(mode);
    if (start_rv) s << " from " << start_rv;
    s << " " << filter.ToString();
    return s.str();
  }

  void Fail(const std::string& what) {  // with mu held
    if (failures.size() < 5) failures.push_back(what);
  }

  void Read(const std::atomic<bool>& stop, int drop_every) {
    size_t received = 0;
    while (!stop) {
      WatchEvent e;
      auto r = client->Next(&e, In(milliseconds(500)));
      if (r == WatchClient::Result::kTimeout) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (r == WatchClient::Result::kEnd) {
        ended = true;
        break;
      }
      if (r == WatchClient::Result::kError) {
        Fail("the stream failed: " + client->error());
        break;
      }
      if (drop_every && e.type != "BOOKMARK" &&
          ++received % static_cast<size_t>(drop_every) == 0) {
        ++dropped;  // the self-check: a watcher that loses events
        continue;
      }
      auto applied = model.Apply(e);
      if (!applied) Fail(applied.message());
      if (base && model.initial_events_end() &&
          (e.type == "BOOKMARK" || model.events() % 20 == 0)) {
        snapshots.push_back({model.last_rv(), model.state()});
        if (snapshots.size() > 16) snapshots.pop_front();
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    over = true;
  }
};

class ModelTest : public WalwatchTest {
 protected:
  void TearDown() override {
    stop_readers_ = true;
    stop_writers_ = true;
    for (auto& t : writer_threads_) {
      if (t.joinable()) t.join();
    }
    for (auto& w : watchers_) {
      if (w->thread.joinable()) w->thread.join();
    }
    watchers_.clear();
    writers_.clear();
    WalwatchTest::TearDown();
  }

  std::string Target(const ModelWatcher& w, Rng& rng) {
    std::string t = w.filter.Path() + "?watch=1&allowWatchBookmarks=true" +
                    w.filter.SelectorQuery();
    switch (w.mode) {
      case StartMode::kUnset: break;
      case StartMode::kZero: t += "&resourceVersion=0"; break;
      case StartMode::kMidStream:
      case StartMode::kHandoff:
        t += "&resourceVersion=" + std::to_string(w.start_rv);
        break;
      case StartMode::kWatchList:
        t += "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
        if (rng.Chance(0.5)) t += "&resourceVersion=0";
        break;
    }
    return t;
  }

  // Sets up `w` (state and RV for the mid-stream and handoff modes), opens
  // its watch and starts its reader.
  void Start(ModelWatcher& w, Rng& rng, PgConnection& lister) {
    WatchModel::Options options;
    ModelState initial;
    if (w.mode == StartMode::kMidStream) {
      // From a snapshot of the unfiltered watcher of the same resource: its
      // state at an RV it received, cut down to this filter.
      ModelWatcher* base = nullptr;
      for (auto& b : watchers_) {
        if (b->base && b->filter.resource.resource == w.filter.resource.resource) {
          base = b.get();
        }
      }
      ASSERT_NE(base, nullptr);
      // The base watcher snapshots at each bookmark (every second) once its
      // initial state is in: wait for one rather than start another mode.
      std::unique_lock<std::mutex> lock(base->mu);
      auto deadline = In(kEventWait);
      while (base->snapshots.empty() && !base->over &&
             Clock::now() < deadline) {
        lock.unlock();
        std::this_thread::sleep_for(milliseconds(50));
        lock.lock();
      }
      ASSERT_FALSE(base->snapshots.empty())
          << base->Describe() << " gave no state to start mid-stream from";
      const auto& snap = base->snapshots[static_cast<size_t>(
          rng.Int(0, static_cast<int>(base->snapshots.size()) - 1))];
      initial = FilterModelState(snap.state, w.filter);
      w.start_rv = snap.rv;
      options.lenient_rv = snap.rv;
    }
    if (w.mode == StartMode::kHandoff) {
      ListedState listed;
      ASSERT_TRUE(ListWithHandoff(lister, socket_, w.filter, &listed,
                                  In(kEventWait)));
      initial = std::move(listed.state);
      w.start_rv = listed.rv;
      handoff_retries_ += listed.attempts - 1;
    }
    options.initial_events_expected = w.mode == StartMode::kWatchList;
    w.model = WatchModel(std::move(initial), w.start_rv, options);
    // The state readers may ask for a retry (409, 504) under load, as the
    // protocol allows; a client retries.
    for (int attempt = 1;; ++attempt) {
      w.target = Target(w, rng);
      ASSERT_TRUE(w.client->Open(socket_, w.target, In(kEventWait)));
      if (w.client->status() == 200) break;
      bool retry = (w.client->status() == 409 || w.client->status() == 504) &&
                   attempt < 5 && w.mode != StartMode::kMidStream &&
                   w.mode != StartMode::kHandoff;
      ASSERT_TRUE(retry) << "GET " << w.target << ": HTTP "
                         << w.client->status() << " " << w.client->body();
      ++open_retries_;
      w.client = std::make_unique<WatchClient>();
    }
    w.thread = std::thread([this, &w] { w.Read(stop_readers_, drop_every_); });
  }

  std::string socket_;
  int drop_every_ = 0;
  int handoff_retries_ = 0;
  int open_retries_ = 0;
  std::atomic<bool> stop_readers_{false};
  std::atomic<bool> stop_writers_{false};
  std::vector<std::unique_ptr<ModelWriter>> writers_;
  std::vector<std::thread> writer_threads_;
  std::vector<std::unique_ptr<ModelWatcher>> watchers_;
};

TEST_F(ModelTest, RandomWatchersAgreeWithSqlAfterRandomWrites) {
  const ModelConfig config = ModelConfig::FromEnvironment();
  std::cout << "[  MODEL   ] WALWATCH_MODEL_SEED=" << config.seed
            << " WALWATCH_MODEL_SECONDS=" << config.seconds
            << " watchers=" << config.watchers << " writers=" << config.writers
            << " WALWATCH_MODEL_LABEL_CHANGES=" << config.label_changes
            << (config.drop_every
                    ? " DROPPING every " + std::to_string(config.drop_every) +
                          "th event (self-check: must fail)"
                    : "")
            << std::endl;
  RecordProperty("seed", std::to_string(config.seed));
  ASSERT_GE(config.writers, 1);
  drop_every_ = config.drop_every;

  // A bookmark every second: each watcher's RV moves on while its filter
  // sees no writes, so that its catching up is seen as it happens.
  auto options = DefaultOptions();
  options.extra_args.push_back("--bookmark-interval=1s");
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  socket_ = ww->socket_path();
  Rng rng(config.seed);

  for (int i = 0; i < config.writers; ++i) {
    writers_.push_back(std::make_unique<ModelWriter>(
        i, config.writers, Conninfo(), config.seed * 1000003 + i + 1,
        config.label_changes != 0));
  }
  // A state before any watcher: the initial states are not trivial.
  for (auto& w : writers_) w->Populate(120 / config.writers);

  const auto begin = Clock::now();
  const auto writers_stop = begin + seconds(config.seconds);

  // The unfiltered watchers, one per resource (WatchList): the source of
  // mid-stream RVs and states.
  int next_id = 0;
  PgConnection lister = Connect();
  for (const auto& r : kResources) {
    auto w = std::make_unique<ModelWatcher>();
    w->id = next_id++;
    w->filter.resource = r;
    w->mode = StartMode::kWatchList;
    w->base = true;
    watchers_.push_back(std::move(w));
    ASSERT_NO_FATAL_FAILURE(Start(*watchers_.back(), rng, lister));
  }

  // The random watchers: every mode at least once, started at random times
  // in the first 60% of the run.
  ASSERT_GE(config.watchers, 5) << "one watcher per start mode at least";
  std::vector<StartMode> modes;
  for (int i = 0; i < config.watchers; ++i) {
    modes.push_back(static_cast<StartMode>(i % 5));
  }
  std::shuffle(modes.begin(), modes.end(), rng.engine());
  std::vector<milliseconds> starts;
  for (int i = 0; i < config.watchers; ++i) {
    starts.push_back(milliseconds(rng.Int(0, config.seconds * 600)));
  }
  std::sort(starts.begin(), starts.end());
  std::vector<ModelFilter> filters;
  for (int i = 0; i < config.watchers; ++i) filters.push_back(RandomFilter(rng));

  for (auto& w : writers_) {
    writer_threads_.emplace_back([this, w = w.get()] { w->Run(stop_writers_); });
  }
  for (int i = 0; i < config.watchers; ++i) {
    std::this_thread::sleep_until(begin + starts[i]);
    auto w = std::make_unique<ModelWatcher>();
    w->id = next_id++;
    w->filter = filters[i];
    w->mode = modes[i];
    watchers_.push_back(std::move(w));
    ASSERT_NO_FATAL_FAILURE(Start(*watchers_.back(), rng, lister))
        << watchers_.back()->Describe();
  }
  std::this_thread::sleep_until(writers_stop);
  stop_writers_ = true;
  for (auto& t : writer_threads_) t.join();
  writer_threads_.clear();

  // Everything written is at or below this RV: wait until every watcher
  // has reached it (or its stream is over, which fails below).
  uint64_t final_rv = 0;
  ASSERT_TRUE(GetFreshRv(socket_, &final_rv, In(kEventWait)));
  const auto catchup_start = Clock::now();
  const auto catchup_deadline = catchup_start + seconds(config.catchup_seconds);
  for (;;) {
    bool all_there = true;
    for (auto& w : watchers_) {
      std::lock_guard<std::mutex> lock(w->mu);
      all_there = all_there && (w->over || w->model.last_rv() >= final_rv);
    }
    if (all_there || Clock::now() > catchup_deadline) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  const double catchup =
      std::chrono::duration<double>(Clock::now() - catchup_start).count();
  stop_readers_ = true;
  for (auto& w : watchers_) w->thread.join();

  // The writers' work.
  std::ostringstream summary;
  std::map<std::string, size_t> totals;
  size_t errors = 0;
  for (auto& w : writers_) {
    for (const auto& [what, n] : w->counts()) totals[what] += n;
    errors += w->errors();
    if (w->errors()) summary << "  writer error: " << w->last_error() << "\n";
  }
  summary << "  writes:";
  for (const auto& [what, n] : totals) summary << " " << what << "=" << n;
  summary << " errors=" << errors << "\n  final RV " << final_rv
          << ", reached by the watchers " << catchup
          << " s after the writers stopped; handoff 409s " << handoff_retries_
          << ", watch retries " << open_retries_ << "\n";
  for (auto& w : watchers_) {
    summary << "  " << w->Describe() << ": " << w->model.events()
            << " events, " << w->model.bookmarks() << " bookmarks, "
            << w->model.state().size() << " objects, last RV "
            << w->model.last_rv() << "\n";
  }
  std::cout << summary.str();

  // Statements that failed (a unique violation where a cluster removal
  // raced a writer, a deadlock) are rare; many mean the writer is broken.
  size_t writes = 0;
  for (const auto& [what, n] : totals) writes += n;
  EXPECT_LT(errors * 20, writes + 20) << "writers failed too often";
  EXPECT_GT(totals["transaction"], 0u);
  EXPECT_GT(totals["update-new-uid"], 0u);
  // Every start mode ran, as it was meant to start.
  std::map<std::string, int> started;
  for (auto& w : watchers_) {
    if (!w->base) ++started[ModeName(w->mode)];
  }
  for (StartMode m : {StartMode::kUnset, StartMode::kZero,
                      StartMode::kMidStream, StartMode::kWatchList,
                      StartMode::kHandoff}) {
    EXPECT_GE(started[ModeName(m)], 1) << "no random watcher started "
                                       << ModeName(m);
    if (m == StartMode::kMidStream || m == StartMode::kHandoff) {
      for (auto& w : watchers_) {
        if (w->mode == m) {
          EXPECT_GT(w->start_rv, 0u) << w->Describe() << ": no start RV";
        }
      }
    }
  }

  for (auto& w : watchers_) {
    SCOPED_TRACE(w->Describe() + "\n  GET " + w->target);
    for (const auto& f : w->failures) ADD_FAILURE() << f;
    EXPECT_FALSE(w->ended) << "the stream ended before the test closed it";
    EXPECT_GE(w->model.last_rv(), final_rv)
        << "the watcher did not reach the RV of the last write within "
        << config.catchup_seconds
        << " s after the writers stopped: walwatch did not catch up, or its "
           "bookmarks' RVs are stale";
    if (w->mode == StartMode::kWatchList) {
      EXPECT_TRUE(w->model.initial_events_end())
          << "no BOOKMARK annotated " << kInitialEventsEndAnnotation;
    } else {
      EXPECT_FALSE(w->model.initial_events_end())
          << "a BOOKMARK annotated " << kInitialEventsEndAnnotation
          << " without sendInitialEvents";
    }
    ModelState expected = QueryModelState(db(), w->filter);
    EXPECT_TRUE(CompareModelStates(expected, w->model.state(), &w->model))
        << "(dropped by the self-check: " << w->dropped << ")";
  }
}

}  // namespace
}  // namespace walwatch::itest
