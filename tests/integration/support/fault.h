// Support for walwatch's fault suite (tests/integration/fault_*_test.cc, on
// support/fault_fixture.h): a TCP proxy whose connections a test can reset;
// a writer that keeps writing Clusterpedia-shaped rows through every fault
// and knows exactly which writes committed; watchers that record what they
// receive; and a checker that compares the two: every event exactly once, in
// commit order, with the stored object. The suite's private clusters are
// support/pg_cluster.h's.
//
// Every wait is a condition polled against a deadline; nothing here sleeps
// for correctness.
//
// Thread safety: FaultWriter and FaultWatcher each run one thread of their
// own; their public methods may be called from the test's thread (they lock).
// TcpProxy's methods are for the test's thread (its forwarding runs on its
// own thread).
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_FAULT_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_FAULT_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/support/pg.h"
#include "tests/integration/support/walwatch_process.h"
#include "tests/integration/support/watch_client.h"

namespace walwatch::itest {

// ---------------------------------------------------------------------------
// A TCP proxy on 127.0.0.1 (an ephemeral port) to a Unix socket: walwatch
// connects through it (conninfo host=127.0.0.1 port=port()) and the test cuts
// every proxied connection at once.
class TcpProxy {
 public:
  explicit TcpProxy(std::string upstream_unix_socket);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // Resets (RST, SO_LINGER 0) both sides of every proxied connection; returns
  // how many connections were cut.
  size_t CutAll();
  // New connections go to `unix_socket` from now on (a failover to another
  // server); proxied connections stay with the old one until CutAll.
  void SetUpstream(std::string unix_socket);
  // While refusing, new connections are accepted and reset at once.
  void SetRefusing(bool refusing);
  // While stalled, nothing is forwarded and no connection is accepted (the
  // kernel still completes handshakes into the backlog): a silent network
  // partition. Connections stay open.
  void SetStalled(bool stalled);
  size_t accepted() const { return accepted_.load(); }
  size_t active() const;
  // While stalled: how many proxied connections have sent bytes that wait
  // unforwarded, i.e. whose client waits on the partition (updated every
  // 50 ms). 0 when not stalled.
  size_t waiting_while_stalled() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<size_t> accepted_{0};
};

// ---------------------------------------------------------------------------
// One connection of FaultWriter to the database it writes: each write's SQL
// in that database's dialect (PgFaultStore; MariaDB's is in
// support/mariadb_fault.h). Every method throws std::exception on an error
// (a cut connection, a server going down); the writer then opens a new
// connection and reads the row back to learn whether the write committed.
class FaultStore {
 public:
  // A row of `resources` as the writer writes it.
  struct Row {
    std::string group, version, resource, kind, cluster, ns, name, uid;
    uint64_t seq = 0;    // resource_version
    std::string object;  // the object's JSON
  };
  virtual ~FaultStore() = default;
  virtual void Insert(const Row& row) = 0;
  // GORM's UPDATE of the row with row's key (cluster, group, version,
  // resource, namespace, name) to `row`; false if no row matched.
  virtual bool Update(const Row& row) = 0;
  virtual bool Delete(const Row& row) = 0;
  // Clusterpedia's event recording on the row of (row.cluster, row.uid):
  // only the events columns change.
  virtual bool RecordEvent(const Row& row, const std::string& reason,
                           const std::string& value) = 0;
  // spec.seq of the object stored under row's key; nullopt if no row.
  virtual std::optional<std::string> StoredSeq(const Row& row) = 0;
};
// Opens a FaultStore; throws if it cannot connect.
using FaultStoreFactory = std::function<std::unique_ptr<FaultStore>()>;
// PostgreSQL's FaultStore on `conninfo`.
std::unique_ptr<FaultStore> PgFaultStore(const std::string& conninfo);

// ---------------------------------------------------------------------------
// What a watcher must receive for one write.
struct ExpectedEvent {
  uint64_t write = 0;  // index in the writer's log (order of commit)
  std::string type;    // ADDED, MODIFIED, DELETED
  std::string kind;    // Pod, Deployment
  std::string cluster, ns, name;
  uint64_t seq = 0;        // spec.seq of the object the event carries
  nlohmann::json object;   // that object as stored
  std::string Describe() const;
};

// Clusterpedia-shaped writes, one autocommit statement each (GORM's SQL, as
// tests/integration/support/harness.h writes them, without owner_uid so that
// a test may drop that column), on 64 objects: pods and deployments in
// clusters c1, c2 and namespaces ns-a, ns-b. Every object carries spec.seq,
// the number of the write that produced it, so each event is identifiable.
// One writer, so commit order is write order.
//
// Through a fault the writer reconnects (within `reconnect_timeout`) and, for
// a statement whose outcome it did not see, reads the row back to learn
// whether it committed; so its log holds exactly the committed writes.
class FaultWriter {
 public:
  struct Options {
    std::string conninfo;  // PostgreSQL's, if `connect` is not set
    FaultStoreFactory connect;
    uint64_t seed = 1;
    std::chrono::microseconds pause{2000};  // between writes
    std::chrono::seconds reconnect_timeout{90};
    size_t payload_bytes = 200;  // filler in spec.data
  };
  explicit FaultWriter(Options options);
  ~FaultWriter();

