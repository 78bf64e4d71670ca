#include "tests/integration/support/reflector_run.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace walwatch::itest {

ReflectorConfig ReflectorConfig::FromEnvironment(ReflectorConfig c) {
  auto get_int = [](const char* name, int* value) {
    const char* v = std::getenv(name);
    if (v && *v) *value = std::atoi(v);
  };
  auto get_string = [](const char* name, std::string* value) {
    const char* v = std::getenv(name);
    if (v && *v) *value = v;
  };
  if (const char* v = std::getenv("WALWATCH_REFLECTOR_SEED"); v && *v) {
    c.seed = static_cast<uint64_t>(std::atoi(v));
  }
  get_int("WALWATCH_REFLECTOR_CLIENTS", &c.clients);
  get_int("WALWATCH_REFLECTOR_SECONDS", &c.seconds);
  get_int("WALWATCH_REFLECTOR_CATCHUP_SECONDS", &c.catchup_seconds);
  get_string("WALWATCH_REFLECTOR_MAX_LOG", &c.max_log);
  get_int("WALWATCH_REFLECTOR_HOT_PAD", &c.hot_pad);
  get_string("WALWATCH_REFLECTOR_QUIET_410", &c.quiet_410);
  get_int("WALWATCH_REFLECTOR_LAGGARDS", &c.laggards);
  return c;
}

