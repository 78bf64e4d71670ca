// StateService implements StateSource on PostgreSQL: a few worker threads,
// each with its own ordinary connection, read states in REPEATABLE READ
// snapshots and hand them off to the stream exactly (DESIGN.md, "exact or
// retry"):
//   1. BEGIN REPEATABLE READ; SELECT pg_current_snapshot(),
//      pg_current_wal_insert_lsn()  -> S, L
//   2. wait until the replication stream has passed L (asking the walsender
//      for a keepalive), at most `catch_up_timeout`;
//   3. PgHandoff::Classify(the sink's commits, S, L) -> the exact RV P, or
//      retry with a new snapshot, or expired;
//   4. read the rows in S through a cursor, as ADDED events carrying P.
//
// Thread safety: the StateSource methods may be called from any thread;
// callbacks run on a worker thread. The EventSink and the PgHandoff must
// outlive the service.
#ifndef WALWATCH_CDC_POSTGRES_STATE_SERVICE_H_
#define WALWATCH_CDC_POSTGRES_STATE_SERVICE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cdc/model/state_source.h"
#include "schema/table_mapping.h"

namespace walwatch {

class EventSink;
class PgHandoff;
class StopSignal;

struct StateServiceOptions {
  std::string conninfo;
  TableMapping mapping;
  int connect_timeout_seconds = 10;
  int workers = 2;
  // How long to wait for the stream to pass a snapshot's insert LSN.
  std::chrono::milliseconds catch_up_timeout{3000};
  // Snapshots retried when commit order and visibility disagree.
  int max_retries = 5;
  size_t rows_per_fetch = 500;
};

class StateService : public StateSource {
 public:
  // `handoff` classifies the sink's commits by a snapshot;
  // `request_keepalive` asks the replication thread for a fresh keepalive.
  StateService(StateServiceOptions options, EventSink* log,
               const PgHandoff* handoff,
               std::function<void()> request_keepalive);
  ~StateService() override;  // stops and joins the workers

  void ReadState(const StateQuery& query,
                 std::shared_ptr<InitialStateStream> stream) override;
  void HandoffRv(const HandoffPosition& at, RvCallback done,
                 Wanted wanted) override;
  void FreshRv(RvCallback done, Wanted wanted) override;

  // Initial states waiting for a worker, not given up on (for a gauge).
  // Any thread.
  size_t queued_states();
  // The most workers one client's initial states hold at once.
  int share() const { return share_; }

 private:
  class Worker;
  using Job = std::function<void(Worker&)>;
  // Two lanes: initial states (long: they stream rows as the client reads),
  // and RV requests (handoffs, fresh RVs: one short query and a wait). The
  // `workers` take both, RV requests first; one more worker takes only RV
  // requests, so that initial states, however many and however slowly
  // read, never leave an APIServer's own SQL list without its RV.
  //
  // Initial states queue per client (StateQuery::client), and the clients
  // are served round robin. One client holds at most share_ workers at
  // once, so that a client with many slow states leaves the other
  // workers to everyone else; its further states wait behind its own (and
  // get the session's 504 if they wait too long).
  struct PendingState {
    StateQuery query;
    std::shared_ptr<InitialStateStream> stream;
  };
  struct ClientStates {
    std::deque<PendingState> queue;
    int running = 0;
  };
  using Clients = std::map<std::string, ClientStates>;
  void PostRv(Job job);
  void WorkerLoop(bool rv_only);
  // The next client, after the one served last, with a state that its
  // share lets run; clients_.end() if none. Drops the states whose session
  // gave up on them from the heads of the queues on the way.
  Clients::iterator NextStateClientLocked();  // REQUIRES(mu_)

  const StateServiceOptions options_;
  // The most workers one client's initial states hold at once:
  // max(1, workers / 2).
  const int share_;
  EventSink* const log_;
  const PgHandoff* const handoff_;
  const std::function<void()> request_keepalive_;
  std::mutex mu_;
  std::condition_variable cv_;
  Clients clients_;              // GUARDED_BY(mu_); entries with work only
  std::string last_client_;      // GUARDED_BY(mu_); served last
  std::deque<Job> rv_jobs_;      // GUARDED_BY(mu_)
  bool stopping_ = false;        // GUARDED_BY(mu_)
  // Interrupts workers waiting on PostgreSQL when the service stops.
  const std::unique_ptr<StopSignal> stop_signal_;
  std::vector<std::thread> threads_;
};

// The position the stream must pass before every record that began before
// `insert_lsn` has been decoded: pg_current_wal_insert_lsn() points past a
// page header when it sits at the start of a page, where no record can
// begin. Exposed for tests.
uint64_t RecordBoundaryBefore(uint64_t insert_lsn, uint64_t wal_block_size,
                              uint64_t wal_segment_size);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_STATE_SERVICE_H_
