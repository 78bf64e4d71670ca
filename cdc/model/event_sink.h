// EventSink is what cdc/ writes into: whole transactions of events, and the
// positions, barriers and losses between them; and what a source's handoff
// asks of the commits it holds (DESIGN.md, "exact or retry"). It is the
// event log (watchserver/event_log.h) as cdc/ sees it: cdc/ knows this
// interface, never the log, its readers or its watchers. Nothing here knows
// which database is underneath: a transaction's xid is the source's id,
// kept and compared, never interpreted (the PostgreSQL source classifies
// the commits by a snapshot's visibility: cdc/postgres/pg_handoff.h).
//
// Ownership: main owns the sink (an EventLog) and keeps it alive as long as
// the ReplicationStream and the StateService that use it.
//
// Threads:
//  * One writer, the replication thread, calls AppendTransaction,
//    AppendBarrier, AppendLoss, ResetHistory, AdvanceCurrentRv and
//    BeginBatch/EndBatch.
//  * Any thread (the replication thread, the state workers) may call the
//    const methods, WaitForRv and CancelWaitForRv.
//
// Cost: a virtual call per transaction, batch, keepalive, status update or
// handoff; nothing here is called per event or per watcher. EventLog is
// final, so the watch sessions' calls on it stay direct.
#ifndef WALWATCH_CDC_MODEL_EVENT_SINK_H_
#define WALWATCH_CDC_MODEL_EVENT_SINK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/model/event.h"

namespace walwatch {

// No RV is above this (EventSink::ceiling_rv): the source's positions mean
// the same on every server of the database.
inline constexpr uint64_t kNoRvCeiling = UINT64_MAX;

class EventSink {
 public:
  virtual ~EventSink() = default;

  // What one watch reads: a resource (ResourceKey), and if the watch is of
  // one cluster, that cluster (floors are then the pair's: another
  // cluster's evictions of the same resource do not expire it).
  struct Selection {
    std::string resource_key;
    std::string cluster;  // empty: every cluster
  };
  // A resource's key: "group/version/resource".
  static std::string ResourceKey(std::string_view group,
                                 std::string_view version,
                                 std::string_view resource);

  enum class AppendResult {
    kAppended,
    // The transaction alone is larger than the sink may hold. It was not
    // retained: it became a loss (AppendLoss) of the resources and clusters
    // its events are of, so the watches of those still behind it end with
    // 410 Expired and must relist; the others go on.
    kTooLarge,
    // commit_lsn is not above current_rv(): a bug upstream (the stream
    // drops re-sent transactions before they get here). Nothing changed;
    // the caller must not let it pass silently (the replication stream
    // appends a barrier).
    kOutOfOrder,
  };
  // Replication thread only. `events` must be non-empty, all of one
  // transaction with commit LSN `commit_lsn` > current_rv(), in order.
  virtual AppendResult AppendTransaction(uint64_t commit_lsn,
                                         std::vector<EventPtr> events) = 0;

  // Replication thread only. Between BeginBatch and EndBatch, appends and RV
  // advances wake nobody, and the events appended are not yet readable by
  // watchers; EndBatch makes them readable and wakes every waiter they
  // would have. The replication thread batches what one read from the
  // socket delivered, so a burst of small transactions wakes each watcher
  // once, not once each; and a watcher that is awake anyway (a write just
  // ended) takes the batch whole too, not a piece of it. EndBatch returns
  // how many watches the batch concerned: those of the resources it
  // appended to, every one after a barrier.
  virtual void BeginBatch() = 0;
  virtual size_t EndBatch() = 0;

  // Replication thread only. Records that a transaction at `commit_lsn` made
  // changes the sink cannot represent as events (TRUNCATE, or a transaction
  // larger than the log): drops everything, and sets floor_rv = current_rv =
  // commit_lsn so that every watcher still behind it gets 410 Expired.
  // `xid`: the full xid of the transaction that caused it (0 if none).
  virtual void AppendBarrier(uint64_t commit_lsn, uint64_t xid) = 0;
  void AppendBarrier(uint64_t commit_lsn) { AppendBarrier(commit_lsn, 0); }

  // Replication thread only. A transaction at `commit_lsn` changed the
  // selections in `touched` (each a resource in one cluster) in a way the
  // sink cannot hold: it is larger than the log. It takes one sequence
  // number that no watch reads, and raises the floors of every touched
  // resource, and of every touched (resource, cluster), to commit_lsn: a
  // watch of one of them still behind it gets 410 Expired, and a resume
  // from below it too. Watches of other resources, or of the same resource
  // in another cluster, go on. An empty `touched` is AppendBarrier.
  virtual void AppendLoss(uint64_t commit_lsn, uint64_t xid,
                          int64_t commit_time_us,
                          const std::vector<Selection>& touched) = 0;