ReflectorConfig ReflectorConfig::FromEnvironment() {
  return FromEnvironment(ReflectorConfig());
}

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Dozens of resource types, core and named groups, a CRD, cluster-scoped
// ones. The last three get no row until the writers are running.
const std::vector<ModelResource> kTypes = {
    {"", "v1", "pods", "Pod", true},
    {"apps", "v1", "deployments", "Deployment", true},
    {"", "v1", "namespaces", "Namespace", false},
    {"", "v1", "configmaps", "ConfigMap", true},
    {"", "v1", "secrets", "Secret", true},
    {"", "v1", "services", "Service", true},
    {"", "v1", "endpoints", "Endpoints", true},
    {"", "v1", "serviceaccounts", "ServiceAccount", true},
    {"", "v1", "nodes", "Node", false},
    {"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true},
    {"", "v1", "persistentvolumes", "PersistentVolume", false},
    {"apps", "v1", "statefulsets", "StatefulSet", true},
    {"apps", "v1", "daemonsets", "DaemonSet", true},
    {"apps", "v1", "replicasets", "ReplicaSet", true},
    {"batch", "v1", "jobs", "Job", true},
    {"batch", "v1", "cronjobs", "CronJob", true},
    {"networking.k8s.io", "v1", "ingresses", "Ingress", true},
    {"networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true},
    {"rbac.authorization.k8s.io", "v1", "roles", "Role", true},
    {"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false},
    {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true},
    {"autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true},
    {"storage.k8s.io", "v1", "storageclasses", "StorageClass", false},
    {"example.com", "v1", "widgets", "Widget", true},
    {"stable.example.io", "v1beta1", "gadgets", "Gadget", true},
    // No row when walwatch starts nor when their first watches start.
    {"coordination.k8s.io", "v1", "leases", "Lease", true},
    {"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true},
    {"late.example.org", "v1alpha1", "sprockets", "Sprocket", true},
};
constexpr size_t kLateTypes = 3;
const std::vector<std::string> kClusters = {"c1", "c2", "c3"};
const std::vector<std::string> kNamespaces = {"ns1", "ns2"};


struct Counts {
  std::atomic<int> too_old{0}, too_old_http{0}, expired{0}, fell_behind{0},
      barrier{0}, not_found{0}, retries{0}, relists{0}, resumes{0};
  // Bytes of padding the hot writer has written, and whether the writers
  // have stopped: what a lagging client waits on.
  std::atomic<uint64_t> hot_bytes{0};
  std::atomic<bool> writers_stopped{false};

  // How long each request waited for its response header, by what it
  // asked (an initial state is read before its 200 header; a resume is
  // not), in seconds; a request that got none counts its whole wait.
  void HeaderWait(const std::string& mode, double secs) {
    std::lock_guard<std::mutex> lock(mu);
    header_waits[mode].push_back(secs);
  }
  // The evidence a 410 is checked against: the RV of every live event
  // (not an initial state's ADDED, which carry the state's RV) that any
  // client received, by resource and cluster.
  void Saw(const std::string& resource, const std::string& cluster, uint64_t rv) {
    std::lock_guard<std::mutex> lock(mu);
    seen[resource + "|" + cluster].insert(rv);
  }
  // Whether some client received an event of `resource` (in `cluster`, or
  // in any cluster if empty) with r < rv <= f.
  bool Witnessed(const std::string& resource, const std::string& cluster,
                 uint64_t r, uint64_t f) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [key, rvs] : seen) {
      if (key.compare(0, resource.size() + 1, resource + "|") != 0) continue;
      if (!cluster.empty() && key != resource + "|" + cluster) continue;
      auto it = rvs.upper_bound(r);
      if (it != rvs.end() && *it <= f) return true;
    }
    return false;
  }
  std::mutex mu;
  std::map<std::string, std::vector<double>> header_waits;
  std::map<std::string, std::set<uint64_t>> seen;
};

// "n=.. p50=.. p99=.. max=.." of `v` (sorted here), and how many >= over.
std::string Distribution(std::vector<double> v, double over) {
  if (v.empty()) return "n=0";
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  char buf[160];
  std::snprintf(buf, sizeof buf, "n=%zu p50=%.3f p90=%.3f p99=%.3f max=%.3f s, %zu at >= %.0f s",
                v.size(), at(0.5), at(0.9), at(0.99), v.back(),
                static_cast<size_t>(v.end() - std::lower_bound(v.begin(), v.end(), over)), over);
  return buf;
}

// Writers: Clusterpedia's statements, one autocommit each, plus some
// explicit transactions.
class Writer {
 public:
  Writer(std::unique_ptr<ModelSql> sql, uint64_t seed)
      : sql_(std::move(sql)), rng_(seed) {}

  ModelObjectSpec Spec(const ModelResource& t, const std::string& cluster,
                       const std::string& ns, const std::string& name,
                       size_t pad) {
    ModelObjectSpec s;
    s.row.group = t.group;
    s.row.version = t.version;
    s.row.resource = t.resource;
    s.row.kind = t.kind;
    s.row.cluster = cluster;
    s.row.ns = t.namespaced ? ns : "";
    s.row.name = name;
    s.row.uid = "u" + std::to_string(rng_()) ;
    s.row.uid.resize(std::min<size_t>(s.row.uid.size(), 36));
    s.row.member_rv = std::to_string(++member_rv_);
    s.row.spec = {{"n", rng_() % 1000}, {"pad", std::string(pad, 'x')}};
    s.labels = {{"app", rng_() % 2 ? "web" : "db"}, {"tier", "t" + std::to_string(rng_() % 3)}};
    return s;
  }

  std::string Key(const ModelObjectSpec& s) const {
    return s.row.resource + "/" + s.row.cluster + "/" + s.row.ns + "/" + s.row.name;
  }

  // One random statement on type t.
  void Step(const ModelResource& t, size_t pad, int names) {
    std::string cluster = kClusters[rng_() % kClusters.size()];
    std::string ns = kNamespaces[rng_() % kNamespaces.size()];
    std::string name = t.resource.substr(0, 3) + std::to_string(rng_() % names);
    ModelObjectSpec s = Spec(t, cluster, ns, name, pad);
    auto it = live_.find(Key(s));
    try {
      if (it == live_.end()) {
        sql_->Insert(s);
        live_[Key(s)] = s;
        ++counts["insert"];
        return;
      }
      int op = static_cast<int>(rng_() % 10);
      ModelObjectSpec& cur = it->second;
      if (op < 5) {  // MODIFIED: object and resource_version
        s.row.uid = cur.row.uid;
        sql_->Update(s);
        cur = s;
        ++counts["update"];
      } else if (op < 7) {  // event recording: events only
        sql_->RecordKubeEvent(cur.row, "r" + std::to_string(rng_() % 100));
        ++counts["event-recording"];
      } else if (op < 8) {  // deleted then added: one UPDATE with a new uid
        sql_->Update(s);
        cur = s;
        ++counts["uid-change"];
      } else {
        sql_->Delete(cur.row);
        live_.erase(it);
        ++counts["delete"];
      }
    } catch (const std::exception& e) {
      // A cluster removal by the other writer raced this one, or the row
      // was written by the other writer: learn what the table holds.
      live_.erase(Key(s));
      std::optional<ModelSql::Row> row = sql_->Find(s.row);
      if (row) {
        s.row.uid = row->uid;
        live_[Key(s)] = s;
      }
      ++errors;
      last_error = e.what();
    }
  }

  // An explicit transaction: an object changed twice, a second object, and
  // a new object; then the same object again in the next transaction.
  void Transaction(const ModelResource& t, size_t pad) {
    std::string cluster = kClusters[rng_() % kClusters.size()];
    std::string ns = kNamespaces[rng_() % kNamespaces.size()];
    std::string base = "tx" + std::to_string(rng_() % 6);
    try {
      sql_->Begin();
      ModelObjectSpec a = Spec(t, cluster, ns, base + "a", pad);
      bool existed = live_.count(Key(a)) > 0;
      if (existed) {
        a.row.uid = live_[Key(a)].row.uid;
        sql_->Update(a);
      } else {
        sql_->Insert(a);
      }
      ModelObjectSpec a2 = Spec(t, cluster, ns, base + "a", pad);
      a2.row.uid = a.row.uid;
      sql_->Update(a2);  // changed twice in one transaction
      ModelObjectSpec b = Spec(t, cluster, ns, base + "b", pad);
      if (live_.count(Key(b))) {
        b.row.uid = live_[Key(b)].row.uid;
        sql_->Update(b);
      } else {
        sql_->Insert(b);
      }
      sql_->Commit();
      live_[Key(a2)] = a2;
      live_[Key(b)] = b;
      // The same object in the consecutive transaction.
      sql_->Begin();
      ModelObjectSpec a3 = Spec(t, cluster, ns, base + "a", pad);
      a3.row.uid = a2.row.uid;
      sql_->Update(a3);
      sql_->Delete(b.row);
      sql_->Commit();
      live_[Key(a3)] = a3;
      live_.erase(Key(b));
      ++counts["transaction"];
    } catch (const std::exception& e) {
      try { sql_->Rollback(); } catch (...) {}
      Resync();
      ++errors;
      last_error = e.what();
    }
  }

  void RemoveCluster(const std::string& cluster) {
    sql_->RemoveCluster(cluster);
    ++counts["cluster-removal"];
    Resync();
  }

  // Forgets what the other writer may have changed.
  void Resync() {
    for (auto it = live_.begin(); it != live_.end();) {
      const auto& r = it->second.row;
      std::optional<ModelSql::Row> row = sql_->Find(r);
      it = row && row->uid == r.uid ? std::next(it) : live_.erase(it);
    }
  }

  std::map<std::string, size_t> counts;
  size_t errors = 0;
  std::string last_error;

 private:
  std::unique_ptr<ModelSql> sql_;
  std::mt19937_64 rng_;
  uint64_t member_rv_ = 1000;
  std::map<std::string, ModelObjectSpec> live_;
};

// A client written the way client-go's reflector works.
struct Client {
  int id = 0;
  ModelFilter filter;
  bool watch_list = false;
  bool quiet = false;  // its resource's events outlast its resumes (see top)
  // Before each resume, wait until the hot writer has written this many
  // more bytes (or the writers stop): a client that falls behind the log.
  uint64_t lag_bytes = 0;
  uint64_t seed = 0;

  std::mutex mu;
  ModelState state;
  uint64_t last_rv = 0;
  bool listing = true;  // in a WatchList's initial state
  std::vector<std::string> failures;
  std::map<std::string, int> causes;  // 410 by cause, this client
  std::vector<std::string> too_old_seen;  // the first few 410 Expired
  // Every 410 Expired: the RV refused and the floor it named.
  std::vector<std::pair<uint64_t, uint64_t>> expiries;
  // uid|cluster|rv -> the version received with that RV.
  std::map<std::string, std::string> versions;
  std::atomic<bool> started{false};

  std::string Describe() const {
    return "client " + std::to_string(id) + (watch_list ? " (WatchList) " : " (RV=0) ") +
           filter.ToString();
  }

  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (failures.size() < 20) failures.push_back(what);
  }

  void Count(Counts& c, const std::string& cause) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++causes[cause];
    }
    if (cause == "too-old") ++c.too_old;
    else if (cause == "too-old-http") ++c.too_old_http;
    else if (cause == "fell-behind") ++c.fell_behind;
    else if (cause == "barrier") ++c.barrier;
    else ++c.expired;
  }

  // "too old resource version: R (F)", walwatch's one 410 Expired format:
  // R is refused because the selection's floor F (the commit of its newest
  // evicted event, or a barrier) is above it. F <= R would be walwatch
  // contradicting itself. A resume's 410 (asked > 0) must name the RV the
  // client asked for, its own last RV.
  void CheckTooOld(const std::string& msg, uint64_t asked, const std::string& t) {
    unsigned long long r = 0, f = 0;
    if (std::sscanf(msg.c_str(), "too old resource version: %llu (%llu)", &r, &f) != 2) {
      Fail("GET " + t + ": 410 message without RV and floor: " + msg);
      return;
    }
    if (f <= r) {
      Fail("GET " + t + ": 410 for RV " + std::to_string(r) + " at or above its floor " +
           std::to_string(f));
    }
    if (asked != 0 && r != asked) {
      Fail("GET " + t + ": 410 names RV " + std::to_string(r) + ", the client asked " + std::to_string(asked));
    }
    std::lock_guard<std::mutex> lock(mu);
    expiries.emplace_back(r, f);
    if (too_old_seen.size() < 3) {
      too_old_seen.push_back("RV " + std::to_string(r) + " floor " + std::to_string(f) +
                             (asked ? " (resume)" : ""));
    }
  }

  void Run(const std::string& socket, std::atomic<bool>& stop, Counts& counts) {
    std::mt19937_64 rng(seed);
    bool relist = true;
    int opens = 0;
    while (!stop) {
      std::string t = filter.Path() + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
                      std::to_string(2 + rng() % 4) + filter.SelectorQuery();
      if (relist) {
        t += watch_list ? "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                        : "&resourceVersion=0";
      } else {
        t += "&resourceVersion=" + std::to_string(last_rv);
      }
      WatchClient w;
      const auto asked_at = Clock::now();
      auto opened = w.Open(socket, t, In(seconds(20)));
      counts.HeaderWait(!relist ? "resume" : watch_list ? "WatchList" : "RV=0",
                        std::chrono::duration<double>(Clock::now() - asked_at).count());
      if (!opened) {
        Fail("GET " + t + ": " + opened.message());
        std::this_thread::sleep_for(milliseconds(200));
        continue;
      }
      ++opens;
      if (w.status() == 410) {
        Count(counts, "too-old-http");
        relist = true;
        ++counts.relists;
        continue;
      }
      if (w.status() == 404) {
        ++counts.not_found;
        Fail("GET " + t + ": 404 " + w.body());
        std::this_thread::sleep_for(milliseconds(200));
        continue;
      }
      if (w.status() == 409 || w.status() == 504 || w.status() == 429) {
        ++counts.retries;
        std::this_thread::sleep_for(milliseconds(100));
        continue;
      }
      if (w.status() != 200) {
        Fail("GET " + t + ": HTTP " + std::to_string(w.status()) + " " + w.body());
        std::this_thread::sleep_for(milliseconds(500));
        continue;
      }
      started = true;
      ModelState fresh;
      bool in_list = relist;
      if (relist) {
        std::lock_guard<std::mutex> lock(mu);
        listing = true;
        if (!watch_list) {
          // RV=0: the synthetic ADDED come first; the state is replaced.
          state.clear();
        }
      } else {
        ++counts.resumes;
      }
      bool first = true;
      uint64_t stream_rv = 0;
      uint64_t state_rv = 0;  // an RV=0 list's: its first event's RV
      bool go_relist = false;
      while (!stop) {
        WatchEvent e;
        auto r = w.Next(&e, In(milliseconds(300)));
        if (r == WatchClient::Result::kTimeout) continue;
        if (r == WatchClient::Result::kEnd) break;  // timeoutSeconds: resume
        if (r == WatchClient::Result::kError) {
          Fail("GET " + t + ": " + w.error());
          go_relist = true;
          break;
        }
        if (e.type == "ERROR") {
          int code = e.object.value("code", 0);
          std::string msg = e.object.value("message", "");
          if (code != 410) {
            Fail("GET " + t + ": ERROR " + e.raw);
          } else if (msg.find("fell too far behind") != std::string::npos) {
            Count(counts, "fell-behind");
          } else if (msg.find("too old resource version") != std::string::npos) {
            // The first message: the RV asked for was refused; later: the
            // stream's own events were evicted before it read them.
            Count(counts, first ? "too-old" : "expired");
            CheckTooOld(msg, first && !relist ? last_rv : 0, t);
          } else {
            Count(counts, "barrier");
          }
          go_relist = true;
          break;
        }
        first = false;
        uint64_t rv = e.rv();
        std::lock_guard<std::mutex> lock(mu);
        if (rv < stream_rv) {
          failures.push_back("RV went back from " + std::to_string(stream_rv) +
                             " to " + std::to_string(rv) + " on GET " + t + ": " + e.raw.substr(0, 300));
        }
        stream_rv = std::max(stream_rv, rv);
        if (e.type == "BOOKMARK") {
          auto& md = e.object["metadata"];
          bool end = md.contains("annotations") && md["annotations"].is_object() &&
                     md["annotations"].value(kInitialEventsEndAnnotation, "") == "true";
          if (end && in_list && watch_list) {
            state = std::move(fresh);
            fresh.clear();
            in_list = false;
          }
          last_rv = rv;
          if (!in_list || !watch_list) listing = false;
          continue;
        }
        if (e.type != "ADDED" && e.type != "MODIFIED" && e.type != "DELETED") {
          failures.push_back("unknown event type: " + e.raw.substr(0, 300));
          continue;
        }
        nlohmann::json norm = NormalizeWatchedObject(e.object);
        ObjectKey key = KeyOfObject(e.object);
        std::string uid = e.object["metadata"].value("uid", "");
        std::string vkey = uid + "|" + key.cluster + "|" + std::to_string(rv);
        std::string version = e.type == "DELETED" ? "" : norm.dump();
        if (e.type != "DELETED") {
          auto [it, inserted] = versions.emplace(vkey, version);
          if (!inserted && it->second != version) {
            failures.push_back("two versions of " + key.ToString() + " uid " + uid +
                               " share RV " + std::to_string(rv) + ":\n    " +
                               it->second.substr(0, 300) + "\n    " + version.substr(0, 300));
          }
        }
        // Live events only: a WatchList's after its end bookmark; an RV=0
        // stream's above its first event's (the state's RV P).
        if (!in_list || (!watch_list && state_rv != 0 && rv > state_rv)) {
          counts.Saw(filter.resource.resource, key.cluster, rv);
        }
        if (in_list && !watch_list && state_rv == 0) state_rv = rv;
        ModelState& target = (in_list && watch_list) ? fresh : state;
        if (e.type == "DELETED") {
          target.erase(key);  // unknown after a relist: fine
        } else {
          target[key] = ModelObjectFromStored(norm);
        }
        last_rv = rv;
        if (!(in_list && watch_list)) listing = false;
      }
      relist = go_relist;
      if (go_relist) ++counts.relists;
      if (in_list && watch_list && !go_relist && !stop) {
        // The stream ended before its initial-events-end bookmark.
        Fail("GET " + t + ": ended before the initial-events-end bookmark");
        relist = true;
      }
      if (lag_bytes > 0 && !relist) {
        const uint64_t from = counts.hot_bytes;
        while (!stop && !counts.writers_stopped &&
               counts.hot_bytes < from + lag_bytes) {
          std::this_thread::sleep_for(milliseconds(20));
        }
      }
    }
    (void)opens;
  }
};


