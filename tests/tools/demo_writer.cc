// demo_writer: writes to Clusterpedia's `resources` table the way Clusterpedia's
// collector (internalstorage, GORM with SkipDefaultTransaction) does, so that
// walwatch can be demonstrated and tested without a Clusterpedia and member
// clusters.
//
//   demo_writer --conninfo STR [--rate N[/s]] [--count N] [--clusters N]
//               [--seed N] [--quiet]
//
//   --conninfo  libpq connection string (required)
//   --rate      writes per second (default 5; 0 = as fast as possible)
//   --count     stop after N writes (default 0 = until SIGINT/SIGTERM)
//   --clusters  member clusters c1..cN (default 2)
//   --seed      random seed (default: random; printed at start)
//   --quiet     no line per write
//
// Each write is one autocommit statement with the shape GORM generates on
// PostgreSQL (map keys sorted, so WHERE is cluster, group, name, namespace,
// resource, version):
//   ADDED     INSERT INTO "resources" (...) VALUES (...) RETURNING "id"
//             (a unique violation is retried as the UPDATE below, as the
//             collector's createOrUpdateResource does)
//   MODIFIED  UPDATE "resources" SET "created_at"=$1,["deleted_at"=..,]"object"=..,
//             "owner_uid"=..,"resource_version"=..,"uid"=..,"synced_at"=.. WHERE six keys
//   event     UPDATE "resources" SET "event_resource_versions"=JSONB_SET(...),
//             "events"=JSONB_SET(...) WHERE cluster AND uid   (object unchanged)
//   DELETED   DELETE FROM "resources" WHERE six keys
//   re-create the queue folds Deleted+Added into the MODIFIED UPDATE, new uid
//   cluster   DELETE FROM "resources" WHERE "resources"."cluster" = $1, then the
//             cluster's objects are re-added one INSERT per write (a re-list)
// Objects are Kubernetes-like Deployments, Pods (owned by the Deployment's
// ReplicaSet) and ConfigMaps (some with ~4 KB of incompressible data, so the
// stored object is TOASTed out of line and an event UPDATE omits it in WAL).
// Every object carries the annotation shadow.clusterpedia.io/cluster-name and
// metadata.resourceVersion from a per-cluster counter.
//
// One line per write goes to stderr, e.g. `INSERT pods c1/default/web-1-...`.
// Only libpq; C++17.

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) { g_stop.store(true); }

// ---------------------------------------------------------------------------
// JSON text

void json_escape(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string q(const std::string& s) {
  std::string out;
  json_escape(out, s);
  return out;
}

// ---------------------------------------------------------------------------
// Time

std::string format_time(std::chrono::system_clock::time_point tp, bool k8s) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(tp);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(tp - secs).count();
  std::time_t t = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  if (k8s) {
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);  // RFC 3339, seconds
  } else {
    char base[40];
    std::strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
    std::snprintf(buf, sizeof buf, "%s.%06lld+00", base, static_cast<long long>(us));
  }
  return buf;
}

std::string k8s_time(std::chrono::system_clock::time_point tp) { return format_time(tp, true); }
std::string sql_time(std::chrono::system_clock::time_point tp) { return format_time(tp, false); }

// ---------------------------------------------------------------------------
// Model

enum class Kind { Deployment, Pod, ConfigMap };

struct TypeInfo {
  const char* group;
  const char* version;
  const char* resource;
  const char* kind;
  const char* api_version;
};

const TypeInfo& type_info(Kind k) {
  static const TypeInfo deploy{"apps", "v1", "deployments", "Deployment", "apps/v1"};
  static const TypeInfo pod{"", "v1", "pods", "Pod", "v1"};
  static const TypeInfo cm{"", "v1", "configmaps", "ConfigMap", "v1"};
  switch (k) {
    case Kind::Deployment: return deploy;
    case Kind::Pod: return pod;
    case Kind::ConfigMap: return cm;
  }
  return pod;
}

