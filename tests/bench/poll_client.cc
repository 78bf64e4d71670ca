// poll_client: the watch a Clusterpedia user writes without walwatch, by
// polling, as kine and Grafana's unified storage do. The table gets a column
// that every write sets from a sequence (poll_bench.sh adds `poll_rv`, a
// trigger and an index on ("group", resource, poll_rv)); each resource is
// polled on its own, Grafana-style, every --interval-ms:
//
//   SELECT poll_rv, object FROM resources WHERE "group" = $1 AND
//     resource = $2 AND version = 'v1' AND poll_rv > $last
//     ORDER BY poll_rv LIMIT 500
//
// and again at once while a poll returns 500 rows (kine's catch-up). The rows
// a poll returns would be handed to the watchers in memory: that costs next
// to nothing and is not simulated. It does not wait out sequence gaps (kine
// waits 1 s for a gap to fill), which favours polling.
//
//   poll_client --conninfo STR --mode one|spread --interval-ms MS
//       [--connections C] [--ready-file F] [--done-file F]
//       [--drain-timeout S]
//
// --mode: bench_writer's objects (one: apps deployments; spread: the 100
// resources widgets00..99). --connections: PostgreSQL connections (default
// 4), resource i polled on connection i % C, each connection's resources
// in turn. --ready-file: written once every connection is open, with their
// backend pids, one a line (the script measures their CPU). --done-file:
// bench_writer's --out; once it is there, polls go on until every writer's
// last seq has been read or --drain-timeout (10 s) passes.
//
// Prints key=value lines: queries, rows, seconds, queries_per_s,
// latency_p50_us, latency_p99_us, latency_max_us (commit stamp to the poll's
// answer, per row), samples, short_at_end (writers whose last seq was not
// read), backends_cpu_s and backends_cpu_pct (the CPU of the pollers'
// PostgreSQL backends over the run, from /proc; % of one core).

#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <iterator>
#include <thread>
#include <vector>

#include "bench_args.h"        // same directory
#include "bench_util.h"        // same directory
#include "latency_histogram.h"  // same directory

namespace {

using walwatch::bench::ReadFinalSeqs;
using walwatch::bench::RealtimeNanos;

using walwatch::bench::LatencyHistogram;
using walwatch::bench::MakeHistogram;
using walwatch::bench::Quantile;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "poll_client: %s\n", message.c_str());
  std::exit(1);
}

struct Options {
  std::string conninfo, mode = "one", ready_file, done_file;
  int interval_ms = 1000;
  int connections = 4;
  double drain_timeout_s = 10;
};

constexpr char kPoll[] =
    "SELECT poll_rv, object FROM resources WHERE \"group\" = $1 AND "
    "resource = $2 AND version = 'v1' AND poll_rv > $3 ORDER BY poll_rv "
    "LIMIT 500";
constexpr int kBatch = 500;

struct Resource {
  std::string group, resource;
  int64_t last = 0;
  Clock::time_point due;
};

// What every connection saw, under one lock (taken once per poll).
struct Shared {
  std::mutex mu;
  uint64_t queries = 0, rows = 0;
  double max_us = 0;
  LatencyHistogram latency = MakeHistogram();
  std::vector<uint64_t> last_seq;  // per writer, the highest seq read
};

// The stamp "W:SEQ:NS" of bench_writer in an object's text.
bool ReadStamp(const char* object, uint64_t* w, uint64_t* seq, int64_t* ns) {
  const char* p = std::strstr(object, "\"bench.walwatch.io/stamp\": \"");
  if (p == nullptr) return false;
  p += std::strlen("\"bench.walwatch.io/stamp\": \"");
  char* end = nullptr;
  *w = std::strtoull(p, &end, 10);
  if (*end != ':') return false;
  *seq = std::strtoull(end + 1, &end, 10);
  if (*end != ':') return false;
  *ns = std::strtoll(end + 1, &end, 10);
  return *ns != 0;
}

