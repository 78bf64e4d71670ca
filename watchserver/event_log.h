// EventLog is the bounded, in-memory, append-only log of watch events. It is
// the only queue between the replication thread and the watch sessions: each
// session keeps its own cursor (a sequence number) and pulls from the log.
//
// Contract:
//  * One writer (the replication thread) calls AppendTransaction,
//    AppendBarrier and AdvanceCurrentRv. Any thread may call the rest.
//  * Events are appended a whole transaction at a time, and evicted a whole
//    transaction at a time, oldest first, to keep MemoryBytes() <= max_bytes.
//  * floor_rv(): every transaction that committed after floor_rv is in the
//    log. A watch may resume from any rv >= floor_rv; an older rv is Expired.
//  * Sequence numbers are dense and never reused: the event at seq s stays
//    readable until it is evicted; a cursor below first_seq() is Expired.
//
// Thread safety: all methods are safe to call concurrently; one mutex guards
// the state, and wake-up callbacks run outside it.
#ifndef WALWATCH_WATCHSERVER_EVENT_LOG_H_
#define WALWATCH_WATCHSERVER_EVENT_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "watchserver/event.h"

namespace walwatch {

class EventLog {
 public:
  // floor_rv: the position the stream starts after (see class comment).
  EventLog(size_t max_bytes, uint64_t floor_rv);

  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  enum class AppendResult {
    kAppended,
    // The transaction alone is larger than max_bytes. It was not retained:
    // the log was emptied and floor_rv moved to its commit, so every watcher
    // still behind it ends with 410 Expired and must relist.
    kTooLarge,
  };

  // Replication thread only. `events` must be non-empty, all of one
  // transaction with commit LSN `commit_lsn` > current_rv(), in order.
  AppendResult AppendTransaction(uint64_t commit_lsn,
                                 std::vector<EventPtr> events);

  // Replication thread only. Records that a transaction at `commit_lsn` made
  // changes the log cannot represent as events (TRUNCATE, or a transaction
  // larger than the log): drops everything, and sets floor_rv = current_rv =
  // commit_lsn so that every watcher still behind it gets 410 Expired.
  void AppendBarrier(uint64_t commit_lsn);

  // Replication thread only. A transaction with no events for the log (for
  // example one on another table) committed at `commit_lsn`.
  void AdvanceCurrentRv(uint64_t commit_lsn);

  enum class SeekStatus { kOk, kExpired };
  struct SeekResult {
    SeekStatus status;
    uint64_t seq;  // first event to send, when kOk
  };
  // Where a watch that has seen everything up to `rv` continues: the first
  // event of the first transaction with commit_lsn > rv.
  SeekResult Seek(uint64_t rv) const;

  enum class ReadStatus { kOk, kExpired };
  // Appends to `out` up to `max_events` events starting at `seq`. kExpired if
  // `seq` was evicted. Reading at tail_seq() returns kOk with nothing added.
  ReadStatus Read(uint64_t seq, size_t max_events,
                  std::vector<EventPtr>* out) const;

  // Calls `wake` once, from the appending thread and outside the lock, as
  // soon as tail_seq() > seq or a barrier is appended. If that is already so,
  // `wake` is called before WaitForAppend returns. `wake` must be cheap (post
  // to a strand) and must not call back into the log synchronously.
  void WaitForAppend(uint64_t seq, std::function<void()> wake);

  // The commit LSN of the oldest retained transaction that committed at or
  // after `since_unix_us`, or 0 if there is none. The replication stream
  // confirms no further than this, so a restart can replay it.
  uint64_t OldestCommitSince(int64_t since_unix_us) const;

  uint64_t first_seq() const;
  uint64_t tail_seq() const;   // seq the next appended event will get
  uint64_t current_rv() const; // commit LSN of the last transaction seen
  uint64_t floor_rv() const;

  struct Stats {
    size_t events;
    size_t bytes;
    uint64_t oldest_rv;  // rv of the oldest retained event, or floor_rv
    uint64_t evicted_transactions;
    uint64_t barriers;
  };
  Stats GetStats() const;

 private:
  void EvictToFitLocked(size_t incoming_bytes);
  std::vector<std::function<void()>> TakeWaitersLocked();

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::deque<EventPtr> events_;       // GUARDED_BY(mu_)
  uint64_t first_seq_ = 0;            // GUARDED_BY(mu_)
  size_t bytes_ = 0;                  // GUARDED_BY(mu_)
  uint64_t floor_rv_;                 // GUARDED_BY(mu_)
  uint64_t current_rv_;               // GUARDED_BY(mu_)
  uint64_t evicted_transactions_ = 0; // GUARDED_BY(mu_)
  uint64_t barriers_ = 0;             // GUARDED_BY(mu_)
  std::vector<std::pair<uint64_t, std::function<void()>>> waiters_;  // GUARDED_BY(mu_)
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_EVENT_LOG_H_
