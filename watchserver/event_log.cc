#include "watchserver/event_log.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace walwatch {

EventLog::EventLog(size_t max_bytes, uint64_t floor_rv, uint64_t ceiling_rv)
    : max_bytes_(max_bytes),
      floor_rv_(floor_rv),
      current_rv_(floor_rv),
      barrier_floor_rv_(floor_rv),
      ceiling_rv_(ceiling_rv) {}

EventLog::~EventLog() {
  MutexLock lock(&mu_);
  for (const EventPtr& e : events_) DischargeLocked(*e);
}

size_t EventLog::ChargeLocked(const Event& e) {
  size_t bytes = e.MemoryBytes();
  for (const FilterFields* f : {e.fields(), e.prev_fields()}) {
    if (f && f->log_refs_++ == 0) bytes += f->MemoryBytes();
  }
  return bytes;
}

size_t EventLog::DischargeLocked(const Event& e) {
  size_t bytes = e.MemoryBytes();
  for (const FilterFields* f : {e.fields(), e.prev_fields()}) {
    if (f && --f->log_refs_ == 0) bytes += f->MemoryBytes();
  }
  return bytes;
}

EventLog::AppendResult EventLog::AppendTransaction(
    uint64_t commit_lsn, std::vector<EventPtr> events) {
  assert(!events.empty());
  // At most this: some of the filter fields may be charged already.
  size_t incoming = 0;
  std::vector<const FilterFields*> fields;
  for (const auto& e : events) {
    incoming += e->MemoryBytes();
    for (const FilterFields* f : {e->fields(), e->prev_fields()}) {
      if (f) fields.push_back(f);
    }
  }
  std::sort(fields.begin(), fields.end());
  fields.erase(std::unique(fields.begin(), fields.end()), fields.end());
  for (const FilterFields* f : fields) incoming += f->MemoryBytes();
  if (incoming > max_bytes_) {
    std::vector<Selection> touched;
    for (const EventPtr& e : events) {
      touched.push_back({ResourceKey(e->group(), e->version(), e->resource()),
                         std::string(e->cluster())});
      if (const FilterFields* prev = e->prev_fields()) {
        touched.push_back(
            {ResourceKey(prev->group(), prev->version(), prev->resource()),
             std::string(prev->cluster())});
      }
    }
    AppendLoss(commit_lsn, events.front()->xid, events.back()->commit_time_us,
               touched);
    return AppendResult::kTooLarge;
  }
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    // Checked in release builds too: appended, such a transaction would
    // break the order every Seek and resume relies on.
    if (commit_lsn <= current_rv_) return AppendResult::kOutOfOrder;
    EvictToFitLocked(incoming);
    for (auto& e : events) {
      IndexAppendLocked(*e, first_seq_ + events_.size());
      offsets_.push_back(appended_bytes_);
      appended_bytes_ += e->MemoryBytes();
      bytes_ += ChargeLocked(*e);
      events_.push_back(std::move(e));
    }
    current_rv_ = commit_lsn;
    wake = TakeWaitersLocked();
    TakeRvWaitersLocked(&wake);
  }
  for (auto& w : wake) w();
  return AppendResult::kAppended;
}

uint64_t EventLog::DropAllLocked() {
  uint64_t max_xid = 0;
  for (const EventPtr& e : events_) {
    DischargeLocked(*e);
    if (!e->last_in_txn) continue;
    ++evicted_transactions_;
    max_xid = std::max(max_xid, e->xid);
  }
  // The drop takes one sequence number of its own, evicted at once, so that
  // a watcher at the tail is behind it too and gets 410 Expired.
  first_seq_ += events_.size() + 1;
  barrier_end_seq_ = first_seq_;
  // Every cursor is behind the barrier now; what each resource lost before
  // it no longer matters.
  for (auto& [key, index] : keys_) {
    index.seqs.clear();
    index.bytes_before.clear();
    index.lost_end_seq = 0;
    index.floor_rv = 0;
  }
  pairs_.clear();
  wake_all_keyed_ = true;
  events_.clear();
  offsets_.clear();
  bytes_ = 0;
  ++barriers_;
  return max_xid;
}

