#include "cdc/mysql/binlog_fetcher.h"

#include <unistd.h>

#include <utility>

namespace walwatch::mysql {

namespace {

// At most this many items queued, whatever their bytes: heartbeats and
// transactions of other tables hold none.
constexpr size_t kMaxQueuedItems = 4096;

}  // namespace

BinlogFetcher::BinlogFetcher(std::unique_ptr<BinlogReader> reader, int wake_fd,
                             size_t max_queued_bytes)
    : reader_(std::move(reader)),
      wake_fd_(wake_fd),
      max_queued_bytes_(max_queued_bytes) {
  thread_ = std::thread([this] { Loop(); });
}

BinlogFetcher::~BinlogFetcher() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  space_.SignalAll();
  reader_->Interrupt();
  thread_.join();
}

void BinlogFetcher::Wake() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof(one));
  (void)n;
}

void BinlogFetcher::Loop() {
  uint64_t counted = reader_->bytes_read();
  for (;;) {
    Fetched f;
    f.status = reader_->Next(&f.item);
    const uint64_t read = reader_->bytes_read();
    f.bytes = read - counted;
    counted = read;
    const bool failed = !f.status.ok();
    const size_t bytes = failed ? 0 : f.item.transaction.bytes;
    {
      MutexLock lock(&mu_);
      // One item is always admitted into an empty queue, so one larger
      // than the bound still passes.
      space_.Wait(&lock, [&]() REQUIRES(mu_) {
        return stopping_ || queue_.empty() ||
               (queued_bytes_ + bytes <= max_queued_bytes_ &&
                queue_.size() < kMaxQueuedItems);
      });
      if (stopping_) return;
      queue_.push_back(std::move(f));
      queued_bytes_ += bytes;
    }
    Wake();
    if (failed) return;
  }
}

bool BinlogFetcher::Pop(Fetched* out) {
  {
    MutexLock lock(&mu_);
    if (queue_.empty()) return false;
    *out = std::move(queue_.front());
    queue_.pop_front();
    if (out->status.ok()) queued_bytes_ -= out->item.transaction.bytes;
  }
  space_.Signal();
  return true;
}

}  // namespace walwatch::mysql