// One run: the clients, their threads and what the threads use, which it
// keeps until it has stopped and joined them, however the run ends.
class ReflectorRun {
 public:
  ReflectorRun(ModelDatabase& db, const ReflectorConfig& config)
      : db_(db), config_(config) {}
  ~ReflectorRun() {
    stop_ = true;
    for (auto& t : threads_) if (t.joinable()) t.join();
  }

  void Run(ReflectorOutcome* outcome);

 private:
  ModelDatabase& db_;
  const ReflectorConfig config_;
  std::string socket_;
  Counts counts_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

void ReflectorRun::Run(ReflectorOutcome* outcome) {
  const uint64_t seed = config_.seed;
  const int nclients = config_.clients;
  const int secs = config_.seconds;
  std::cout << "[REFLECTOR] " << db_.ModelDatabaseName()
            << " WALWATCH_REFLECTOR_SEED=" << seed
            << " WALWATCH_REFLECTOR_CLIENTS=" << nclients
            << " WALWATCH_REFLECTOR_SECONDS=" << secs << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);

  // A state before walwatch: one object of every type but the late ones.
  {
    Writer init(db_.ConnectModelSql(), seed + 7);
    for (size_t i = 0; i + kLateTypes < kTypes.size(); ++i) {
      for (int k = 0; k < 4; ++k) init.Step(kTypes[i], i == 0 ? 1500 : 100, 4);
    }
  }
  // The database log's own account of every event (the WAL, the binlog),
  // to check each 410 Expired against.
  std::unique_ptr<EventWitness> witness = db_.StartEventWitness();
  EventWitness& wal = *witness;
  WalwatchOptions options = db_.ModelWalwatchOptions();
  options.max_log_bytes = config_.max_log;
  options.log_level = "info";
  auto* ww = db_.StartModelWalwatch(options);
  ASSERT_NE(ww, nullptr);
  socket_ = ww->socket_path();
  const std::string& socket = socket_;