struct Obj {
  Kind kind = Kind::Pod;
  std::string cluster, ns, name, uid;
  std::string owner_uid;      // column owner_uid: the controller's uid, or ""
  std::string owner_name;     // pods: the ReplicaSet's name
  std::string app;            // label app
  std::string template_hash;  // deployments: pod-template-hash; pods: theirs
  std::string rs_uid;         // deployments: uid of their current ReplicaSet
  std::chrono::system_clock::time_point created;
  std::optional<std::chrono::system_clock::time_point> deleting;
  uint64_t rv = 0;
  int generation = 1;
  int replicas = 1;
  int restarts = 0;
  int image_tag = 1;
  std::string node;
  std::string pod_ip;
  std::string big_data;  // configmaps: incompressible payload, may be empty
  int data_rev = 1;

  std::string key() const {
    const TypeInfo& t = type_info(kind);
    return cluster + "|" + t.group + "|" + t.resource + "|" + ns + "|" + name;
  }
};

struct Cluster {
  std::string name;
  uint64_t rv = 0;  // the member cluster's own resourceVersion counter
  bool present = true;
};

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  uint64_t u64() { return rng_(); }
  int range(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(range(0, int(v.size()) - 1))]; }
  std::string alnum(int n, const char* alphabet = "bcdfghjklmnpqrstvwxz2456789") {
    size_t len = std::strlen(alphabet);
    std::string s;
    for (int i = 0; i < n; i++) s.push_back(alphabet[u64() % len]);
    return s;
  }
  std::string uuid() {
    uint64_t a = u64(), b = u64();
    a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
    b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 1
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx",
                  static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                  static_cast<unsigned>(a & 0xffff), static_cast<unsigned>(b >> 48),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    return buf;
  }

 private:
  std::mt19937_64 rng_;
};

const std::vector<std::string> kNamespaces = {"default", "kube-system", "team-a", "team-b"};
const std::vector<std::string> kApps = {"web", "api", "worker", "cache", "gateway", "billing",
                                        "search", "auth", "metrics", "frontend"};
const std::vector<std::string> kImages = {"nginx", "redis", "busybox", "envoyproxy/envoy",
                                          "ghcr.io/example/api", "registry.k8s.io/pause"};

// ---------------------------------------------------------------------------
// Kubernetes-like objects, as the collector stores them (JSON text; PostgreSQL
// normalizes it into jsonb).

std::string metadata_json(const Obj& o, const std::string& labels, const std::string& owner_refs) {
  std::string m = "{";
  m += "\"name\":" + q(o.name);
  m += ",\"namespace\":" + q(o.ns);
  m += ",\"uid\":" + q(o.uid);
  m += ",\"resourceVersion\":" + q(std::to_string(o.rv));
  if (o.kind == Kind::Deployment) m += ",\"generation\":" + std::to_string(o.generation);
  m += ",\"creationTimestamp\":" + q(k8s_time(o.created));
  if (o.deleting) {
    m += ",\"deletionTimestamp\":" + q(k8s_time(*o.deleting));
    m += ",\"deletionGracePeriodSeconds\":30";
  }
  m += ",\"labels\":" + labels;
  m += ",\"annotations\":{\"shadow.clusterpedia.io/cluster-name\":" + q(o.cluster);
  if (o.kind == Kind::Deployment) {
    m += ",\"deployment.kubernetes.io/revision\":" + q(std::to_string(o.image_tag));
  }
  m += "}";
  if (!owner_refs.empty()) m += ",\"ownerReferences\":" + owner_refs;
  m += "}";
  return m;
}

std::string container_json(const Obj& o) {
  std::string image = kImages[std::hash<std::string>{}(o.app) % kImages.size()] + ":1." +
                      std::to_string(o.image_tag);
  return "[{\"name\":" + q(o.app) + ",\"image\":" + q(image) +
         ",\"ports\":[{\"name\":\"http\",\"containerPort\":8080,\"protocol\":\"TCP\"}]"
         ",\"env\":[{\"name\":\"APP\",\"value\":" + q(o.app) + "},{\"name\":\"LOG_LEVEL\",\"value\":\"info\"}]"
         ",\"resources\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\"},"
         "\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}}"
         ",\"readinessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080,\"scheme\":\"HTTP\"},"
         "\"periodSeconds\":10,\"timeoutSeconds\":1,\"successThreshold\":1,\"failureThreshold\":3}"
         ",\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\""
         ",\"imagePullPolicy\":\"IfNotPresent\"}]";
}

