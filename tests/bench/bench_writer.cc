// bench_writer: the fan-out, memory, replay and soak benchmarks' writer. It
// updates rows of Clusterpedia's `resources` table at a fixed rate, one
// autocommit UPDATE per write (as Clusterpedia's collector does for a
// MODIFIED), and stamps every object with the writer's wall clock, so that a
// watcher can tell how long a write took to reach it with no second channel:
//
//   metadata.annotations["bench.walwatch.io/stamp"] = "W:SEQ:NS"
//
// W is the writer thread (0..--writers-1), SEQ its own sequence number
// (1, 2, ... in commit order, since each thread writes on one connection, one
// statement at a time) and NS the CLOCK_REALTIME nanoseconds taken just
// before the statement is sent. The commit follows within the statement's
// round trip, which is reported (statement_p50_us, statement_p99_us), so
// "commit to client" measured from NS overstates by at most that much.
//
//   bench_writer --conninfo STR --setup [--mode one|spread] [--objects N]
//                [--object-bytes B]
//   bench_writer --conninfo STR [--mode one|spread] [--objects N]
//                [--object-bytes B] [--rate R] [--duration S | --count N]
//                [--writers W] [--out FILE]
//
// --mysql CONNINFO in place of --conninfo writes to Clusterpedia's table on
// MySQL/MariaDB (schema/mysql/clusterpedia.sql), with the same statements
// in MySQL's dialect; CONNINFO is walwatch's --mysql-conninfo.
//
// Modes (the objects --setup inserts and the run updates):
//   one     N (default 100) Deployments apps/v1 deployments, cluster c1,
//           namespace bench; labels app=bench, shard=s(i%4).
//   spread  100 resources bench.walwatch.io/v1 widgets00..widgets99 (kind
//           Widget) x 10 namespaces ns-0..ns-9 x N (default 4) objects,
//           labels app=bench, shard=s(i%4). Writes go round-robin over all.
// --rate: commits/s over all writers (0: as fast as they go); each thread
// keeps its own schedule of rate/W. --duration (seconds) or --count (writes
// in total) ends the run; SIGINT/SIGTERM end it early.
// --out FILE: key=value results (also printed on stdout): writes, seconds,
// rate, statement round trip p50/p99/max, and last_seq_W per writer (the
// watchers' end condition).
//
// libpq, or MariaDB Connector/C through walwatch's own MysqlConnection;
// Boost.Histogram for the round-trip percentiles.

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <mysql.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base64.h"      // same directory
#include "bench_args.h"  // same directory
#include "bench_util.h"  // same directory
#include "cdc/mysql/mysql_conn.h"
#include "cdc/mysql/mysql_conninfo.h"
#include "latency_histogram.h"  // same directory

namespace {

using walwatch::bench::RealtimeNanos;

using walwatch::bench::LatencyHistogram;
using walwatch::bench::MakeHistogram;
using walwatch::bench::Quantile;

std::atomic<bool> g_stop{false};
extern "C" void OnSignal(int) { g_stop.store(true); }

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "bench_writer: %s\n", message.c_str());
  std::exit(1);
}

struct Options {
  std::string conninfo;
  bool setup = false;
  std::string mode = "one";
  int objects = 0;  // per stream; 0: the mode's default
  int object_bytes = 1024;
  double rate = 1000;
  double duration_s = 0;
  uint64_t count = 0;
  int writers = 1;
  std::string out;
  std::string etcd;  // HOST:PORT: write to etcd instead of PostgreSQL
  std::string mysql;  // --mysql-conninfo: write to MySQL/MariaDB instead
};

// One row the run updates.
struct Target {
  std::string group, resource, kind, api_version, ns, name, uid, shard;
  std::string cluster = "c1";
};

// The rows, and the order the writes go through them (indexes into
// targets; the writers take turns along it).
struct Workload {
  std::vector<Target> targets;
  std::vector<size_t> order;
};

