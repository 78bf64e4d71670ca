// decoder_bench: the replication thread's per-row work on wal2json v2 input,
// next to raw simdjson parsing of the very same bytes (the ceiling), and
// pgoutput's decoding of the same rows.
//
// Input: one-row transactions (B, I or U, C lines) exactly as walwatch
// receives them (tests/data/wal2json_v2_capture.jsonl: format-version 2,
// include-xids/lsn/timestamp, include-types=0, REPLICA IDENTITY FULL so an
// UPDATE carries the whole old row in `identity`). The `object` column is
// jsonb, so its value is a JSON string holding the text jsonb_out prints:
// keys sorted by length then bytes, ", " and ": " spacing. The objects are
// Kubernetes-like Pods with labels, annotations (including kubectl's
// last-applied-configuration, a JSON document inside a JSON string inside the
// wal2json string), ownerReferences, managedFields, spec and status, grown to
// about 1, 4, 16 and 64 KB of jsonb text. The same transactions are also
// written as pgoutput sends them (protocol version 1: Begin, Insert or
// Update with the old row 'O', Commit; text tuples, so the object column is
// jsonb_out's text itself), after one Relation message of the table,
// by the unit tests' pgoutput builder (tests/unit/support/pgoutput_builder.h).
//
// Benchmarks, each over the whole corpus of one size and one operation
// (insert or update; bytes/s counts every line, B and C included; items/s
// counts rows, i.e. events):
//   SimdjsonDom          dom::parser::parse of each line (runtime-dispatched
//                        kernel: the fastest this CPU has)
//   SimdjsonOnDemand     On-Demand, every key and value of each line touched
//                        (strings unescaped, numbers parsed): the decoder's
//                        ceiling, built with walwatch's -march like walwatch
//   SimdjsonOnDemandNested  the same, plus the object column's JSON text
//                        parsed again, every value touched: the ceiling of
//                        the full path, which also reads both layers
//   Decode               Wal2JsonDecoder::Decode of each line
//   DecodeBuild          Decode + TransactionAssembler::Feed +
//                        EventBuilder::Build (wire bytes with the spliced
//                        resourceVersion): the full per-row path up to the
//                        EventLog
//   PgoutputDecode       PgoutputDecoder::Decode of each pgoutput message of
//                        the same rows (bytes/s counts pgoutput's bytes),
//                        and Decode of the wal2json lines in the same
//                        iterations, alternately first: counters
//                        pgoutput_ns_per_row, wal2json_ns_per_row and their
//                        ratio pgoutput_over_wal2json, from the same moments
//                        of the same run (each pass timed in the thread's
//                        CPU time; the benchmark's time, bytes/s and items/s
//                        are pgoutput's passes alone)
//
// Run: decoder_bench --benchmark_repetitions=5
//      --benchmark_report_aggregates_only=true   (tests/bench/run-bench.sh)
// Environment: DECODER_BENCH_CORPUS_MB (default 8) bytes per corpus.
#include <algorithm>
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
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <simdjson.h>

#include "cdc/event_builder.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pgoutput_decoder.h"
#include "cdc/postgres/transaction_assembler.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "schema/table_mapping.h"
#include "tests/unit/support/pgoutput_builder.h"

