// EventLog is the bounded, in-memory, append-only log of watch events. It is
// the only queue between the replication thread and the watch sessions: each
// session keeps its own cursor (a sequence number) and pulls from the log.
//
// Contract:
//  * One writer (the replication thread) calls AppendTransaction,
//    AppendBarrier and AdvanceCurrentRv. Any thread may call the rest.
//  * Events are appended a whole transaction at a time, and evicted a whole
//    transaction at a time, oldest first, to keep their bytes <= max_bytes:
//    each event's MemoryBytes(), and once each the FilterFields they refer
//    to (an event is in at most one log).
//  * floor_rv(): every transaction that committed after floor_rv is in the
//    log. Each selection (a resource, or a resource in one cluster) also has
//    a floor of its own, FloorRv(selection) <= floor_rv(): the commit of its
//    newest evicted event. A watch of that selection may resume from any
//    rv >= its floor, however much other resources wrote since; an older rv
//    is Expired. A barrier raises every floor.
//  * Sequence numbers are dense and never reused: the event at seq s stays
//    readable until it is evicted. A watch's cursor is Expired only when an
//    event of its own selection at or after the cursor is gone (or a
//    barrier lies after it); other resources' evictions move it forward.
//  * Each resource has an index of its retained events, so a watch of a
//    quiet resource reads its own events only and steps over any number of
//    other resources' in O(log n), and its backlog counts its own bytes.
//
// Thread safety: all methods are safe to call concurrently; one mutex guards
// the state, and wake-up callbacks run outside it.
#ifndef WALWATCH_WATCHSERVER_EVENT_LOG_H_
#define WALWATCH_WATCHSERVER_EVENT_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cdc/model/event.h"

namespace walwatch {

class EventLog {
 public:
  // floor_rv: the position the stream starts after (see class comment).
  EventLog(size_t max_bytes, uint64_t floor_rv);

  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // What one watch reads: a resource (ResourceKey), and if the watch is of
  // one cluster, that cluster (floors are then the pair's: another
  // cluster's evictions of the same resource do not expire it).
  struct Selection {
    std::string resource_key;
    std::string cluster;  // empty: every cluster
  };

  enum class AppendResult {
    kAppended,
    // The transaction alone is larger than max_bytes. It was not retained:
    // it became a loss (AppendLoss) of the resources and clusters its events
    // are of, so the watches of those still behind it end with 410 Expired
    // and must relist; the others go on.
    kTooLarge,
    // commit_lsn is not above current_rv(): a bug upstream (the stream
    // drops re-sent transactions before they get here). Nothing changed;
    // the caller must not let it pass silently (the replication stream
    // appends a barrier).
    kOutOfOrder,
  };

  // Replication thread only. `events` must be non-empty, all of one
  // transaction with commit LSN `commit_lsn` > current_rv(), in order.
  AppendResult AppendTransaction(uint64_t commit_lsn,
                                 std::vector<EventPtr> events);

  // Replication thread only. Between BeginBatch and EndBatch, appends and RV
  // advances wake nobody, and the events appended are not yet readable
  // (Read, ReadForWatch); EndBatch makes them readable and wakes every
  // waiter they would have. The replication thread batches what one read
  // from the socket delivered, so a burst of small transactions wakes each
  // watcher once, not once each; and a watcher that is awake anyway (a
  // write just ended) takes the batch whole too, not a piece of it.
  // EndBatch returns how many watches (AddWatcher) the batch concerned:
  // those of the resources it appended to, every one after a barrier.
  void BeginBatch();
  size_t EndBatch();

  // Replication thread only. Records that a transaction at `commit_lsn` made
  // changes the log cannot represent as events (TRUNCATE, or a transaction
  // larger than the log): drops everything, and sets floor_rv = current_rv =
  // commit_lsn so that every watcher still behind it gets 410 Expired.
  // `xid`: the full xid of the transaction that caused it (0 if none).
  void AppendBarrier(uint64_t commit_lsn, uint64_t xid = 0);

