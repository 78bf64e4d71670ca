#include "cdc/state_workers.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "cdc/base/logging.h"
#include "cdc/base/stop_signal.h"
#include "cdc/event_builder.h"
#include "cdc/model/event_sink.h"

namespace walwatch {

StateWorkerPool::StateWorkerPool(int workers, MakeWorker make_worker)
    : share_(std::max(1, workers / 2)),
      make_worker_(std::move(make_worker)),
      stop_signal_(std::make_unique<StopSignal>()) {
  for (int i = 0; i < std::max(1, workers); ++i) {
    threads_.emplace_back([this] { WorkerLoop(/*rv_only=*/false); });
  }
  threads_.emplace_back([this] { WorkerLoop(/*rv_only=*/true); });
}

StateWorkerPool::~StateWorkerPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  stop_signal_->Raise();
  cv_.SignalAll();
  for (auto& t : threads_) t.join();
}

void StateWorkerPool::PostRv(Job job) {
  {
    MutexLock lock(&mu_);
    rv_jobs_.push_back(std::move(job));
  }
  // Every waiter: the one woken must be able to take this lane's job.
  cv_.SignalAll();
}

size_t StateWorkerPool::queued_states() {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& entry : clients_) {
    for (const PendingState& p : entry.second.queue) {
      n += !p.stream->cancelled();
    }
  }
  return n;
}

StateWorkerPool::Clients::iterator StateWorkerPool::NextStateClientLocked() {
  auto it = clients_.upper_bound(last_client_);
  for (size_t n = clients_.size(); n > 0; --n) {
    if (it == clients_.end()) it = clients_.begin();
    std::deque<PendingState>& queue = it->second.queue;
    while (!queue.empty() && queue.front().stream->cancelled()) {
      queue.pop_front();
    }
    if (queue.empty() && it->second.running == 0) {
      it = clients_.erase(it);  // nothing left of this client
      continue;
    }
    if (!queue.empty() && it->second.running < share_) return it;
    ++it;
  }
  return clients_.end();
}

void StateWorkerPool::WorkerLoop(bool rv_only) {
  std::unique_ptr<StateWorker> worker = make_worker_(stop_signal_.get());
  for (;;) {
    Job job;
    std::optional<PendingState> state;
    {
      MutexLock lock(&mu_);
      Clients::iterator next = clients_.end();
      cv_.Wait(&lock, [&]() REQUIRES(mu_) {
        if (stopping_ || !rv_jobs_.empty()) return true;
        if (rv_only) return false;
        next = NextStateClientLocked();
        return next != clients_.end();
      });
      if (stopping_) return;
      if (!rv_jobs_.empty()) {
        job = std::move(rv_jobs_.front());
        rv_jobs_.pop_front();
      } else {
        state = std::move(next->second.queue.front());
        next->second.queue.pop_front();
        ++next->second.running;
        last_client_ = next->first;
      }
    }
    if (!state) {
      job(*worker);
      continue;
    }
    worker->ReadState(state->query, state->stream.get());
    {
      MutexLock lock(&mu_);
      auto it = clients_.find(state->query.client);
      if (--it->second.running == 0 && it->second.queue.empty()) {
        clients_.erase(it);
      }
    }
    // The client's share has room again: a worker waiting may take its
    // next state.
    cv_.SignalAll();
  }
}

void StateWorkerPool::ReadState(const StateQuery& query,
                                std::shared_ptr<InitialStateStream> stream) {
  {
    MutexLock lock(&mu_);
    clients_[query.client].queue.push_back({query, std::move(stream)});
  }
  cv_.SignalAll();
}

void StateWorkerPool::HandoffRv(const HandoffPosition& at, RvCallback done,
                                Wanted wanted) {
  PostRv([at, done, wanted](StateWorker& w) {
    if (wanted()) w.HandoffRv(at, done, wanted);
  });
}

void StateWorkerPool::FreshRv(RvCallback done, Wanted wanted) {
  PostRv([done, wanted](StateWorker& w) {
    if (wanted()) w.FreshRv(done, wanted);
  });
}

bool WaitForCurrentRv(EventSink* log, uint64_t rv, Clock::duration timeout,
                      const StopSignal& stop, const StateSource::Wanted& wanted,
                      const std::function<void()>& poke) {
  struct Signal {
    Mutex mu;
    CondVar cv;
    bool done GUARDED_BY(mu) = false;
  };
  auto signal = std::make_shared<Signal>();
  uint64_t id = log->WaitForRv(rv, [signal] {
    MutexLock lock(&signal->mu);
    signal->done = true;
    signal->cv.SignalAll();
  });
  const auto deadline = Clock::now() + timeout;
  MutexLock lock(&signal->mu);
  while (!signal->done) {
    if (stop.raised() || !wanted()) {
      lock.Unlock();
      log->CancelWaitForRv(id);
      return false;
    }
    if (poke) {
      lock.Unlock();
      poke();
      lock.Lock();
      if (signal->done) break;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      lock.Unlock();
      log->CancelWaitForRv(id);
      return false;
    }
    signal->cv.WaitFor(
        &lock, std::min<Clock::duration>(std::chrono::milliseconds(100),
                                        deadline - now));
  }
  return true;
}

std::string StateSelectSql(
    const TableMapping& m, const std::string& qualified_table,
    const StateQuery& q, const char* object_cast,
    const std::function<std::string(const std::string&)>& ident,
    const std::function<std::string(const std::string&)>& value) {
  std::string sql = "SELECT ";
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    if (i) sql += ", ";
    sql += ident(m.columns[i]);
    if (static_cast<MappedField>(i) == MappedField::kObject) {
      sql += object_cast;
    }
  }
  sql += " FROM " + qualified_table;
  const char* join = " WHERE ";
  auto where = [&](MappedField f, const std::string& v) {
    sql += join + ident(m.column(f)) + " = " + value(v);
    join = " AND ";
  };
  where(MappedField::kGroup, q.group);
  where(MappedField::kVersion, q.version);
  where(MappedField::kResource, q.resource);
  if (!q.cluster.empty()) where(MappedField::kCluster, q.cluster);
  if (!q.ns.empty()) where(MappedField::kNamespace, q.ns);
  return sql;
}

void SetStateColumn(ColumnValue* value, const char* text, size_t length) {
  value->state = ColumnValue::State::kValue;
  value->text.reserve(length + 64);  // simdjson's padding
  value->text.assign(text, length);
}

bool PushStateRows(EventBuilder* builder, const Transaction& rows, uint64_t rv,
                   InitialStateStream* stream) {
  EventBuilder::Result built;
  builder->BuildAt(rows, rv, &built);
  if (!built.errors.empty()) {
    // A state without that row would silently diverge the watcher from the
    // table: fail it, as the stream turns such a transaction into a
    // barrier. The client sees a 500 Status and retries its list.
    for (const std::string& e : built.errors) {
      LogError("a row of the state could not become an event", {{"error", e}});
    }
    stream->Fail({500, "InternalError",
                  "a row of the table could not become a watch event (" +
                      built.errors.front().substr(0, 200) +
                      "); the initial state would miss it"});
    return false;
  }
  if (built.events.empty()) return true;
  return stream->Push(std::move(built.events));
}

}  // namespace walwatch
