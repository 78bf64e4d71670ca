// EventLog is the bounded, in-memory, append-only log of watch events. It is
// the only queue between the replication thread and the watch sessions: each
// session keeps its own cursor (a sequence number) and pulls from the log.
//
// It is the EventSink (cdc/model/event_sink.h) that the replication stream
// writes into and the state service asks: cdc/ sees only that interface.
// main owns the one log, and keeps it alive until the replication stream,
// the state service and the HTTP server have stopped.
//
// Contract:
//  * One writer (the replication thread) calls the sink's writing methods
//    (AppendTransaction, AppendBarrier, AppendLoss, ResetHistory,
//    AdvanceCurrentRv, BeginBatch/EndBatch). Any thread may call the rest.
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
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cdc/base/mutex.h"
#include "cdc/model/event.h"
#include "cdc/model/event_sink.h"

namespace walwatch {

class EventLog final : public EventSink {
 public:
  // floor_rv: the position the stream starts after (see class comment);
  // ceiling_rv: the highest RV of its history (EventSink::ceiling_rv).
  EventLog(size_t max_bytes, uint64_t floor_rv,
           uint64_t ceiling_rv = kNoRvCeiling);

  ~EventLog() override;
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // EventSink (cdc/model/event_sink.h, which says what each does): the
  // replication stream's and the state service's side. Here "readable"
  // means Read and ReadForWatch see the events, EndBatch counts the watches
  // of AddWatcher, and a transaction is too large (kTooLarge, AppendLoss)
  // when its events exceed max_bytes.
  AppendResult AppendTransaction(uint64_t commit_lsn,
                                 std::vector<EventPtr> events) override;
  void BeginBatch() override;
  size_t EndBatch() override;
  using EventSink::AppendBarrier;
  void AppendBarrier(uint64_t commit_lsn, uint64_t xid) override;
  void AppendLoss(uint64_t commit_lsn, uint64_t xid, int64_t commit_time_us,
                  const std::vector<Selection>& touched) override;
  void ResetHistory(uint64_t new_floor, uint64_t fence_hi,
                    uint64_t ceiling_rv) override;
  void SetRestartFloor(uint64_t rv) override;
  void AdvanceCurrentRv(uint64_t rv) override;
  uint64_t current_rv() const override;
  uint64_t ceiling_rv() const override;
  uint64_t OldestCommitSince(int64_t since_unix_us) const override;
  SeekResult Seek(uint64_t rv) const override;
  HeldCommits CommitsFrom(uint64_t from_xid, uint64_t before) const override;
  uint64_t WaitForRv(uint64_t rv, std::function<void()> wake) override;
  void CancelWaitForRv(uint64_t id) override;

  // The watch sessions' side.

  // Seek for a watch of `selection`: only the selection's floor counts.
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

  uint64_t first_seq() const;
  uint64_t tail_seq() const;   // seq the next appended event will get
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
  void EvictToFitLocked(size_t incoming_bytes) REQUIRES(mu_);
  // A barrier's or a history reset's common part: drops every event, moves
  // every cursor (one at the tail too) behind the log, counts the barrier.
  // Returns the highest xid of the transactions dropped.
  uint64_t DropAllLocked() REQUIRES(mu_);
  // The bytes an event adds to the log as it is appended, or removes as it
  // leaves: its own, and its FilterFields' as the first or the last retained
  // event to refer to them.
  size_t ChargeLocked(const Event& e) REQUIRES(mu_);
  size_t DischargeLocked(const Event& e) REQUIRES(mu_);
  struct KeyIndex;
  // The resource's index, or null if it never had an event.
  const KeyIndex* FindKeyLocked(const std::string& resource_key) const
      REQUIRES(mu_);
  // The index that records what `selection` lost (lost_end_seq, floor_rv):
  // its resource's, or for one cluster the pair's; null if none.
  const KeyIndex* LossesOfLocked(const Selection& selection) const
      REQUIRES(mu_);
  // Whether a watch of `selection` at `seq` missed an event that is gone.
  bool ExpiredLocked(uint64_t seq, const Selection& selection) const
      REQUIRES(mu_);
  uint64_t FloorRvLocked(const Selection& selection) const REQUIRES(mu_);
  // The seq of the resource's first retained event at or after `seq` (its
  // position in the index in *pos), or tail if none.
  uint64_t NextOfKeyLocked(const KeyIndex* index, uint64_t seq,
                           size_t* pos) const REQUIRES(mu_);
  // Notes that the event at `seq` is gone from the log (evicted).
  void ForgetLocked(const Event& event, uint64_t seq) REQUIRES(mu_);
  // Raises the floors of `selection`'s resource and pair: an event of it at
  // `seq`, committed at `commit_lsn`, is gone.
  void LoseLocked(const std::string& resource_key, std::string_view cluster,
                  uint64_t seq, uint64_t commit_lsn) REQUIRES(mu_);
  // *out = ResourceKey of `event`'s resource, built in *out's buffer: the
  // appending side reuses one for every event, which allocates only when a
  // longer key than any before comes.
  static void AssignResourceKey(const Event& event, std::string* out);
  static void AppendPairKey(std::string_view resource_key,
                            std::string_view cluster, std::string* out);
  ReadStatus ReadLocked(uint64_t seq, size_t max_events,
                        std::vector<EventPtr>* out) const REQUIRES(mu_);
  uint64_t BacklogBytesLocked(uint64_t seq) const REQUIRES(mu_);
  struct KeyedWaiter {
    std::weak_ptr<const void> owner;
    std::function<void()> wake;
  };
  // Notes the resource of the event appended at `seq` (the index of
  // WaitForAppendOf and SkipOtherResources).
  void IndexAppendLocked(const Event& event, uint64_t seq) REQUIRES(mu_);
  // Moves out the waiters whose owner is gone, to be destroyed unlocked.
  void DropGoneKeyedWaitersLocked(std::vector<KeyedWaiter>* dropped)
      REQUIRES(mu_);
  // Also sets *watchers (if given) to the watches of the appended keys.
  std::vector<std::function<void()>> TakeWaitersLocked(
      size_t* watchers = nullptr) REQUIRES(mu_);
  void TakeRvWaitersLocked(std::vector<std::function<void()>>* wake)
      REQUIRES(mu_);