void EventLog::AppendBarrier(uint64_t commit_lsn, uint64_t xid) {
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    max_evicted_xid_ = std::max({max_evicted_xid_, DropAllLocked(), xid});
    floor_rv_ = std::max(floor_rv_, commit_lsn);
    barrier_floor_rv_ = floor_rv_;
    current_rv_ = std::max(current_rv_, commit_lsn);
    wake = TakeWaitersLocked();
    TakeRvWaitersLocked(&wake);
  }
  for (auto& w : wake) w();
}

void EventLog::AppendLoss(uint64_t commit_lsn, uint64_t xid,
                          int64_t commit_time_us,
                          const std::vector<Selection>& touched) {
  if (touched.empty()) return AppendBarrier(commit_lsn, xid);
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    if (commit_lsn <= current_rv_) {
      // Out of order (a bug upstream): nobody can tell who missed it.
      max_evicted_xid_ = std::max({max_evicted_xid_, DropAllLocked(), xid});
      floor_rv_ = std::max(floor_rv_, current_rv_);
      barrier_floor_rv_ = floor_rv_;
    } else {
      // A placeholder: no wire, no fields, indexed under no resource, so no
      // watch reads it; it keeps the transaction's place in commit order
      // (Seek, ResumeRvAt, the handoff's classification by xid, the replay
      // window) and the sequence number a watch at the tail is behind.
      MutableEventPtr gap = Event::Make({}, {});
      gap->rv = commit_lsn;
      gap->commit_lsn = commit_lsn;
      gap->xid = xid;
      gap->commit_time_us = commit_time_us;
      gap->last_in_txn = true;
      EvictToFitLocked(gap->MemoryBytes());
      const uint64_t seq = first_seq_ + events_.size();
      offsets_.push_back(appended_bytes_);
      appended_bytes_ += gap->MemoryBytes();
      bytes_ += ChargeLocked(*gap);
      events_.push_back(std::move(gap));
      for (const Selection& t : touched) {
        LoseLocked(t.resource_key, t.cluster, seq, commit_lsn);
        if (std::find(appended_keys_.begin(), appended_keys_.end(),
                      t.resource_key) == appended_keys_.end()) {
          appended_keys_.push_back(t.resource_key);
        }
      }
      current_rv_ = commit_lsn;
    }
    wake = TakeWaitersLocked();
    TakeRvWaitersLocked(&wake);
  }
  for (auto& w : wake) w();
}

void EventLog::ResetHistory(uint64_t new_floor, uint64_t fence_hi,
                            uint64_t ceiling_rv) {
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    DropAllLocked();
    max_evicted_xid_ = 0;
    if (current_rv_ <= ceiling_rv) fence_hi = std::max(fence_hi, current_rv_);
    if (fence_hi_ != 0) {
      // What lies outside the new range is refused by its floor and
      // ceiling; kept, it would widen the fence over the new history.
      fence_lo_ = std::max(fence_lo_, new_floor);
      fence_hi_ = std::min(fence_hi_, ceiling_rv);
      if (fence_lo_ >= fence_hi_) fence_lo_ = fence_hi_ = 0;
    }
    fence_lo_ = fence_hi_ == 0 ? new_floor : std::min(fence_lo_, new_floor);
    fence_hi_ = std::max(fence_hi_, fence_hi);
    ceiling_rv_ = ceiling_rv;
    floor_rv_ = new_floor;
    barrier_floor_rv_ = new_floor;
    restart_floor_rv_ = new_floor;
    current_rv_ = new_floor;
    wake = TakeWaitersLocked();
    TakeRvWaitersLocked(&wake);
  }
  for (auto& w : wake) w();
}

