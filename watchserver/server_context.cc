#include "watchserver/server_context.h"

#include <chrono>
#include <cstdint>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"

namespace walwatch {

bool SessionRegistry::Add(const std::shared_ptr<Session>& session) {
  MutexLock lock(&mu_);
  if (stopping_) return false;
  sessions_[session.get()] = session;
  return true;
}

bool SessionRegistry::Replace(const Session* previous,
                              const std::shared_ptr<Session>& next) {
  MutexLock lock(&mu_);
  sessions_.erase(previous);
  sessions_[next.get()] = next;
  return !stopping_;
}

void SessionRegistry::Remove(const Session* session) {
  MutexLock lock(&mu_);
  sessions_.erase(session);
}

std::vector<std::shared_ptr<Session>> SessionRegistry::BeginStop() {
  MutexLock lock(&mu_);
  stopping_ = true;
  std::vector<std::shared_ptr<Session>> live;
  for (auto& entry : sessions_) {
    if (std::shared_ptr<Session> session = entry.second.lock()) {
      live.push_back(std::move(session));
    }
  }
  return live;
}

size_t SessionRegistry::size() const {
  MutexLock lock(&mu_);
  return sessions_.size();
}

void LogBufferBudgetRefusal(const char* what, size_t limit) {
  static std::atomic<int64_t> last_logged{INT64_MIN};
  const int64_t now = Clock::now().time_since_epoch().count();
  const int64_t interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(10))
          .count();
  int64_t last = last_logged.load();
  if (last != INT64_MIN && now - last < interval) return;
  if (!last_logged.compare_exchange_strong(last, now)) return;
  LogWarn(what, {{"limit", static_cast<uint64_t>(limit)}});
}

}  // namespace walwatch