Target Widget(int resource, const std::string& cluster, const std::string& ns,
              int i) {
  char name_of_resource[16], name[32];
  std::snprintf(name_of_resource, sizeof name_of_resource, "widgets%02d", resource);
  std::snprintf(name, sizeof name, "widget-%05d", i);
  return {"bench.walwatch.io", name_of_resource, "Widget", "bench.walwatch.io/v1",
          ns, name, "", "s" + std::to_string(i % 4), cluster};
}

Workload MakeWorkload(const Options& o) {
  Workload work;
  std::vector<Target>& targets = work.targets;
  if (o.mode == "one") {
    for (int i = 0; i < o.objects; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "bench-%05d", i);
      targets.push_back({"apps", "deployments", "Deployment", "apps/v1",
                         "bench", name, "", "s" + std::to_string(i % 4)});
    }
  } else if (o.mode == "spread") {
    // Interleaved so that consecutive writes go to different resources.
    for (int i = 0; i < o.objects; ++i) {
      for (int ns = 0; ns < 10; ++ns) {
        for (int r = 0; r < 100; ++r) {
          targets.push_back(Widget(r, "c1", "ns-" + std::to_string(ns), i));
        }
      }
    }
  } else {
    // mixed: Clusterpedia's shape. 4 clusters c1..c4; one hot resource,
    // pods (10 namespaces x N per cluster), which every other write
    // updates; 99 quiet ones, widgets00..98 (5 namespaces x N per cluster),
    // which the rest go round-robin over.
    std::vector<size_t> pods, widgets;
    for (int i = 0; i < o.objects; ++i) {
      for (int c = 1; c <= 4; ++c) {
        const std::string cluster = "c" + std::to_string(c);
        for (int ns = 0; ns < 10; ++ns) {
          char name[32];
          std::snprintf(name, sizeof name, "pod-%05d", i);
          pods.push_back(targets.size());
          targets.push_back({"", "pods", "Pod", "v1", "ns-" + std::to_string(ns),
                             name, "", "s" + std::to_string(i % 4), cluster});
        }
        for (int ns = 0; ns < 5; ++ns) {
          for (int r = 0; r < 99; ++r) {
            widgets.push_back(targets.size());
            targets.push_back(Widget(r, cluster, "ns-" + std::to_string(ns), i));
          }
        }
      }
    }
    for (size_t k = 0; k < widgets.size(); ++k) {
      work.order.push_back(pods[k % pods.size()]);
      work.order.push_back(widgets[k]);
    }
  }
  if (work.order.empty()) {
    for (size_t i = 0; i < targets.size(); ++i) work.order.push_back(i);
  }
  std::mt19937_64 rng(42);
  for (Target& t : targets) {
    char uid[40];
    uint64_t a = rng(), b = rng();
    std::snprintf(uid, sizeof uid, "%08x-%04x-4%03x-8%03x-%012llx",
                  static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff),
                  static_cast<unsigned>(a & 0xfff),
                  static_cast<unsigned>(b >> 52),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    t.uid = uid;
  }
  return work;
}

// A Kubernetes-like object of about `bytes` bytes of JSON text.
std::string ObjectJson(const Target& t, const std::string& stamp,
                       uint64_t generation, const std::string& padding) {
  std::string g = std::to_string(generation);
  std::string s;
  s.reserve(padding.size() + 900);
  s += "{\"apiVersion\":\"" + t.api_version + "\",\"kind\":\"" + t.kind +
       "\",\"metadata\":{\"name\":\"" + t.name + "\",\"namespace\":\"" + t.ns +
       "\",\"uid\":\"" + t.uid + "\",\"resourceVersion\":\"" + g +
       "\",\"generation\":" + g +
       ",\"creationTimestamp\":\"2026-12-02T13:21:36Z\",\"labels\":{\"app\":"
       "\"bench\",\"shard\":\"" +
       t.shard +
       "\"},\"annotations\":{\"shadow.clusterpedia.io/cluster-name\":\"" +
       t.cluster +
       "\",\"bench.walwatch.io/stamp\":\"" +
       stamp +
       "\"}},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"app\":"
       "\"bench\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"bench\"}}"
       ",\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"registry."
       "example.com/bench/app:1.0\",\"env\":[{\"name\":\"PAD\",\"value\":\"" +
       padding +
       "\"}],\"resources\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\"}"
       "}}]}}},\"status\":{\"replicas\":3,\"readyReplicas\":3,"
       "\"observedGeneration\":" +
       g + "}}";
  return s;
}