bool EventLog::Fenced(uint64_t rv) const {
  MutexLock lock(&mu_);
  return FencedLocked(rv);
}

void EventLog::AdvanceCurrentRv(uint64_t rv) {
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    if (rv <= current_rv_) return;
    current_rv_ = rv;
    TakeRvWaitersLocked(&wake);
  }
  for (auto& w : wake) w();
}

void EventLog::TakeRvWaitersLocked(std::vector<std::function<void()>>* wake) {
  if (batching_) return;
  auto end = rv_waiters_.upper_bound(current_rv_);
  for (auto it = rv_waiters_.begin(); it != end; ++it) {
    wake->push_back(std::move(it->second.wake));
  }
  rv_waiters_.erase(rv_waiters_.begin(), end);
}

uint64_t EventLog::WaitForRv(uint64_t rv, std::function<void()> wake) {
  {
    MutexLock lock(&mu_);
    if (current_rv_ < rv) {
      uint64_t id = next_waiter_id_++;
      rv_waiters_.emplace(rv, RvWaiter{id, std::move(wake)});
      return id;
    }
  }
  wake();
  return 0;
}

void EventLog::CancelWaitForRv(uint64_t id) {
  std::function<void()> dropped;  // destroyed outside the lock
  MutexLock lock(&mu_);
  for (auto it = rv_waiters_.begin(); it != rv_waiters_.end(); ++it) {
    if (it->second.id == id) {
      dropped = std::move(it->second.wake);
      rv_waiters_.erase(it);
      return;
    }
  }
}

uint64_t EventLog::ResumeRvAt(uint64_t seq) const {
  MutexLock lock(&mu_);
  uint64_t tail = first_seq_ + events_.size();
  if (seq < first_seq_) return 0;
  if (seq >= tail) return current_rv_;
  const Event& next = *events_[seq - first_seq_];
  if (seq == first_seq_) {
    // Everything before the log's first event is at or below the floor;
    // the first transaction commits above it.
    return std::max(floor_rv_, next.commit_lsn - 1);
  }
  const Event& prev = *events_[seq - first_seq_ - 1];
  // At a boundary, the previous commit. Mid-transaction the watcher has
  // not seen the whole of it: the RV of its earlier events (not next.rv,
  // which is the commit itself if `next` is the transaction's last event),
  // from which a resume re-sends it.
  return prev.last_in_txn ? prev.commit_lsn : next.commit_lsn - 1;
}

uint64_t EventLog::BacklogBytes(uint64_t seq) const {
  MutexLock lock(&mu_);
  return BacklogBytesLocked(seq);
}

uint64_t EventLog::BacklogBytesLocked(uint64_t seq) const {
  if (seq < first_seq_) return appended_bytes_;  // expired: everything
  uint64_t tail = first_seq_ + events_.size();
  if (seq >= tail) return 0;
  return appended_bytes_ - offsets_[seq - first_seq_];
}

void EventLog::SetRestartFloor(uint64_t rv) {
  MutexLock lock(&mu_);
  restart_floor_rv_ = rv;
}

EventLog::HeldCommits EventLog::CommitsFrom(uint64_t from_xid,
                                            uint64_t before) const {
  MutexLock lock(&mu_);
  HeldCommits held{floor_rv_, current_rv_, max_evicted_xid_, fence_lo_,
                   fence_hi_, {}};
  held.restart_floor_rv = restart_floor_rv_;
  // A transaction's last event stands for it: all carry its commit LSN and
  // xid. A loss's placeholder is one such event too.
  bool from_here = false;
  for (const EventPtr& t : events_) {
    if (!t->last_in_txn) continue;
    if (t->commit_lsn >= before) break;
    held.last_commit_lsn = t->commit_lsn;
    from_here = from_here || t->xid >= from_xid;
    if (from_here) held.commits.push_back({t->commit_lsn, t->xid});
  }
  return held;
}