  void Start();
  // Waits until the in-flight write is done and no new one starts.
  void Pause();
  void Resume();
  // Stops after the in-flight write and joins.
  void Stop();
  // While paused: forget every object (after a TRUNCATE).
  void ForgetAllObjects();
  // After Stop: inserts a pod in c1/ns-b and a deployment in c2/ns-a (new
  // names), so that every watch of fault_test's filters has a known last
  // event: a watcher that received it has received everything before it.
  ::testing::AssertionResult WriteTail();

  // Blocks until `n` writes have committed since Start, or the deadline.
  bool WaitForWrites(size_t n, Clock::time_point deadline);
  size_t writes() const;
  // Statements that failed (and were resolved); with their messages.
  size_t errors() const;
  std::vector<std::string> error_messages() const;
  // A failure the writer could not get past (it stopped); "" if none.
  std::string fatal() const;
  // Committed writes' events, from index `from`.
  std::vector<ExpectedEvent> Log(size_t from = 0) const;

 private:
  struct Object {
    std::string kind, resource, group, version;
    std::string cluster, ns, name, uid;
    bool exists = false;
    uint64_t seq = 0;
    nlohmann::json stored;
  };
  void Loop();
  bool WriteOne(std::unique_ptr<FaultStore>* conn);
  bool Reconnect(std::unique_ptr<FaultStore>* conn);
  std::unique_ptr<FaultStore> Connect() const;
  nlohmann::json ObjectFor(const Object& o, uint64_t seq) const;
  // `o` as its row (resource_version o.seq, the object o.stored).
  static FaultStore::Row RowOf(const Object& o);

  Options options_;
  std::mt19937_64 rng_;
  std::vector<Object> objects_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool paused_ = false;
  bool busy_ = false;
  uint64_t next_seq_ = 1;
  std::vector<ExpectedEvent> log_;
  std::vector<std::string> errors_;
  std::string fatal_;
};

// ---------------------------------------------------------------------------
// One watch, as a Kubernetes client keeps it.
struct WatchFilter {
  std::string path;     // e.g. /clusters/c1/api/v1/pods
  std::string kind;     // Pod or Deployment
  std::string cluster;  // "" any
  std::string ns;       // "" any
  bool Matches(const ExpectedEvent& e) const;
};

class FaultWatcher {
 public:
  enum class Policy {
    // The stream must stay open through the fault: any end is recorded as
    // a failure and the watcher stops.
    kStayOpen,
    // Reconnect with the last RV received whenever the stream ends (a
    // walwatch restart), retrying refused connections and 504s until
    // `reconnect_timeout`.
    kResume,
  };
  FaultWatcher(std::string socket_path, WatchFilter filter, uint64_t start_rv,
               Policy policy,
               std::chrono::seconds reconnect_timeout = std::chrono::seconds(60));
  ~FaultWatcher();

  // Opens the first watch (synchronously: 200 or failure), then reads on its
  // own thread.
  ::testing::AssertionResult Start();
  void Stop();