  Counts& counts = counts_;
  std::vector<std::unique_ptr<Client>>& clients = clients_;
  for (int i = 0; i < nclients; ++i) {
    auto c = std::make_unique<Client>();
    c->id = i;
    // A quarter watch pods; the rest a quiet type.
    size_t ti = i % 4 == 0 ? 0 : 1 + rng() % (kTypes.size() - 1);
    c->filter.resource = kTypes[ti];
    c->quiet = ti != 0;
    c->watch_list = rng() % 2;
    c->seed = seed * 7919 + i;
    int f = static_cast<int>(rng() % 6);
    if (f == 1) c->filter.cluster = kClusters[rng() % kClusters.size()];
    if (f == 2 && kTypes[ti].namespaced) c->filter.ns = kNamespaces[rng() % 2];
    if (f == 3) c->filter.label_selector = rng() % 2 ? "app=web" : "tier in (t0,t1)";
    if (f == 4 && kTypes[ti].namespaced) c->filter.field_selector = "metadata.namespace=ns1";
    if (f == 5) {
      c->filter.cluster = kClusters[rng() % kClusters.size()];
      c->filter.label_selector = "app!=web";
    }
    clients.push_back(std::move(c));
  }
  // The laggards: clients of the hot resource that resume only after the
  // hot writer has written lag_bytes more, so their RVs are evicted and
  // their resumes must end in a 410 Expired the log witnesses, then a
  // relist.
  for (int i = 0; i < config_.laggards; ++i) {
    auto c = std::make_unique<Client>();
    c->id = nclients + i;
    c->filter.resource = kTypes[0];
    if (i % 2 == 1) c->filter.cluster = kClusters[0];
    c->watch_list = i % 4 >= 2;
    c->seed = seed * 7919 + nclients + i;
    c->lag_bytes = config_.lag_bytes;
    clients.push_back(std::move(c));
  }
  for (auto& c : clients) {
    threads_.emplace_back([&, c = c.get()] { c->Run(socket, stop_, counts); });
  }

