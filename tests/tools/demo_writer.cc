// demo_writer: writes to Clusterpedia's `resources` table the way
// Clusterpedia's collector (internalstorage, GORM with SkipDefaultTransaction)
// does, so that walwatch can be demonstrated and tested without a Clusterpedia
// and member clusters.
//
//   demo_writer (--conninfo STR | --mysql-conninfo STR) [--rate N[/s]]
//               [--count N] [--clusters N] [--seed N] [--quiet]
//
//   --conninfo        PostgreSQL: a libpq connection string
//   --mysql-conninfo  MySQL/MariaDB: walwatch's --mysql-conninfo syntax
//                     (cdc/mysql/mysql_conninfo.h), database= required
//   --rate      writes per second (default 5; 0 = as fast as possible)
//   --count     stop after N writes (default 0 = until SIGINT/SIGTERM)
//   --clusters  member clusters c1..cN (default 2)
//   --seed      random seed (default: random; printed at start)
//   --quiet     no line per write
//
// Each write is one autocommit statement with the shape GORM generates for
// the database's dialect (demo_store.h; the SQL is in demo_store_postgres.cc
// and demo_store_mysql.cc):
//   ADDED     INSERT (a unique violation is retried as the UPDATE below, as
//             the collector's createOrUpdateResource does)
//   MODIFIED  UPDATE created_at,[deleted_at,]object,owner_uid,
//             resource_version,uid,synced_at WHERE six keys
//   event     UPDATE event_resource_versions=JSONB_SET/JSON_SET(...),
//             events=JSONB_SET/JSON_SET(...) WHERE cluster AND uid
//             (object unchanged)
//   DELETED   DELETE WHERE six keys
//   re-create the queue folds Deleted+Added into the MODIFIED UPDATE, new uid
//   cluster   DELETE WHERE cluster, then the cluster's objects are re-added
//             one INSERT per write (a re-list)
// Objects (demo_objects.h) are Kubernetes-like Deployments, Pods (owned by
// the Deployment's ReplicaSet) and ConfigMaps (some with ~4 KB of
// incompressible data, so on PostgreSQL the stored object is TOASTed out of
// line and an event UPDATE omits it in WAL). Every object carries the
// annotation shadow.clusterpedia.io/cluster-name and metadata.resourceVersion
// from a per-cluster counter.
//
// One line per write goes to stderr, e.g. `INSERT pods c1/default/web-1-...`.
// libpq and MariaDB Connector/C; C++17.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/tools/demo_objects.h"
#include "tests/tools/demo_store.h"

namespace {

using demo::Cluster;
using demo::kApps;
using demo::Kind;
using demo::kNamespaces;
using demo::Obj;
using demo::object_json;
using demo::Random;
using demo::Store;
using demo::StoreResult;
using demo::type_info;
using demo::TypeInfo;

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) { g_stop.store(true); }

// ---------------------------------------------------------------------------
// The writer

struct Options {
  std::string conninfo;        // PostgreSQL
  std::string mysql_conninfo;  // MySQL/MariaDB
  double rate = 5;
  uint64_t count = 0;
  int clusters = 2;
  uint64_t seed = 0;
  bool seed_set = false;
  bool quiet = false;
};

class Writer {
 public:
  Writer(Store& db, const Options& opt)
      : db_(db), opt_(opt), rnd_(opt.seed), target_per_cluster_(30) {
    for (int i = 1; i <= opt.clusters; i++) {
      Cluster c;
      c.name = "c" + std::to_string(i);
      c.rv = 100000ULL * static_cast<uint64_t>(i) + static_cast<uint64_t>(rnd_.range(0, 9999));
      clusters_.push_back(c);
    }
  }