std::string Padding(int object_bytes, uint64_t seed) {
  // The rest of the object is ~650 bytes; pad with random text (it does not
  // compress, as real objects' hashes and uids do not).
  int n = std::max(16, object_bytes - 650);
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::mt19937_64 rng(seed);
  std::string p(static_cast<size_t>(n), 'x');
  for (char& c : p) c = kAlphabet[rng() % (sizeof kAlphabet - 1)];
  return p;
}

struct PgConn {
  explicit PgConn(const std::string& conninfo) {
    const char* keys[] = {"fallback_application_name", "dbname", nullptr};
    const char* vals[] = {"walwatch_bench_writer", conninfo.c_str(), nullptr};
    conn = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(conn) != CONNECTION_OK) {
      Die(std::string("cannot connect: ") + PQerrorMessage(conn));
    }
  }
  ~PgConn() { PQfinish(conn); }
  void Exec(const std::string& sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn, sql.c_str()),
                                                    &PQclear);
    ExecStatusType st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      Die(sql.substr(0, 60) + ": " + PQerrorMessage(conn));
    }
  }
  PGconn* conn;
};

constexpr char kInsert[] =
    "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
    "namespace, name, owner_uid, uid, resource_version, object, created_at, "
    "synced_at) VALUES ($1, 'v1', $2, $3, $8, $4, $5, '', $6, '0', "
    "$7::jsonb, now(), now()) ON CONFLICT (\"group\", version, resource, "
    "cluster, namespace, name) DO UPDATE SET object = EXCLUDED.object";

// GORM's UPDATE of a MODIFIED, trimmed to what changes here.
constexpr char kUpdate[] =
    "UPDATE resources SET object = $1::jsonb, resource_version = $2, "
    "synced_at = now() WHERE cluster = $7 AND \"group\" = $3 AND name = $4 "
    "AND namespace = $5 AND resource = $6 AND version = 'v1'";

// Where the objects go: Clusterpedia's table, or etcd's keys.
class Store {
 public:
  virtual ~Store() = default;
  // --setup's write of an object (an upsert), or a run's (an update).
  virtual void Put(const Target& t, const std::string& object,
                   const std::string& rv) = 0;
  virtual void Done() {}
};

class PgStore : public Store {
 public:
  PgStore(const std::string& conninfo, bool setup) : db_(conninfo), setup_(setup) {
    if (setup_) db_.Exec("BEGIN");
    std::unique_ptr<PGresult, decltype(&PQclear)> prep(
        PQprepare(db_.conn, "put", setup_ ? kInsert : kUpdate, 0, nullptr),
        &PQclear);
    if (PQresultStatus(prep.get()) != PGRES_COMMAND_OK) {
      Die(std::string("prepare: ") + PQerrorMessage(db_.conn));
    }
  }
  void Put(const Target& t, const std::string& object,
           const std::string& rv) override {
    const char* ins[] = {t.group.c_str(), t.resource.c_str(), t.kind.c_str(),
                         t.ns.c_str(),    t.name.c_str(),     t.uid.c_str(),
                         object.c_str(),  t.cluster.c_str()};
    const char* upd[] = {object.c_str(), rv.c_str(),        t.group.c_str(),
                         t.name.c_str(), t.ns.c_str(),      t.resource.c_str(),
                         t.cluster.c_str()};
    std::unique_ptr<PGresult, decltype(&PQclear)> r(
        setup_ ? PQexecPrepared(db_.conn, "put", 8, ins, nullptr, nullptr, 0)
               : PQexecPrepared(db_.conn, "put", 7, upd, nullptr, nullptr, 0),
        &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      Die(std::string(setup_ ? "insert: " : "update: ") +
          PQerrorMessage(db_.conn));
    }
    if (!setup_ && std::strcmp(PQcmdTuples(r.get()), "1") != 0) {
      Die("update of " + t.resource + "/" + t.ns + "/" + t.name +
          " changed no row: run --setup with the same --mode and --objects");
    }
  }
  void Done() override {
    if (setup_) db_.Exec("COMMIT");
  }

