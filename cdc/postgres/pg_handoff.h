// PgHandoff places a list read in a PostgreSQL snapshot among the commits
// the EventSink holds: the handoff of DESIGN.md, "exact or retry". Given S =
// pg_current_snapshot() and L = pg_current_wal_insert_lsn() read after it,
// the transactions that commit before L are classified by whether S sees
// them (xid below xmax and not in xip; xids widened to 64 bits by the
// source). If every one S sees comes before every one it does not, in commit
// order, the RV P just before the first unseen one (or L - 1) is exact: the
// list holds exactly the transactions up to P, and a watch from P delivers
// exactly those after it. Otherwise no single P is exact: retry.
//
// The sink offers only what it holds (EventSink::CommitsFrom); what xids
// mean, and which of them may have committed before the sink began, is
// PostgreSQL's and stays here. The state service asks; the replication
// source tells it where the stream began (SetClassifiableFromXid) and when
// the history went back (ResetHistory).
//
// Ownership: the PostgreSQL side (cdc/postgres/postgres.h) owns the one
// PgHandoff and keeps it alive while the source and the state service use
// it. Threads: all methods may be called from any thread; one mutex makes a
// history reset and a classification each happen whole, with respect to
// each other (lock order: this mutex, then the sink's).
#ifndef WALWATCH_CDC_POSTGRES_PG_HANDOFF_H_
#define WALWATCH_CDC_POSTGRES_PG_HANDOFF_H_

#include <cstdint>
#include <functional>

#include "cdc/base/mutex.h"
#include "cdc/base/thread_annotations.h"
#include "cdc/model/event_sink.h"
#include "cdc/model/state_source.h"

namespace walwatch {

// Whether `snapshot` sees the transaction with 64-bit xid `xid`: it
// committed before the snapshot was taken.
bool SnapshotSees(const HandoffSnapshot& snapshot, uint64_t xid);

enum class HandoffStatus {
  kExact,    // rv: the list is exactly the transactions up to rv
  kRetry,    // commit order and visibility disagree near the snapshot
  kExpired,  // the sink no longer reaches back to the snapshot
};
struct HandoffResult {
  HandoffStatus status;
  uint64_t rv;
  // With kExact: the newest RV of the same state (no held transaction
  // commits in (rv, latest]), at least rv.
  uint64_t latest = 0;
};

class PgHandoff {
 public:
  // Before streaming: transactions whose full xid is below `xid` (the xmax
  // of a snapshot read after the slot's position) may have committed before
  // the sink starts, so a snapshot whose xmin is below it cannot be
  // classified (kExpired).
  void SetClassifiableFromXid(uint64_t xid) EXCLUDES(mu_);

  // PostgreSQL's history went back (cdc/postgres/slot_recovery.cc): runs
  // `reset_sink` (which calls EventSink::ResetHistory) and makes `next_xid`
  // (read after the new slot was made, as at startup) the classifiable xid,
  // as one step: no classification sees one without the other.
  void ResetHistory(uint64_t next_xid, const std::function<void()>& reset_sink)
      EXCLUDES(mu_);

  // The position from which a watch continues a list read in `snapshot`,
  // taken before `insert_lsn` (pg_current_wal_insert_lsn() after the
  // snapshot). Precondition: no commit record starts between
  // sink.current_rv() and insert_lsn, i.e. the stream has passed the last
  // record boundary before insert_lsn (the state service waits for that).
  // The result is never above sink.current_rv().
  HandoffResult Classify(const EventSink& sink,
                         const HandoffSnapshot& snapshot,
                         uint64_t insert_lsn) const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  uint64_t classifiable_from_xid_ GUARDED_BY(mu_) = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_PG_HANDOFF_H_