void EventLog::EvictToFitLocked(size_t incoming_bytes) {
  // Evict whole transactions, oldest first. The floor moves to the commit of
  // the last transaction evicted: everything after it is still here.
  while (!events_.empty() && bytes_ + incoming_bytes > max_bytes_) {
    const EventPtr& e = events_.front();
    bool last = e->last_in_txn;
    floor_rv_ = e->commit_lsn;
    max_evicted_xid_ = std::max(max_evicted_xid_, e->xid);
    ForgetLocked(*e, first_seq_);
    bytes_ -= DischargeLocked(*e);
    events_.pop_front();
    offsets_.pop_front();
    ++first_seq_;
    if (last) ++evicted_transactions_;
    // Finish the transaction even if this made room already.
    while (!last && !events_.empty()) {
      const EventPtr& f = events_.front();
      last = f->last_in_txn;
      ForgetLocked(*f, first_seq_);
      bytes_ -= DischargeLocked(*f);
      events_.pop_front();
      offsets_.pop_front();
      ++first_seq_;
      if (last) ++evicted_transactions_;
    }
  }
}

void EventLog::BeginBatch() {
  MutexLock lock(&mu_);
  batching_ = true;
}

size_t EventLog::EndBatch() {
  std::vector<std::function<void()>> wake;
  size_t watchers = 0;
  {
    MutexLock lock(&mu_);
    batching_ = false;
    wake = TakeWaitersLocked(&watchers);
    TakeRvWaitersLocked(&wake);
  }
  for (auto& w : wake) w();
  return watchers;
}

void EventLog::AddWatcher(const std::string& resource_key) {
  MutexLock lock(&mu_);
  ++watchers_of_[resource_key];
  ++watchers_;
}

void EventLog::RemoveWatcher(const std::string& resource_key) {
  MutexLock lock(&mu_);
  auto it = watchers_of_.find(resource_key);
  if (it == watchers_of_.end()) return;
  --watchers_;
  if (--it->second == 0) watchers_of_.erase(it);
}

std::vector<std::function<void()>> EventLog::TakeWaitersLocked(
    size_t* watchers) {
  std::vector<std::function<void()>> wake;
  if (batching_) return wake;
  // The batch's events become readable together, as their waiters wake.
  readable_end_ = first_seq_ + events_.size();
  // The lists of the keys appended to (usually one), to size `wake` exactly:
  // reserving for every keyed waiter would allocate for all watchers on
  // each commit, though most commits wake few of them.
  std::vector<std::vector<KeyedWaiter>*>& lists = wake_lists_;  // empty
  size_t count = waiters_.size();
  size_t concerned = 0;  // the watches of the appended keys
  if (wake_all_keyed_) {
    count += keyed_waiter_count_;
    concerned = watchers_;
  } else {
    for (const std::string& key : appended_keys_) {
      if (auto w = watchers_of_.find(key); w != watchers_of_.end()) {
        concerned += w->second;
      }
      auto it = keyed_waiters_.find(key);
      if (it == keyed_waiters_.end() || it->second.empty()) continue;
      lists.push_back(&it->second);
      count += it->second.size();
    }
  }
  if (watchers != nullptr) *watchers = concerned;
  wake.reserve(count);
  for (auto& w : waiters_) wake.push_back(std::move(w.second));
  waiters_.clear();
  // A key's entry stays, emptied, so that its waiters, who come back after
  // each wake, reuse its capacity (at most what the key's peak took);
  // DropGoneKeyedWaitersLocked removes empty entries.
  // The analysis does not follow into lambdas: this one runs here, under
  // the lock.
  auto take = [&](std::vector<KeyedWaiter>& keyed) REQUIRES(mu_) {
    for (KeyedWaiter& w : keyed) wake.push_back(std::move(w.wake));
    keyed_waiter_count_ -= keyed.size();
    keyed.clear();
  };
  if (wake_all_keyed_) {
    for (auto& [key, keyed] : keyed_waiters_) take(keyed);
  } else {
    for (std::vector<KeyedWaiter>* keyed : lists) take(*keyed);
    lists.clear();  // no pointer into keyed_waiters_ outlives this call
  }
  wake_all_keyed_ = false;
  appended_keys_.clear();
  return wake;
}