 private:
  PgConn db_;
  const bool setup_;
};

// Clusterpedia's table on MySQL/MariaDB: GORM's upsert and UPDATE in MySQL's
// dialect, one autocommit statement per write, as Clusterpedia's MySQL
// driver sends them.
class MysqlStore : public Store {
 public:
  MysqlStore(const std::string& conninfo, bool setup) : setup_(setup) {
    walwatch::mysql::MysqlConnParams params;
    if (std::string err =
            walwatch::mysql::ParseMysqlConninfo(conninfo, &params);
        !err.empty()) {
      Die("--mysql: " + err);
    }
    if (std::string err = conn_.Connect(params); !err.empty()) {
      Die("cannot connect: " + err);
    }
    if (setup_) Run("BEGIN");
  }
  void Put(const Target& t, const std::string& object,
           const std::string& rv) override {
    std::string sql;
    if (setup_) {
      sql =
          "INSERT INTO resources (`group`, version, resource, kind, cluster, "
          "namespace, name, owner_uid, uid, resource_version, object, "
          "created_at, synced_at) VALUES (" +
          Q(t.group) + ", 'v1', " + Q(t.resource) + ", " + Q(t.kind) + ", " +
          Q(t.cluster) + ", " + Q(t.ns) + ", " + Q(t.name) + ", '', " +
          Q(t.uid) + ", '0', " + Q(object) +
          ", NOW(3), NOW(3)) ON DUPLICATE KEY UPDATE object = "
          "VALUES(object)";
    } else {
      sql = "UPDATE resources SET object = " + Q(object) +
            ", resource_version = " + Q(rv) +
            ", synced_at = NOW(3) WHERE cluster = " + Q(t.cluster) +
            " AND `group` = " + Q(t.group) + " AND name = " + Q(t.name) +
            " AND namespace = " + Q(t.ns) + " AND resource = " + Q(t.resource) +
            " AND version = 'v1'";
    }
    Run(sql);
    if (!setup_ && mysql_affected_rows(conn_.handle()) != 1) {
      Die("update of " + t.resource + "/" + t.ns + "/" + t.name +
          " changed no row: run --setup with the same --mode and --objects");
    }
  }
  void Done() override {
    if (setup_) Run("COMMIT");
  }

 private:
  std::string Q(const std::string& text) { return conn_.Quote(text); }
  void Run(const std::string& sql) {
    if (std::string err = conn_.Query(sql); !err.empty()) {
      Die(sql.substr(0, 60) + ": " + err);
    }
  }

  walwatch::mysql::MysqlConnection conn_;
  const bool setup_;
};