  // Writers: the hot pods; the quiet rest with transactions, uid changes
  // and cluster removals; both stop at writers_stop.
  std::atomic<bool> stop_writers{false};
  Writer hot(db_.ConnectModelSql(), seed + 1);
  Writer quiet(db_.ConnectModelSql(), seed + 2);
  const auto begin = Clock::now();
  const auto writers_stop = begin + seconds(secs);
  const size_t hot_pad = static_cast<size_t>(config_.hot_pad);
  std::thread hot_thread([&] {
    while (!stop_writers) {
      hot.Step(kTypes[0], hot_pad, 40);
      counts.hot_bytes += hot_pad;
      std::this_thread::sleep_for(milliseconds(3));
    }
  });
  std::thread quiet_thread([&] {
    std::mt19937_64 qrng(seed + 3);
    int n = 0;
    while (!stop_writers) {
      ++n;
      if (n % 400 == 0) {
        quiet.RemoveCluster("c3");
      } else if (n % 25 == 0) {
        quiet.Transaction(kTypes[1 + qrng() % (kTypes.size() - 1)], 100);
      } else {
        // The late types get their first rows a few seconds in.
        size_t span = Clock::now() - begin < seconds(4) ? kTypes.size() - 1 - kLateTypes
                                                       : kTypes.size() - 1;
        quiet.Step(kTypes[1 + qrng() % span], 100, 4);
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  std::this_thread::sleep_until(writers_stop);
  stop_writers = true;
  counts.writers_stopped = true;
  hot_thread.join();
  quiet_thread.join();

  uint64_t final_rv = 0;
  ASSERT_TRUE(GetFreshRv(socket, &final_rv, In(seconds(30))));
  // Caught up: every client has received an RV at or past the last write
  // (a bookmark comes at least at each timeoutSeconds, <= 5 s).
  // An upper bound on catching up, not a measure of speed.
  const auto deadline =
      Clock::now() + seconds(config_.catchup_seconds);
  std::vector<Client*> behind;
  for (;;) {
    behind.clear();
    for (auto& c : clients) {
      std::lock_guard<std::mutex> lock(c->mu);
      if (c->last_rv < final_rv || c->listing) behind.push_back(c.get());
    }
    if (behind.empty() || Clock::now() > deadline) break;
    std::this_thread::sleep_for(milliseconds(200));
  }
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
  const double took = std::chrono::duration<double>(Clock::now() - begin).count();

  std::ostringstream summary;
  summary << "[REFLECTOR] writes:";
  for (auto* w : {&hot, &quiet}) {
    for (const auto& [what, n] : w->counts) summary << " " << what << "=" << n;
  }
  summary << " errors=" << hot.errors + quiet.errors << " (" << quiet.last_error << hot.last_error
          << ")\n[REFLECTOR] final RV " << final_rv << ", " << took << " s; 410s: too-old="
          << counts.too_old << " too-old-http=" << counts.too_old_http
          << " expired-mid-stream=" << counts.expired << " fell-behind=" << counts.fell_behind
          << " barrier=" << counts.barrier << "; 404s=" << counts.not_found
          << " retries=" << counts.retries << " relists=" << counts.relists
          << " resumes=" << counts.resumes << "\n";
  std::cout << summary.str();
  EXPECT_GT(hot.counts["insert"], 0u);
  EXPECT_GT(quiet.counts["transaction"], 0u);
  EXPECT_GT(quiet.counts["uid-change"], 0u);
  EXPECT_GT(quiet.counts["cluster-removal"], 0u);

  // Every 410 Expired must be witnessed by the database's log (the WAL, the
  // binlog): a transaction that gave
  // an event of the client's selection (its resource, in its cluster if it
  // watches one) committed above the RV refused and at or below the floor
  // named, so an event the client would still have received is gone. That
  // is walwatch's 410 rule, checked against the database for every client.
  //
  // Quiet resources. By default none of their clients may get a 410 at
  // all (see the top: at make test's size their events outlast every
  // resume). WALWATCH_REFLECTOR_QUIET_410=witnessed (the soak, where that
  // premise fails on 2 cores) allows them the 410 Expired the log
  // witnesses; any other 410 to a quiet client fails. The summary also
  // counts the 410s a client-side witness accounts for (some client
  // received the event), which cannot see an event evicted before anyone
  // read it.
  wal.CatchUp();
  std::unique_ptr<ModelSql> checker = db_.ConnectModelSql();
  const bool witnessed_ok = config_.quiet_410 == "witnessed";
  int quiet_410 = 0, quiet_wal = 0, quiet_seen = 0;
  size_t hot_expiries = 0, hot_wal = 0, hot_seen = 0;
  for (auto& c : clients) {
    std::lock_guard<std::mutex> lock(c->mu);
    SCOPED_TRACE(c->Describe());
    for (const auto& f : c->failures) ADD_FAILURE() << f;
    int by_wal = 0, by_clients = 0;
    for (const auto& [r, f] : c->expiries) {
      if (counts.Witnessed(c->filter.resource.resource, c->filter.cluster, r, f)) ++by_clients;
      if (wal.Witnessed(c->filter.resource.resource, c->filter.cluster, r, f)) {
        ++by_wal;
      } else {
        ADD_FAILURE() << "410 Expired for RV " << r << " (floor " << f
                      << "), but the database's log holds no event of this selection in (" << r << ", "
                      << f << "]: the watch lost nothing";
      }
    }
    outcome->expired += static_cast<int>(c->expiries.size());
    if (c->lag_bytes > 0) {
      outcome->laggard_expired += static_cast<int>(c->expiries.size());
    }
    outcome->witnessed += by_wal;
    int total = 0;
    std::string causes;
    for (const auto& [cause, n] : c->causes) {
      total += n;
      causes += " " + cause + "=" + std::to_string(n);
    }
    if (c->quiet) {
      quiet_410 += total;
      quiet_wal += by_wal;
      quiet_seen += by_clients;
      if (!witnessed_ok && total > 0) {
        ADD_FAILURE() << total << " x 410 (" << causes
                      << ") for a quiet resource, whose events should outlast its resumes; first: "
                      << (c->too_old_seen.empty() ? "" : c->too_old_seen.front());
      }
      if (witnessed_ok && total > static_cast<int>(c->expiries.size())) {
        ADD_FAILURE() << total - c->expiries.size() << " of " << total << " x 410 (" << causes
                      << ") for a quiet resource are not an Expired naming a floor";
      }
    } else {
      hot_expiries += c->expiries.size();
      hot_wal += by_wal;
      hot_seen += by_clients;
    }
    if (std::find(behind.begin(), behind.end(), c.get()) != behind.end()) {
      ADD_FAILURE() << "did not catch up to RV " << final_rv << " (at " << c->last_rv
                    << (c->listing ? ", still listing" : "") << ")";
      continue;
    }
    ModelState expected = checker->State(c->filter);
    EXPECT_TRUE(CompareModelStates(expected, c->state));
  }
  std::cout << "[REFLECTOR] log witness: " << wal.transactions()
            << " transactions that gave events\n"
            << "[REFLECTOR] 410s to clients of quiet resources: " << quiet_410 << ", of them "
            << quiet_wal << " witnessed by the log (an event of the selection committed in (RV, "
            << "floor]; rule: " << (witnessed_ok ? "witnessed ones allowed" : "none allowed")
            << "), " << quiet_seen << " by an event some client received; hot resource's 410 "
            << "Expired: " << hot_expiries << ", " << hot_wal << " witnessed by the log, "
            << hot_seen << " by clients" << std::endl;
  for (const auto& [mode, waits] : counts.header_waits) {
    std::cout << "[REFLECTOR] response header wait, " << mode << ": "
              << Distribution(waits, 20) << std::endl;
  }
  outcome->other_410 = counts.too_old_http + counts.fell_behind +
                       counts.barrier;
}


}  // namespace

ReflectorOutcome RunReflectors(ModelDatabase& db,
                               const ReflectorConfig& config) {
  ReflectorOutcome outcome;
  ReflectorRun run(db, config);
  run.Run(&outcome);
  return outcome;
}

}  // namespace walwatch::itest
