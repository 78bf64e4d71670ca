// FaultTest: the fixture of walwatch's fault suite (tests/integration/
// fault_*_test.cc, one `fault_test` binary). For each fault, one writer keeps
// writing Clusterpedia-shaped rows while five watchers (every pod; one
// cluster's pods; one namespace's pods; every deployment; one cluster's
// deployments in one namespace) read their streams. Afterwards each watcher
// must have received every committed write's event exactly once, in commit
// order, with the stored object (support/fault.h: ExactlyOnceInOrder) -- or,
// where the fault demands a relist, an exact prefix and then an explicit 410
// Expired ERROR event (PrefixThenExpired), and watches opened afterwards are
// exact again.
//
// Every test runs its own PostgreSQL cluster (support/pg_cluster.h), which
// it may restart, crash or starve of WAL without disturbing other tests;
// walwatch runs as the real binary (WALWATCH_BINARY).
//
// The script most tests share is Begin(Scenario): a cluster, walwatch on it
// (directly or through a TCP proxy) and ready, the watchers from a fresh
// marker, the writer and a first phase of writes. The test then injects its
// fault and states what must follow, usually ending with
// StopWriterAndCheckExact (everything exactly once) or ExpectAllExpired and
// RelistAndCheckExact (a 410, and exact watches after the relist). Tests
// that need a step in between call Begin's three steps themselves:
// StartCluster, LaunchWalwatch, StartTraffic.
//
// Helpers that assert fatally return void: call them inside
// ASSERT_NO_FATAL_FAILURE where the test must stop on their failure.
//
// The database is PostgreSQL unless a subclass overrides the hooks marked
// "(a hook)": support/mariadb_fault.h runs the same script on MariaDB.
//
// Run with `make test-fault` (ctest -L fault). WALWATCH_FAULT_HUGE_ROWS
// changes the huge transaction's row count (default 100000, ~325 MB);
// WALWATCH_TEST_KEEP_LOGS=1 keeps walwatch's and PostgreSQL's logs.
//
// Thread safety: the test's thread only.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_FAULT_FIXTURE_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_FAULT_FIXTURE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/support/fault.h"
#include "tests/integration/support/model.h"
#include "tests/integration/support/pg.h"
#include "tests/integration/support/pg_cluster.h"
#include "tests/integration/support/walwatch_process.h"

struct pg_conn;  // PGconn; libpq-fe.h stays out of this header.

namespace walwatch::itest {

class FaultTest : public ::testing::Test {
 public:
  static constexpr char kDb[] = "fault";
  static constexpr char kSlot[] = "walwatch_fault";
  // Writes before and after each fault; at about 300-500 writes/s here.
  static constexpr size_t kWritesPerPhase = 300;
  // How long watchers may take to receive everything after the last write.
  static constexpr std::chrono::seconds kDeliveryWait{60};
  // What walwatch logs, at every refusal, while another walsender holds its
  // slot.
  static constexpr char kSlotHeldMessage[] =
      "the replication slot is active in another process; waiting for it to "
      "end (a previous walwatch's walsender lives until wal_sender_timeout)";

  // What Begin sets up. Each setter returns the scenario, so that a test
  // names only what differs: Begin(Scenario().WithMetrics().ThroughProxy()).
  struct Scenario {
    PgCluster::Options cluster;
    // Serve /metrics on a free loopback port (FaultTest::Metric reads it).
    bool metrics = false;
    // walwatch reaches PostgreSQL through FaultTest::proxy_.
    bool through_proxy = false;
    // walwatch's conninfo; "" for the cluster's database (or the proxy).
    std::string conninfo;
    std::vector<std::string> walwatch_args;
    std::string max_log_bytes;  // "" for walwatch's default
    FaultWatcher::Policy policy = FaultWatcher::Policy::kStayOpen;
    // Committed writes StartTraffic waits for.
    size_t first_writes = kWritesPerPhase;

    Scenario& Cluster(PgCluster::Options options) {
      cluster = std::move(options);
      return *this;
    }
    Scenario& WithMetrics() {
      metrics = true;
      return *this;
    }
    Scenario& ThroughProxy() {
      through_proxy = true;
      return *this;
    }
    Scenario& Conninfo(std::string value) {
      conninfo = std::move(value);
      return *this;
    }
    Scenario& Args(std::vector<std::string> args) {
      walwatch_args = std::move(args);
      return *this;
    }
    Scenario& MaxLogBytes(std::string value) {
      max_log_bytes = std::move(value);
      return *this;
    }
    // Watchers resume with their last RV when a stream ends (a walwatch
    // restart) instead of failing.
    Scenario& Resuming() {
      policy = FaultWatcher::Policy::kResume;
      return *this;
    }
    Scenario& FirstWrites(size_t n) {
      first_writes = n;
      return *this;
    }
  };

  // The five watches: every pod; c1's pods; ns-b's pods; every deployment;
  // c2's deployments in ns-a.
  static const std::vector<WatchFilter>& Filters();

