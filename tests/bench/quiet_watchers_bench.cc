// quiet_watchers_bench: what a hot resource's events cost the watchers of
// quiet resources, through the event log's per-resource index (issue 18 §2).
//
// Clusterpedia keeps every resource of every cluster in one table: pods
// churn, deployments and CRDs hardly change. The log is shared, so each pod
// event lies between a quiet watcher's cursor and the tail. With the index
// (EventLog::ReadForWatch, SkipOtherResources, WaitForAppendOf) a quiet
// watcher should pay nothing per pod event, and the appender nothing per
// quiet watcher. Two benchmarks, each measuring both of its arms in the same
// iterations, interleaved, so that their ratio holds on a noisy machine:
//
//   BM_HotAppend        the replication thread's cost per hot transaction
//                       (pods, 1-10 events of ~1 KiB, the log full so every
//                       append evicts) into a log with no watcher at all
//                       ("bare") and into one with 1,000 watchers of ~30
//                       quiet resources waiting (AddWatcher, and
//                       WaitForAppendOf with an owner, as WatchStream
//                       does). Counters: bare_ns_per_txn, watched_ns_per_txn,
//                       watched_over_bare (1.0: the waiters cost nothing);
//                       quiet_wakes must stay 0.
//   BM_WatcherTurn/N    N hot events lie between the cursors and the tail.
//                       A quiet watcher's turn as its bookmark takes it
//                       (SkipOtherResources, ResumeRvAt, then ReadForWatch,
//                       which finds nothing), once for each of the 1,000;
//                       against a watcher of pods reading the same N events
//                       (ReadForWatch 256 at a time, as the session does, then
//                       ResumeRvAt). Counters: quiet_turn_ns, hot_read_ns,
//                       hot_ns_per_event, hot_over_quiet. quiet_turn_ns
//                       should not grow with N (O(log n) per turn).
//
// Events are built as EventBuilder builds them (shared FilterFields, lines in
// a WireArena) but outside the timed regions: only the log's work counts.
// Wake-ups are counted, not posted: posting to a strand is the sessions'
// cost, the same with or without the index.
//
// Run: quiet_watchers_bench --benchmark_repetitions=5
//      --benchmark_report_aggregates_only=true   (tests/bench/run-bench.sh)
// Environment: QUIET_BENCH_LOG_MB (256) the log's --max-log-bytes,
// QUIET_BENCH_EVENT_BYTES (1024) each event's wire line,
// QUIET_BENCH_WATCHERS (1000) the quiet watchers.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "cdc/model/event.h"
#include "cdc/model/filter_fields.h"
#include "cdc/model/wire_arena.h"
#include "watchserver/event_log.h"

