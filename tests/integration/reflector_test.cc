// The consumer's test (issue 18, part 6): many clients written the way
// client-go's reflector works read walwatch while Clusterpedia-shaped writers
// run. Each client lists (RV=0 initial state, or WatchList ending with the
// k8s.io/initial-events-end bookmark), then watches with bookmarks and a
// random timeoutSeconds, resumes from the last RV it received, and relists
// on 410. One hot resource (pods) overruns a small --max-log-bytes several
// times; the others are quiet.
//
// Checked: when the writers stop, every client's state equals SQL for its
// filter; no two different versions of one object (uid + cluster) share an
// RV; RVs never decrease along a stream; clients of quiet resources get no
// 410 at all; every 410 Expired names a floor above the RV it refuses, and
// a resume's 410 names the client's own last RV; every 410 Expired is
// witnessed by the WAL (WalWitness, a wal2json slot of the test's own): a
// transaction that gave an event of the client's selection committed above
// the RV refused and at or below the floor named, so the client really
// lost an event; no watch of a known resource type is answered 404.
//
// "Quiet" assumes that a quiet client resumes before the hot resource has
// written a whole log after its quiet resource's next event. At make test's
// 48 clients that holds with room to spare. At thousands of clients on 2 cores a
// resume can take longer than the 1 MiB log lasts (about 2 s of this
// writer), and then the quiet resource's own event is evicted and its 410s
// are right. For that, WALWATCH_REFLECTOR_QUIET_410=witnessed (the soak,
// tests/bench/reflector_soak.sh) allows a quiet client the 410 Expired that
// the WAL witnesses, and nothing else. The summary also counts the 410s
// that a client-side witness accounts for (some client received the
// event), and gives each kind of request's wait for its response header
// (an initial state is read before its 200).
//
// Knobs: WALWATCH_REFLECTOR_SEED, WALWATCH_REFLECTOR_CLIENTS (default 48),
// WALWATCH_REFLECTOR_SECONDS (writing time, default 30),
// WALWATCH_REFLECTOR_CATCHUP_SECONDS (the bound on every client reaching the
// last write's RV after the writers stop, default 300; the test waits for
// the condition, not for this long), WALWATCH_REFLECTOR_MAX_LOG (walwatch's
// --max-log-bytes, default 1Mi), WALWATCH_REFLECTOR_HOT_PAD (bytes of
// padding in each pod, default 1500: larger pods turn the log over faster),
// WALWATCH_REFLECTOR_QUIET_410 ("none" or "witnessed", above). `make soak` runs it long and wide
// (tests/bench/reflector_soak.sh).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/model.h"
#include "tests/integration/support/wal_witness.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::string EnvString(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

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
  Writer(std::string conninfo, uint64_t seed) : db_(conninfo), rng_(seed) {}

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
        InsertModelRow(db_, s);
        live_[Key(s)] = s;
        ++counts["insert"];
        return;
      }
      int op = static_cast<int>(rng_() % 10);
      ModelObjectSpec& cur = it->second;
      if (op < 5) {  // MODIFIED: object and resource_version
        s.row.uid = cur.row.uid;
        UpdateModelRow(db_, s);
        cur = s;
        ++counts["update"];
      } else if (op < 7) {  // event recording: events only
        db_.Exec("UPDATE resources SET events = '[{\"reason\":\"r" +
                 std::to_string(rng_() % 100) +
                 "\"}]'::jsonb, event_resource_versions = '{}'::jsonb WHERE "
                 "cluster = '" + cur.row.cluster + "' AND uid = '" +
                 cur.row.uid + "'");
        ++counts["event-recording"];
      } else if (op < 8) {  // deleted then added: one UPDATE with a new uid
        UpdateModelRow(db_, s);
        cur = s;
        ++counts["uid-change"];
      } else {
        db_.Exec("DELETE FROM resources WHERE cluster = '" + cur.row.cluster +
                 "' AND \"group\" = '" + t.group + "' AND version = '" +
                 t.version + "' AND resource = '" + t.resource +
                 "' AND namespace = '" + cur.row.ns + "' AND name = '" +
                 cur.row.name + "'");
        live_.erase(it);
        ++counts["delete"];
      }
    } catch (const std::exception& e) {
      // A cluster removal by the other writer raced this one, or the row
      // was written by the other writer: learn what the table holds.
      live_.erase(Key(s));
      auto rows = db_.Query(
          "SELECT uid FROM resources WHERE cluster = $1 AND \"group\" = $2 AND "
          "version = $3 AND resource = $4 AND namespace = $5 AND name = $6",
          {s.row.cluster, t.group, t.version, t.resource, s.row.ns, s.row.name});
      if (rows.size() == 1 && rows[0][0]) {
        s.row.uid = *rows[0][0];
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
      db_.Exec("BEGIN");
      ModelObjectSpec a = Spec(t, cluster, ns, base + "a", pad);
      bool existed = live_.count(Key(a)) > 0;
      if (existed) {
        a.row.uid = live_[Key(a)].row.uid;
        UpdateModelRow(db_, a);
      } else {
        InsertModelRow(db_, a);
      }
      ModelObjectSpec a2 = Spec(t, cluster, ns, base + "a", pad);
      a2.row.uid = a.row.uid;
      UpdateModelRow(db_, a2);  // changed twice in one transaction
      ModelObjectSpec b = Spec(t, cluster, ns, base + "b", pad);
      if (live_.count(Key(b))) {
        b.row.uid = live_[Key(b)].row.uid;
        UpdateModelRow(db_, b);
      } else {
        InsertModelRow(db_, b);
      }
      db_.Exec("COMMIT");
      live_[Key(a2)] = a2;
      live_[Key(b)] = b;
      // The same object in the consecutive transaction.
      db_.Exec("BEGIN");
      ModelObjectSpec a3 = Spec(t, cluster, ns, base + "a", pad);
      a3.row.uid = a2.row.uid;
      UpdateModelRow(db_, a3);
      db_.Exec("DELETE FROM resources WHERE cluster = '" + cluster +
               "' AND \"group\" = '" + t.group + "' AND version = '" +
               t.version + "' AND resource = '" + t.resource +
               "' AND namespace = '" + b.row.ns + "' AND name = '" +
               b.row.name + "'");
      db_.Exec("COMMIT");
      live_[Key(a3)] = a3;
      live_.erase(Key(b));
      ++counts["transaction"];
    } catch (const std::exception& e) {
      try { db_.Exec("ROLLBACK"); } catch (...) {}
      Resync();
      ++errors;
      last_error = e.what();
    }
  }

  void RemoveCluster(const std::string& cluster) {
    db_.Exec("DELETE FROM resources WHERE cluster = '" + cluster + "'");
    ++counts["cluster-removal"];
    Resync();
  }

  // Forgets what the other writer may have changed.
  void Resync() {
    for (auto it = live_.begin(); it != live_.end();) {
      const auto& r = it->second.row;
      auto n = db_.QueryValue(
          "SELECT count(*) FROM resources WHERE cluster = $1 AND \"group\" = "
          "$2 AND version = $3 AND resource = $4 AND namespace = $5 AND name = "
          "$6 AND uid = $7",
          {r.cluster, r.group, r.version, r.resource, r.ns, r.name, r.uid});
      it = n == "1" ? std::next(it) : live_.erase(it);
    }
  }

  std::map<std::string, size_t> counts;
  size_t errors = 0;
  std::string last_error;

 private:
  PgConnection db_;
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
    }
    (void)opens;
  }
};