namespace walwatch {
namespace {

namespace od = simdjson::ondemand;
namespace pgo = testing_pgoutput;

// ---------------------------------------------------------------------------
// A small JSON tree, printed the way PostgreSQL's jsonb_out prints jsonb.

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  std::string scalar;  // number text, "true"/"false", or the string value
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
};

Json Null() { return Json{}; }
Json Bool(bool b) {
  Json j;
  j.type = Json::Type::kBool;
  j.scalar = b ? "true" : "false";
  return j;
}
Json Num(int64_t n) {
  Json j;
  j.type = Json::Type::kNumber;
  j.scalar = std::to_string(n);
  return j;
}
Json Str(std::string s) {
  Json j;
  j.type = Json::Type::kString;
  j.scalar = std::move(s);
  return j;
}
Json Arr(std::vector<Json> items = {}) {
  Json j;
  j.type = Json::Type::kArray;
  j.items = std::move(items);
  return j;
}
Json Obj(std::vector<std::pair<std::string, Json>> members = {}) {
  Json j;
  j.type = Json::Type::kObject;
  j.members = std::move(members);
  return j;
}

// PostgreSQL's escape_json.
void AppendEscaped(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// jsonb's key order: shorter keys first, then bytewise.
bool JsonbKeyLess(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

// jsonb = true: jsonb_out's text (keys reordered, ", " and ": ").
// jsonb = false: compact, keys in the given order (kubectl's annotation).
void Print(const Json& j, bool jsonb, std::string* out) {
  switch (j.type) {
    case Json::Type::kNull: out->append("null"); break;
    case Json::Type::kBool:
    case Json::Type::kNumber: out->append(j.scalar); break;
    case Json::Type::kString: AppendEscaped(j.scalar, out); break;
    case Json::Type::kArray: {
      out->push_back('[');
      for (size_t i = 0; i < j.items.size(); ++i) {
        if (i) out->append(jsonb ? ", " : ",");
        Print(j.items[i], jsonb, out);
      }
      out->push_back(']');
      break;
    }
    case Json::Type::kObject: {
      std::vector<const std::pair<std::string, Json>*> order;
      for (const auto& m : j.members) order.push_back(&m);
      if (jsonb) {
        std::stable_sort(order.begin(), order.end(),
                         [](const auto* a, const auto* b) {
                           return JsonbKeyLess(a->first, b->first);
                         });
      }
      out->push_back('{');
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out->append(jsonb ? ", " : ",");
        AppendEscaped(order[i]->first, out);
        out->append(jsonb ? ": " : ":");
        Print(order[i]->second, jsonb, out);
      }
      out->push_back('}');
      break;
    }
  }
}

std::string JsonbText(const Json& j) {
  std::string s;
  Print(j, true, &s);
  return s;
}

// ---------------------------------------------------------------------------
// Kubernetes-like Pods.

struct PodSeed {
  uint64_t index;   // which pod
  int revision;     // which version of it (resourceVersion, status)
  int env_vars;     // the size knob
};

std::string Hex(std::mt19937_64& rng, int n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(kDigits[rng() % 16]);
  return s;
}

std::string Uuid(std::mt19937_64& rng) {
  return Hex(rng, 8) + "-" + Hex(rng, 4) + "-4" + Hex(rng, 3) + "-a" +
         Hex(rng, 3) + "-" + Hex(rng, 12);
}

std::string K8sTime(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Pod {
  Json object;
  std::string name, ns, uid, resource_version, owner_uid;
};

Json Empty() { return Obj(); }

Pod MakePod(const PodSeed& seed) {
  // Everything but the revision-dependent fields comes from the index, so
  // two revisions of one pod differ like a real status update.
  std::mt19937_64 rng(seed.index * 0x9E3779B97F4A7C15ULL + 17);
  static const char* const kApps[] = {"web", "api", "worker", "cache",
                                      "gateway", "billing", "search", "auth"};
  static const char* const kNamespaces[] = {"default", "team-a", "team-b",
                                            "payments", "kube-system"};
  const std::string app = kApps[rng() % 8];
  const std::string ns = kNamespaces[rng() % 5];
  const std::string hash = Hex(rng, 10);
  const std::string rs_name = app + "-" + hash;
  const std::string name = rs_name + "-" + Hex(rng, 5);
  const std::string uid = Uuid(rng);
  const std::string rs_uid = Uuid(rng);
  const std::string node = "node-" + std::to_string(rng() % 500) + ".zone-" +
                           std::to_string(rng() % 3) + ".example.internal";
  const std::string pod_ip = "10.244." + std::to_string(rng() % 250) + "." +
                             std::to_string(rng() % 250);
  const int64_t created = 1764680000 + static_cast<int64_t>(rng() % 1000000);
  const std::string created_text = K8sTime(created);
  const std::string now_text = K8sTime(created + 60 * seed.revision);
  const std::string rv = std::to_string(1000000 + seed.index * 7 +
                                        static_cast<uint64_t>(seed.revision));
  const int containers = 1 + std::max(seed.env_vars, 0) / 24;
  const bool rich = seed.env_vars >= 4;  // managedFields and more labels
  const bool applied = seed.env_vars >= 16;  // kubectl apply's annotation

  std::vector<std::pair<std::string, Json>> labels = {
      {"app", Str(app)}, {"pod-template-hash", Str(hash)}};
  if (rich) {
    labels.push_back({"app.kubernetes.io/part-of", Str("shop")});
    labels.push_back({"app.kubernetes.io/version", Str("1.24." + Hex(rng, 2))});
    for (int i = 0; i < seed.env_vars / 16; ++i) {
      labels.push_back({"example.com/team-" + std::to_string(i), Str(Hex(rng, 8))});
    }
  }

  std::vector<Json> container_list, container_status, volumes;
  Json managed_containers = Obj();
  int env_left = seed.env_vars;
  for (int c = 0; c < containers; ++c) {
    const std::string cname = c == 0 ? app : app + "-sidecar-" + std::to_string(c);
    const std::string image = "registry.example.com/" + app + "/" + cname +
                              ":1." + std::to_string(seed.revision % 3);
    int n_env = std::max(c + 1 == containers ? env_left : std::min(env_left, 24), 0);
    env_left -= n_env;
    std::vector<Json> env;
    Json managed_env = Obj({{".", Empty()}});
    for (int e = 0; e < n_env; ++e) {
      std::string key = "FEATURE_" + std::to_string(c) + "_" + std::to_string(e);
      if (e % 5 == 4) {
        env.push_back(Obj({{"name", Str(key)},
                           {"valueFrom", Obj({{"secretKeyRef",
                                               Obj({{"name", Str(app + "-secrets")},
                                                    {"key", Str("key-" + std::to_string(e))}})}})}}));
      } else {
        env.push_back(Obj({{"name", Str(key)},
                           {"value", Str("value-" + Hex(rng, 12) + " \"quoted\"")}}));
      }
      managed_env.members.push_back(
          {"k:{\"name\":\"" + key + "\"}",
           Obj({{".", Empty()}, {"f:name", Empty()},
                {e % 5 == 4 ? "f:valueFrom" : "f:value", Empty()}})});
    }
    container_list.push_back(Obj({
        {"name", Str(cname)},
        {"image", Str(image)},
        {"ports", Arr({Obj({{"name", Str("http")},
                            {"containerPort", Num(8080 + c)},
                            {"protocol", Str("TCP")}})})},
        {"env", Arr(env)},
        {"resources", Obj({{"limits", Obj({{"cpu", Str("500m")}, {"memory", Str("256Mi")}})},
                           {"requests", Obj({{"cpu", Str("100m")}, {"memory", Str("128Mi")}})}})},
        {"volumeMounts", Arr({Obj({{"name", Str("kube-api-access-" + Hex(rng, 5))},
                                   {"readOnly", Bool(true)},
                                   {"mountPath", Str("/var/run/secrets/kubernetes.io/serviceaccount")}})})},
        {"readinessProbe", Obj({{"httpGet", Obj({{"path", Str("/healthz")},
                                                 {"port", Num(8080 + c)},
                                                 {"scheme", Str("HTTP")}})},
                                {"periodSeconds", Num(10)},
                                {"timeoutSeconds", Num(1)},
                                {"successThreshold", Num(1)},
                                {"failureThreshold", Num(3)}})},
        {"terminationMessagePath", Str("/dev/termination-log")},
        {"terminationMessagePolicy", Str("File")},
        {"imagePullPolicy", Str("IfNotPresent")},
    }));
    container_status.push_back(Obj({
        {"name", Str(cname)},
        {"state", Obj({{"running", Obj({{"startedAt", Str(now_text)}})}})},
        {"lastState", Empty()},
        {"ready", Bool(seed.revision % 4 != 3)},
        {"restartCount", Num(seed.revision % 7)},
        {"image", Str(image)},
        {"imageID", Str("registry.example.com/" + app + "@sha256:" + Hex(rng, 64))},
        {"containerID", Str("containerd://" + Hex(rng, 64))},
        {"started", Bool(true)},
    }));
    managed_containers.members.push_back(
        {"k:{\"name\":\"" + cname + "\"}",
         Obj({{".", Empty()}, {"f:env", managed_env}, {"f:image", Empty()},
              {"f:imagePullPolicy", Empty()}, {"f:name", Empty()},
              {"f:ports", Obj({{".", Empty()},
                               {"k:{\"containerPort\":" + std::to_string(8080 + c) +
                                    ",\"protocol\":\"TCP\"}",
                                Obj({{".", Empty()}, {"f:containerPort", Empty()},
                                     {"f:name", Empty()}, {"f:protocol", Empty()}})}})},
              {"f:readinessProbe", Obj({{".", Empty()}, {"f:httpGet", Empty()}})},
              {"f:resources", Obj({{".", Empty()}, {"f:limits", Empty()},
                                   {"f:requests", Empty()}})}})});
  }
  volumes.push_back(Obj({{"name", Str("kube-api-access")},
                         {"projected", Obj({{"defaultMode", Num(420)},
                                            {"sources", Arr({Obj({{"serviceAccountToken",
                                                                   Obj({{"path", Str("token")},
                                                                        {"expirationSeconds", Num(3607)}})}}),
                                                             Obj({{"configMap",
                                                                   Obj({{"name", Str("kube-root-ca.crt")}})}})})}})}}));

  Json spec = Obj({
      {"containers", Arr(container_list)},
      {"volumes", Arr(volumes)},
      {"restartPolicy", Str("Always")},
      {"terminationGracePeriodSeconds", Num(30)},
      {"dnsPolicy", Str("ClusterFirst")},
      {"serviceAccountName", Str("default")},
      {"serviceAccount", Str("default")},
      {"nodeName", Str(node)},
      {"securityContext", Empty()},
      {"schedulerName", Str("default-scheduler")},
      {"priority", Num(0)},
      {"enableServiceLinks", Bool(true)},
      {"preemptionPolicy", Str("PreemptLowerPriority")},
      {"tolerations", Arr({Obj({{"key", Str("node.kubernetes.io/not-ready")},
                                {"operator", Str("Exists")},
                                {"effect", Str("NoExecute")},
                                {"tolerationSeconds", Num(300)}}),
                           Obj({{"key", Str("node.kubernetes.io/unreachable")},
                                {"operator", Str("Exists")},
                                {"effect", Str("NoExecute")},
                                {"tolerationSeconds", Num(300)}})})},
  });

  std::vector<std::pair<std::string, Json>> annotations = {
      {"shadow.clusterpedia.io/cluster-name", Str("member-" + std::to_string(seed.index % 4))}};
  if (rich) {
    annotations.push_back({"prometheus.io/scrape", Str("true")});
    annotations.push_back({"prometheus.io/port", Str("8080")});
  }
  if (applied) {
    // kubectl apply keeps the applied manifest as compact JSON text.
    Json manifest = Obj({{"apiVersion", Str("v1")}, {"kind", Str("Pod")},
                         {"metadata", Obj({{"name", Str(name)},
                                           {"namespace", Str(ns)},
                                           {"labels", Obj(labels)}})},
                         {"spec", Obj({{"containers", Arr(container_list)}})}});
    std::string text;
    Print(manifest, false, &text);
    annotations.push_back({"kubectl.kubernetes.io/last-applied-configuration",
                           Str(text + "\n")});
  }

  std::vector<std::pair<std::string, Json>> metadata = {
      {"name", Str(name)},
      {"generateName", Str(rs_name + "-")},
      {"namespace", Str(ns)},
      {"uid", Str(uid)},
      {"resourceVersion", Str(rv)},
      {"creationTimestamp", Str(created_text)},
      {"labels", Obj(labels)},
      {"annotations", Obj(annotations)},
      {"ownerReferences", Arr({Obj({{"apiVersion", Str("apps/v1")},
                                    {"kind", Str("ReplicaSet")},
                                    {"name", Str(rs_name)},
                                    {"uid", Str(rs_uid)},
                                    {"controller", Bool(true)},
                                    {"blockOwnerDeletion", Bool(true)}})})},
  };
  if (rich) {
    metadata.push_back(
        {"managedFields",
         Arr({Obj({{"manager", Str("kube-controller-manager")},
                   {"operation", Str("Update")},
                   {"apiVersion", Str("v1")},
                   {"time", Str(created_text)},
                   {"fieldsType", Str("FieldsV1")},
                   {"fieldsV1", Obj({{"f:metadata",
                                      Obj({{"f:generateName", Empty()},
                                           {"f:labels", Obj({{".", Empty()},
                                                             {"f:app", Empty()},
                                                             {"f:pod-template-hash", Empty()}})},
                                           {"f:ownerReferences",
                                            Obj({{".", Empty()},
                                                 {"k:{\"uid\":\"" + rs_uid + "\"}", Empty()}})}})},
                                     {"f:spec", Obj({{"f:containers", managed_containers},
                                                     {"f:dnsPolicy", Empty()},
                                                     {"f:restartPolicy", Empty()}})}})}}),
              Obj({{"manager", Str("kubelet")},
                   {"operation", Str("Update")},
                   {"apiVersion", Str("v1")},
                   {"time", Str(now_text)},
                   {"fieldsType", Str("FieldsV1")},
                   {"subresource", Str("status")},
                   {"fieldsV1", Obj({{"f:status",
                                      Obj({{"f:conditions", Obj({{"k:{\"type\":\"Ready\"}",
                                                                  Obj({{".", Empty()},
                                                                       {"f:lastProbeTime", Empty()},
                                                                       {"f:lastTransitionTime", Empty()},
                                                                       {"f:status", Empty()},
                                                                       {"f:type", Empty()}})}})},
                                           {"f:containerStatuses", Empty()},
                                           {"f:hostIP", Empty()},
                                           {"f:phase", Empty()},
                                           {"f:podIP", Empty()},
                                           {"f:startTime", Empty()}})}})}})})});
    // Small pods: the kubelet's entry only.
    if (seed.env_vars < 8) {
      auto& entries = metadata.back().second.items;
      entries.erase(entries.begin());
    }
  }

  auto condition = [&](const char* type, bool status) {
    return Obj({{"type", Str(type)},
                {"status", Str(status ? "True" : "False")},
                {"lastProbeTime", Null()},
                {"lastTransitionTime", Str(status ? created_text : now_text)}});
  };
  const bool ready = seed.revision % 4 != 3;
  Json status = Obj({
      {"phase", Str("Running")},
      {"conditions", Arr({condition("Initialized", true), condition("Ready", ready),
                          condition("ContainersReady", ready),
                          condition("PodScheduled", true)})},
      {"hostIP", Str("192.168.7." + std::to_string(seed.index % 250))},
      {"podIP", Str(pod_ip)},
      {"podIPs", Arr({Obj({{"ip", Str(pod_ip)}})})},
      {"startTime", Str(created_text)},
      {"containerStatuses", Arr(container_status)},
      {"qosClass", Str("Burstable")},
  });

  Pod pod;
  if (seed.env_vars < 0) {
    // The 1 KB class: a lean Pod (a small controller's, before the
    // kubelet fills its status), still with labels, annotations, an owner.
    container_list.resize(1);
    container_list[0].members.resize(3);  // name, image, ports
    metadata.resize(9);                   // no managedFields
    spec = Obj({{"containers", Arr(container_list)},
                {"nodeName", Str(node)},
                {"restartPolicy", Str("Always")}});
    status = Obj({{"phase", Str("Running")},
                  {"hostIP", Str("192.168.7." + std::to_string(seed.index % 250))},
                  {"podIP", Str(pod_ip)},
                  {"startTime", Str(created_text)}});
  }
  pod.object = Obj({{"apiVersion", Str("v1")},
                    {"kind", Str("Pod")},
                    {"metadata", Obj(metadata)},
                    {"spec", spec},
                    {"status", status}});
  pod.name = name;
  pod.ns = ns;
  pod.uid = uid;
  pod.resource_version = rv;
  pod.owner_uid = rs_uid;
  return pod;
}

// ---------------------------------------------------------------------------
// wal2json v2 lines.

std::string PgTime(int64_t unix_micros) {
  time_t t = static_cast<time_t>(unix_micros / 1000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char base[32], buf[48];
  std::strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
  std::snprintf(buf, sizeof buf, "%s.%06lld+00", base,
                static_cast<long long>(unix_micros % 1000000));
  return buf;
}

// One column of a row, in table order: what both plugins print of it.
struct Column {
  const char* name;
  uint32_t type_oid;                // for pgoutput's Relation message
  std::optional<std::string> text;  // the type's text output; nullopt: NULL
  bool number;                      // wal2json prints it as a JSON number
};

using pgo::kInt8Oid;
using pgo::kJsonbOid;
using pgo::kTextOid;
using pgo::kTimestamptzOid;

std::vector<Column> Row(const Pod& pod, uint64_t id, const std::string& when) {
  return {
      {"id", kInt8Oid, std::to_string(id), true},
      {"group", kTextOid, "", false},
      {"version", kTextOid, "v1", false},
      {"resource", kTextOid, "pods", false},
      {"kind", kTextOid, "Pod", false},
      {"cluster", kTextOid, "member-" + std::to_string(id % 4), false},
      {"namespace", kTextOid, pod.ns, false},
      {"name", kTextOid, pod.name, false},
      {"owner_uid", kTextOid, pod.owner_uid, false},
      {"uid", kTextOid, pod.uid, false},
      {"resource_version", kTextOid, pod.resource_version, false},
      {"object", kJsonbOid, JsonbText(pod.object), false},
      {"events", kJsonbOid, std::nullopt, false},
      {"event_resource_versions", kJsonbOid, std::nullopt, false},
      {"created_at", kTimestamptzOid, when, false},
      {"synced_at", kTimestamptzOid, when, false},
      {"deleted_at", kTimestamptzOid, std::nullopt, false},
  };
}

// The row's columns as wal2json prints a tuple (jsonb: a JSON string).
std::string Tuple(const std::vector<Column>& row) {
  std::string s = "[";
  for (const Column& c : row) {
    if (s.size() > 1) s.push_back(',');
    s.append("{\"name\":\"").append(c.name).append("\",\"value\":");
    if (!c.text) {
      s.append("null");
    } else if (c.number) {
      s.append(*c.text);
    } else {
      AppendEscaped(*c.text, &s);
    }
    s.push_back('}');
  }
  s.push_back(']');
  return s;
}

// ---------------------------------------------------------------------------
// pgoutput messages (tests/unit/support/pgoutput_builder.h).

// TupleData in text: 'n' for a null, 't' and the text otherwise.
pgo::Tuple PgoutputTuple(const std::vector<Column>& row) {
  pgo::Tuple tuple;
  for (const Column& c : row) {
    tuple.push_back(c.text ? pgo::Text(*c.text) : pgo::kNull);
  }
  return tuple;
}

constexpr uint32_t kRelationId = 16385;

// The Relation message of public.resources (REPLICA IDENTITY FULL: every
// column is part of the key).
std::string PgoutputRelation(const std::vector<Column>& row) {
  std::vector<pgo::RelColumn> columns;
  for (const Column& c : row) columns.push_back({c.name, c.type_oid, true});
  return pgo::Relation(kRelationId, "public", "resources", columns);
}

enum class Op { kInsert, kUpdate };

// A line with simdjson's padding behind it, as the raw parsers need.
struct Line {
  std::string text;
  std::string_view view() const { return text; }
};

Line MakeLine(std::string s) {
  Line l;
  l.text.reserve(s.size() + simdjson::SIMDJSON_PADDING);
  l.text.assign(s);  // not a move: that would drop the padding
  return l;
}

// One pgoutput message, at the position its XLogData starts.
struct PgMessage {
  std::string bytes;
  uint64_t wal_start;
};

struct Corpus {
  std::vector<Line> lines;  // B, I|U, C per transaction
  size_t bytes = 0;         // all lines
  size_t rows = 0;
  size_t object_bytes = 0;  // jsonb text of the new objects
  // The same transactions as pgoutput sends them, after `pg_relation`.
  std::string pg_relation;
  std::vector<PgMessage> pg_messages;
  size_t pg_bytes = 0;  // all pg_messages
};

// The env_vars knob that makes a pod's jsonb text about `target` bytes.
int KnobFor(size_t target) {
  int knob = 0;
  for (;;) {
    size_t size = JsonbText(MakePod({1, 1, knob}).object).size();
    if (size >= target) return knob;
    knob += size < target / 2 ? 4 : 1;
  }
}

Corpus MakeCorpus(size_t object_target, Op op, size_t corpus_bytes) {
  const int knob = object_target <= 1024 ? -1 : KnobFor(object_target);
  Corpus c;
  uint64_t lsn = (uint64_t{0x16} << 32) | 0xB3740000;
  uint32_t xid = 1000;
  int64_t micros = 1764682896726676;
  for (uint64_t i = 0; c.bytes < corpus_bytes || c.rows < 16; ++i) {
    Pod now = MakePod({i, op == Op::kInsert ? 1 : 2, knob});
    std::string when = PgTime(micros);
    uint64_t change_lsn = lsn + 40;
    uint64_t commit_lsn = lsn + 40 + 4096;
    uint64_t next_lsn = commit_lsn + 48;
    std::string head = "{\"action\":\"B\",\"xid\":" + std::to_string(xid) +
                       ",\"timestamp\":\"" + when + "\",\"lsn\":\"" +
                       FormatLsn(commit_lsn) + "\",\"nextlsn\":\"" +
                       FormatLsn(next_lsn) + "\"}";
    const std::vector<Column> new_row = Row(now, i + 1, when);
    std::vector<Column> old_row;
    std::string change = std::string("{\"action\":\"") +
                         (op == Op::kInsert ? "I" : "U") +
                         "\",\"xid\":" + std::to_string(xid) +
                         ",\"timestamp\":\"" + when + "\",\"lsn\":\"" +
                         FormatLsn(change_lsn) +
                         "\",\"schema\":\"public\",\"table\":\"resources\","
                         "\"columns\":" +
                         Tuple(new_row);
    if (op == Op::kUpdate) {
      Pod before = MakePod({i, 1, knob});
      old_row = Row(before, i + 1, PgTime(micros - 60000000));
      change += ",\"identity\":" + Tuple(old_row);
    }
    change += "}";
    if (c.pg_relation.empty()) c.pg_relation = PgoutputRelation(new_row);
    // pgoutput: Begin (the commit's position, time and xid), the change,
    // Commit (flags, the commit's position and end, time).
    PgMessage pg_begin{pgo::Begin(commit_lsn, pgo::PgTime(micros), xid), lsn};
    PgMessage pg_change{
        op == Op::kInsert
            ? pgo::Insert(kRelationId, PgoutputTuple(new_row))
            : pgo::Update(kRelationId, 'O', PgoutputTuple(old_row),
                          PgoutputTuple(new_row)),
        change_lsn};
    PgMessage pg_commit{pgo::Commit(commit_lsn, next_lsn, pgo::PgTime(micros)),
                        commit_lsn};
    for (PgMessage* m : {&pg_begin, &pg_change, &pg_commit}) {
      c.pg_bytes += m->bytes.size();
      c.pg_messages.push_back(std::move(*m));
    }
    std::string commit = head;
    commit[11] = 'C';
    c.object_bytes += JsonbText(now.object).size();
    for (std::string* s : {&head, &change, &commit}) {
      c.bytes += s->size();
      c.lines.push_back(MakeLine(std::move(*s)));
    }
    ++c.rows;
    lsn = next_lsn + 8;
    ++xid;
    micros += 1337;
  }
  return c;
}

size_t CorpusBytes() {
  const char* env = std::getenv("DECODER_BENCH_CORPUS_MB");
  size_t mb = env ? std::strtoul(env, nullptr, 10) : 8;
  return (mb ? mb : 8) << 20;
}

const Corpus& GetCorpus(size_t object_target, Op op) {
  static std::map<std::pair<size_t, Op>, std::unique_ptr<Corpus>> cache;
  auto& slot = cache[{object_target, op}];
  if (!slot) {
    slot = std::make_unique<Corpus>(MakeCorpus(object_target, op, CorpusBytes()));
  }
  return *slot;
}

void SetCounters(benchmark::State& state, const Corpus& c) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * c.bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * c.rows));
  state.counters["object_bytes"] =
      static_cast<double>(c.object_bytes) / static_cast<double>(c.rows);
  state.counters["row_line_bytes"] =
      static_cast<double>(c.lines[1].text.size());
}

// ---------------------------------------------------------------------------
// Raw simdjson.

struct Touch {
  uint64_t sum = 0;
  bool nested = false;          // parse JSON text inside strings again
  od::parser* inner = nullptr;  // for nested documents
  std::string* scratch = nullptr;
};

simdjson::error_code TouchValue(od::value v, Touch* t);

simdjson::error_code TouchDocument(od::document& doc, Touch* t) {
  od::value v;
  if (auto err = doc.get_value().get(v)) return err;
  return TouchValue(v, t);
}

simdjson::error_code TouchValue(od::value v, Touch* t) {
  od::json_type type;
  if (auto err = v.type().get(type)) return err;
  switch (type) {
    case od::json_type::object: {
      od::object o;
      if (auto err = v.get_object().get(o)) return err;
      for (auto field : o) {
        std::string_view key;
        if (auto err = field.unescaped_key().get(key)) return err;
        t->sum += key.size();
        if (auto err = TouchValue(field.value(), t)) return err;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::array: {
      od::array a;
      if (auto err = v.get_array().get(a)) return err;
      for (auto element : a) {
        od::value e;
        if (auto err = element.get(e)) return err;
        if (auto err = TouchValue(e, t)) return err;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view s;
      if (auto err = v.get_string().get(s)) return err;
      t->sum += s.size();
      if (t->nested && !s.empty() && s[0] == '{') {
        // The object column: parse its JSON text too, from a padded copy
        // (what walwatch's decoder and event builder do).
        t->scratch->reserve(s.size() + simdjson::SIMDJSON_PADDING);
        t->scratch->assign(s.data(), s.size());
        od::document inner;
        if (auto err = t->inner->iterate(t->scratch->data(), s.size(),
                                         t->scratch->capacity())
                           .get(inner)) {
          return err;
        }
        Touch sub{0, false, nullptr, nullptr};
        if (auto err = TouchDocument(inner, &sub)) return err;
        t->sum += sub.sum;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::number: {
      od::number n;
      if (auto err = v.get_number().get(n)) return err;
      t->sum += static_cast<uint64_t>(n.get_number_type());
      return simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool b;
      if (auto err = v.get_bool().get(b)) return err;
      t->sum += b;
      return simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool is_null;
      if (auto err = v.is_null().get(is_null)) return err;
      t->sum += is_null;
      return simdjson::SUCCESS;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

void BM_SimdjsonDom(benchmark::State& state, size_t size, Op op) {
  const Corpus& c = GetCorpus(size, op);
  simdjson::dom::parser parser;
  for (auto _ : state) {
    for (const Line& line : c.lines) {
      simdjson::dom::element root;
      auto err = parser.parse(line.text.data(), line.text.size(), false).get(root);
      if (err) {
        state.SkipWithError(simdjson::error_message(err));
        return;
      }
      benchmark::DoNotOptimize(root);
    }
  }
  SetCounters(state, c);
}

void RunOnDemand(benchmark::State& state, size_t size, Op op, bool nested) {
  const Corpus& c = GetCorpus(size, op);
  od::parser parser, inner;
  std::string scratch;
  Touch t{0, nested, &inner, &scratch};
  for (auto _ : state) {
    for (const Line& line : c.lines) {
      od::document doc;
      auto err = parser.iterate(line.text.data(), line.text.size(),
                                line.text.capacity())
                     .get(doc);
      if (!err) err = TouchDocument(doc, &t);
      if (err) {
        state.SkipWithError(simdjson::error_message(err));
        return;
      }
    }
    benchmark::DoNotOptimize(t.sum);
  }
  SetCounters(state, c);
}

void BM_SimdjsonOnDemand(benchmark::State& state, size_t size, Op op) {
  RunOnDemand(state, size, op, false);
}

void BM_SimdjsonOnDemandNested(benchmark::State& state, size_t size, Op op) {
  RunOnDemand(state, size, op, true);
}

// ---------------------------------------------------------------------------
// walwatch.

void BM_Decode(benchmark::State& state, size_t size, Op op) {
  const Corpus& c = GetCorpus(size, op);
  TableMapping mapping = DefaultTableMapping();
  Wal2JsonDecoder decoder(mapping);
  LogicalRecord record;
  for (auto _ : state) {
    for (const Line& line : c.lines) {
      std::string err = decoder.Decode(line.view(), &record);
      if (!err.empty()) {
        state.SkipWithError(err.c_str());
        return;
      }
      benchmark::DoNotOptimize(record.columns.fields.data());
    }
  }
  SetCounters(state, c);
}

void BM_DecodeBuild(benchmark::State& state, size_t size, Op op) {
  const Corpus& c = GetCorpus(size, op);
  TableMapping mapping = DefaultTableMapping();
  Wal2JsonDecoder decoder(mapping);
  TransactionAssembler assembler(size_t{128} << 20, 0);
  EventBuilder builder;
  LogicalRecord record;
  Transaction txn;
  EventBuilder::Result built;
  size_t events = 0;
  for (auto _ : state) {
    // Each pass replays the same commits: forget the last one seen, or the
    // assembler drops them as re-sent duplicates.
    assembler.set_last_commit_lsn(0);
    for (const Line& line : c.lines) {
      std::string err = decoder.Decode(line.view(), &record);
      TransactionAssembler::Outcome outcome;
      if (err.empty()) err = assembler.Feed(record, &txn, &outcome);
      if (!err.empty()) {
        state.SkipWithError(err.c_str());
        return;
      }
      if (outcome != TransactionAssembler::Outcome::kCommitted) continue;
      built.events.clear();
      built.errors.clear();
      builder.Build(txn, &built);
      if (!built.errors.empty() || built.events.size() != 1) {
        state.SkipWithError(built.errors.empty() ? "not one event per row"
                                                 : built.errors[0].c_str());
        return;
      }
      events += built.events.size();
      benchmark::DoNotOptimize(built.events.front()->wire().data());
    }
  }
  benchmark::DoNotOptimize(events);
  SetCounters(state, c);
}

// This thread's CPU time: what the other benchmarks' rates count too, and
// steady on a machine busy with other work.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Decodes the corpus's pgoutput messages; "" or the first error.
std::string DecodePgoutput(const Corpus& c, PgoutputDecoder* decoder,
                           LogicalRecord* record) {
  for (const PgMessage& m : c.pg_messages) {
    std::string err = decoder->Decode(m.bytes, m.wal_start, record);
    if (!err.empty()) return err;
    benchmark::DoNotOptimize(record->columns.fields.data());
  }
  return "";
}

std::string DecodeWal2Json(const Corpus& c, Wal2JsonDecoder* decoder,
                           LogicalRecord* record) {
  for (const Line& line : c.lines) {
    std::string err = decoder->Decode(line.view(), record);
    if (!err.empty()) return err;
    benchmark::DoNotOptimize(record->columns.fields.data());
  }
  return "";
}

// Both decoders must read the same rows from their formats: the same
// records, images and all, for every message of the corpus.
std::string CheckSameRecords(const Corpus& c, PgoutputDecoder* pgoutput,
                             Wal2JsonDecoder* wal2json) {
  if (c.pg_messages.size() != c.lines.size()) return "not one message per line";
  LogicalRecord p, w;
  for (size_t i = 0; i < c.lines.size(); ++i) {
    std::string err = pgoutput->Decode(c.pg_messages[i].bytes,
                                       c.pg_messages[i].wal_start, &p);
    if (err.empty()) err = wal2json->Decode(c.lines[i].view(), &w);
    if (!err.empty()) return err;
    // (wal2json also gives a change its transaction's xid and time.)
    const bool change = p.action == RecordAction::kInsert ||
                        p.action == RecordAction::kUpdate;
    bool same = p.action == w.action && p.lsn == w.lsn &&
                (change || p.timestamp_us == w.timestamp_us) &&
                p.mapped_table == w.mapped_table &&
                p.columns.present == w.columns.present &&
                p.identity.present == w.identity.present &&
                p.columns.fields == w.columns.fields &&
                p.identity.fields == w.identity.fields;
    if (!same) return "pgoutput and wal2json differ at message " + std::to_string(i);
  }
  return "";
}

void BM_PgoutputDecode(benchmark::State& state, size_t size, Op op) {
  const Corpus& c = GetCorpus(size, op);
  TableMapping mapping = DefaultTableMapping();
  PgoutputDecoder pgoutput(mapping);
  Wal2JsonDecoder wal2json(mapping);
  LogicalRecord record;
  std::string err = pgoutput.Decode(c.pg_relation, 0, &record);
  if (err.empty()) err = CheckSameRecords(c, &pgoutput, &wal2json);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  double pgoutput_s = 0, wal2json_s = 0;
  bool pgoutput_first = true;
  for (auto _ : state) {
    // Alternately first, so that neither always finds the caches the
    // other left.
    for (int pass = 0; pass < 2; ++pass) {
      const bool pg = (pass == 0) == pgoutput_first;
      const double start = ThreadCpuSeconds();
      err = pg ? DecodePgoutput(c, &pgoutput, &record)
               : DecodeWal2Json(c, &wal2json, &record);
      const double seconds = ThreadCpuSeconds() - start;
      if (!err.empty()) {
        state.SkipWithError(err.c_str());
        return;
      }
      if (pg) {
        state.SetIterationTime(seconds);
        pgoutput_s += seconds;
      } else {
        wal2json_s += seconds;
      }
    }
    pgoutput_first = !pgoutput_first;
  }
  const double rows = static_cast<double>(state.iterations() * c.rows);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * c.pg_bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * c.rows));
  state.counters["object_bytes"] =
      static_cast<double>(c.object_bytes) / static_cast<double>(c.rows);
  state.counters["row_line_bytes"] =
      static_cast<double>(c.pg_messages[1].bytes.size());
  state.counters["pgoutput_ns_per_row"] = pgoutput_s * 1e9 / rows;
  state.counters["wal2json_ns_per_row"] = wal2json_s * 1e9 / rows;
  state.counters["pgoutput_over_wal2json"] =
      wal2json_s > 0 ? pgoutput_s / wal2json_s : 0;
}

struct SizeClass {
  const char* name;
  size_t object_bytes;
};

constexpr SizeClass kSizes[] = {
    {"1KB", 1024}, {"4KB", 4096}, {"16KB", 16384}, {"64KB", 65536}};

void RegisterAll() {
  using Fn = void (*)(benchmark::State&, size_t, Op);
  const std::pair<const char*, Fn> kBenchmarks[] = {
      {"SimdjsonDom", BM_SimdjsonDom},
      {"SimdjsonOnDemand", BM_SimdjsonOnDemand},
      {"SimdjsonOnDemandNested", BM_SimdjsonOnDemandNested},
      {"Decode", BM_Decode},
      {"DecodeBuild", BM_DecodeBuild},
      {"PgoutputDecode", BM_PgoutputDecode},
  };
  for (const SizeClass& size : kSizes) {
    for (Op op : {Op::kInsert, Op::kUpdate}) {
      for (const auto& [name, fn] : kBenchmarks) {
        std::string full = std::string(name) + "/" + size.name + "/" +
                           (op == Op::kInsert ? "insert" : "update");
        size_t bytes = size.object_bytes;
        Fn f = fn;
        auto* b = benchmark::RegisterBenchmark(
            full.c_str(),
            [f, bytes, op](benchmark::State& s) { f(s, bytes, op); });
        b->Unit(benchmark::kMillisecond);
        // Its iterations time both decoders; its own time is pgoutput's.
        if (f == BM_PgoutputDecode) b->UseManualTime();
      }
    }
  }
}

}  // namespace
}  // namespace walwatch

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The On-Demand kernel is fixed at compile time by -march (here, in this
  // file, as in walwatch's); simdjson::builtin_implementation() would name
  // the shared library's own.
#define WALWATCH_STRINGIFY2(x) #x
#define WALWATCH_STRINGIFY(x) WALWATCH_STRINGIFY2(x)
  benchmark::AddCustomContext(
      "simdjson_ondemand_kernel",
      WALWATCH_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION));
  benchmark::AddCustomContext(
      "simdjson_dom_kernel",
      simdjson::get_active_implementation()->name());
  walwatch::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