class Poller {
 public:
  Poller(const Options& o, std::vector<Resource> resources, Shared* shared)
      : o_(o), resources_(std::move(resources)), shared_(shared) {
    const char* keys[] = {"fallback_application_name", "dbname", nullptr};
    const char* vals[] = {"walwatch_bench_poll", o.conninfo.c_str(), nullptr};
    conn_ = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(conn_) != CONNECTION_OK) {
      Die(std::string("cannot connect: ") + PQerrorMessage(conn_));
    }
    Result prep(PQprepare(conn_, "poll", kPoll, 0, nullptr), &PQclear);
    if (PQresultStatus(prep.get()) != PGRES_COMMAND_OK) {
      Die(std::string("prepare: ") + PQerrorMessage(conn_));
    }
    // Start from now: the highest poll_rv there is.
    Result max(PQexec(conn_, "SELECT coalesce(max(poll_rv), 0) FROM resources"),
               &PQclear);
    if (PQresultStatus(max.get()) != PGRES_TUPLES_OK) {
      Die(std::string("max(poll_rv): ") + PQerrorMessage(conn_) +
          " (poll_bench.sh adds the column)");
    }
    const int64_t start = std::strtoll(PQgetvalue(max.get(), 0, 0), nullptr, 10);
    for (Resource& r : resources_) {
      r.last = start;
      r.due = Clock::now();
    }
  }
  ~Poller() { PQfinish(conn_); }

  int BackendPid() const { return PQbackendPID(conn_); }

  void Run(const std::atomic<bool>* stop) {
    const auto interval = std::chrono::milliseconds(o_.interval_ms);
    while (!stop->load()) {
      auto next = std::min_element(resources_.begin(), resources_.end(),
                                   [](const Resource& a, const Resource& b) {
                                     return a.due < b.due;
                                   });
      std::this_thread::sleep_until(next->due);
      if (stop->load()) break;
      const int got = Poll(*next);
      // A full batch: there is more, poll again at once.
      next->due = got == kBatch ? Clock::now() : next->due + interval;
      if (next->due < Clock::now() - interval) next->due = Clock::now();
    }
  }

 private:
  using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

  int Poll(Resource& r) {
    const std::string last = std::to_string(r.last);
    const char* params[] = {r.group.c_str(), r.resource.c_str(), last.c_str()};
    Result res(PQexecPrepared(conn_, "poll", 3, params, nullptr, nullptr, 0),
               &PQclear);
    const int64_t now_ns = RealtimeNanos();
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
      Die(std::string("poll: ") + PQerrorMessage(conn_));
    }
    const int n = PQntuples(res.get());
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++shared_->queries;
    shared_->rows += static_cast<uint64_t>(n);
    for (int i = 0; i < n; ++i) {
      r.last = std::max<int64_t>(
          r.last, std::strtoll(PQgetvalue(res.get(), i, 0), nullptr, 10));
      uint64_t w, seq;
      int64_t ns;
      if (!ReadStamp(PQgetvalue(res.get(), i, 1), &w, &seq, &ns)) continue;
      const double us = std::max(1.0, (now_ns - ns) / 1e3);
      shared_->latency(us);
      shared_->max_us = std::max(shared_->max_us, us);
      if (w >= shared_->last_seq.size()) shared_->last_seq.resize(w + 1, 0);
      shared_->last_seq[w] = std::max(shared_->last_seq[w], seq);
    }
    return n;
  }

  const Options& o_;
  std::vector<Resource> resources_;
  Shared* shared_;
  PGconn* conn_;
};

