#include "cdc/model/state_source.h"

#include <algorithm>
#include <utility>

#include "cdc/base/clock.h"
#include "cdc/base/text.h"

namespace walwatch {

namespace {

std::string FormatMillis(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s"
                               : std::to_string(d.count()) + " ms";
}

// "1 MiB/s", "64 KiB/s", "1000 B/s".
std::string FormatRate(uint64_t bytes_per_second) {
  constexpr uint64_t kKi = 1024;
  if (bytes_per_second >= kKi * kKi && bytes_per_second % (kKi * kKi) == 0) {
    return std::to_string(bytes_per_second / (kKi * kKi)) + " MiB/s";
  }
  if (bytes_per_second >= kKi && bytes_per_second % kKi == 0) {
    return std::to_string(bytes_per_second / kKi) + " KiB/s";
  }
  return std::to_string(bytes_per_second) + " B/s";
}

}  // namespace

void InitialStateStream::NotifyLocked(
    std::vector<std::function<void()>>* wake) {
  if (wake_) {
    wake->push_back(std::move(wake_));
    wake_ = nullptr;
  }
}

void InitialStateStream::Ready(uint64_t rv) {
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    ready_ = true;
    rv_ = rv;
    NotifyLocked(&wake);
  }
  for (auto& w : wake) w();
}

bool InitialStateStream::Push(std::vector<EventPtr> events) {
  // An event's filter fields are kept apart from it (and may be shared):
  // counted with each event, which errs on the side of the bound.
  size_t bytes = 0;
  for (const auto& e : events) {
    bytes += e->MemoryBytes();
    if (const FilterFields* f = e->fields()) bytes += f->MemoryBytes();
    if (const FilterFields* f = e->prev_fields()) bytes += f->MemoryBytes();
  }
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    // Admit a batch whenever the queue is empty, so one batch larger than
    // the bound still passes.
    auto room = [&]() REQUIRES(mu_) {
      return cancelled_ || queue_.empty() ||
             queued_bytes_ + bytes <= max_queued_bytes_;
    };
    // The overall bound (from the stream's start) and the stall window (the
    // producer's waits since the window began), whichever ends first.
    const bool overall = timeout_.count() > 0;
    const bool stall = stall_timeout_.count() > 0;
    std::string failure;  // empty: room, or cancelled
    bool stalled = false;
    while (!room()) {
      if (!overall && !stall) {
        space_.Wait(&lock, room);
        break;
      }
      const Clock::time_point now = Clock::now();
      const Clock::time_point window_end =
          now + (stall_timeout_ - window_waited_);
      const bool window_first = stall && (!overall || window_end < deadline_);
      const bool got_room =
          space_.WaitUntil(&lock, window_first ? window_end : deadline_, room);
      if (stall) window_waited_ += Clock::now() - now;
      if (got_room) break;
      if (!window_first) {
        failure = "the initial state was not read within " +
                  FormatMillis(timeout_) +
                  " (--initial-state-timeout): the client reads too slowly; "
                  "relist";
        break;
      }
      // The producer has waited stall_timeout in this window: did the
      // consumer take enough meanwhile?
      const uint64_t need = min_rate_ *
                            static_cast<uint64_t>(stall_timeout_.count()) /
                            1000;
      if (window_taken_ > 0 && window_taken_ >= need) {
        window_waited_ = {};
        window_taken_ = 0;
        continue;
      }
      stalled = true;
      failure =
          window_taken_ == 0
              ? "the initial state was not read for " +
                    FormatMillis(stall_timeout_) +
                    " (--initial-state-stall-timeout): the client reads too "
                    "slowly; relist"
              : "the initial state was read at less than " +
                    FormatRate(min_rate_) + " (--initial-state-min-rate) "
                    "for " + FormatMillis(stall_timeout_) +
                    " (--initial-state-stall-timeout): the client reads too "
                    "slowly; relist";
      break;
    }
    if (!failure.empty()) {
      // The client reads too slowly for the snapshot to stay open.
      bool report_stall = false;
      if (!failed_) {
        report_stall = stalled;
        failed_ = true;
        error_ = {410, "Expired", std::move(failure)};
        NotifyLocked(&wake);
      }
      lock.Unlock();
      for (auto& w : wake) w();
      if (report_stall && on_stall_) on_stall_();
      return false;
    }
    if (cancelled_) return false;
    for (auto& e : events) queue_.push_back(std::move(e));
    queued_bytes_ += bytes;
    NotifyLocked(&wake);
  }
  for (auto& w : wake) w();
  return true;
}

void InitialStateStream::Finish() {
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    finished_ = true;
    NotifyLocked(&wake);
  }
  for (auto& w : wake) w();
}

void InitialStateStream::Fail(StateError error) {
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    failed_ = true;
    error_ = std::move(error);
    NotifyLocked(&wake);
  }
  for (auto& w : wake) w();
}

void InitialStateStream::Cancel() {
  {
    MutexLock lock(&mu_);
    cancelled_ = true;
    wake_ = nullptr;
    queue_.clear();
    queued_bytes_ = 0;
  }
  space_.SignalAll();
}

bool InitialStateStream::cancelled() const {
  MutexLock lock(&mu_);
  return cancelled_;
}

InitialStateStream::Taken InitialStateStream::Take(
    std::vector<EventPtr>* out, std::function<void()> wake) {
  Taken t;
  bool freed = false;
  {
    MutexLock lock(&mu_);
    bool news = !queue_.empty() || failed_ || (ready_ && !reported_ready_) ||
                (finished_ && queue_.empty());
    while (!queue_.empty()) {
      out->push_back(std::move(queue_.front()));
      queue_.pop_front();
      freed = true;
    }
    window_taken_ += queued_bytes_;
    queued_bytes_ = 0;
    t.ready = ready_;
    t.rv = rv_;
    t.finished = finished_;
    t.failed = failed_;
    t.error = error_;
    if (ready_) reported_ready_ = true;
    if (!news && !finished_ && !failed_) wake_ = std::move(wake);
  }
  if (freed) space_.SignalAll();
  return t;
}

bool ParseHandoffSnapshot(std::string_view text, HandoffSnapshot* out) {
  // "xmin:xmax:xip,xip,..." with decimal 64-bit xids; xip may be empty.
  auto number = [](std::string_view s, uint64_t* v) {
    return s.size() <= 20 && ParseUnsigned(s, v);
  };
  size_t a = text.find(':');
  if (a == std::string_view::npos) return false;
  size_t b = text.find(':', a + 1);
  if (b == std::string_view::npos) return false;
  HandoffSnapshot s;
  if (!number(text.substr(0, a), &s.xmin) ||
      !number(text.substr(a + 1, b - a - 1), &s.xmax) || s.xmin > s.xmax) {
    return false;
  }
  std::string_view rest = text.substr(b + 1);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    uint64_t x;
    if (!number(rest.substr(0, comma), &x) || x < s.xmin || x >= s.xmax) {
      return false;
    }
    s.xip.push_back(x);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return false;
    if (s.xip.size() > 1000000) return false;
  }
  std::sort(s.xip.begin(), s.xip.end());
  *out = std::move(s);
  return true;
}

}  // namespace walwatch