  // One write. Returns false on a fatal error.
  bool step() {
    if (!readd_.empty()) return readd_one();

    if (writes_ > 40 && opt_.clusters > 0 && rnd_.chance(1.0 / 250)) return remove_cluster();

    size_t n = objects_.size();
    size_t target = target_per_cluster_ * clusters_.size();
    std::vector<std::pair<int, int>> w;  // (op, weight)
    enum { kInsert, kUpdate, kEvent, kDelete, kRecreate, kTerminate };
    w.push_back({kInsert, n < target ? 45 : 12});
    if (n > 0) {
      w.push_back({kUpdate, 33});
      w.push_back({kEvent, 14});
      w.push_back({kDelete, n > target ? 30 : 7});
      w.push_back({kRecreate, 4});
      w.push_back({kTerminate, 5});
    }
    int total = 0;
    for (auto& p : w) total += p.second;
    int r = rnd_.range(1, total);
    int op = kInsert;
    for (auto& p : w) {
      if (r <= p.second) { op = p.first; break; }
      r -= p.second;
    }
    switch (op) {
      case kInsert: return insert_new();
      case kUpdate: return modify(random_object());
      case kEvent: return record_event(random_object());
      case kDelete: return remove(random_object());
      case kRecreate: return recreate(random_object());
      case kTerminate: return terminate();
    }
    return true;
  }

  uint64_t writes() const { return writes_; }

 private:
  Cluster& cluster(const std::string& name) {
    for (auto& c : clusters_) {
      if (c.name == name) return c;
    }
    return clusters_.front();
  }

  std::string random_object() {
    auto it = objects_.begin();
    std::advance(it, rnd_.range(0, int(objects_.size()) - 1));
    return it->first;
  }

  void log(const char* what, const Obj& o, const std::string& extra = "") {
    if (opt_.quiet) return;
    const TypeInfo& t = type_info(o.kind);
    std::fprintf(stderr, "%s %s %s/%s/%s%s%s\n", what, t.resource, o.cluster.c_str(), o.ns.c_str(),
                 o.name.c_str(), extra.empty() ? "" : " ", extra.c_str());
  }

  bool fail(const char* what, const std::string& err) {
    std::fprintf(stderr, "demo_writer: %s failed: %s\n", what, err.c_str());
    return false;
  }

  // The row the collector writes for `o`.
  static demo::Row row(const Obj& o) {
    const TypeInfo& t = type_info(o.kind);
    demo::Row r;
    r.group = t.group;
    r.version = t.version;
    r.resource = t.resource;
    r.kind = t.kind;
    r.cluster = o.cluster;
    r.ns = o.ns;
    r.name = o.name;
    r.owner_uid = o.owner_uid;
    r.uid = o.uid;
    r.resource_version = std::to_string(o.rv);
    r.object = object_json(o);
    r.created_at = o.created;
    r.synced_at = std::chrono::system_clock::now();
    r.deleted_at = o.deleting;
    return r;
  }

  // -- new objects ---------------------------------------------------------
  Obj make_object(Cluster& c) {
    Obj o;
    o.cluster = c.name;
    o.created = std::chrono::system_clock::now();
    o.uid = rnd_.uuid();
    o.image_tag = rnd_.range(1, 9);
    // Pods need a deployment in that cluster.
    std::vector<const Obj*> deployments;
    for (auto& kv : objects_) {
      if (kv.second.kind == Kind::Deployment && kv.second.cluster == c.name) deployments.push_back(&kv.second);
    }
    int roll = rnd_.range(1, 100);
    if (roll <= 50 && !deployments.empty()) {
      const Obj& d = *rnd_.pick(deployments);
      o.kind = Kind::Pod;
      o.ns = d.ns;
      o.app = d.app;
      o.template_hash = d.template_hash;
      o.owner_name = d.name + "-" + d.template_hash;
      o.owner_uid = d.rs_uid;
      o.name = o.owner_name + "-" + rnd_.alnum(5);
      o.image_tag = d.image_tag;
      o.node = "node-" + std::to_string(rnd_.range(1, 5));
      o.pod_ip = "10.244." + std::to_string(rnd_.range(0, 15)) + "." + std::to_string(rnd_.range(2, 254));
    } else if (roll <= 80) {
      o.kind = Kind::Deployment;
      o.ns = rnd_.pick(kNamespaces);
      o.app = rnd_.pick(kApps);
      o.name = o.app + "-" + std::to_string(rnd_.range(1, 20));
      o.template_hash = rnd_.alnum(10);
      o.rs_uid = rnd_.uuid();
      o.replicas = rnd_.range(1, 5);
    } else {
      o.kind = Kind::ConfigMap;
      o.ns = rnd_.pick(kNamespaces);
      o.app = rnd_.pick(kApps);
      o.name = o.app + "-config-" + std::to_string(rnd_.range(1, 20));
      if (rnd_.chance(0.3)) big_data(o);
    }
    o.rv = ++c.rv;
    return o;
  }

