// BinlogFetcher runs an opened BinlogReader on a thread of its own and
// queues what it reads, so that the replication thread never blocks on the
// binlog: Connector/C's binlog reads block, and buffer what they read ahead
// where a poll(2) of the socket cannot see it, while the replication loop
// must return from ChangeSource::Next at once when nothing is there (its
// batches, wakes and timers depend on it).
//
// The queue is bounded (bytes of the queued transactions' changes, and a
// count): the fetcher waits while it is full, so a slow replication thread
// slows the reading, never memory. After an error (the reader's, the
// connection's) the fetcher queues it last and ends.
//
// Thread safety: Pop and the accessors from the replication thread (any
// thread for bytes_read); the fetcher's thread is its own. The destructor
// interrupts the reader and joins the thread. `wake_fd` (an eventfd) must
// outlive the fetcher: each item queued is also written there.
#ifndef WALWATCH_CDC_MYSQL_BINLOG_FETCHER_H_
#define WALWATCH_CDC_MYSQL_BINLOG_FETCHER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "cdc/base/mutex.h"
#include "cdc/mysql/binlog_reader.h"

namespace walwatch::mysql {

struct Fetched {
  BinlogStatus status;  // not ok: the stream failed; nothing follows
  BinlogItem item;      // when status is ok
  uint64_t bytes = 0;   // binlog bytes read for it (metrics)
};

class BinlogFetcher {
 public:
  // `reader` is open (BinlogReader::Open succeeded).
  BinlogFetcher(std::unique_ptr<BinlogReader> reader, int wake_fd,
                size_t max_queued_bytes);
  ~BinlogFetcher();
  BinlogFetcher(const BinlogFetcher&) = delete;
  BinlogFetcher& operator=(const BinlogFetcher&) = delete;

  // The next item or error, without waiting; false if none is queued.
  bool Pop(Fetched* out);

  // Bytes of binlog read so far (the reader's): it moves while a long
  // transaction arrives, whatever the queue shows. Any thread.
  uint64_t bytes_read() const { return reader_->bytes_read(); }

 private:
  void Loop();
  void Wake();

  const std::unique_ptr<BinlogReader> reader_;
  const int wake_fd_;
  const size_t max_queued_bytes_;
  Mutex mu_;
  CondVar space_;
  std::deque<Fetched> queue_ GUARDED_BY(mu_);
  size_t queued_bytes_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_BINLOG_FETCHER_H_