namespace walwatch {
namespace {

constexpr size_t kClusters = 4;
constexpr size_t kNamespaces = 8;
constexpr size_t kEventsPerRead = 256;  // WatchStream's (watch_stream.cc)
constexpr size_t kTxnsPerBlock = 256;   // BM_HotAppend's per arm and iteration

size_t EnvSize(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}
size_t LogBytes() { return EnvSize("QUIET_BENCH_LOG_MB", 256) << 20; }
size_t EventBytes() { return EnvSize("QUIET_BENCH_EVENT_BYTES", 1024); }
// 0 makes BM_HotAppend an A/A run: its ratio then shows the noise alone.
const size_t kQuietWatchers = EnvSize("QUIET_BENCH_WATCHERS", 1000);

struct ResourceType {
  const char* group;
  const char* version;
  const char* resource;
  const char* kind;
};

// The quiet resources: Kubernetes' own and a few CRDs, as one Clusterpedia
// table holds them next to the pods.
constexpr ResourceType kQuiet[] = {
    {"apps", "v1", "deployments", "Deployment"},
    {"apps", "v1", "statefulsets", "StatefulSet"},
    {"apps", "v1", "daemonsets", "DaemonSet"},
    {"apps", "v1", "replicasets", "ReplicaSet"},
    {"apps", "v1", "controllerrevisions", "ControllerRevision"},
    {"", "v1", "namespaces", "Namespace"},
    {"", "v1", "services", "Service"},
    {"", "v1", "configmaps", "ConfigMap"},
    {"", "v1", "secrets", "Secret"},
    {"", "v1", "serviceaccounts", "ServiceAccount"},
    {"", "v1", "persistentvolumes", "PersistentVolume"},
    {"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"},
    {"", "v1", "nodes", "Node"},
    {"", "v1", "limitranges", "LimitRange"},
    {"", "v1", "resourcequotas", "ResourceQuota"},
    {"batch", "v1", "jobs", "Job"},
    {"batch", "v1", "cronjobs", "CronJob"},
    {"networking.k8s.io", "v1", "ingresses", "Ingress"},
    {"networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"},
    {"networking.k8s.io", "v1", "ingressclasses", "IngressClass"},
    {"rbac.authorization.k8s.io", "v1", "roles", "Role"},
    {"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"},
    {"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole"},
    {"rbac.authorization.k8s.io", "v1", "clusterrolebindings",
     "ClusterRoleBinding"},
    {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"},
    {"storage.k8s.io", "v1", "storageclasses", "StorageClass"},
    {"autoscaling", "v2", "horizontalpodautoscalers",
     "HorizontalPodAutoscaler"},
    {"apiextensions.k8s.io", "v1", "customresourcedefinitions",
     "CustomResourceDefinition"},
    {"cert-manager.io", "v1", "certificates", "Certificate"},
    {"monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor"},
};
constexpr size_t kQuietTypes = sizeof(kQuiet) / sizeof(kQuiet[0]);
constexpr ResourceType kPods = {"", "v1", "pods", "Pod"};

std::string Key(const ResourceType& t) {
  return EventLog::ResourceKey(t.group, t.version, t.resource);
}

// Makes transactions the way the replication thread does: commit LSNs that
// only grow, the RVs of cdc/event_builder.cc, FilterFields shared by every
// event of one (resource, cluster, namespace), lines in a WireArena.
class TxnFactory {
 public:
  TxnFactory() : arena_(WireArena::Create(&arena_error_)), rng_(18) {
    line_.assign(EventBytes(), ' ');
    const std::string head = "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"";
    std::memcpy(&line_[0], head.data(), std::min(head.size(), line_.size()));
    line_.back() = '\n';
  }

  std::vector<EventPtr> Hot() {
    return Make(kPods, std::uniform_int_distribution<size_t>(1, 10)(rng_));
  }
  std::vector<EventPtr> Make(const ResourceType& type, size_t n) {
    commit_ += 4096;  // commit records are 8-byte aligned: c - 1 is free
    std::vector<EventPtr> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = object_ % kClusters, ns = object_ / kClusters % kNamespaces;
      std::string name = std::string(type.resource) + "-" +
                         std::to_string(object_++ % 100000);
      MutableEventPtr e = Event::Allocate(Fields(type, c, ns), nullptr, name,
                                          line_.size(), 0, arena_.get());
      std::memcpy(e->mutable_wire(), line_.data(), line_.size());
      e->last_in_txn = i + 1 == n;
      e->rv = e->last_in_txn ? commit_ : commit_ - 1;
      e->commit_lsn = commit_;
      e->xid = ++xid_;
      e->commit_time_us = static_cast<int64_t>(xid_);
      e->type = EventType::kModified;
      out.push_back(std::move(e));
    }
    return out;
  }
  uint64_t commit() const { return commit_; }

 private:
  FilterFieldsPtr Fields(const ResourceType& type, size_t cluster, size_t ns) {
    for (auto& [t, c, n, fields] : fields_) {
      if (t == &type && c == cluster && n == ns) return fields;
    }
    std::string cluster_name = "cluster-" + std::to_string(cluster);
    std::string ns_name = "ns-" + std::to_string(ns);
    FilterFields::Values v;
    v.group = type.group;
    v.version = type.version;
    v.resource = type.resource;
    v.kind = type.kind;
    v.cluster = cluster_name;
    v.ns = ns_name;
    fields_.push_back({&type, cluster, ns, FilterFields::Make(v)});
    return fields_.back().fields;
  }

  struct Interned {
    const ResourceType* type;
    size_t cluster, ns;
    FilterFieldsPtr fields;
  };
  std::string arena_error_;
  std::unique_ptr<WireArena> arena_;  // null: events on the heap
  std::mt19937_64 rng_;
  std::string line_;
  std::vector<Interned> fields_;
  uint64_t commit_ = 1 << 20;
  uint64_t xid_ = 1000;
  uint64_t object_ = 0;
};

void Append(EventLog* log, std::vector<EventPtr> txn) {
  const uint64_t commit = txn.front()->commit_lsn;
  log->AppendTransaction(commit, std::move(txn));
}

// Appends hot transactions until the log holds about `bytes`.
void FillHot(EventLog* log, TxnFactory* factory, size_t bytes) {
  while (log->GetStats().bytes < bytes) Append(log, factory->Hot());
}

// One event of each quiet resource in each cluster, a transaction per
// resource, as their collectors' first writes.
void AppendQuiet(EventLog* log, TxnFactory* factory) {
  for (const ResourceType& t : kQuiet) {
    Append(log, factory->Make(t, kClusters));
  }
}

// Watcher i of the 1,000: quiet resource i % 30; every other one watches a
// single cluster (a Selection with a cluster), as an APIServer's per-cluster
// informers do.
EventLog::Selection QuietSelection(size_t i) {
  EventLog::Selection s;
  s.resource_key = Key(kQuiet[i % kQuietTypes]);
  if (i % 2 == 1) s.cluster = "cluster-" + std::to_string(i / 2 % kClusters);
  return s;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// ---------------------------------------------------------------------------

// One log and what appends to it. Each log has its own factory, and so its
// own WireArena: the cost of freeing an evicted event's segment falls on the
// log that evicted it. Factories start from the same seed, so both logs get
// transactions of the same sizes, in the same order.
struct AppendArm {
  TxnFactory factory;
  EventLog log{LogBytes(), 1 << 20};
  std::vector<std::vector<EventPtr>> block;

  AppendArm() {
    AppendQuiet(&log, &factory);
    FillHot(&log, &factory, LogBytes() - LogBytes() / 64);
  }
  double Run() {
    block.clear();
    for (size_t i = 0; i < kTxnsPerBlock; ++i) block.push_back(factory.Hot());
    auto t0 = std::chrono::steady_clock::now();
    for (std::vector<EventPtr>& txn : block) Append(&log, std::move(txn));
    return Seconds(std::chrono::steady_clock::now() - t0);
  }
};

struct AppendFixture {
  AppendArm bare;
  AppendArm watched;
  std::vector<std::shared_ptr<int>> owners;  // the sessions, as the log sees them
  size_t quiet_wakes = 0;

  AppendFixture() {
    const uint64_t tail = watched.log.tail_seq();
    for (size_t i = 0; i < kQuietWatchers; ++i) {
      const EventLog::Selection s = QuietSelection(i);
      owners.push_back(std::make_shared<int>(0));
      watched.log.AddWatcher(s.resource_key);
      watched.log.WaitForAppendOf(tail, s.resource_key, owners.back(),
                                  [this] { ++quiet_wakes; });
    }
  }
};

void BM_HotAppend(benchmark::State& state) {
  static std::unique_ptr<AppendFixture> fixture;
  if (!fixture) fixture = std::make_unique<AppendFixture>();
  AppendFixture& f = *fixture;
  double bare_s = 0, watched_s = 0;
  size_t txns = 0, flip = 0;
  const uint64_t events_before = f.bare.log.tail_seq();
  for (auto _ : state) {
    // The arms alternate which goes first, so that neither always finds the
    // caches as the other left them.
    double tb, tw;
    if (flip++ % 2 == 0) {
      tb = f.bare.Run();
      tw = f.watched.Run();
    } else {
      tw = f.watched.Run();
      tb = f.bare.Run();
    }
    bare_s += tb;
    watched_s += tw;
    state.SetIterationTime(tb + tw);
    txns += kTxnsPerBlock;
  }
  const uint64_t events = f.bare.log.tail_seq() - events_before;
  state.counters["bare_ns_per_txn"] = 1e9 * bare_s / txns;
  state.counters["watched_ns_per_txn"] = 1e9 * watched_s / txns;
  state.counters["watched_over_bare"] = watched_s / bare_s;
  state.counters["events_per_txn"] = static_cast<double>(events) / txns;
  state.counters["quiet_watchers"] = static_cast<double>(kQuietWatchers);
  state.counters["quiet_wakes"] = static_cast<double>(f.quiet_wakes);
  state.counters["log_mib"] =
      static_cast<double>(f.watched.log.GetStats().bytes) / (1 << 20);
  state.SetItemsProcessed(static_cast<int64_t>(2 * txns));
}
BENCHMARK(BM_HotAppend)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------

struct TurnFixture {
  TxnFactory factory;
  EventLog log{LogBytes(), 1 << 20};
  std::vector<EventLog::Selection> quiet;
  uint64_t quiet_seq = 0;  // every quiet watcher's cursor: after its events
  uint64_t hot_seq = 0;    // the pods watcher's: the first of the N
  size_t hot_events = 0;   // N, as transactions rounded it

  explicit TurnFixture(size_t n) {
    // Older pods fill the log but for the N and some room: the index the
    // quiet watchers search is as long as at the full 256 MiB.
    const size_t per_event = EventBytes() + 150;
    const size_t room = n * per_event + LogBytes() / 32;
    if (room < LogBytes()) FillHot(&log, &factory, LogBytes() - room);
    AppendQuiet(&log, &factory);
    quiet_seq = hot_seq = log.tail_seq();
    while (log.tail_seq() - hot_seq < n) {
      Append(&log, factory.Hot());
    }
    hot_events = log.tail_seq() - hot_seq;
    const size_t watchers = std::max<size_t>(kQuietWatchers, 1);
    for (size_t i = 0; i < watchers; ++i) quiet.push_back(QuietSelection(i));
  }
};

void BM_WatcherTurn(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  static std::unique_ptr<TurnFixture> fixture;
  static size_t fixture_n = 0;
  if (!fixture || fixture_n != n) {
    fixture.reset();  // one log of LogBytes() at a time
    fixture = std::make_unique<TurnFixture>(n);
    fixture_n = n;
  }
  TurnFixture& f = *fixture;
  if (f.log.GetStats().evicted_transactions != 0) {
    state.SkipWithError("the log evicted: raise QUIET_BENCH_LOG_MB");
    return;
  }
  const EventLog::Selection pods{Key(kPods), ""};
  std::vector<EventPtr> out;
  std::vector<uint64_t> seqs;
  out.reserve(kEventsPerRead);
  seqs.reserve(kEventsPerRead);
  double quiet_s = 0, hot_s = 0;
  size_t turns = 0, reads = 0, read_events = 0, flip = 0;
  uint64_t sink = 0;

  auto quiet_turns = [&] {
    auto t0 = std::chrono::steady_clock::now();
    for (const EventLog::Selection& s : f.quiet) {
      // A bookmark comes due (WatchStream::Pump): step over the others'
      // events, say where the watch stands, then read: nothing.
      uint64_t seq = f.log.SkipOtherResources(f.quiet_seq, s);
      sink += f.log.ResumeRvAt(seq);
      EventLog::WatchRead r = f.log.ReadForWatch(seq, s, kEventsPerRead, &out,
                                                 &seqs);
      sink += r.next_seq + out.size();
    }
    quiet_s += Seconds(std::chrono::steady_clock::now() - t0);
    turns += f.quiet.size();
  };
  auto hot_read = [&] {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t seq = f.hot_seq;
    for (;;) {
      out.clear();
      seqs.clear();
      EventLog::WatchRead r =
          f.log.ReadForWatch(seq, pods, kEventsPerRead, &out, &seqs);
      if (out.empty()) break;
      read_events += out.size();
      seq = r.next_seq;
      ++reads;
    }
    sink += f.log.ResumeRvAt(seq);
    out.clear();  // the events' references go, as after a session's write
    seqs.clear();
    hot_s += Seconds(std::chrono::steady_clock::now() - t0);
  };
  for (auto _ : state) {
    const double before = quiet_s + hot_s;
    if (flip++ % 2 == 0) {
      quiet_turns();
      hot_read();
    } else {
      hot_read();
      quiet_turns();
    }
    state.SetIterationTime(quiet_s + hot_s - before);
  }
  benchmark::DoNotOptimize(sink);
  const double hot_reads = static_cast<double>(state.iterations());
  const double quiet_turn = quiet_s / turns;
  const double hot = hot_s / hot_reads;
  state.counters["hot_events_between"] = static_cast<double>(f.hot_events);
  state.counters["quiet_turn_ns"] = 1e9 * quiet_turn;
  state.counters["hot_read_ns"] = 1e9 * hot;
  state.counters["hot_ns_per_event"] =
      read_events ? 1e9 * hot_s / read_events : 0;
  state.counters["hot_over_quiet"] = hot / quiet_turn;
  state.counters["log_mib"] =
      static_cast<double>(f.log.GetStats().bytes) / (1 << 20);
  state.counters["log_events"] = static_cast<double>(f.log.GetStats().events);
}
BENCHMARK(BM_WatcherTurn)
    ->Arg(1000)
    ->Arg(100000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace walwatch

BENCHMARK_MAIN();