std::string object_json(const Obj& o) {
  const TypeInfo& t = type_info(o.kind);
  std::string s = "{\"kind\":" + q(t.kind) + ",\"apiVersion\":" + q(t.api_version) + ",\"metadata\":";
  std::string created = k8s_time(o.created);
  switch (o.kind) {
    case Kind::Deployment: {
      std::string labels = "{\"app\":" + q(o.app) + ",\"tier\":\"backend\"}";
      s += metadata_json(o, labels, "");
      s += ",\"spec\":{\"replicas\":" + std::to_string(o.replicas) +
           ",\"selector\":{\"matchLabels\":{\"app\":" + q(o.app) + "}}" +
           ",\"template\":{\"metadata\":{\"creationTimestamp\":null,\"labels\":{\"app\":" + q(o.app) +
           "}},\"spec\":{\"containers\":" + container_json(o) +
           ",\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
           "\"dnsPolicy\":\"ClusterFirst\",\"securityContext\":{},\"schedulerName\":\"default-scheduler\"}}" +
           ",\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"25%\",\"maxSurge\":\"25%\"}}"
           ",\"revisionHistoryLimit\":10,\"progressDeadlineSeconds\":600}";
      s += ",\"status\":{\"observedGeneration\":" + std::to_string(o.generation) +
           ",\"replicas\":" + std::to_string(o.replicas) +
           ",\"updatedReplicas\":" + std::to_string(o.replicas) +
           ",\"readyReplicas\":" + std::to_string(o.replicas) +
           ",\"availableReplicas\":" + std::to_string(o.replicas) +
           ",\"conditions\":[{\"type\":\"Available\",\"status\":\"True\",\"lastUpdateTime\":" + q(created) +
           ",\"lastTransitionTime\":" + q(created) +
           ",\"reason\":\"MinimumReplicasAvailable\",\"message\":\"Deployment has minimum availability.\"},"
           "{\"type\":\"Progressing\",\"status\":\"True\",\"lastUpdateTime\":" + q(created) +
           ",\"lastTransitionTime\":" + q(created) +
           ",\"reason\":\"NewReplicaSetAvailable\",\"message\":" +
           q("ReplicaSet \"" + o.name + "-" + o.template_hash + "\" has successfully progressed.") + "}]}";
      break;
    }
    case Kind::Pod: {
      std::string labels = "{\"app\":" + q(o.app) + ",\"pod-template-hash\":" + q(o.template_hash) + "}";
      std::string owner;
      if (!o.owner_uid.empty()) {
        owner = "[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":" + q(o.owner_name) +
                ",\"uid\":" + q(o.owner_uid) + ",\"controller\":true,\"blockOwnerDeletion\":true}]";
      }
      s += metadata_json(o, labels, owner);
      s += ",\"spec\":{\"containers\":" + container_json(o) +
           ",\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\""
           ",\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\",\"nodeName\":" + q(o.node) +
           ",\"securityContext\":{},\"schedulerName\":\"default-scheduler\",\"priority\":0"
           ",\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\","
           "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}]}";
      bool ready = !o.deleting;
      s += ",\"status\":{\"phase\":\"Running\",\"conditions\":["
           "{\"type\":\"Initialized\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":" + q(created) + "},"
           "{\"type\":\"Ready\",\"status\":" + q(ready ? "True" : "False") +
           ",\"lastProbeTime\":null,\"lastTransitionTime\":" + q(created) + "},"
           "{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":" + q(created) + "}]"
           ",\"hostIP\":\"10.0.0." + std::to_string(1 + std::hash<std::string>{}(o.node) % 200) + "\""
           ",\"podIP\":" + q(o.pod_ip) + ",\"podIPs\":[{\"ip\":" + q(o.pod_ip) + "}]" +
           ",\"startTime\":" + q(created) +
           ",\"containerStatuses\":[{\"name\":" + q(o.app) + ",\"state\":{\"running\":{\"startedAt\":" + q(created) +
           "}},\"ready\":" + (ready ? "true" : "false") + ",\"restartCount\":" + std::to_string(o.restarts) +
           ",\"image\":" + q(kImages[std::hash<std::string>{}(o.app) % kImages.size()] + ":1." + std::to_string(o.image_tag)) +
           ",\"imageID\":\"docker-pullable://example@sha256:" + std::string(64, 'a' + char(o.image_tag % 6)) + "\""
           ",\"started\":true}],\"qosClass\":\"Burstable\"}";
      break;
    }
    case Kind::ConfigMap: {
      std::string labels = "{\"app\":" + q(o.app) + "}";
      s += metadata_json(o, labels, "");
      s += ",\"data\":{\"app.properties\":" +
           q("app.name=" + o.app + "\nrevision=" + std::to_string(o.data_rev) + "\nlog.level=info\n") +
           ",\"feature-flags.yaml\":" + q("flags:\n  fastPath: true\n  rev: " + std::to_string(o.data_rev) + "\n");
      if (!o.big_data.empty()) s += ",\"blob.b64\":" + q(o.big_data);
      s += "}";
      break;
    }
  }
  s += "}";
  return s;
}