void EventLog::IndexAppendLocked(const Event& event, uint64_t seq) {
  AssignResourceKey(event, &key_scratch_);
  auto it = keys_.find(key_scratch_);
  if (it == keys_.end()) it = keys_.emplace(key_scratch_, KeyIndex()).first;
  KeyIndex& index = it->second;
  index.seqs.push_back(seq);
  index.bytes_before.push_back(index.appended_bytes);
  index.appended_bytes += event.MemoryBytes();
  if (std::find(appended_keys_.begin(), appended_keys_.end(), key_scratch_) ==
      appended_keys_.end()) {
    appended_keys_.push_back(key_scratch_);
  }
}

void EventLog::WaitForAppendOf(uint64_t seq, const std::string& resource_key,
                               std::weak_ptr<const void> owner,
                               std::function<void()> wake) {
  std::vector<KeyedWaiter> dropped;  // destroyed outside the lock
  {
    MutexLock lock(&mu_);
    if (seq >= readable_end_ && seq >= first_seq_) {
      keyed_waiters_[resource_key].push_back(
          KeyedWaiter{std::move(owner), std::move(wake)});
      ++keyed_waiter_count_;
      // Amortized: sweep once the count has doubled since the last sweep.
      if (keyed_waiter_count_ > 2 * keyed_waiters_after_drop_ + 64) {
        DropGoneKeyedWaitersLocked(&dropped);
      }
      return;
    }
  }
  wake();
}

void EventLog::DropGoneKeyedWaitersLocked(std::vector<KeyedWaiter>* dropped) {
  for (auto it = keyed_waiters_.begin(); it != keyed_waiters_.end();) {
    std::vector<KeyedWaiter>& keyed = it->second;
    auto gone = std::stable_partition(
        keyed.begin(), keyed.end(),
        [](const KeyedWaiter& w) { return !w.owner.expired(); });
    keyed_waiter_count_ -= static_cast<size_t>(keyed.end() - gone);
    std::move(gone, keyed.end(), std::back_inserter(*dropped));
    keyed.erase(gone, keyed.end());
    it = keyed.empty() ? keyed_waiters_.erase(it) : std::next(it);
  }
  keyed_waiters_after_drop_ = keyed_waiter_count_;
}

uint64_t EventLog::SkipOtherResources(uint64_t seq,
                                      const Selection& selection) const {
  MutexLock lock(&mu_);
  if (ExpiredLocked(seq, selection)) return seq;
  size_t pos;
  return NextOfKeyLocked(FindKeyLocked(selection.resource_key), seq, &pos);
}

void EventLog::AssignResourceKey(const Event& event, std::string* out) {
  out->clear();
  out->append(event.group())
      .append(1, '/')
      .append(event.version())
      .append(1, '/')
      .append(event.resource());
}

void EventLog::AppendPairKey(std::string_view resource_key,
                             std::string_view cluster, std::string* out) {
  out->clear();
  out->append(resource_key).append(1, '\0').append(cluster);
}

const EventLog::KeyIndex* EventLog::FindKeyLocked(
    const std::string& resource_key) const {
  auto it = keys_.find(resource_key);
  return it == keys_.end() ? nullptr : &it->second;
}

