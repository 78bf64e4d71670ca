#include "cdc/postgres/pg_handoff.h"

#include <algorithm>

namespace walwatch {

bool SnapshotSees(const HandoffSnapshot& snapshot, uint64_t xid) {
  if (xid < snapshot.xmin) return true;
  if (xid >= snapshot.xmax) return false;
  return !std::binary_search(snapshot.xip.begin(), snapshot.xip.end(), xid);
}

void PgHandoff::SetClassifiableFromXid(uint64_t xid) {
  MutexLock lock(&mu_);
  classifiable_from_xid_ = xid;
}

void PgHandoff::ResetHistory(uint64_t next_xid,
                             const std::function<void()>& reset_sink) {
  MutexLock lock(&mu_);
  reset_sink();
  classifiable_from_xid_ = next_xid;
}

HandoffResult PgHandoff::Classify(const EventSink& sink,
                                  const HandoffSnapshot& snapshot,
                                  uint64_t insert_lsn) const {
  MutexLock lock(&mu_);
  // Transactions with an xid below xmin are all seen, and come before any
  // unseen one in what the sink lists: only those from the first xid at or
  // above xmin on can decide.
  const EventSink::HeldCommits held =
      sink.CommitsFrom(snapshot.xmin, insert_lsn);
  // Every transaction the snapshot might not see has an xid >= xmin. If one
  // of those is no longer in the log, or committed before the log began,
  // its visibility cannot be checked.
  if (snapshot.xmin <= held.max_evicted_xid ||
      snapshot.xmin < classifiable_from_xid_) {
    return {HandoffStatus::kExpired, 0};
  }
  // A snapshot older than the floor. After an eviction the xid test above
  // has refused it already (what was evicted after insert_lsn is unseen, so
  // its xid is >= xmin); but a barrier without xids (a slot lost or moved)
  // skipped transactions nobody can classify.
  if (insert_lsn > 0 && insert_lsn - 1 < held.floor_rv) {
    return {HandoffStatus::kExpired, 0};
  }
  // A list whose position PostgreSQL's other history may also have had.
  if (insert_lsn > 0 && held.Fenced(insert_lsn - 1)) {
    return {HandoffStatus::kExpired, 0};
  }
  // Transactions committed at or after insert_lsn began their commit after
  // the snapshot was taken: none is visible (the sink lists none of them).
  // Before it, visible ones must all come before invisible ones in commit
  // order.
  const EventSink::Commit* first_invisible = nullptr;
  for (const EventSink::Commit& t : held.commits) {
    if (!SnapshotSees(snapshot, t.xid)) {
      if (first_invisible == nullptr) first_invisible = &t;
    } else if (first_invisible != nullptr) {
      return {HandoffStatus::kRetry, 0};
    }
  }
  // With every held transaction visible, the list's state is the one after
  // the last transaction of the table before insert_lsn: its commit is the
  // RV, unless a restart would no longer keep it (HeldCommits::StateRv).
  // Any position up to insert_lsn - 1 continues the list as exactly.
  uint64_t rv = first_invisible ? first_invisible->commit_lsn - 1
              : insert_lsn > 0  ? std::min(held.StateRv(), insert_lsn - 1)
                                : 0;
  // How far the same state holds: to the first invisible commit, else to
  // insert_lsn - 1 (or the stream's position, if that is below it).
  uint64_t latest = first_invisible ? rv
                    : insert_lsn > 0 ? std::min(insert_lsn - 1, held.current_rv)
                                     : rv;
  // The first later transaction L's events carry c(L)-1 or c(L), both at
  // least rv (c(L) > rv): the watch that continues from rv never sees an
  // RV below its start.
  // No commit lies between current_rv and insert_lsn either (the
  // precondition): a watch from current_rv starts at once, where one from
  // insert_lsn - 1 would wait for the stream to move (which an idle
  // database may not do), and its events' RVs would go below its start.
  rv = std::min(rv, held.current_rv);
  // The list saw everything up to the floor (older snapshots were refused
  // above), so the handoff is never below it.
  rv = std::max(rv, held.floor_rv);
  if (held.Fenced(rv)) {
    // The stream has not left a fence yet (it is decoding the WAL pushed
    // past it), and a watch from rv would be refused. With every logged
    // transaction visible, nothing commits between rv and insert_lsn, which
    // lies past the fence (refused above otherwise): the first RV past the
    // fence continues the list exactly, and a watch from there waits for
    // the stream to reach it. An invisible transaction in the fence cannot
    // be continued from an RV nobody can tell apart.
    if (first_invisible != nullptr || insert_lsn == 0) {
      return {HandoffStatus::kExpired, 0};
    }
    rv = held.fence_hi + 1;
  }
  return {HandoffStatus::kExact, rv, std::max(latest, rv)};
}

}  // namespace walwatch