  // Replication thread only. A transaction at `commit_lsn` changed the
  // selections in `touched` (each a resource in one cluster) in a way the
  // log cannot hold: it is larger than the log. It takes one sequence number
  // that no watch reads, and raises the floors of every touched resource,
  // and of every touched (resource, cluster), to commit_lsn: a watch of one
  // of them still behind it gets 410 Expired, and a resume from below it
  // too. Watches of other resources, or of the same resource in another
  // cluster, go on. An empty `touched` is AppendBarrier.
  void AppendLoss(uint64_t commit_lsn, uint64_t xid, int64_t commit_time_us,
                  const std::vector<Selection>& touched);

  // Replication thread only. PostgreSQL's history went back: the slot was
  // recreated at `new_floor`, below current_rv (a failover to a server that
  // was behind, or another server at the same address). Drops everything as
  // a barrier does, moves floor_rv and current_rv back to new_floor, and
  // fences (new_floor, fence_hi]: an RV there may name a position of either
  // history, so from now on Seek answers kExpired for it and Handoff refuses
  // an insert LSN there. fence_hi must be at least the old current_rv.
  // The old history's xids say nothing of the new one's: what was evicted
  // is forgotten, and next_xid (read after the new slot was made, as at
  // startup) becomes SetClassifiableFromXid's.
  void ResetHistory(uint64_t new_floor, uint64_t fence_hi, uint64_t next_xid);

  // Replication thread only. The stream has passed `rv`: a transaction with
  // no events for the log (for example one on another table) committed at
  // it, or the server reported that it has decoded everything before rv+1.
  void AdvanceCurrentRv(uint64_t rv);

  // Replication thread only, before streaming: transactions whose full xid
  // is below `xid` may have committed before the log starts, so a snapshot
  // whose xmin is below it cannot be classified (Handoff -> kExpired).
  void SetClassifiableFromXid(uint64_t xid);

  enum class SeekStatus { kOk, kExpired };
  struct SeekResult {
    SeekStatus status;
    uint64_t seq;  // first event to send, when kOk
    // That event's commit LSN, readable or not (see BeginBatch); 0 if the
    // log has none after rv.
    uint64_t commit_lsn;
  };
  // Where a watch that has seen everything up to `rv` continues: the first
  // event of the first transaction with commit_lsn > rv.
  // Seek(rv) is for the whole log (rv < floor_rv() is Expired); with a
  // selection, only the selection's floor counts.
  SeekResult Seek(uint64_t rv) const;
  SeekResult Seek(uint64_t rv, const Selection& selection) const;
  // The selection's floor: the commit LSN of its newest event no longer in
  // the log, or of the last barrier, whichever is newer.
  uint64_t FloorRv(const Selection& selection) const;

  enum class ReadStatus { kOk, kExpired };
  // Appends to `out` up to `max_events` readable events (see BeginBatch)
  // starting at `seq`. kExpired if `seq` was evicted. Reading at tail_seq()
  // returns kOk with nothing added.
  ReadStatus Read(uint64_t seq, size_t max_events,
                  std::vector<EventPtr>* out) const;

  // Calls `wake` once, from the appending thread and outside the lock, as
  // soon as an event at or after `seq` is readable (tail_seq() > seq outside
  // a batch) or a barrier is appended. If that is already so,
  // `wake` is called before WaitForAppend returns. `wake` must be cheap (post
  // to a strand) and must not call back into the log synchronously.
  void WaitForAppend(uint64_t seq, std::function<void()> wake);

  // The watch sessions' index from resource to watchers: a watch of one
  // resource (group, version, resource: ResourceKey) never sends an event of
  // another, so it waits only for its own. WaitForAppendOf is WaitForAppend
  // (same rules for `wake`) but called only for an appended event of
  // `resource_key` or a barrier (or at once if an event at or after `seq`
  // is readable already).
  // Meanwhile the cursor of such a waiter stays where it was while other
  // resources' events pile up: SkipOtherResources moves it past them.
  // `owner` is the waiter's owner: entries whose owner is gone are dropped
  // now and then, so waiters of watches that ended on a resource that never
  // changes again do not accumulate.
  static std::string ResourceKey(std::string_view group,
                                 std::string_view version,
                                 std::string_view resource);
  void WaitForAppendOf(uint64_t seq, const std::string& resource_key,
                       std::weak_ptr<const void> owner,
                       std::function<void()> wake);
  // Where a watch of `selection` whose cursor is at `seq` may continue: the
  // seq of the resource's next retained event at or after `seq` (readable
  // or not), or tail_seq() if there is none; `seq` itself if the watch is
  // expired there (see ReadForWatch).
  uint64_t SkipOtherResources(uint64_t seq, const Selection& selection) const;