 protected:
  void SetUp() override;
  void TearDown() override;

  // --- The shared script -------------------------------------------------

  // StartCluster(s.cluster), LaunchWalwatch(s), StartTraffic().
  void Begin(const Scenario& s);
  // A cluster with the schema in database `fault`, a seed pod and deployment
  // (so walwatch knows both resources), and two other tables: fault_marker
  // (marker transactions) and other_table (filtered out by walwatch).
  void StartCluster(PgCluster::Options options = {});
  // walwatch on the cluster as `s` says (a proxy first, if through one),
  // ready; ww_ is it. (A hook.)
  virtual void LaunchWalwatch(const Scenario& s);
  // The watchers of Filters() from a new marker (start_rv_), with the
  // scenario's policy, then the writer, and the scenario's first writes.
  // watchers() are these watchers.
  void StartTraffic();
  // walwatch again, with the options LaunchWalwatch used, ready; nullptr
  // (with a failure) if it did not become ready.
  WalwatchProcess* Relaunch();

  // Database `fault` on `cluster`, as StartCluster describes it.
  static void PrepareDatabase(const PgCluster& cluster);

  std::string Conninfo() const { return cluster_->Conninfo(kDb); }
  PgConnection& db() { return *db_; }
  // The watchers StartTraffic started.
  const std::vector<FaultWatcher*>& watchers() const { return watchers_0_; }
  uint64_t start_rv() const { return start_rv_; }

  // walwatch's options for this test's cluster, slot and socket.
  WalwatchOptions Options();
  // Starts walwatch and waits until /readyz says 200; nullptr (with a
  // failure) if it does not.
  WalwatchProcess* Launch(WalwatchOptions options);
  // Starts walwatch without waiting for anything.
  WalwatchProcess& Spawn(WalwatchOptions options);

  // The commit LSN of a new transaction on fault_marker: the start RV for
  // watches that must see exactly the writes after it. (A hook.)
  virtual uint64_t Marker();
  // The rows `f` selects, as SQL holds them now. (A hook.)
  virtual ModelState SqlState(const WatchFilter& f);
  // How the writer connects. (A hook.)
  virtual FaultStoreFactory WriterStore();
  // The same selection as `f`, for support/model.h's checker.
  static ModelFilter ToModelFilter(const WatchFilter& f);

  // --- The writer and the watchers ----------------------------------------

  FaultWriter& StartWriter(FaultWriter::Options options = {});
  // Waits for `n` more committed writes.
  ::testing::AssertionResult MoreWrites(
      size_t n, std::chrono::seconds timeout = std::chrono::seconds(90));
  // One watcher per filter, from `rv`. The writer must be paused or not yet
  // started: the state SQL holds now is each watcher's starting state for
  // the model check.
  std::vector<FaultWatcher*> StartWatchers(const WalwatchProcess& ww,
                                           uint64_t rv,
                                           FaultWatcher::Policy policy);
  // Pauses the writer, starts watchers from a new marker, resumes it;
  // *from: the writer log index their expected events start at.
  std::vector<FaultWatcher*> StartWatchersFromNow(FaultWatcher::Policy policy,
                                                  size_t* from);

  // Stops the writer, writes the tail, waits until every watcher has had
  // the time to receive all it should, then checks each: exactly once, in
  // order, from writer log entry `from` on, and (support/model.h) the
  // events applied to its starting state give what SQL holds now.
  // `since_start`: more watchers, checked from writer log entry 0.
  void StopWriterAndCheckExact(const std::vector<FaultWatcher*>& watchers,
                               size_t from = 0,
                               std::vector<FaultWatcher*> since_start = {});
  // Before a failover: stops the writer, writes the tail, and waits until
  // every watcher of watchers() has each write it matches. Returns the
  // highest RV any of them received (0 if none).
  uint64_t StopWriterBeforeFailover();
  // After the failover: each watcher of watchers() got every write before
  // it exactly once, in order, then a 410, within `timeout`.
  void ExpectEveryWriteThenExpired(
      std::chrono::seconds timeout = std::chrono::seconds(60));
  // Every watcher got a 410 after an exact prefix of the writes from `from`.
  void ExpectAllExpired(
      const std::vector<FaultWatcher*>& watchers, size_t from = 0,
      std::chrono::seconds timeout = std::chrono::seconds(30));
  // After a 410: a new list position (a marker), new watchers from it, more
  // writes, and those watchers must be exact.
  // `untouched`: watchers that were not expired, checked whole at the end.
  void RelistAndCheckExact(std::vector<FaultWatcher*> untouched = {});
  // A watch of Filters()[0] from `rv`, before a barrier, is told to relist
  // at once: a 410 within 20 s and no event.
  void ExpectAWatchFromIsExpiredAtOnce(uint64_t rv);

  // --- Faults ------------------------------------------------------------

