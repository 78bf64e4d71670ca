// StateWorkerPool is the half of a StateSource that is the same for every
// database: the threads that answer, and who gets them when. A source
// supplies a StateWorker (its own connection and queries: a snapshot, its
// position, the rows), one per thread; the pool schedules:
//   * two lanes: initial states (long: they stream rows as the client
//     reads), and RV requests (handoffs, fresh RVs: one short query and a
//     wait). The `workers` threads take both, RV requests first; one more
//     thread takes only RV requests, so that initial states, however many
//     and however slowly read, never leave an APIServer's own SQL list
//     without its RV;
//   * initial states queue per client (StateQuery::client) and are served
//     round robin; one client holds at most share() workers at once, so that
//     a client with many slow states leaves the other workers to everyone
//     else; its further states wait behind its own (and get the session's
//     504 if they wait too long);
//   * a request whose session gave up while it was queued (walwatch lagging,
//     clients timing out and asking again) is skipped, so that it does not
//     hold a worker that a live one needs.
// Beside it, what every worker does alike: wait until the replication
// stream has passed a position (WaitForCurrentRv), and stream rows read in a
// snapshot as ADDED events (PushStateRows).
//
// Thread safety: the StateSource methods may be called from any thread;
// each worker is made, used and destroyed on its own thread. The pool stops
// and joins its threads in its destructor; a worker's waits on the database
// end on the StopSignal it was made with.
#ifndef WALWATCH_CDC_STATE_WORKERS_H_
#define WALWATCH_CDC_STATE_WORKERS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cdc/base/clock.h"
#include "cdc/base/mutex.h"
#include "cdc/model/state_source.h"
#include "cdc/transaction.h"
#include "schema/table_mapping.h"

namespace walwatch {

class EventBuilder;
class EventSink;
class StopSignal;

// One thread's connection and queries, a database's own. Called by that
// thread only.
class StateWorker {
 public:
  virtual ~StateWorker() = default;
  virtual void ReadState(const StateQuery& query,
                         InitialStateStream* stream) = 0;
  virtual void HandoffRv(const HandoffPosition& at,
                         const StateSource::RvCallback& done,
                         const StateSource::Wanted& wanted) = 0;
  virtual void FreshRv(const StateSource::RvCallback& done,
                       const StateSource::Wanted& wanted) = 0;
};

class StateWorkerPool : public StateSource {
 public:
  // Called on each thread to make its worker; `stop` is raised when the
  // pool stops, and must end the worker's waits.
  using MakeWorker =
      std::function<std::unique_ptr<StateWorker>(const StopSignal* stop)>;
  // `workers` threads (at least 1) for both lanes, and one more for RV
  // requests only.
  StateWorkerPool(int workers, MakeWorker make_worker);
  ~StateWorkerPool() override;  // stops and joins the threads
  StateWorkerPool(const StateWorkerPool&) = delete;
  StateWorkerPool& operator=(const StateWorkerPool&) = delete;

  void ReadState(const StateQuery& query,
                 std::shared_ptr<InitialStateStream> stream) override;
  void HandoffRv(const HandoffPosition& at, RvCallback done,
                 Wanted wanted) override;
  void FreshRv(RvCallback done, Wanted wanted) override;

  // Initial states waiting for a worker, not given up on (for a gauge).
  // Any thread.
  size_t queued_states();
  // The most workers one client's initial states hold at once:
  // max(1, workers / 2).
  int share() const { return share_; }

 private:
  using Job = std::function<void(StateWorker&)>;
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
  Clients::iterator NextStateClientLocked() REQUIRES(mu_);

  const int share_;
  const MakeWorker make_worker_;
  Mutex mu_;
  CondVar cv_;
  Clients clients_ GUARDED_BY(mu_);          // entries with work only
  std::string last_client_ GUARDED_BY(mu_);  // served last
  std::deque<Job> rv_jobs_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  // Interrupts workers waiting on the database when the pool stops.
  const std::unique_ptr<StopSignal> stop_signal_;
  std::vector<std::thread> threads_;
};

// Waits until `log`'s current RV is at least `rv`: the stream has passed
// it. Calls `poke` about every 100 ms meanwhile (a source asks its server
// for its position; may be null). False once `timeout` has passed, `stop`
// is raised, or `wanted` turns false.
bool WaitForCurrentRv(EventSink* log, uint64_t rv, Clock::duration timeout,
                      const StopSignal& stop, const StateSource::Wanted& wanted,
                      const std::function<void()>& poke);

// The SELECT of a state's rows: the mapped columns in MappedField order
// (the object's followed by `object_cast`, e.g. PostgreSQL's "::text"),
// from `qualified_table`, of the query's resource, and of its cluster and
// namespace when it names them. `ident` quotes an identifier; `value` puts
// a value into the statement (a placeholder it binds, or a quoted
// literal), called in the order the values appear.
std::string StateSelectSql(
    const TableMapping& mapping, const std::string& qualified_table,
    const StateQuery& q, const char* object_cast,
    const std::function<std::string(const std::string&)>& ident,
    const std::function<std::string(const std::string&)>& value);

// One column of a row read in a snapshot: the value as text (a json object
// keeps the padding the EventBuilder parses it in place with).
void SetStateColumn(ColumnValue* value, const char* text, size_t length);

// Builds `rows` (INSERTs of the rows one fetch read) as ADDED events at `rv`
// and pushes them into `stream`. False if the state ends here: the client
// went away (the stream was cancelled), or a row could not become an event,
// which is logged and fails the stream with a 500 (a state without that
// row would silently diverge the watcher from the table).
bool PushStateRows(EventBuilder* builder, const Transaction& rows, uint64_t rv,
                   InitialStateStream* stream);

}  // namespace walwatch

#endif  // WALWATCH_CDC_STATE_WORKERS_H_