void EventLog::ForgetLocked(const Event& event, uint64_t seq) {
  // A loss's placeholder (AppendLoss) is of no resource: its floors were
  // raised when it was appended.
  if (event.fields() == nullptr && event.wire().empty()) return;
  // key_scratch_ is the appending side's; eviction runs on that thread too,
  // inside AppendTransaction, before the new events are indexed.
  AssignResourceKey(event, &key_scratch_);
  auto it = keys_.find(key_scratch_);
  if (it != keys_.end()) {
    KeyIndex& index = it->second;
    // Evictions go oldest first, as appends did: the front is this event.
    if (!index.seqs.empty() && index.seqs.front() == seq) {
      index.seqs.pop_front();
      index.bytes_before.pop_front();
    }
  }
  LoseLocked(key_scratch_, event.cluster(), seq, event.commit_lsn);
}

void EventLog::LoseLocked(const std::string& resource_key,
                          std::string_view cluster, uint64_t seq,
                          uint64_t commit_lsn) {
  AppendPairKey(resource_key, cluster, &pair_scratch_);
  for (KeyIndex* lost : {&keys_[resource_key], &pairs_[pair_scratch_]}) {
    lost->lost_end_seq = std::max(lost->lost_end_seq, seq + 1);
    lost->floor_rv = std::max(lost->floor_rv, commit_lsn);
  }
}

const EventLog::KeyIndex* EventLog::LossesOfLocked(
    const Selection& selection) const {
  if (selection.cluster.empty()) return FindKeyLocked(selection.resource_key);
  AppendPairKey(selection.resource_key, selection.cluster, &pair_scratch_);
  auto it = pairs_.find(pair_scratch_);
  return it == pairs_.end() ? nullptr : &it->second;
}

bool EventLog::ExpiredLocked(uint64_t seq, const Selection& selection) const {
  if (seq < barrier_end_seq_) return true;
  // Its own events evicted past it, or a loss (AppendLoss) after it, which
  // may lie in the retained part of the log.
  const KeyIndex* lost = LossesOfLocked(selection);
  return lost != nullptr && lost->lost_end_seq > seq;
}

uint64_t EventLog::FloorRv(const Selection& selection) const {
  MutexLock lock(&mu_);
  return FloorRvLocked(selection);
}

uint64_t EventLog::FloorRvLocked(const Selection& selection) const {
  const KeyIndex* lost = LossesOfLocked(selection);
  return std::max(barrier_floor_rv_, lost ? lost->floor_rv : 0);
}

uint64_t EventLog::NextOfKeyLocked(const KeyIndex* index, uint64_t seq,
                                   size_t* pos) const {
  const uint64_t tail = first_seq_ + events_.size();
  *pos = 0;
  if (index == nullptr) return tail;
  auto it = std::lower_bound(index->seqs.begin(), index->seqs.end(), seq);
  *pos = static_cast<size_t>(it - index->seqs.begin());
  return it == index->seqs.end() ? tail : *it;
}

EventLog::SeekResult EventLog::Seek(uint64_t rv,
                                    const Selection& selection) const {
  MutexLock lock(&mu_);
  if (RefusedLocked(rv, FloorRvLocked(selection))) {
    return {SeekStatus::kExpired, 0, 0};
  }
  // Below floor_rv_, what is gone between rv and the log's start is other
  // resources' (or other clusters'): the watch starts at the first event.
  auto it = std::partition_point(
      events_.begin(), events_.end(),
      [rv](const EventPtr& e) { return e->commit_lsn <= rv; });
  return {SeekStatus::kOk, first_seq_ + (it - events_.begin()),
          it == events_.end() ? 0 : (*it)->commit_lsn};
}

EventLog::SeekResult EventLog::Seek(uint64_t rv) const {
  MutexLock lock(&mu_);
  if (RefusedLocked(rv, floor_rv_)) return {SeekStatus::kExpired, 0, 0};
  // Events are ordered by commit_lsn; the first with commit_lsn > rv starts
  // the first transaction the watcher has not seen completely.
  auto it = std::partition_point(
      events_.begin(), events_.end(),
      [rv](const EventPtr& e) { return e->commit_lsn <= rv; });
  return {SeekStatus::kOk, first_seq_ + (it - events_.begin()),
          it == events_.end() ? 0 : (*it)->commit_lsn};
}