  // With the writer paused and walwatch frozen (SIGSTOP), runs `fault`; then,
  // walwatch still frozen, the writer writes kWritesPerPhase / 2 more (lost
  // with the slot, or skipped) and `then` runs; then walwatch is thawed
  // (SIGCONT). Fails fatally if the fault or the writes did.
  //
  // Why the writer pauses: PostgreSQL 15 terminates a slot's walsender to
  // invalidate or drop the slot, and its FATAL message to a client that
  // does not read blocks forever once the socket's buffer is full -- and so
  // does the CHECKPOINT waiting for the slot (seen here under load).
  void WhileWalwatchIsFrozen(
      const std::function<::testing::AssertionResult()>& fault,
      const std::function<void()>& then = nullptr);
  // SIGTERM to `ww`, which must exit 0 within `bound`; *took (if given):
  // from the signal to the exit.
  void SigtermExpectingCleanExit(WalwatchProcess& ww,
                                 std::chrono::seconds bound,
                                 std::chrono::milliseconds* took = nullptr);
  // Each watcher's first stream ended with the final chunk ("end"). Waits up
  // to `wait` for each stream to end; with `stop`, stops each watcher first
  // (after that wait).
  void ExpectStreamsEndedWithTheFinalChunk(
      const std::vector<FaultWatcher*>& watchers, std::chrono::seconds wait,
      bool stop);

  // A replication connection, closed (PQfinish) when it goes.
  struct PqFinish {
    void operator()(pg_conn* conn) const;
  };
  using Replication = std::unique_ptr<pg_conn, PqFinish>;
  // StartCluster; then walwatch's slot is created and held by another
  // replication connection (holder_; resetting it releases the slot), as
  // the walsender of a walwatch on a lost node would hold it; then walwatch
  // starts (ww_), not waited for.
  void SpawnWhileAnotherWalsenderHoldsTheSlot();
  // Waits until a session (walwatch's) is inside
  // pg_create_logical_replication_slot, held up by an open transaction.
  bool WaitUntilASlotIsBeingCreated();

  // --- What walwatch and PostgreSQL say -----------------------------------

  // walwatch's log lines with message `msg`.
  std::vector<nlohmann::json> LogLines(const WalwatchProcess& ww,
                                       const std::string& msg);
  // Polls until there are `n` of them or `timeout` passes; returns them.
  std::vector<nlohmann::json> WaitForLogLines(const WalwatchProcess& ww,
                                              const std::string& msg,
                                              size_t n,
                                              std::chrono::seconds timeout);
  // A watch from the marker receives a row committed now: walwatch streams.
  void ExpectANewRowArrives(const WalwatchProcess& ww);

  // A sample of /metrics (Scenario::WithMetrics); nullopt if unread.
  std::optional<double> Metric(const std::string& sample);
  // Polls the sample until it equals `want` or `timeout` passes; returns
  // the last value read.
  std::optional<double> WaitForMetric(const std::string& sample, double want,
                                      std::chrono::seconds timeout);
  // Polls walwatch_current_rv until it reaches `rv`.
  ::testing::AssertionResult WaitForCurrentRv(uint64_t rv,
                                              std::chrono::seconds timeout);
  // walwatch_slot_recreated_timestamp_seconds says a recreation within the
  // last two minutes.
  void ExpectRecreatedRecently();

  // The walsender serving `slot` (0 if none).
  int WalsenderPid(const std::string& slot);
  // Waits for a walsender on `slot` other than `old_pid`; 0 if none came.
  int WaitForWalsender(const std::string& slot, int old_pid,
                       std::chrono::seconds timeout);
  // The reconnect log lines follow walwatch's capped exponential backoff:
  // attempt k waits 200 ms * 2^(k-1) (at most 10 s), +-20% jitter. Returns
  // the number of attempts seen.
  size_t ExpectBackoff(const WalwatchProcess& ww);

  std::string tmpdir_;
  uint64_t seed_ = 20261202;
  Clock::time_point started_;
  std::unique_ptr<PgCluster> cluster_;
  std::unique_ptr<PgConnection> db_;
  std::unique_ptr<TcpProxy> proxy_;
  std::vector<std::unique_ptr<WalwatchProcess>> walwatches_;
  std::unique_ptr<FaultWriter> writer_;
  // The walwatch LaunchWalwatch or Relaunch started last, and its options.
  WalwatchProcess* ww_ = nullptr;
  WalwatchOptions ww_options_;
  int metrics_port_ = 0;
  Replication holder_;
  Scenario scenario_;  // LaunchWalwatch's

 private:
  const ModelState& InitialState(const FaultWatcher* w);

  uint64_t start_rv_ = 0;
  std::vector<FaultWatcher*> watchers_0_;
  std::vector<std::unique_ptr<FaultWatcher>> all_watchers_;
  std::map<size_t, ModelState> initial_states_;  // by index in all_watchers_
  // StopWriterBeforeFailover's writes, and what each watcher matches of them.
  std::vector<ExpectedEvent> before_failover_;
  std::map<const FaultWatcher*, size_t> want_before_failover_;
};

// Whether anything (a file, a socket) is at `path`.
bool FileExists(const std::string& path);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_FAULT_FIXTURE_H_
