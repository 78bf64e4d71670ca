// MariaDbSource's stream: opening it, what the fetcher queued, the waits.
// Startup is in mariadb_startup.cc, reconnects across purges and other
// histories in binlog_recovery.cc.
#include "cdc/mysql/mariadb_source.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "cdc/base/logging.h"
#include "cdc/mysql/binlog_fetcher.h"
#include "cdc/mysql/row_change_conversion.h"
#include "cdc/replication_stats.h"

namespace walwatch::mysql {

namespace {

// What the fetcher may queue ahead of the replication thread: a few large
// transactions.
constexpr size_t kMaxQueuedBytes = size_t{64} << 20;

std::string FormatVersion(uint64_t version) {
  return FormatBinlogVersion(version);
}

}  // namespace

MariaDbSource::MariaDbSource(MariaDbSourceOptions options,
                             ResourceCatalog* catalog)
    : opt_(std::move(options)),
      catalog_(catalog),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      interrupter_(&stop_) {}

MariaDbSource::~MariaDbSource() {
  fetcher_.reset();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void MariaDbSource::SetHighestServerPosition(
    std::function<uint64_t(uint64_t)> highest) {
  highest_server_position_ = std::move(highest);
}

LogField MariaDbSource::stream_field() const {
  return {"server_id", static_cast<uint64_t>(opt_.server_id)};
}

PositionFormatter MariaDbSource::position_formatter() const {
  return &FormatVersion;
}

BinlogReaderOptions MariaDbSource::ReaderOptions() const {
  BinlogReaderOptions o;
  o.database = opt_.conn.database;
  o.table = opt_.mapping.table;
  o.columns = MappedColumnNames(opt_.mapping);
  o.server_id = opt_.server_id;
  o.replica_host = opt_.replica_host;
  o.heartbeat_period = opt_.heartbeat_period;
  o.silence_timeout = opt_.silence_timeout;
  o.max_transaction_bytes = opt_.max_transaction_bytes;
  o.key_columns = OverflowKeyColumns();
  return o;
}

std::string MariaDbSource::Connect(MysqlConnection* conn) {
  MysqlConnParams params = opt_.conn;
  // A server that stops answering must not hold walwatch: queries give up
  // after the stream's silence timeout, and Stop interrupts them.
  params.read_timeout_s = static_cast<unsigned>(opt_.silence_timeout.count());
  StopInterrupter::Scope interruptible(&interrupter_,
                                       [conn] { conn->Interrupt(); });
  return conn->Connect(params);
}

BinlogStatus MariaDbSource::StartStreaming(const BinlogPosition& start) {
  auto reader = std::make_unique<BinlogReader>(opt_.conn, ReaderOptions());
  BinlogReader* r = reader.get();
  BinlogStatus s;
  {
    StopInterrupter::Scope interruptible(&interrupter_,
                                         [r] { r->Interrupt(); });
    s = reader->Open(start);
  }
  if (!s.ok()) {
    no_position_ = s.kind == BinlogErrorKind::kNoPosition;
    return s;
  }
  no_position_ = false;
  resume_ = start;
  received_ = 0;
  bytes_at_last_check_ = 0;
  waiting_for_busy_reader_ = false;
  fetcher_ = std::make_unique<BinlogFetcher>(std::move(reader), wake_fd_,
                                             kMaxQueuedBytes);
  return s;
}

ChangeSource::Step MariaDbSource::Next(ChangeReceiver* receiver,
                                       std::string* error) {
  Fetched f;
  if (!fetcher_->Pop(&f)) return Step::kIdle;
  ReplicationStats* stats = receiver->stats();
  stats->bytes_received += f.bytes;
  if (!f.status.ok()) {
    *error = std::string(BinlogErrorKindName(f.status.kind)) + ": " +
             f.status.message;
    no_position_ = f.status.kind == BinlogErrorKind::kNoPosition;
    return Step::kEnd;
  }
  const BinlogItem& item = f.item;
  std::string why;
  const std::optional<uint64_t> version =
      BinlogVersion(history(), item.position, &why);
  if (!version) {
    *error = why;
    return Step::kEnd;
  }
  resume_ = item.position;
  received_ = std::max(received_, *version);
  stats->received_lsn = *version;
  if (*version > stats->decoded_lsn) stats->decoded_lsn = *version;
  if (item.type != BinlogItem::Type::kTransaction) {
    // A heartbeat (the server has sent everything before it) or a new file:
    // every transaction not yet taken commits after it.
    receiver->Passed(*version);
    return Step::kMessage;
  }
  if (gtid_state_) gtid_state_->Advance(item.transaction.gtid);
  if (*version <= receiver->last_commit()) {
    ++stats->duplicate_transactions;
    return Step::kMessage;
  }
  std::string err = ToTransaction(item.transaction, history(), &txn_);
  if (!err.empty()) {
    *error = err;
    return Step::kEnd;
  }
  receiver->Commit(&txn_);
  return Step::kMessage;
}

bool MariaDbSource::Wait(Clock::duration timeout, std::string* error) {
  const auto timeout_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  const timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
                    static_cast<long>(timeout_ns % 1000000000)};
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
  int r = ppoll(fds, 2, &ts, nullptr);
  if (r < 0 && errno != EINTR) {
    *error = std::string("ppoll: ") + std::strerror(errno);
    return false;
  }
  if (fds[0].revents) {
    uint64_t count;
    ssize_t n = read(wake_fd_, &count, sizeof(count));
    (void)n;
  }
  return true;
}

bool MariaDbSource::Confirm(uint64_t flush, bool want_position,
                            std::string* error) {
  // A binlog dump takes no feedback: the server keeps its binlog by its own
  // retention, and the replay window is rebuilt by time after a restart
  // (mariadb_startup.cc). Heartbeats report the position unasked.
  return true;
}

bool MariaDbSource::BusyWhileSilent(std::chrono::seconds silence) {
  // The reader receives a long transaction of other tables, which becomes
  // an item only at its end: the server is working, not gone (a silent
  // connection fails the reader itself, after silence_timeout).
  const uint64_t bytes = fetcher_->bytes_read();
  const bool moved = bytes != bytes_at_last_check_;
  bytes_at_last_check_ = bytes;
  if (moved && !waiting_for_busy_reader_) {
    LogInfo(
        "the binlog carries a long transaction (of other tables, or "
        "past what walwatch keeps); waiting for its end",
        {{"silent_seconds", static_cast<uint64_t>(silence.count())},
         {"bytes_read", bytes}});
    waiting_for_busy_reader_ = true;
  }
  if (!moved) waiting_for_busy_reader_ = false;
  return moved;
}

void MariaDbSource::Close() { fetcher_.reset(); }

void MariaDbSource::Wake() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof(one));
  (void)n;
}

}  // namespace walwatch::mysql
