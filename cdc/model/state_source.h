// StateSource is what the HTTP layer asks of the database: the current state
// of a resource (for a watch without resourceVersion, or WatchList), and the
// RV that continues an APIServer's own SQL list. Each source implements it
// (cdc/postgres/state_service.h, cdc/mysql/mariadb_state.h) on the worker
// pool of cdc/state_workers.h; tests may substitute their own.
//
// Every answer rests on one rule, "exact or retry" (DESIGN.md): the RV given
// with a state is the exact position from which the watch stream continues
// that state, so nothing is lost or doubled between the two.
//
// Ownership and threads: main owns the one StateSource (a StateService) and
// keeps it alive until the HTTP server has stopped. The sessions call it
// from their strands; it answers from threads of its own (see each method).
#ifndef WALWATCH_CDC_MODEL_STATE_SOURCE_H_
#define WALWATCH_CDC_MODEL_STATE_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/base/mutex.h"
#include "cdc/model/event.h"

namespace walwatch {

// A failure the HTTP layer turns into a Kubernetes Status.
struct StateError {
  int code = 500;             // 409 retry, 410 expired, 504 timeout, 500
  std::string reason;         // Conflict, Expired, Timeout, InternalError
  std::string message;
};

// Which rows make up the state: one resource, optionally one cluster and one
// namespace. Selectors are applied by the session on the events.
struct StateQuery {
  std::string group, version, resource;
  std::string cluster;    // empty: all clusters
  std::string ns;         // empty: all namespaces
  // The state's RV must be at least this (WatchList's resourceVersion with
  // resourceVersionMatch=NotOlderThan); 0: any.
  uint64_t not_older_than = 0;
  // Who asks (PeerIdentity: the Unix socket peer's process, or the TCP
  // peer's address). A client holds at most its share of the state readers;
  // its further states wait behind its own. Empty: one anonymous client.
  std::string client;
};

// InitialStateStream carries one state read from the worker that reads it to
// the session that sends it, with bounded memory: Push blocks while too much
// is queued. The worker holds a snapshot open meanwhile, so a consumer that
// is too slow fails it: 410 Expired, and Push returns false. Too slow is
//   - still reading `timeout` after the stream was made; or
//   - while the producer waits on a full queue, taking less than
//     `min_rate` bytes per second over any `stall_timeout` of that wait
//     (nothing at all when `min_rate` is zero). A client that trickles
//     therefore gives the worker back as surely as one that stopped, as
//     Kestrel's MinResponseDataRate does for slow HTTP readers; a producer
//     that is itself the slower side never waits and is never judged.
// A stall also calls `on_stall` (from the producer's thread) once.
//
// Producer (a worker thread): Ready(rv) first, then Push()*, then Finish();
// or Fail() at any point. Consumer (a session strand): Take() with a wake-up.
// Thread safety: all methods may be called from any thread.
class InitialStateStream {
 public:
  // timeout, stall_timeout zero: no limit. min_rate: bytes per second (of
  // queued events, as MemoryBytes counts them) a consumer must take while
  // the producer waits; only with a stall_timeout.
  explicit InitialStateStream(
      size_t max_queued_bytes,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
      std::chrono::milliseconds stall_timeout = std::chrono::milliseconds(0),
      std::function<void()> on_stall = nullptr, uint64_t min_rate = 0)
      : max_queued_bytes_(max_queued_bytes),
        timeout_(timeout),
        deadline_(std::chrono::steady_clock::now() + timeout),
        stall_timeout_(stall_timeout),
        min_rate_(min_rate),
        on_stall_(std::move(on_stall)) {}

  // Producer. The live stream continues after `rv`; initial events carry it.
  void Ready(uint64_t rv);
  // Producer. Returns false if the consumer cancelled: stop reading.
  bool Push(std::vector<EventPtr> events);
  void Finish();
  void Fail(StateError error);

  // Consumer. Abandons the stream; a blocked Push returns false.
  void Cancel();
  bool cancelled() const;

  struct Taken {
    bool ready = false;     // rv is known
    uint64_t rv = 0;
    bool finished = false;  // every event has been taken
    bool failed = false;
    StateError error;
  };
  // Moves the queued events into *out and reports the state. If nothing new
  // is there (no events, no change of state), `wake` is kept and called once
  // when something arrives; it must only post to the consumer's strand.
  Taken Take(std::vector<EventPtr>* out, std::function<void()> wake);

 private:
  void NotifyLocked(std::vector<std::function<void()>>* wake) REQUIRES(mu_);