// etcd, through its JSON gateway (POST /v3/kv/put on one kept-alive HTTP/1.1
// connection): the object under /registry/GROUP/RESOURCE/CLUSTER/NS/NAME,
// as Kubernetes lays out its keys (the core group as "core").
class EtcdStore : public Store {
 public:
  explicit EtcdStore(const std::string& host_port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    size_t colon = host_port.rfind(':');
    if (colon == std::string::npos ||
        inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
      Die("--etcd: HOST:PORT with an IPv4 address, not " + host_port);
    }
    addr.sin_port = htons(static_cast<uint16_t>(std::atoi(host_port.c_str() + colon + 1)));
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      Die("cannot connect to etcd at " + host_port + ": " + std::strerror(errno));
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~EtcdStore() override { close(fd_); }

  void Put(const Target& t, const std::string& object,
           const std::string&) override {
    std::string key = "/registry/" + (t.group.empty() ? "core" : t.group) + "/" +
                      t.resource + "/" + t.cluster + "/" + t.ns + "/" + t.name;
    std::string body = "{\"key\":\"" + walwatch::bench::EncodeBase64(key) +
                       "\",\"value\":\"" + walwatch::bench::EncodeBase64(object) +
                       "\"}";
    std::string request =
        "POST /v3/kv/put HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    for (size_t sent = 0; sent < request.size();) {
      ssize_t n = write(fd_, request.data() + sent, request.size() - sent);
      if (n <= 0) Die(std::string("etcd put: ") + std::strerror(errno));
      sent += static_cast<size_t>(n);
    }
    // The answer: a header with Content-Length, then that many bytes.
    size_t header_end, length = 0;
    while ((header_end = in_.find("\r\n\r\n")) == std::string::npos) Read();
    if (in_.compare(0, 12, "HTTP/1.1 200") != 0) {
      Die("etcd put: " + in_.substr(0, in_.find('\r')));
    }
    size_t cl = in_.find("Content-Length: ");
    if (cl == std::string::npos || cl > header_end) {
      Die("etcd put: an answer without Content-Length");
    }
    length = std::strtoull(in_.c_str() + cl + 16, nullptr, 10);
    while (in_.size() < header_end + 4 + length) Read();
    in_.erase(0, header_end + 4 + length);
  }

 private:
  void Read() {
    char buf[4096];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) Die("etcd put: the connection ended");
    in_.append(buf, static_cast<size_t>(n));
  }

  int fd_;
  std::string in_;
};

std::unique_ptr<Store> OpenStore(const Options& o, bool setup) {
  if (!o.etcd.empty()) return std::make_unique<EtcdStore>(o.etcd);
  if (!o.mysql.empty()) return std::make_unique<MysqlStore>(o.mysql, setup);
  return std::make_unique<PgStore>(o.conninfo, setup);
}

void Setup(const Options& o, const Workload& work) {
  std::unique_ptr<Store> store = OpenStore(o, true);
  std::string padding = Padding(o.object_bytes, 1);
  for (const Target& t : work.targets) {
    store->Put(t, ObjectJson(t, "0:0:0", 1, padding), "0");
  }
  store->Done();
  std::printf("setup_rows=%zu\n", work.targets.size());
}

struct WriterResult {
  uint64_t writes = 0;
  uint64_t last_seq = 0;
  double max_us = 0;
  LatencyHistogram hist = MakeHistogram();
};

void RunWriter(const Options& o, const Workload& work, int w, uint64_t count,
               std::chrono::steady_clock::time_point end,
               WriterResult* result) {
  std::unique_ptr<Store> store = OpenStore(o, false);
  std::string padding = Padding(o.object_bytes, 1);
  using Clock = std::chrono::steady_clock;
  const double per_thread = o.rate / o.writers;
  const auto period =
      per_thread > 0 ? std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(1.0 / per_thread))
                     : Clock::duration::zero();
  auto next = Clock::now();
  const size_t writes = work.order.size();
  size_t ti = static_cast<size_t>(w) % writes;
  uint64_t seq = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (count ? seq >= count : Clock::now() >= end) break;
    if (period.count() > 0) {
      auto now = Clock::now();
      if (next > now) std::this_thread::sleep_until(next);
      // Behind by more than a second: do not burst to catch up.
      if (next < now - std::chrono::seconds(1)) next = now;
      next += period;
    }
    const Target& t = work.targets[work.order[ti]];
    ti += static_cast<size_t>(o.writers);
    if (ti >= writes) ti = static_cast<size_t>(w) % writes;
    ++seq;
    int64_t stamp_ns = RealtimeNanos();
    std::string stamp = std::to_string(w) + ":" + std::to_string(seq) + ":" +
                        std::to_string(stamp_ns);
    store->Put(t, ObjectJson(t, stamp, seq, padding), std::to_string(seq));
    double us = (RealtimeNanos() - stamp_ns) / 1e3;
    result->hist(std::max(1.0, us));
    result->max_us = std::max(result->max_us, us);
  }
  result->writes = seq;
  result->last_seq = seq;
}