class ReflectorTest : public WalwatchTest {
 protected:
  void TearDown() override {
    stop_ = true;
    for (auto& t : threads_) if (t.joinable()) t.join();
    WalwatchTest::TearDown();
  }
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST_F(ReflectorTest, ReflectorsAgreeWithSqlUnderAHotResource) {
  const uint64_t seed = static_cast<uint64_t>(EnvInt("WALWATCH_REFLECTOR_SEED", 20261204));
  const int nclients = EnvInt("WALWATCH_REFLECTOR_CLIENTS", 48);
  const int secs = EnvInt("WALWATCH_REFLECTOR_SECONDS", 30);
  std::cout << "[REFLECTOR] WALWATCH_REFLECTOR_SEED=" << seed
            << " WALWATCH_REFLECTOR_CLIENTS=" << nclients
            << " WALWATCH_REFLECTOR_SECONDS=" << secs << std::endl;
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);

  // A state before walwatch: one object of every type but the late ones.
  {
    Writer init(Conninfo(), seed + 7);
    for (size_t i = 0; i + kLateTypes < kTypes.size(); ++i) {
      for (int k = 0; k < 4; ++k) init.Step(kTypes[i], i == 0 ? 1500 : 100, 4);
    }
  }
  // The WAL's own account of every event, to check each 410 Expired against.
  WalWitness wal(Conninfo(), UniqueName("witness"));
  WalwatchOptions options = DefaultOptions();
  options.max_log_bytes = EnvString("WALWATCH_REFLECTOR_MAX_LOG", "1Mi");
  options.log_level = "info";
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  const std::string socket = ww->socket_path();