  const WatchFilter& filter() const { return filter_; }
  uint64_t start_rv() const { return start_rv_; }
  size_t events() const;  // ADDED/MODIFIED/DELETED received
  // A 410 Expired ERROR event arrived (the watcher stopped then).
  bool expired() const;
  bool stopped() const;
  // Waits until `n` events, a 410, or the watcher stopped.
  bool WaitForEvents(size_t n, Clock::time_point deadline);
  bool WaitForExpired(Clock::time_point deadline);

  struct Record {
    std::vector<WatchEvent> events;  // ADDED/MODIFIED/DELETED, in order
    std::vector<uint64_t> bookmark_rvs;
    std::optional<WatchEvent> error_event;  // the ERROR event, if any
    // How streams ended: "end" (final chunk) or "error: ..." (a reset, or a
    // close without the final chunk), in order.
    std::vector<std::string> stream_ends;
    std::vector<std::string> problems;  // anything else that went wrong
    size_t reconnects = 0;
    size_t retries_504 = 0;
    size_t open_failures = 0;
  };
  Record Snapshot() const;

 private:
  void Loop();
  bool OpenLocked(WatchClient* client, uint64_t rv, Clock::time_point deadline,
                  std::string* error);

  const std::string socket_path_;
  const WatchFilter filter_;
  const uint64_t start_rv_;
  const Policy policy_;
  const std::chrono::seconds reconnect_timeout_;
  std::unique_ptr<WatchClient> client_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Record record_;
  bool finished_ = false;
};

// The watcher received exactly `expected` (its filter applied), in order:
// the same type, object identity, spec.seq and whole stored object; RVs
// strictly increasing and above the start RV; no ERROR event. Otherwise
// counts lost, duplicated and reordered events and shows the first
// difference with its neighbourhood.
::testing::AssertionResult ExactlyOnceInOrder(
    const std::vector<ExpectedEvent>& all, const FaultWatcher& watcher);
// What the watcher received before its 410 ERROR event is a prefix of
// `expected` (nothing lost before the barrier, nothing doubled, order kept),
// and the 410 arrived.
::testing::AssertionResult PrefixThenExpired(
    const std::vector<ExpectedEvent>& all, const FaultWatcher& watcher);

// ---------------------------------------------------------------------------
// Small helpers.

// VmRSS / VmHWM of `pid` in bytes (0 if unreadable).
uint64_t ProcessRssBytes(pid_t pid);
uint64_t ProcessPeakRssBytes(pid_t pid);

// Samples a process's RSS every 20 ms, on a thread of its own, from Start()
// until Stop() (or the destructor); max() is the largest sample. For the
// huge-transaction tests: VmHWM alone would miss nothing, but a sample
// series shows when memory grew.
class RssSampler {
 public:
  RssSampler() = default;
  ~RssSampler() { Stop(); }
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  void Start(pid_t pid);
  void Stop();
  uint64_t max() const { return max_; }

 private:
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> max_{0};
};

// The rows of the huge-transaction tests (both databases): 100,000, or
// WALWATCH_FAULT_HUGE_ROWS.
size_t HugeTransactionRows();

// The commit LSN of a fresh transaction on table `marker_table` of the
// database at `conninfo`, found with a temporary wal2json slot: a position
// every slot of the database decodes, so a watch from it gets exactly the
// transactions after it. On a server without wal2json (the npm builds of
// PostgreSQL 16-18, tests/tools/install-pg-npm.sh), or with
// WALWATCH_TEST_OBSERVER_PLUGIN=pgoutput, through PgoutputMarkerCommitLsn
// and the publication `<marker_table>_publication`, made if missing.
uint64_t MarkerCommitLsn(const std::string& conninfo,
                         const std::string& marker_table);
// The same through a temporary pgoutput slot: `publication` must publish
// `marker_table` (pgoutput sends no commit for a transaction without a
// published change).
uint64_t PgoutputMarkerCommitLsn(const std::string& conninfo,
                                 const std::string& marker_table,
                                 const std::string& publication);
// The commit LSN of a pgoutput Commit message ('C', flags, commit LSN, end
// LSN, timestamp) as the SQL interface returns it (bytea as text: \x43...);
// nullopt for any other message.
std::optional<uint64_t> PgoutputCommitLsn(const std::string& bytea_text);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_FAULT_H_