  const size_t max_queued_bytes_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point deadline_;
  const std::chrono::milliseconds stall_timeout_;
  const uint64_t min_rate_;
  const std::function<void()> on_stall_;
  mutable Mutex mu_;
  CondVar space_;
  std::deque<EventPtr> queue_ GUARDED_BY(mu_);
  size_t queued_bytes_ GUARDED_BY(mu_) = 0;
  // The stall window: how long the producer has waited on a full queue
  // since the window began, and what the consumer took meanwhile. When the
  // waits add up to stall_timeout the window is judged against min_rate,
  // and the next one begins.
  std::chrono::steady_clock::duration window_waited_ GUARDED_BY(mu_){};
  uint64_t window_taken_ GUARDED_BY(mu_) = 0;
  bool ready_ GUARDED_BY(mu_) = false;
  uint64_t rv_ GUARDED_BY(mu_) = 0;
  bool finished_ GUARDED_BY(mu_) = false;
  bool failed_ GUARDED_BY(mu_) = false;
  bool cancelled_ GUARDED_BY(mu_) = false;
  bool reported_ready_ GUARDED_BY(mu_) = false;
  StateError error_ GUARDED_BY(mu_);
  std::function<void()> wake_ GUARDED_BY(mu_);
};

// The handoff's snapshot as the endpoint takes it (PROTOCOL.md, "Handoff"):
// PostgreSQL's pg_current_snapshot() text, "xmin:xmax:xip,...", 64-bit xids.
// The HTTP layer checks its form before it asks HandoffRv; what the snapshot
// sees is the PostgreSQL source's to say (cdc/postgres/pg_handoff.h).
struct HandoffSnapshot {
  uint64_t xmin = 0;
  uint64_t xmax = 0;
  std::vector<uint64_t> xip;  // sorted
};
// Parses that text form (xip may be empty). False for anything else.
bool ParseHandoffSnapshot(std::string_view text, HandoffSnapshot* out);

// Where an APIServer's own SQL list was read, as the handoff endpoint takes
// it (PROTOCOL.md, "Handoff"), in the form of the database it read:
//   * PostgreSQL: the list's pg_current_snapshot() text (checked to parse:
//     ParseHandoffSnapshot) and pg_current_wal_insert_lsn() read after it in
//     the same transaction (0: walwatch reads a later one itself);
//   * MySQL/MariaDB: the binlog_snapshot_file and binlog_snapshot_position
//     of the list's START TRANSACTION WITH CONSISTENT SNAPSHOT.
// The HTTP layer checks the form, whatever the database; a source answers
// 400 to the other database's.
struct HandoffPosition {
  std::string snapshot;
  uint64_t insert_lsn = 0;
  std::string binlog_file;  // set: the MySQL/MariaDB form
  uint64_t binlog_position = 0;
  // The server the list was read on (its @@server_id), if the client says.
  std::optional<uint64_t> binlog_server_id;

  bool binlog() const { return !binlog_file.empty(); }
};

class StateSource {
 public:
  virtual ~StateSource() = default;

  // Reads the state of `query` in one snapshot and streams it, as ADDED
  // events carrying the handoff RV, into `stream`. Returns at once; the work
  // happens on another thread.
  virtual void ReadState(const StateQuery& query,
                         std::shared_ptr<InitialStateStream> stream) = 0;

  // An answer's RV, and the newest RV of the same state: no transaction of
  // the table commits in (rv, latest]. A handoff answers the state's own RV
  // (its last commit) and how far it holds, so that a list asked to be not
  // older than an RV N in that range (one a client saw on a bookmark, say)
  // may answer N. Built from one RV, both are it.
  struct AnsweredRv {
    AnsweredRv(uint64_t rv) : rv(rv), latest(rv) {}  // NOLINT: one RV
    AnsweredRv(uint64_t rv, uint64_t latest) : rv(rv), latest(latest) {}
    uint64_t rv;
    uint64_t latest;
  };
  using RvCallback = std::function<void(AnsweredRv rv, const StateError* err)>;
  // Whether the answer is still wanted; false once the session gave up on
  // it or ended. A source checks it before and while it works, and drops a
  // request nobody waits for (without calling `done`). Any thread.
  using Wanted = std::function<bool()>;

  // The RV from which a watch continues a list read at `at`. `done` is
  // called at most once (not when `wanted` turned false), from another
  // thread.
  virtual void HandoffRv(const HandoffPosition& at, RvCallback done,
                         Wanted wanted) = 0;

  // An RV at least as new as the database at the time of the call: waits
  // until the stream has passed the end of the database's log as it was
  // (PostgreSQL: pg_current_wal_insert_lsn(); MySQL: SHOW MASTER STATUS).
  virtual void FreshRv(RvCallback done, Wanted wanted) = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_MODEL_STATE_SOURCE_H_