  Counts counts;
  std::vector<std::unique_ptr<Client>> clients;
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
  for (auto& c : clients) {
    threads_.emplace_back([&, c = c.get()] { c->Run(socket, stop_, counts); });
  }

  // Writers: the hot pods; the quiet rest with transactions, uid changes
  // and cluster removals; both stop at writers_stop.
  std::atomic<bool> stop_writers{false};
  Writer hot(Conninfo(), seed + 1), quiet(Conninfo(), seed + 2);
  const auto begin = Clock::now();
  const auto writers_stop = begin + seconds(secs);
  const size_t hot_pad = static_cast<size_t>(EnvInt("WALWATCH_REFLECTOR_HOT_PAD", 1500));
  std::thread hot_thread([&] {
    while (!stop_writers) {
      hot.Step(kTypes[0], hot_pad, 40);
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
  hot_thread.join();
  quiet_thread.join();

  uint64_t final_rv = 0;
  ASSERT_TRUE(GetFreshRv(socket, &final_rv, In(seconds(30))));
  // Caught up: every client has received an RV at or past the last write
  // (a bookmark comes at least at each timeoutSeconds, <= 5 s).
  // An upper bound on catching up, not a measure of speed.
  const auto deadline =
      Clock::now() + seconds(EnvInt("WALWATCH_REFLECTOR_CATCHUP_SECONDS", 300));
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

  // Every 410 Expired must be witnessed by the WAL: a transaction that gave
  // an event of the client's selection (its resource, in its cluster if it
  // watches one) committed above the RV refused and at or below the floor
  // named, so an event the client would still have received is gone. That
  // is walwatch's 410 rule, checked against the database for every client.
  //
  // Quiet resources. By default none of their clients may get a 410 at
  // all (see the top: at make test's size their events outlast every
  // resume). WALWATCH_REFLECTOR_QUIET_410=witnessed (the soak, where that
  // premise fails on 2 cores) allows them the 410 Expired the WAL
  // witnesses; any other 410 to a quiet client fails. The summary also
  // counts the 410s a client-side witness accounts for (some client
  // received the event), which cannot see an event evicted before anyone
  // read it.
  wal.CatchUp();
  const bool witnessed_ok = EnvString("WALWATCH_REFLECTOR_QUIET_410", "none") == "witnessed";
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
                      << "), but the WAL holds no event of this selection in (" << r << ", "
                      << f << "]: the watch lost nothing";
      }
    }
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
    ModelState expected = QueryModelState(db(), c->filter);
    EXPECT_TRUE(CompareModelStates(expected, c->state));
  }
  std::cout << "[REFLECTOR] WAL witness: " << wal.transactions()
            << " transactions that gave events\n"
            << "[REFLECTOR] 410s to clients of quiet resources: " << quiet_410 << ", of them "
            << quiet_wal << " witnessed by the WAL (an event of the selection committed in (RV, "
            << "floor]; rule: " << (witnessed_ok ? "witnessed ones allowed" : "none allowed")
            << "), " << quiet_seen << " by an event some client received; hot resource's 410 "
            << "Expired: " << hot_expiries << ", " << hot_wal << " witnessed by the WAL, "
            << hot_seen << " by clients" << std::endl;
  for (const auto& [mode, waits] : counts.header_waits) {
    std::cout << "[REFLECTOR] response header wait, " << mode << ": "
              << Distribution(waits, 20) << std::endl;
  }
}

}  // namespace
}  // namespace walwatch::itest