constexpr char kUsage[] =
    "usage: bench_writer (--conninfo STR | --mysql CONNINFO | --etcd "
    "HOST:PORT) [--setup] "
    "[--mode one|spread|mixed] "
    "[--objects N] [--object-bytes B] [--rate R] [--duration S | "
    "--count N] [--writers W] [--out FILE]";
const walwatch::bench::Flags kFlags("bench_writer", kUsage);

Options Parse(int argc, char** argv) {
  Options o;
  kFlags.Parse(argc, argv,
               {{"--conninfo", &o.conninfo},
                {"--etcd", &o.etcd},
                {"--mysql", &o.mysql},
                {"--setup", &o.setup},
                {"--mode", &o.mode},
                {"--objects", &o.objects},
                {"--object-bytes", &o.object_bytes},
                {"--rate", &o.rate},
                {"--duration", &o.duration_s},
                {"--count", &o.count},
                {"--writers", &o.writers},
                {"--out", &o.out}});
  const int stores = !o.conninfo.empty() + !o.etcd.empty() + !o.mysql.empty();
  if (stores != 1) {
    kFlags.Usage("one of --conninfo, --mysql and --etcd is required");
  }
  if (o.mode != "one" && o.mode != "spread" && o.mode != "mixed") {
    kFlags.Usage("--mode: one, spread or mixed");
  }
  if (o.objects <= 0) o.objects = o.mode == "one" ? 100 : o.mode == "spread" ? 4 : 2;
  if (o.writers < 1 || o.writers > 64) kFlags.Usage("--writers: 1 to 64");
  if (o.rate < 0) kFlags.Usage("--rate must be >= 0");
  if (!o.setup && o.duration_s <= 0 && o.count == 0) {
    kFlags.Usage("--duration or --count is required");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  const Workload work = MakeWorkload(o);
  if (o.setup) {
    Setup(o, work);
    return 0;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<WriterResult> results(static_cast<size_t>(o.writers));
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  const auto end =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(o.duration_s));
  for (int w = 0; w < o.writers; ++w) {
    // --count is a total: spread it over the writers.
    uint64_t count = 0;
    if (o.count) {
      count = o.count / o.writers + (static_cast<uint64_t>(w) < o.count % o.writers);
      if (count == 0) continue;
    }
    threads.emplace_back(RunWriter, std::cref(o), std::cref(work), w, count,
                         end, &results[static_cast<size_t>(w)]);
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  LatencyHistogram all = MakeHistogram();
  uint64_t writes = 0;
  double max_us = 0;
  for (WriterResult& r : results) {
    all += r.hist;
    writes += r.writes;
    max_us = std::max(max_us, r.max_us);
  }
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line,
                "writes=%llu\nseconds=%.3f\nrate=%.0f\nwriters=%d\n"
                "statement_p50_us=%.0f\nstatement_p99_us=%.0f\n"
                "statement_max_us=%.0f\n",
                static_cast<unsigned long long>(writes), seconds,
                writes / seconds, o.writers, Quantile(all, 0.5),
                Quantile(all, 0.99), max_us);
  out += line;
  for (int w = 0; w < o.writers; ++w) {
    std::snprintf(line, sizeof line, "last_seq_%d=%llu\n", w,
                  static_cast<unsigned long long>(
                      results[static_cast<size_t>(w)].last_seq));
    out += line;
  }
  std::fputs(out.c_str(), stdout);
  if (!o.out.empty()) {
    std::string tmp = o.out + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) Die("cannot write " + tmp);
    std::fputs(out.c_str(), f);
    std::fclose(f);
    if (std::rename(tmp.c_str(), o.out.c_str()) != 0) Die("cannot rename " + tmp);
  }
  return g_stop.load() ? 130 : 0;
}
