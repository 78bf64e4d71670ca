#include "watchserver/event_log.h"

#include <algorithm>
#include <cassert>

namespace walwatch {

EventLog::EventLog(size_t max_bytes, uint64_t floor_rv)
    : max_bytes_(max_bytes), floor_rv_(floor_rv), current_rv_(floor_rv) {}

EventLog::AppendResult EventLog::AppendTransaction(
    uint64_t commit_lsn, std::vector<EventPtr> events) {
  assert(!events.empty());
  size_t incoming = 0;
  for (const auto& e : events) incoming += e->MemoryBytes();
  if (incoming > max_bytes_) {
    AppendBarrier(commit_lsn);
    return AppendResult::kTooLarge;
  }
  std::vector<std::function<void()>> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    assert(commit_lsn > current_rv_);
    EvictToFitLocked(incoming);
    for (auto& e : events) events_.push_back(std::move(e));
    bytes_ += incoming;
    current_rv_ = commit_lsn;
    wake = TakeWaitersLocked();
  }
  for (auto& w : wake) w();
  return AppendResult::kAppended;
}

void EventLog::AppendBarrier(uint64_t commit_lsn) {
  std::vector<std::function<void()>> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!events_.empty()) ++evicted_transactions_;  // counted as one batch
    // The barrier takes one sequence number of its own, evicted at once, so
    // that a watcher at the tail is behind it too and gets 410 Expired.
    first_seq_ += events_.size() + 1;
    events_.clear();
    bytes_ = 0;
    floor_rv_ = std::max(floor_rv_, commit_lsn);
    current_rv_ = std::max(current_rv_, commit_lsn);
    ++barriers_;
    wake = TakeWaitersLocked();
  }
  for (auto& w : wake) w();
}

void EventLog::AdvanceCurrentRv(uint64_t commit_lsn) {
  std::lock_guard<std::mutex> lock(mu_);
  current_rv_ = std::max(current_rv_, commit_lsn);
}

void EventLog::EvictToFitLocked(size_t incoming_bytes) {
  // Evict whole transactions, oldest first. The floor moves to the commit of
  // the last transaction evicted: everything after it is still here.
  while (!events_.empty() && bytes_ + incoming_bytes > max_bytes_) {
    const EventPtr& e = events_.front();
    bool last = e->last_in_txn;
    floor_rv_ = e->commit_lsn;
    bytes_ -= e->MemoryBytes();
    events_.pop_front();
    ++first_seq_;
    if (last) ++evicted_transactions_;
    // Finish the transaction even if this made room already.
    while (!last && !events_.empty()) {
      const EventPtr& f = events_.front();
      last = f->last_in_txn;
      bytes_ -= f->MemoryBytes();
      events_.pop_front();
      ++first_seq_;
      if (last) ++evicted_transactions_;
    }
  }
}

std::vector<std::function<void()>> EventLog::TakeWaitersLocked() {
  std::vector<std::function<void()>> wake;
  wake.reserve(waiters_.size());
  for (auto& w : waiters_) wake.push_back(std::move(w.second));
  waiters_.clear();
  return wake;
}

EventLog::SeekResult EventLog::Seek(uint64_t rv) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (rv < floor_rv_) return {SeekStatus::kExpired, 0};
  // Events are ordered by commit_lsn; the first with commit_lsn > rv starts
  // the first transaction the watcher has not seen completely.
  auto it = std::partition_point(
      events_.begin(), events_.end(),
      [rv](const EventPtr& e) { return e->commit_lsn <= rv; });
  return {SeekStatus::kOk, first_seq_ + (it - events_.begin())};
}

EventLog::ReadStatus EventLog::Read(uint64_t seq, size_t max_events,
                                    std::vector<EventPtr>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq < first_seq_) return ReadStatus::kExpired;
  uint64_t tail = first_seq_ + events_.size();
  uint64_t end = std::min<uint64_t>(tail, seq + max_events);
  for (uint64_t s = seq; s < end; ++s) {
    out->push_back(events_[s - first_seq_]);
  }
  return ReadStatus::kOk;
}

void EventLog::WaitForAppend(uint64_t seq, std::function<void()> wake) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq >= first_seq_ + events_.size() && seq >= first_seq_) {
      waiters_.emplace_back(seq, std::move(wake));
      return;
    }
  }
  wake();
}

uint64_t EventLog::OldestCommitSince(int64_t since_unix_us) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Commit times follow commit order closely but not strictly; a search by
  // time is good enough for a retention window.
  auto it = std::partition_point(
      events_.begin(), events_.end(), [since_unix_us](const EventPtr& e) {
        return e->commit_time_us < since_unix_us;
      });
  return it == events_.end() ? 0 : (*it)->commit_lsn;
}

uint64_t EventLog::first_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_seq_;
}

uint64_t EventLog::tail_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_seq_ + events_.size();
}

uint64_t EventLog::current_rv() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_rv_;
}

uint64_t EventLog::floor_rv() const {
  std::lock_guard<std::mutex> lock(mu_);
  return floor_rv_;
}

EventLog::Stats EventLog::GetStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {events_.size(), bytes_,
          events_.empty() ? floor_rv_ : events_.front()->rv,
          evicted_transactions_, barriers_};
}

}  // namespace walwatch