  // Replication thread only. The database's history changed: the stream
  // starts again at `new_floor` (on PostgreSQL below current_rv: a slot
  // recreated after a failover to a server that was behind, or another
  // server at the same address; on a binlog, another server, whose RVs may
  // lie anywhere). Drops everything as a barrier does, moves floor_rv and
  // current_rv to new_floor, sets ceiling_rv, and fences (new_floor,
  // fence_hi]: an RV there may name a position of either history, so from
  // now on a watch from it is Expired (and a handoff refuses a list
  // position there: HeldCommits::Fenced). The fence reaches at least the
  // old current_rv if that is at or below the new ceiling (above it, the
  // ceiling refuses it); fences of earlier resets outside (new_floor,
  // ceiling_rv] are dropped, as the floor and the ceiling refuse them. The
  // old history's xids say nothing of the new one's: what was evicted is
  // forgotten (max_evicted_xid starts again from 0).
  virtual void ResetHistory(uint64_t new_floor, uint64_t fence_hi,
                            uint64_t ceiling_rv) = 0;

  // Replication thread only. A restart of walwatch now would start the
  // stream after `rv`: the position the replay window has confirmed to the
  // source, less one (see cdc/replay_window.h). Handoffs never answer below
  // it (HeldCommits::StateRv), so that a watch from a list's RV resumes
  // across a restart.
  virtual void SetRestartFloor(uint64_t rv) = 0;

  // Replication thread only. The stream has passed `rv`: a transaction with
  // no events for the sink (for example one on another table) committed at
  // it, or the server reported that it has decoded everything before rv+1.
  virtual void AdvanceCurrentRv(uint64_t rv) = 0;

  // The commit LSN of the last transaction seen, or a later position the
  // stream has passed (AdvanceCurrentRv).
  virtual uint64_t current_rv() const = 0;

  // The highest RV of the stream's history (ChangeSource's StreamStart):
  // one above it names a position of another history, which no wait
  // reaches; Seek answers it Expired. kNoRvCeiling for PostgreSQL.
  virtual uint64_t ceiling_rv() const = 0;

  // The commit LSN of the oldest retained transaction that committed at or
  // after `since_unix_us`, or 0 if there is none. The replication stream
  // confirms no further than this, so a restart can replay it.
  virtual uint64_t OldestCommitSince(int64_t since_unix_us) const = 0;

  enum class SeekStatus { kOk, kExpired };
  struct SeekResult {
    SeekStatus status;
    uint64_t seq;  // first event to send, when kOk
    // That event's commit LSN, readable or not (see BeginBatch); 0 if the
    // sink holds none after rv.
    uint64_t commit_lsn;
  };
  // Where a reader that has seen everything up to `rv` continues: the first
  // event of the first transaction with commit_lsn > rv (rv below the
  // sink's floor, in a fence, or above its ceiling is Expired).
  virtual SeekResult Seek(uint64_t rv) const = 0;

  // What the sink holds of commit order, for a source that places a list's
  // position among the commits (a handoff; see the header comment).
  struct Commit {
    uint64_t commit_lsn;
    uint64_t xid;  // the source's id of the transaction (Event::xid)
  };
  struct HeldCommits {
    // Every transaction that committed after floor_rv is held, or was
    // evicted (then its xid is at most max_evicted_xid).
    uint64_t floor_rv;
    uint64_t current_rv;
    // The highest xid of the transactions no longer held: evicted, or
    // dropped by a barrier (the barrier's own xid included); 0 if none since
    // the sink began or its history was last reset.
    uint64_t max_evicted_xid;
    // RVs in (fence_lo, fence_hi] are ambiguous (ResetHistory); none if
    // fence_hi is 0.
    uint64_t fence_lo;
    uint64_t fence_hi;
    // The held transactions (a loss's place in commit order too) that
    // commit before `before`, in commit order, from the first whose xid is
    // at least `from_xid`: those before it are left out, and all have lower
    // xids.
    std::vector<Commit> commits;
    // The commit LSN of the last held transaction that commits before
    // `before`, whatever its xid; 0 if none is held.
    uint64_t last_commit_lsn = 0;
    // SetRestartFloor's last `rv` (0 before the first; ResetHistory sets it
    // to the new floor). StateRv never answers below floor_rv either.
    uint64_t restart_floor_rv = 0;

    bool Fenced(uint64_t rv) const { return rv > fence_lo && rv <= fence_hi; }
    // The RV to hand a list of the table's state at `before` - 1, once the
    // stream has passed it (the caller keeps it at most `before` - 1): the
    // last held transaction's commit, as etcd's revision after a write is
    // that write's; or the floor if none is held after it; but never below
    // the restart floor, which a watch from a list's RV must not fall under
    // if walwatch restarts. No transaction of the table commits between any
    // two of these and `before` (the sink would hold it), so each continues
    // the list exactly.
    uint64_t StateRv() const {
      uint64_t rv = last_commit_lsn > floor_rv ? last_commit_lsn : floor_rv;
      return rv > restart_floor_rv ? rv : restart_floor_rv;
    }
  };
  // Any thread. One consistent view, taken under the sink's lock.
  virtual HeldCommits CommitsFrom(uint64_t from_xid, uint64_t before) const = 0;

  // Calls `wake` once, outside the sink's lock, as soon as current_rv() >=
  // rv (immediately if it already is). `wake` must be cheap and must not
  // call back into the sink synchronously. Returns an id for
  // CancelWaitForRv, or 0 if `wake` was already called.
  virtual uint64_t WaitForRv(uint64_t rv, std::function<void()> wake) = 0;
  // Forgets a waiter that has not fired (for a wait that gave up).
  virtual void CancelWaitForRv(uint64_t id) = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_MODEL_EVENT_SINK_H_