// ---------------------------------------------------------------------------
// Database

struct PGresultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, PGresultDeleter>;

// The statements, as GORM renders them on PostgreSQL.
const char* const kInsertSQL =
    "INSERT INTO \"resources\" (\"group\",\"version\",\"resource\",\"kind\",\"cluster\",\"namespace\","
    "\"name\",\"owner_uid\",\"uid\",\"resource_version\",\"object\",\"events\",\"event_resource_versions\","
    "\"created_at\",\"synced_at\",\"deleted_at\") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,NULL,NULL,$12,$13,$14) "
    "RETURNING \"id\"";

const char* const kUpdateSQL =
    "UPDATE \"resources\" SET \"created_at\"=$1,\"object\"=$2,\"owner_uid\"=$3,\"resource_version\"=$4,"
    "\"uid\"=$5,\"synced_at\"=$6 WHERE \"resources\".\"cluster\" = $7 AND \"resources\".\"group\" = $8 AND "
    "\"resources\".\"name\" = $9 AND \"resources\".\"namespace\" = $10 AND \"resources\".\"resource\" = $11 AND "
    "\"resources\".\"version\" = $12";

// With a deletionTimestamp the collector also sets deleted_at (sorted in).
const char* const kUpdateDeletingSQL =
    "UPDATE \"resources\" SET \"created_at\"=$1,\"deleted_at\"=$2,\"object\"=$3,\"owner_uid\"=$4,"
    "\"resource_version\"=$5,\"uid\"=$6,\"synced_at\"=$7 WHERE \"resources\".\"cluster\" = $8 AND "
    "\"resources\".\"group\" = $9 AND \"resources\".\"name\" = $10 AND \"resources\".\"namespace\" = $11 AND "
    "\"resources\".\"resource\" = $12 AND \"resources\".\"version\" = $13";

const char* const kEventSQL =
    "UPDATE \"resources\" SET \"event_resource_versions\"=JSONB_SET(COALESCE(event_resource_versions, '{}'), "
    "$1, $2, true),\"events\"=JSONB_SET(COALESCE(events, '{}'), $3, $4, true) WHERE "
    "\"resources\".\"cluster\" = $5 AND \"resources\".\"uid\" = $6";

const char* const kDeleteSQL =
    "DELETE FROM \"resources\" WHERE \"resources\".\"cluster\" = $1 AND \"resources\".\"group\" = $2 AND "
    "\"resources\".\"name\" = $3 AND \"resources\".\"namespace\" = $4 AND \"resources\".\"resource\" = $5 AND "
    "\"resources\".\"version\" = $6";

const char* const kDeleteClusterSQL = "DELETE FROM \"resources\" WHERE \"resources\".\"cluster\" = $1";

std::string first_line(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t nl = s.find('\n');
  if (nl != std::string::npos) s = s.substr(0, nl);
  return s;
}

class Db {
 public:
  explicit Db(PGconn* c) : conn_(c) {}
  ~Db() { PQfinish(conn_); }