  // The watches of each resource, counted from when they start streaming
  // (AddWatcher) to when they end (RemoveWatcher, once per AddWatcher):
  // EndBatch reports how many watch what the batch appended to.
  void AddWatcher(const std::string& resource_key);
  void RemoveWatcher(const std::string& resource_key);

  // What a watch of `selection` with its cursor at `seq` does on each turn,
  // under one lock: appends to `out` up to `max_events` readable events of
  // the selection's resource from `seq` on, and their seqs to `seqs`.
  // kExpired if an event of the selection at or after `seq` was evicted, or
  // a barrier lies after `seq`. Other resources' events are not looked at.
  struct WatchRead {
    ReadStatus status;
    // Where the cursor goes once all of `out` is consumed: past the last
    // event read, and past other resources' events after it.
    uint64_t next_seq;
    // The resource's bytes from the first event read to the tail: what the
    // watch still has to look at.
    uint64_t backlog_bytes;
  };
  WatchRead ReadForWatch(uint64_t seq, const Selection& selection,
                         size_t max_events, std::vector<EventPtr>* out,
                         std::vector<uint64_t>* seqs) const;

  // The commit LSN of the oldest retained transaction that committed at or
  // after `since_unix_us`, or 0 if there is none. The replication stream
  // confirms no further than this, so a restart can replay it.
  uint64_t OldestCommitSince(int64_t since_unix_us) const;

  // Calls `wake` once, outside the lock, as soon as current_rv() >= rv
  // (immediately if it already is). Same rules for `wake` as WaitForAppend.
  // Returns an id for CancelWaitForRv, or 0 if `wake` was already called.
  uint64_t WaitForRv(uint64_t rv, std::function<void()> wake);
  // Forgets a waiter that has not fired (for a watch that gave up).
  void CancelWaitForRv(uint64_t id);

  // The RV a watcher whose cursor is at `seq` (after SkipOtherResources)
  // has fully seen: resuming from it continues at `seq`. At a transaction
  // boundary, the previous commit; at the tail, current_rv(), so a
  // bookmark's RV keeps moving while the watched resource is idle. Inside a
  // transaction T (a write ended mid-way), c(T)-1, the RV of T's earlier
  // events: never c(T), which would claim T's rest; a resume from it
  // re-sends T whole. 0 if `seq` was evicted.
  uint64_t ResumeRvAt(uint64_t seq) const;

  // Bytes of the events from `seq` to the tail (readable or not): a
  // watcher's unsent backlog.
  uint64_t BacklogBytes(uint64_t seq) const;

  // A PostgreSQL snapshot (pg_current_snapshot()), with 64-bit xids.
  struct Snapshot {
    uint64_t xmin = 0;
    uint64_t xmax = 0;
    std::vector<uint64_t> xip;  // sorted
    bool Visible(uint64_t xid) const;
  };
  // Parses pg_current_snapshot()'s text form "xmin:xmax:xip,...".
  static bool ParseSnapshot(std::string_view text, Snapshot* out);
  enum class HandoffStatus {
    kExact,    // rv: the list is exactly the transactions up to rv
    kRetry,    // commit order and visibility disagree near the snapshot
    kExpired,  // the log no longer reaches back to the snapshot
  };
  struct HandoffResult {
    HandoffStatus status;
    uint64_t rv;
  };
  // The position from which a watch continues a list read in `snapshot`,
  // taken before `insert_lsn` (pg_current_wal_insert_lsn() after the
  // snapshot). Precondition: no commit record starts between current_rv()
  // and insert_lsn, i.e. the stream has passed the last record boundary
  // before insert_lsn (StateService waits for that). The result is never
  // above current_rv(). See DESIGN.md "exact or retry".
  HandoffResult Handoff(const Snapshot& snapshot, uint64_t insert_lsn) const;

