#include "tests/integration/support/model_run.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace walwatch::itest {

ModelConfig ModelConfig::FromEnvironment(ModelConfig c) {
  auto get = [](const char* name, auto* value) {
    const char* v = std::getenv(name);
    if (v && *v) {
      *value = static_cast<std::decay_t<decltype(*value)>>(std::stoull(v));
    }
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

ModelConfig ModelConfig::FromEnvironment() {
  return FromEnvironment(ModelConfig());
}

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

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
  ModelWriter(int index, int count, std::unique_ptr<ModelSql> sql,
              uint64_t seed, bool label_changes)
      : index_(index),
        count_(count),
        label_changes_(label_changes),
        sql_(std::move(sql)),
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
        Count("remove-cluster", sql_->RemoveCluster(rng_.Pick(kClusters)));
      } else if (index_ == 0 && dice < 4) {
        const auto& r = rng_.Pick(kResources);
        Count("remove-resource", sql_->RemoveCluster(rng_.Pick(kClusters), &r));
      } else if (dice < 150) {
        Transaction();
      } else {
        WriteOne();
      }
    } catch (const std::runtime_error& e) {
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
    sql_->Begin();
    try {
      int n = rng_.Int(2, 6);
      for (int i = 0; i < n; ++i) WriteOne();
      if (rng_.Chance(0.05)) {
        sql_->Rollback();
        Count("rolled-back-transaction");
      } else {
        sql_->Commit();
        Count("transaction");
      }
    } catch (...) {
      try {
        sql_->Rollback();
      } catch (const std::runtime_error&) {
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

  // The row key of `t`.
  static Resource KeyOf(const Target& t) {
    Resource r;
    r.group = t.resource.group;
    r.version = t.resource.version;
    r.resource = t.resource.resource;
    r.cluster = t.cluster;
    r.ns = t.ns;
    r.name = t.name;
    return r;
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
    std::optional<ModelSql::Row> row = sql_->Find(KeyOf(t));
    if (!row) {
      sql_->Insert(NewSpec(t, NewUid()));
      ++inserted_;
      return Count("insert");
    }
    std::string uid = row->uid;
    int dice = rng_.Int(0, 99);
    if (dice < 40) {
      ModelObjectSpec s = NewSpec(t, uid);
      if (!label_changes_ || rng_.Chance(0.3)) {  // the same labels
        auto old = nlohmann::json::parse(row->object);
        s.labels = old["metadata"]["labels"].get<std::map<std::string, std::string>>();
      }
      sql_->Update(s);
      Count("update");
    } else if (dice < 55) {
      sql_->Update(NewSpec(t, NewUid()));
      Count("update-new-uid");
    } else if (dice < 75) {
      Resource r;
      r.cluster = t.cluster;
      r.uid = uid;
      r.name = t.name;
      sql_->RecordKubeEvent(r, "Reason" + std::to_string(rng_.Int(0, 3)));
      Count("record-event");
    } else {
      ModelObjectSpec s = NewSpec(t, uid);
      sql_->Delete(s.row);
      Count("delete");
    }
  }

  const int index_, count_;
  const bool label_changes_;
  std::unique_ptr<ModelSql> sql_;
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

// One run: the writers, the watchers and their threads, which it stops and
// joins however the run ends.
class ModelRun {
 public:
  ModelRun(ModelDatabase& db, const ModelConfig& config)
      : db_(db), config_(config) {}
  ~ModelRun() {
    stop_readers_ = true;
    stop_writers_ = true;
    for (auto& t : writer_threads_) {
      if (t.joinable()) t.join();
    }
    for (auto& w : watchers_) {
      if (w->thread.joinable()) w->thread.join();
    }
  }

  void Run();

 private:
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
  void Start(ModelWatcher& w, Rng& rng, ModelSql& lister) {
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
      ASSERT_TRUE(
          lister.ListWithHandoff(socket_, w.filter, &listed, In(kEventWait)));
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

  ModelDatabase& db_;
  const ModelConfig config_;
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


void ModelRun::Run() {
  const ModelConfig& config = config_;
  std::cout << "[  MODEL   ] " << db_.ModelDatabaseName()
            << " WALWATCH_MODEL_SEED=" << config.seed
            << " WALWATCH_MODEL_SECONDS=" << config.seconds
            << " watchers=" << config.watchers << " writers=" << config.writers
            << " WALWATCH_MODEL_LABEL_CHANGES=" << config.label_changes
            << (config.drop_every
                    ? " DROPPING every " + std::to_string(config.drop_every) +
                          "th event (self-check: must fail)"
                    : "")
            << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(config.seed));
  ASSERT_GE(config.writers, 1);
  drop_every_ = config.drop_every;

  // A bookmark every second: each watcher's RV moves on while its filter
  // sees no writes, so that its catching up is seen as it happens.
  auto options = db_.ModelWalwatchOptions();
  options.extra_args.push_back("--bookmark-interval=1s");
  auto* ww = db_.StartModelWalwatch(options);
  ASSERT_NE(ww, nullptr);
  socket_ = ww->socket_path();
  Rng rng(config.seed);

  for (int i = 0; i < config.writers; ++i) {
    writers_.push_back(std::make_unique<ModelWriter>(
        i, config.writers, db_.ConnectModelSql(), config.seed * 1000003 + i + 1,
        config.label_changes != 0));
  }
  // A state before any watcher: the initial states are not trivial.
  for (auto& w : writers_) w->Populate(120 / config.writers);

  const auto begin = Clock::now();
  const auto writers_stop = begin + seconds(config.seconds);

  // The unfiltered watchers, one per resource (WatchList): the source of
  // mid-stream RVs and states.
  int next_id = 0;
  std::unique_ptr<ModelSql> lister = db_.ConnectModelSql();
  for (const auto& r : kResources) {
    auto w = std::make_unique<ModelWatcher>();
    w->id = next_id++;
    w->filter.resource = r;
    w->mode = StartMode::kWatchList;
    w->base = true;
    watchers_.push_back(std::move(w));
    ASSERT_NO_FATAL_FAILURE(Start(*watchers_.back(), rng, *lister));
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
    ASSERT_NO_FATAL_FAILURE(Start(*watchers_.back(), rng, *lister))
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
    ModelState expected = lister->State(w->filter);
    EXPECT_TRUE(CompareModelStates(expected, w->model.state(), &w->model))
        << "(dropped by the self-check: " << w->dropped << ")";
  }
}


}  // namespace

void RunRandomModel(ModelDatabase& db, const ModelConfig& config) {
  ModelRun run(db, config);
  run.Run();
}

}  // namespace walwatch::itest