  // Runs one parameterized statement (NULL entries are SQL NULLs).
  // Returns the result; error_out gets SQLSTATE and message on failure.
  Result exec(const char* sql, const std::vector<const std::string*>& params, std::string* sqlstate,
              std::string* error) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const std::string* p : params) values.push_back(p ? p->c_str() : nullptr);
    Result r(PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                          nullptr, 0));
    ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
    const char* code = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    *sqlstate = code ? code : "";
    *error = first_line(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_));
    if (error->empty()) *error = first_line(PQerrorMessage(conn_));
    return nullptr;
  }

  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }

 private:
  PGconn* conn_;
};

// ---------------------------------------------------------------------------
// The writer

struct Options {
  std::string conninfo;
  double rate = 5;
  uint64_t count = 0;
  int clusters = 2;
  uint64_t seed = 0;
  bool seed_set = false;
  bool quiet = false;
};

class Writer {
 public:
  Writer(Db& db, const Options& opt)
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

  std::string now_sql() { return sql_time(std::chrono::system_clock::now()); }

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
    const TypeInfo& t = type_info(o.kind);
    std::string group = t.group, version = t.version, resource = t.resource, kind = t.kind;
    std::string rv = std::to_string(o.rv), object = object_json(o), created = sql_time(o.created);
    std::string synced = now_sql();
    std::string deleted = o.deleting ? sql_time(*o.deleting) : "";
    std::string state, err;
    Result r = db_.exec(kInsertSQL,
                        {&group, &version, &resource, &kind, &o.cluster, &o.ns, &o.name, &o.owner_uid, &o.uid,
                         &rv, &object, &created, &synced, o.deleting ? &deleted : nullptr},
                        &state, &err);
    if (!r) {
      if (state == "23505") {
        // The collector's createOrUpdateResource: Create, and on "exists" Update.
        objects_[o.key()] = o;
        return update(o, std::string(label) + "->UPDATE", "(exists)");
      }
      return fail("INSERT", err);
    }
    writes_++;
    objects_[o.key()] = o;
    log(label, o, std::string("id=") + PQgetvalue(r.get(), 0, 0));
    return true;
  }

  // -- updates -------------------------------------------------------------
  bool update(const Obj& o, const std::string& label, const std::string& extra = "") {
    const TypeInfo& t = type_info(o.kind);
    std::string group = t.group, version = t.version, resource = t.resource;
    std::string rv = std::to_string(o.rv), object = object_json(o), created = sql_time(o.created);
    std::string synced = now_sql();
    std::string state, err;
    Result r;
    if (o.deleting) {
      std::string deleted = sql_time(*o.deleting);
      r = db_.exec(kUpdateDeletingSQL,
                   {&created, &deleted, &object, &o.owner_uid, &rv, &o.uid, &synced, &o.cluster, &group, &o.name,
                    &o.ns, &resource, &version},
                   &state, &err);
    } else {
      r = db_.exec(kUpdateSQL,
                   {&created, &object, &o.owner_uid, &rv, &o.uid, &synced, &o.cluster, &group, &o.name, &o.ns,
                    &resource, &version},
                   &state, &err);
    }
    if (!r) return fail("UPDATE", err);
    writes_++;
    std::string rows = PQcmdTuples(r.get());
    std::string more = extra;
    if (rows != "1") more += std::string(more.empty() ? "" : " ") + "rows=" + rows;
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
    const TypeInfo& t = type_info(o.kind);
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
    std::string ev_name = o.name + "." + rnd_.alnum(16, "0123456789abcdef");
    std::string ev_uid = rnd_.uuid();
    uint64_t ev_rv = ++c.rv;
    std::string now = k8s_time(std::chrono::system_clock::now());
    std::string ev =
        "{\"kind\":\"Event\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":" + q(ev_name) + ",\"namespace\":" +
        q(o.ns) + ",\"uid\":" + q(ev_uid) + ",\"resourceVersion\":" + q(std::to_string(ev_rv)) +
        ",\"creationTimestamp\":" + q(now) + "},\"involvedObject\":{\"kind\":" + q(t.kind) +
        ",\"namespace\":" + q(o.ns) + ",\"name\":" + q(o.name) + ",\"uid\":" + q(o.uid) +
        ",\"apiVersion\":" + q(t.api_version) + ",\"resourceVersion\":" + q(std::to_string(o.rv)) +
        "},\"reason\":" + q(reason[0]) + ",\"message\":" + q(reason[1]) +
        ",\"source\":{\"component\":\"kubelet\",\"host\":\"node-1\"},\"firstTimestamp\":" + q(now) +
        ",\"lastTimestamp\":" + q(now) + ",\"count\":1,\"type\":\"Normal\",\"eventTime\":null"
        ",\"reportingComponent\":\"kubelet\",\"reportingInstance\":\"node-1\"}";
    // JSONB_SET paths, as text[] literals: {<ns/name>} and {<event uid>}.
    std::string rv_path = "{" + o.ns + "/" + ev_name + "}";
    std::string rv_value = std::to_string(ev_rv);  // the RV's digits: a JSON number
    std::string ev_path = "{" + ev_uid + "}";
    std::string state, err;
    Result r = db_.exec(kEventSQL, {&rv_path, &rv_value, &ev_path, &ev, &o.cluster, &o.uid}, &state, &err);
    if (!r) return fail("event UPDATE", err);
    writes_++;
    log("EVENT", o, std::string(reason[0]) + (std::string(PQcmdTuples(r.get())) == "1" ? "" : " rows=0"));
    return true;
  }

  // -- deletes -------------------------------------------------------------
  bool remove(const std::string& key) {
    Obj o = objects_[key];
    const TypeInfo& t = type_info(o.kind);
    std::string group = t.group, version = t.version, resource = t.resource;
    std::string state, err;
    Result r = db_.exec(kDeleteSQL, {&o.cluster, &group, &o.name, &o.ns, &resource, &version}, &state, &err);
    if (!r) return fail("DELETE", err);
    writes_++;
    objects_.erase(key);
    std::string rows = PQcmdTuples(r.get());
    log("DELETE", o, rows == "1" ? "" : "rows=" + rows);
    return true;
  }

  // Clusterpedia's CleanCluster: one multi-row DELETE; then the cluster is
  // added back and its objects are listed and created again, one by one.
  bool remove_cluster() {
    Cluster& c = clusters_[static_cast<size_t>(rnd_.range(0, int(clusters_.size()) - 1))];
    std::string state, err;
    Result r = db_.exec(kDeleteClusterSQL, {&c.name}, &state, &err);
    if (!r) return fail("DELETE cluster", err);
    writes_++;
    if (!opt_.quiet) std::fprintf(stderr, "DELETE-CLUSTER %s rows=%s\n", c.name.c_str(), PQcmdTuples(r.get()));
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

  Db& db_;
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
               "usage: demo_writer --conninfo STR [--rate N[/s]] [--count N] [--clusters N] [--seed N] "
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
  if (o.conninfo.empty()) usage("--conninfo is required");
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

  const char* keys[] = {"fallback_application_name", "dbname", nullptr};
  const char* vals[] = {"walwatch_demo_writer", opt.conninfo.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, vals, /*expand_dbname=*/1);
  if (!conn || PQstatus(conn) != CONNECTION_OK) {
    std::fprintf(stderr, "demo_writer: cannot connect: %s\n",
                 conn ? first_line(PQerrorMessage(conn)).c_str() : "out of memory");
    PQfinish(conn);
    return 1;
  }
  Db db(conn);
  {
    // Timestamps are sent as UTC text; keep the session's interpretation fixed.
    std::string state, err;
    db.exec("SET TimeZone = 'UTC'", {}, &state, &err);
  }

  char rate[32] = "unlimited";
  if (opt.rate > 0) std::snprintf(rate, sizeof rate, "%g/s", opt.rate);
  std::fprintf(stderr, "demo_writer: seed %llu, %d cluster(s), rate %s, count %s\n",
               static_cast<unsigned long long>(opt.seed), opt.clusters, rate,
               opt.count ? std::to_string(opt.count).c_str() : "unlimited");

  Writer w(db, opt);
  using clock = std::chrono::steady_clock;
  auto next = clock::now();
  auto period = opt.rate > 0 ? std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(1.0 / opt.rate))
                             : clock::duration::zero();
  int rc = 0;
  while (!g_stop.load() && (opt.count == 0 || w.writes() < opt.count)) {
    if (!w.step()) {
      rc = 1;
      if (!db.ok()) std::fprintf(stderr, "demo_writer: connection lost\n");
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