  uint64_t first_seq() const;
  uint64_t tail_seq() const;   // seq the next appended event will get
  uint64_t current_rv() const; // commit LSN of the last transaction seen
  uint64_t floor_rv() const;
  // Whether `rv` lies in a fence left by ResetHistory.
  bool Fenced(uint64_t rv) const;

  struct Stats {
    size_t events;
    size_t bytes;
    uint64_t oldest_rv;  // rv of the oldest retained event, or floor_rv
    uint64_t evicted_transactions;
    uint64_t barriers;
    size_t watchers;  // AddWatcher's, less RemoveWatcher's
  };
  Stats GetStats() const;

 private:
  void EvictToFitLocked(size_t incoming_bytes);
  // A barrier's or a history reset's common part: drops every event, moves
  // every cursor (one at the tail too) behind the log, counts the barrier.
  // Returns the highest xid of the transactions dropped.
  uint64_t DropAllLocked();
  // The bytes an event adds to the log as it is appended, or removes as it
  // leaves: its own, and its FilterFields' as the first or the last retained
  // event to refer to them.
  size_t ChargeLocked(const Event& e);
  size_t DischargeLocked(const Event& e);
  struct KeyIndex;
  // The resource's index, or null if it never had an event.
  const KeyIndex* FindKeyLocked(const std::string& resource_key) const;
  // Whether a watch of `selection` at `seq` missed an event that is gone.
  bool ExpiredLocked(uint64_t seq, const Selection& selection) const;
  uint64_t FloorRvLocked(const Selection& selection) const;
  // The seq of the resource's first retained event at or after `seq` (its
  // position in the index in *pos), or tail if none.
  uint64_t NextOfKeyLocked(const KeyIndex* index, uint64_t seq,
                           size_t* pos) const;
  // Notes that the event at `seq` is gone from the log (evicted).
  void ForgetLocked(const Event& event, uint64_t seq);
  // Raises the floors of `selection`'s resource and pair: an event of it at
  // `seq`, committed at `commit_lsn`, is gone.
  void LoseLocked(const std::string& resource_key, std::string_view cluster,
                  uint64_t seq, uint64_t commit_lsn);
  static void AppendPairKey(std::string_view resource_key,
                            std::string_view cluster, std::string* out);
  ReadStatus ReadLocked(uint64_t seq, size_t max_events,
                        std::vector<EventPtr>* out) const;
  uint64_t BacklogBytesLocked(uint64_t seq) const;
  struct KeyedWaiter {
    std::weak_ptr<const void> owner;
    std::function<void()> wake;
  };
  // Notes the resource of the event appended at `seq` (the index of
  // WaitForAppendOf and SkipOtherResources).
  void IndexAppendLocked(const Event& event, uint64_t seq);
  // Moves out the waiters whose owner is gone, to be destroyed unlocked.
  void DropGoneKeyedWaitersLocked(std::vector<KeyedWaiter>* dropped);
  // Also sets *watchers (if given) to the watches of the appended keys.
  std::vector<std::function<void()>> TakeWaitersLocked(
      size_t* watchers = nullptr);
  void TakeRvWaitersLocked(std::vector<std::function<void()>>* wake);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::deque<EventPtr> events_;       // GUARDED_BY(mu_)
  uint64_t first_seq_ = 0;            // GUARDED_BY(mu_)
  size_t bytes_ = 0;                  // GUARDED_BY(mu_)
  uint64_t floor_rv_;                 // GUARDED_BY(mu_)
  uint64_t current_rv_;               // GUARDED_BY(mu_)
  uint64_t evicted_transactions_ = 0; // GUARDED_BY(mu_)
  uint64_t barriers_ = 0;             // GUARDED_BY(mu_)
  bool batching_ = false;             // GUARDED_BY(mu_)
  // Events below it are readable; the batch's above it are not yet. At
  // most the tail; below first_seq_ after a barrier, or an eviction, in a
  // batch.
  uint64_t readable_end_ = 0;         // GUARDED_BY(mu_)
  std::vector<std::pair<uint64_t, std::function<void()>>> waiters_;  // GUARDED_BY(mu_)
  // By resource key; woken by TakeWaitersLocked for the keys in
  // appended_keys_, all of them after a barrier.
  std::unordered_map<std::string, std::vector<KeyedWaiter>>
      keyed_waiters_;                             // GUARDED_BY(mu_)
  size_t keyed_waiter_count_ = 0;                 // GUARDED_BY(mu_)
  size_t keyed_waiters_after_drop_ = 0;           // GUARDED_BY(mu_)
  std::vector<std::string> appended_keys_;        // GUARDED_BY(mu_)
  // TakeWaitersLocked's scratch, kept to spare an allocation per commit.
  std::vector<std::vector<KeyedWaiter>*> wake_lists_;  // GUARDED_BY(mu_)
  bool wake_all_keyed_ = false;                   // GUARDED_BY(mu_)
  // AddWatcher's counts, by resource key, and their sum.
  std::unordered_map<std::string, size_t> watchers_of_;  // GUARDED_BY(mu_)
  size_t watchers_ = 0;                                   // GUARDED_BY(mu_)
  // What the log knows of one resource (or, in pairs_, of one resource in
  // one cluster: only lost_end_seq and floor_rv).
  struct KeyIndex {
    // Its retained events, oldest first, and the resource's bytes appended
    // before each (so a backlog is a subtraction).
    std::deque<uint64_t> seqs;
    std::deque<uint64_t> bytes_before;
    uint64_t appended_bytes = 0;
    // One past the seq of its newest event that is gone, and that event's
    // commit LSN: a cursor below lost_end_seq, or an rv below floor_rv,
    // missed it.
    uint64_t lost_end_seq = 0;
    uint64_t floor_rv = 0;
  };
  std::unordered_map<std::string, KeyIndex> keys_;   // GUARDED_BY(mu_)
  std::unordered_map<std::string, KeyIndex> pairs_;  // GUARDED_BY(mu_)
  // One past the seq of the last barrier, and its floor (at least the
  // floor the log started with): every selection's floor is at least this.
  uint64_t barrier_end_seq_ = 0;                           // GUARDED_BY(mu_)
  uint64_t barrier_floor_rv_ = 0;                          // GUARDED_BY(mu_)
  std::string key_scratch_;                                // GUARDED_BY(mu_)
  mutable std::string pair_scratch_;                       // GUARDED_BY(mu_)
  struct RvWaiter {
    uint64_t id;
    std::function<void()> wake;
  };
  std::multimap<uint64_t, RvWaiter> rv_waiters_;  // GUARDED_BY(mu_)
  uint64_t next_waiter_id_ = 1;                   // GUARDED_BY(mu_)
  // appended_bytes_ counts every byte ever appended; offsets_[i] is the count
  // before events_[i], so a backlog is a subtraction.
  uint64_t appended_bytes_ = 0;   // GUARDED_BY(mu_)
  std::deque<uint64_t> offsets_;  // GUARDED_BY(mu_)
  // Highest xid not retained (evicted, or dropped by a barrier), and the
  // lowest xid known to commit after the log starts.
  uint64_t max_evicted_xid_ = 0;        // GUARDED_BY(mu_)
  uint64_t classifiable_from_xid_ = 0;  // GUARDED_BY(mu_)
  // RVs in (fence_lo_, fence_hi_] are ambiguous (ResetHistory); none if
  // fence_hi_ is 0. Several resets widen one fence.
  uint64_t fence_lo_ = 0;  // GUARDED_BY(mu_)
  uint64_t fence_hi_ = 0;  // GUARDED_BY(mu_)
  bool FencedLocked(uint64_t rv) const {
    return rv > fence_lo_ && rv <= fence_hi_;
  }
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_EVENT_LOG_H_