  void big_data(Obj& o) {
    // ~4 KB of random base64-ish text: incompressible, so the jsonb is stored
    // out of line (TOAST) and an UPDATE that does not change it omits it.
    o.big_data = rnd_.alnum(4096, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  }

  bool insert_new() {
    Cluster& c = clusters_[static_cast<size_t>(rnd_.range(0, int(clusters_.size()) - 1))];
    Obj o = make_object(c);
    if (objects_.count(o.key())) {
      // Same name again (names are drawn from small sets): the collector sees
      // a new object with that name only after the old one is gone.
      return remove(o.key());
    }
    return insert(o, "INSERT");
  }

  bool insert(const Obj& o, const char* label) {
    StoreResult r = db_.Insert(row(o));
    if (!r.ok) {
      if (r.duplicate) {
        // The collector's createOrUpdateResource: Create, and on "exists" Update.
        objects_[o.key()] = o;
        return update(o, std::string(label) + "->UPDATE", "(exists)");
      }
      return fail("INSERT", r.error);
    }
    writes_++;
    objects_[o.key()] = o;
    log(label, o, "id=" + r.id);
    return true;
  }

  // -- updates -------------------------------------------------------------
  bool update(const Obj& o, const std::string& label, const std::string& extra = "") {
    StoreResult r = db_.Update(row(o));
    if (!r.ok) return fail("UPDATE", r.error);
    writes_++;
    std::string more = extra;
    if (r.rows != 1)
      more += std::string(more.empty() ? "" : " ") +
              "rows=" + std::to_string(r.rows);
    log(label.c_str(), o, more);
    return true;
  }

  bool modify(const std::string& key) {
    Obj& o = objects_[key];
    Cluster& c = cluster(o.cluster);
    switch (o.kind) {
      case Kind::Deployment:
        if (rnd_.chance(0.5)) {
          o.replicas = rnd_.range(1, 6);
        } else {
          o.image_tag++;  // a rollout: new template, new ReplicaSet
          o.template_hash = rnd_.alnum(10);
          o.rs_uid = rnd_.uuid();
        }
        o.generation++;
        break;
      case Kind::Pod:
        o.restarts++;
        break;
      case Kind::ConfigMap:
        o.data_rev++;
        if (!o.big_data.empty() && rnd_.chance(0.5)) big_data(o);
        break;
    }
    o.rv = ++c.rv;
    return update(o, "UPDATE");
  }

  // A pod gets a deletionTimestamp (graceful deletion): an UPDATE that also
  // sets deleted_at. A later DELETE removes it.
  bool terminate() {
    std::vector<std::string> pods;
    for (auto& kv : objects_) {
      if (kv.second.kind == Kind::Pod && !kv.second.deleting) pods.push_back(kv.first);
    }
    if (pods.empty()) return modify(random_object());
    Obj& o = objects_[rnd_.pick(pods)];
    o.deleting = std::chrono::system_clock::now() + std::chrono::seconds(30);
    o.rv = ++cluster(o.cluster).rv;
    return update(o, "UPDATE", "(terminating)");
  }

  // The collector's queue folds Deleted then Added of the same name into one
  // UPDATE that carries the new object, with a new uid.
  bool recreate(const std::string& key) {
    Obj& o = objects_[key];
    o.uid = rnd_.uuid();
    o.created = std::chrono::system_clock::now();
    o.deleting.reset();
    o.restarts = 0;
    o.generation = 1;
    if (o.kind == Kind::Deployment) {
      o.template_hash = rnd_.alnum(10);
      o.rs_uid = rnd_.uuid();
    }
    if (o.kind == Kind::Pod) {
      o.pod_ip = "10.244." + std::to_string(rnd_.range(0, 15)) + "." + std::to_string(rnd_.range(2, 254));
    }
    o.rv = ++cluster(o.cluster).rv;
    return update(o, "RECREATE", "uid=" + o.uid.substr(0, 8));
  }

  // -- events --------------------------------------------------------------
  bool record_event(const std::string& key) {
    const Obj& o = objects_[key];
    Cluster& c = cluster(o.cluster);
    static const char* const pod_reasons[][2] = {
        {"Scheduled", "Successfully assigned pod to node"},
        {"Pulled", "Container image already present on machine"},
        {"Created", "Created container"},
        {"Started", "Started container"},
        {"BackOff", "Back-off restarting failed container"},
    };
    static const char* const deploy_reasons[][2] = {
        {"ScalingReplicaSet", "Scaled up replica set"},
        {"ScalingReplicaSet", "Scaled down replica set"},
    };
    static const char* const cm_reasons[][2] = {
        {"Sync", "Synced configuration"},
    };
    const char* const* reason = cm_reasons[0];
    if (o.kind == Kind::Pod) reason = pod_reasons[rnd_.range(0, 4)];
    if (o.kind == Kind::Deployment) reason = deploy_reasons[rnd_.range(0, 1)];
    demo::KubeEvent ev;
    ev.name = o.name + "." + rnd_.alnum(16, "0123456789abcdef");
    ev.uid = rnd_.uuid();
    ev.rv = ++c.rv;
    ev.reason = reason[0];
    ev.message = reason[1];
    std::string json =
        demo::event_json(o, ev, std::chrono::system_clock::now());
    StoreResult r = db_.RecordEvent(o.cluster, o.uid, o.ns + "/" + ev.name,
                                    ev.rv, ev.uid, json);
    if (!r.ok) return fail("event UPDATE", r.error);
    writes_++;
    log("EVENT", o,
        std::string(reason[0]) +
            (r.rows == 1 ? "" : " rows=" + std::to_string(r.rows)));
    return true;
  }

  // -- deletes -------------------------------------------------------------
  bool remove(const std::string& key) {
    Obj o = objects_[key];
    StoreResult r = db_.Delete(row(o));
    if (!r.ok) return fail("DELETE", r.error);
    writes_++;
    objects_.erase(key);
    log("DELETE", o, r.rows == 1 ? "" : "rows=" + std::to_string(r.rows));
    return true;
  }

  // Clusterpedia's CleanCluster: one multi-row DELETE; then the cluster is
  // added back and its objects are listed and created again, one by one.
  bool remove_cluster() {
    Cluster& c = clusters_[static_cast<size_t>(rnd_.range(0, int(clusters_.size()) - 1))];
    StoreResult r = db_.DeleteCluster(c.name);
    if (!r.ok) return fail("DELETE cluster", r.error);
    writes_++;
    if (!opt_.quiet) {
      std::fprintf(stderr, "DELETE-CLUSTER %s rows=%llu\n", c.name.c_str(),
                   static_cast<unsigned long long>(r.rows));
    }
    for (auto it = objects_.begin(); it != objects_.end();) {
      if (it->second.cluster == c.name) {
        readd_.push_back(it->second);
        it = objects_.erase(it);
      } else {
        ++it;
      }
    }
    std::sort(readd_.begin(), readd_.end(), [](const Obj& a, const Obj& b) {
      return int(a.kind) < int(b.kind);  // deployments first, as a re-list would
    });
    if (!opt_.quiet) {
      std::fprintf(stderr, "ADD-CLUSTER %s (re-listing %zu objects)\n", c.name.c_str(), readd_.size());
    }
    return true;
  }

  bool readd_one() {
    Obj o = readd_.front();
    readd_.erase(readd_.begin());
    return insert(o, "INSERT");
  }

  Store& db_;
  const Options& opt_;
  Random rnd_;
  size_t target_per_cluster_;
  std::vector<Cluster> clusters_;
  std::map<std::string, Obj> objects_;
  std::vector<Obj> readd_;
  uint64_t writes_ = 0;
};

[[noreturn]] void usage(const char* msg) {
  if (msg) std::fprintf(stderr, "demo_writer: %s\n", msg);
  std::fprintf(stderr,
               "usage: demo_writer (--conninfo STR | --mysql-conninfo STR) "
               "[--rate N[/s]] [--count N] "
               "[--clusters N] [--seed N] "
               "[--quiet]\n");
  std::exit(2);
}

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || s[0] == '-') return false;
  *out = v;
  return true;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    std::string v;
    auto eq = a.find('=');
    bool inline_value = a.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inline_value) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return v;
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--conninfo") {
      o.conninfo = value();
    } else if (a == "--mysql-conninfo") {
      o.mysql_conninfo = value();
    } else if (a == "--rate") {
      std::string r = value();
      if (r.size() > 2 && r.compare(r.size() - 2, 2, "/s") == 0) r.resize(r.size() - 2);
      char* end = nullptr;
      o.rate = std::strtod(r.c_str(), &end);
      if (r.empty() || *end != '\0' || o.rate < 0) usage("bad --rate");
    } else if (a == "--count") {
      if (!parse_u64(value(), &o.count)) usage("bad --count");
    } else if (a == "--clusters") {
      uint64_t n;
      if (!parse_u64(value(), &n) || n < 1 || n > 1000) usage("bad --clusters (1..1000)");
      o.clusters = static_cast<int>(n);
    } else if (a == "--seed") {
      if (!parse_u64(value(), &o.seed)) usage("bad --seed");
      o.seed_set = true;
    } else if (a == "--quiet" || a == "-q") {
      o.quiet = true;
    } else if (a == "--help" || a == "-h") {
      usage(nullptr);
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.conninfo.empty() == o.mysql_conninfo.empty())
    usage("give one of --conninfo and --mysql-conninfo");
  if (!o.seed_set) o.seed = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse(argc, argv);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a signal interrupts the sleep
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::string err;
  std::unique_ptr<Store> db =
      opt.mysql_conninfo.empty() ? demo::ConnectPostgres(opt.conninfo, &err)
                                 : demo::ConnectMysql(opt.mysql_conninfo, &err);
  if (!db) {
    std::fprintf(stderr, "demo_writer: cannot connect: %s\n", err.c_str());
    return 1;
  }

  char rate[32] = "unlimited";
  if (opt.rate > 0) std::snprintf(rate, sizeof rate, "%g/s", opt.rate);
  std::fprintf(stderr, "demo_writer: seed %llu, %d cluster(s), rate %s, count %s\n",
               static_cast<unsigned long long>(opt.seed), opt.clusters, rate,
               opt.count ? std::to_string(opt.count).c_str() : "unlimited");

  Writer w(*db, opt);
  using clock = std::chrono::steady_clock;
  auto next = clock::now();
  auto period = opt.rate > 0 ? std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(1.0 / opt.rate))
                             : clock::duration::zero();
  int rc = 0;
  while (!g_stop.load() && (opt.count == 0 || w.writes() < opt.count)) {
    if (!w.step()) {
      rc = 1;
      if (!db->connected())
        std::fprintf(stderr, "demo_writer: connection lost\n");
      break;
    }
    if (opt.rate > 0) {
      next += period;
      auto now = clock::now();
      if (next < now - std::chrono::seconds(1)) next = now;  // do not burst after a stall
      while (!g_stop.load() && clock::now() < next) {
        auto left = next - clock::now();
        std::this_thread::sleep_for(std::min<clock::duration>(left, std::chrono::milliseconds(100)));
      }
    }
  }
  std::fprintf(stderr, "demo_writer: %llu write(s)%s\n", static_cast<unsigned long long>(w.writes()),
               g_stop.load() ? ", stopped by signal" : "");
  return rc;
}