// CPU seconds (user + system) of the pollers' backends, from /proc: they
// run on this machine.
double BackendsCpuSeconds(const std::vector<std::unique_ptr<Poller>>& pollers) {
  double ticks = 0;
  for (const auto& p : pollers) {
    std::ifstream in("/proc/" + std::to_string(p->BackendPid()) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    size_t at = stat.rfind(')');  // fields after the command name
    if (at == std::string::npos) continue;
    std::vector<std::string> fields;
    for (size_t i = at + 2, j; i < stat.size(); i = j + 1) {
      j = stat.find(' ', i);
      if (j == std::string::npos) j = stat.size();
      fields.push_back(stat.substr(i, j - i));
    }
    if (fields.size() > 12) ticks += std::atof(fields[11].c_str()) + std::atof(fields[12].c_str());
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const walwatch::bench::Flags flags(
      "poll_client",
      "usage: poll_client --conninfo STR --mode one|spread --interval-ms MS "
      "[--connections C] [--ready-file F] [--done-file F] "
      "[--drain-timeout S]");
  flags.Parse(argc, argv,
              {{"--conninfo", &o.conninfo},
               {"--mode", &o.mode},
               {"--interval-ms", &o.interval_ms},
               {"--connections", &o.connections},
               {"--ready-file", &o.ready_file},
               {"--done-file", &o.done_file},
               {"--drain-timeout", &o.drain_timeout_s}});
  if (o.conninfo.empty() || o.interval_ms <= 0 || o.connections <= 0 ||
      (o.mode != "one" && o.mode != "spread")) {
    flags.Usage("--conninfo, --mode one|spread and --interval-ms are required");
  }

  std::vector<Resource> all;
  if (o.mode == "one") {
    all.push_back({"apps", "deployments"});
  } else {
    for (int r = 0; r < 100; ++r) {
      char name[16];
      std::snprintf(name, sizeof name, "widgets%02d", r);
      all.push_back({"bench.walwatch.io", name});
    }
  }
  const size_t c = std::min<size_t>(static_cast<size_t>(o.connections), all.size());
  Shared shared;
  std::vector<std::unique_ptr<Poller>> pollers;
  for (size_t k = 0; k < c; ++k) {
    std::vector<Resource> mine;
    for (size_t i = k; i < all.size(); i += c) mine.push_back(all[i]);
    pollers.push_back(std::make_unique<Poller>(o, std::move(mine), &shared));
  }
  if (!o.ready_file.empty()) {
    std::string tmp = o.ready_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) Die("cannot write " + tmp);
    for (const auto& p : pollers) std::fprintf(f, "%d\n", p->BackendPid());
    std::fclose(f);
    std::rename(tmp.c_str(), o.ready_file.c_str());
  }

  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  const double cpu0 = BackendsCpuSeconds(pollers);
  std::vector<std::thread> threads;
  for (auto& p : pollers) threads.emplace_back([&p, &stop] { p->Run(&stop); });

  size_t short_at_end = 0;
  Clock::time_point done_at{};
  bool done_seen = false;
  std::vector<uint64_t> final_seqs;
  while (!o.done_file.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!done_seen) {
      final_seqs = ReadFinalSeqs(o.done_file, &done_seen);
      if (!done_seen) continue;
      done_at = Clock::now();
    }
    std::lock_guard<std::mutex> lock(shared.mu);
    short_at_end = 0;
    for (size_t w = 0; w < final_seqs.size(); ++w) {
      if (final_seqs[w] == 0) continue;
      if (w >= shared.last_seq.size() || shared.last_seq[w] < final_seqs[w]) {
        ++short_at_end;
      }
    }
    if (short_at_end == 0 ||
        Clock::now() - done_at > std::chrono::duration<double>(o.drain_timeout_s)) {
      break;
    }
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  const double backends_cpu = BackendsCpuSeconds(pollers) - cpu0;
  std::printf("queries=%llu\nrows=%llu\nseconds=%.2f\nqueries_per_s=%.1f\n",
              static_cast<unsigned long long>(shared.queries),
              static_cast<unsigned long long>(shared.rows), seconds,
              shared.queries / seconds);
  std::printf("backends_cpu_s=%.2f\nbackends_cpu_pct=%.1f\n", backends_cpu,
              100 * backends_cpu / seconds);
  std::printf("latency_p50_us=%.0f\nlatency_p99_us=%.0f\nlatency_max_us=%.0f\n"
              "samples=%.0f\nshort_at_end=%zu\n",
              Quantile(shared.latency, 0.5), Quantile(shared.latency, 0.99),
              shared.max_us, boost::histogram::algorithm::sum(shared.latency),
              short_at_end);
  return 0;
}