  const size_t max_bytes_;
  mutable Mutex mu_;
  std::deque<EventPtr> events_ GUARDED_BY(mu_);
  uint64_t first_seq_ GUARDED_BY(mu_) = 0;
  size_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t floor_rv_ GUARDED_BY(mu_);
  uint64_t current_rv_ GUARDED_BY(mu_);
  uint64_t evicted_transactions_ GUARDED_BY(mu_) = 0;
  uint64_t barriers_ GUARDED_BY(mu_) = 0;
  bool batching_ GUARDED_BY(mu_) = false;
  // Events below it are readable; the batch's above it are not yet. At
  // most the tail; below first_seq_ after a barrier, or an eviction, in a
  // batch.
  uint64_t readable_end_ GUARDED_BY(mu_) = 0;
  std::vector<std::pair<uint64_t, std::function<void()>>> waiters_
      GUARDED_BY(mu_);
  // By resource key; woken by TakeWaitersLocked for the keys in
  // appended_keys_, all of them after a barrier.
  std::unordered_map<std::string, std::vector<KeyedWaiter>> keyed_waiters_
      GUARDED_BY(mu_);
  size_t keyed_waiter_count_ GUARDED_BY(mu_) = 0;
  size_t keyed_waiters_after_drop_ GUARDED_BY(mu_) = 0;
  std::vector<std::string> appended_keys_ GUARDED_BY(mu_);
  // TakeWaitersLocked's scratch, kept to spare an allocation per commit.
  std::vector<std::vector<KeyedWaiter>*> wake_lists_ GUARDED_BY(mu_);
  bool wake_all_keyed_ GUARDED_BY(mu_) = false;
  // AddWatcher's counts, by resource key, and their sum.
  std::unordered_map<std::string, size_t> watchers_of_ GUARDED_BY(mu_);
  size_t watchers_ GUARDED_BY(mu_) = 0;
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
  std::unordered_map<std::string, KeyIndex> keys_ GUARDED_BY(mu_);
  std::unordered_map<std::string, KeyIndex> pairs_ GUARDED_BY(mu_);
  // One past the seq of the last barrier, and its floor (at least the
  // floor the log started with): every selection's floor is at least this.
  uint64_t barrier_end_seq_ GUARDED_BY(mu_) = 0;
  uint64_t barrier_floor_rv_ GUARDED_BY(mu_) = 0;
  // SetRestartFloor's; 0 until the first, the new floor after ResetHistory.
  uint64_t restart_floor_rv_ GUARDED_BY(mu_) = 0;
  std::string key_scratch_ GUARDED_BY(mu_);
  mutable std::string pair_scratch_ GUARDED_BY(mu_);
  struct RvWaiter {
    uint64_t id;
    std::function<void()> wake;
  };
  std::multimap<uint64_t, RvWaiter> rv_waiters_ GUARDED_BY(mu_);
  uint64_t next_waiter_id_ GUARDED_BY(mu_) = 1;
  // appended_bytes_ counts every byte ever appended; offsets_[i] is the count
  // before events_[i], so a backlog is a subtraction.
  uint64_t appended_bytes_ GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> offsets_ GUARDED_BY(mu_);
  // Highest xid not retained (evicted, or dropped by a barrier).
  uint64_t max_evicted_xid_ GUARDED_BY(mu_) = 0;
  // RVs in (fence_lo_, fence_hi_] are ambiguous (ResetHistory); none if
  // fence_hi_ is 0. Several resets of one range widen one fence.
  uint64_t fence_lo_ GUARDED_BY(mu_) = 0;
  uint64_t fence_hi_ GUARDED_BY(mu_) = 0;
  // The highest RV of the stream's history.
  uint64_t ceiling_rv_ GUARDED_BY(mu_);
  bool FencedLocked(uint64_t rv) const REQUIRES(mu_) {
    return rv > fence_lo_ && rv <= fence_hi_;
  }
  // Whether no watch may start at `rv`: below `floor`, fenced, or another
  // history's.
  bool RefusedLocked(uint64_t rv, uint64_t floor) const REQUIRES(mu_) {
    return rv < floor || FencedLocked(rv) || rv > ceiling_rv_;
  }
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_EVENT_LOG_H_