EventLog::ReadStatus EventLog::Read(uint64_t seq, size_t max_events,
                                    std::vector<EventPtr>* out) const {
  MutexLock lock(&mu_);
  return ReadLocked(seq, max_events, out);
}

EventLog::WatchRead EventLog::ReadForWatch(
    uint64_t seq, const Selection& selection, size_t max_events,
    std::vector<EventPtr>* out, std::vector<uint64_t>* seqs) const {
  MutexLock lock(&mu_);
  if (ExpiredLocked(seq, selection)) {
    return {ReadStatus::kExpired, seq, appended_bytes_};
  }
  const KeyIndex* index = FindKeyLocked(selection.resource_key);
  size_t pos;
  uint64_t next = NextOfKeyLocked(index, seq, &pos);
  if (index == nullptr || pos == index->seqs.size()) {
    return {ReadStatus::kOk, next, 0};
  }
  const uint64_t backlog = index->appended_bytes - index->bytes_before[pos];
  // Only readable events (see BeginBatch); the cursor stops at the first
  // that is not.
  size_t end = std::min(index->seqs.size(), pos + max_events);
  for (; pos < end; ++pos) {
    uint64_t s = index->seqs[pos];
    if (s >= readable_end_) break;
    out->push_back(events_[s - first_seq_]);
    seqs->push_back(s);
    next = s + 1;
  }
  // All of the resource's events are read: past everything else too.
  if (pos == index->seqs.size()) next = first_seq_ + events_.size();
  else next = std::max(next, index->seqs[pos]);
  return {ReadStatus::kOk, next, backlog};
}

EventLog::ReadStatus EventLog::ReadLocked(uint64_t seq, size_t max_events,
                                          std::vector<EventPtr>* out) const {
  if (seq < first_seq_) return ReadStatus::kExpired;
  // readable_end_ <= the tail: a barrier moves first_seq_ past both.
  uint64_t end = std::min<uint64_t>(readable_end_, seq + max_events);
  for (uint64_t s = seq; s < end; ++s) {
    out->push_back(events_[s - first_seq_]);
  }
  return ReadStatus::kOk;
}

void EventLog::WaitForAppend(uint64_t seq, std::function<void()> wake) {
  {
    MutexLock lock(&mu_);
    if (seq >= readable_end_ && seq >= first_seq_) {
      waiters_.emplace_back(seq, std::move(wake));
      return;
    }
  }
  wake();
}

uint64_t EventLog::OldestCommitSince(int64_t since_unix_us) const {
  MutexLock lock(&mu_);
  // Commit times follow commit order closely but not strictly; a search by
  // time is good enough for a retention window.
  auto it = std::partition_point(
      events_.begin(), events_.end(), [since_unix_us](const EventPtr& e) {
        return e->commit_time_us < since_unix_us;
      });
  return it == events_.end() ? 0 : (*it)->commit_lsn;
}

uint64_t EventLog::first_seq() const {
  MutexLock lock(&mu_);
  return first_seq_;
}

uint64_t EventLog::tail_seq() const {
  MutexLock lock(&mu_);
  return first_seq_ + events_.size();
}

uint64_t EventLog::current_rv() const {
  MutexLock lock(&mu_);
  return current_rv_;
}

uint64_t EventLog::ceiling_rv() const {
  MutexLock lock(&mu_);
  return ceiling_rv_;
}

uint64_t EventLog::floor_rv() const {
  MutexLock lock(&mu_);
  return floor_rv_;
}

EventLog::Stats EventLog::GetStats() const {
  MutexLock lock(&mu_);
  return {events_.size(), bytes_,
          events_.empty() ? floor_rv_ : events_.front()->rv,
          evicted_transactions_, barriers_, watchers_};
}

}  // namespace walwatch
