// PostgresSource's stream: opening it, its messages, its status updates and
// its waits. Startup is in pg_startup.cc, lost and moved slots in
// slot_recovery.cc.
#include "cdc/postgres/postgres_source.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "cdc/base/logging.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_conn.h"
#include "cdc/postgres/pgoutput_decoder.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "cdc/postgres/replication_protocol.h"
#include "cdc/replication_stats.h"

namespace walwatch {

namespace {

bool SlotIsGone(const std::string& error) {
  return error.find("has been invalidated") != std::string::npos ||
         (error.find("replication slot") != std::string::npos &&
          error.find("does not exist") != std::string::npos);
}

// The first `n` bytes of a binary message, in hex, for a log line.
std::string HexPrefix(std::string_view bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < bytes.size() && i < n; ++i) {
    hex += kDigits[static_cast<uint8_t>(bytes[i]) >> 4];
    hex += kDigits[static_cast<uint8_t>(bytes[i]) & 15];
  }
  return hex;
}

}  // namespace

PostgresSource::PostgresSource(PostgresSourceOptions options,
                               ResourceCatalog* catalog, PgHandoff* handoff,
                               std::unique_ptr<ReplicationConnector> connector)
    : opt_(std::move(options)),
      catalog_(catalog),
      handoff_(handoff),
      connector_(connector ? std::move(connector)
                           : std::make_unique<LibpqReplicationConnector>(
                                 opt_.conninfo, opt_.connect_timeout_seconds,
                                 opt_.receive_timeout)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      slot_spec_{opt_.pgoutput ? "pgoutput" : "wal2json", opt_.slot_failover},
      format_{opt_.pgoutput, opt_.mapping.QualifiedTable(),
              opt_.publication.empty() ? opt_.slot : opt_.publication,
              opt_.pgoutput_protocol},
      decoder_(opt_.pgoutput
                   ? std::unique_ptr<LogicalDecoder>(
                         std::make_unique<PgoutputDecoder>(opt_.mapping))
                   : std::make_unique<Wal2JsonDecoder>(opt_.mapping)),
      assembler_(opt_.max_transaction_bytes, 0) {}

PostgresSource::~PostgresSource() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

void PostgresSource::SetHighestServerWal(std::function<uint64_t()> highest) {
  highest_server_wal_ = std::move(highest);
}

PositionFormatter PostgresSource::position_formatter() const {
  return &FormatLsn;
}

std::string PostgresSource::StartStreaming() {
  start_failed_after_connect_ = false;
  start_sqlstate_.clear();
  slot_confirmed_flush_ = 0;
  ReplicationConnector::Started started =
      connector_->Start(opt_.slot, format_, timeline_, stop_);
  if (started.timeline != 0) {
    if (timeline_ != 0 && started.timeline != timeline_ &&
        timeline_changed_from_ == 0) {
      timeline_changed_from_ = timeline_;
      old_timeline_end_ = started.previous_timeline_end;
    }
    timeline_ = started.timeline;
  }
  if (!started.connection) {
    start_failed_after_connect_ = started.answered;
    start_sqlstate_ = started.sqlstate;
    return started.error;
  }
  repl_ = std::move(started.connection);
  // A new walsender announces its relations again.
  decoder_->Reset();
  assembler_.Reset();
  slot_confirmed_flush_ = started.slot_confirmed_flush;
  last_received_ = 0;
  waiting_for_busy_walsender_ = false;
  return "";
}

ChangeSource::Reconnected PostgresSource::Reconnect(ChangeReceiver* receiver,
                                                    std::string* error) {
  if (slot_recreation_pending_) {
    // A recreation whose outcome was not read back yet: streaming from
    // the new slot before would lose its barrier or reset.
    if (std::string err = FinishSlotRecreation(receiver); !err.empty()) {
      LogError("cannot read back the recreated replication slot",
               {{"error", err}});
      return Reconnected::kNotYet;
    }
  }
  *error = StartStreaming();
  if (!error->empty()) return Reconnected::kFailed;
  if (timeline_changed_from_ != 0) {
    if (std::string err = CheckTimelineChange(receiver); !err.empty()) {
      LogError("cannot check the new timeline against what walwatch served",
               {{"error", err}});
      Close();
      return Reconnected::kNotYet;
    }
  }
  if (slot_confirmed_flush_ > receiver->served_rv() + 1) {
    // Moved while walwatch was away (pg_replication_slot_advance, a
    // second consumer, or a slot dropped and created again): the
    // server resumes after confirmed_flush - 1, and what lies before it
    // is gone.
    LogError("the replication slot moved past what walwatch confirmed; "
             "every watcher must relist",
             {{"slot", opt_.slot},
              {"confirmed_flush_lsn", FormatLsn(slot_confirmed_flush_)},
              {"current_rv", FormatLsn(receiver->served_rv())}});
    receiver->Gap(slot_confirmed_flush_ - 1);
  }
  return Reconnected::kOpen;
}

void PostgresSource::Recover(ChangeReceiver* receiver,
                             const std::string& error) {
  // The connection worked but START_REPLICATION did not: look at the slot
  // itself (the message's first line does not say why, and its wording
  // depends on lc_messages).
  if (start_failed_after_connect_ || SlotIsGone(error)) {
    if (std::string err = RecreateSlot(receiver); !err.empty()) {
      LogError("cannot recreate the replication slot", {{"error", err}});
    }
  }
}

uint64_t PostgresSource::WidenXid(uint32_t xid) {
  // Transactions in the stream are within 2^31 of each other (PostgreSQL's
  // wraparound protection), so the nearest 64-bit value is the right one.
  uint64_t candidate = (xid_reference_ & ~uint64_t{0xFFFFFFFF}) | xid;
  if (candidate > xid_reference_ + (uint64_t{1} << 31)) {
    if (candidate >= (uint64_t{1} << 32)) candidate -= uint64_t{1} << 32;
  } else if (candidate + (uint64_t{1} << 31) < xid_reference_) {
    candidate += uint64_t{1} << 32;
  }
  xid_reference_ = std::max(xid_reference_, candidate);
  return candidate;
}

ChangeSource::Step PostgresSource::Next(ChangeReceiver* receiver,
                                        std::string* error) {
  std::string_view message;
  switch (repl_->Read(&message, error)) {
    case ReplicationConnection::ReadStatus::kWouldBlock:
      return Step::kIdle;
    case ReplicationConnection::ReadStatus::kEnd:
      return Step::kEnd;
    case ReplicationConnection::ReadStatus::kMessage:
      break;
  }
  waiting_for_busy_walsender_ = false;
  return HandleMessage(message, receiver, error) ? Step::kMessage
                                                 : Step::kEnd;
}

bool PostgresSource::HandleMessage(std::string_view message,
                                   ChangeReceiver* receiver,
                                   std::string* error) {
  ReplicationStats* stats = receiver->stats();
  switch (ReplicationMessageType(message)) {
    case 'w': {
      XLogData data;
      if (!ParseXLogData(message, &data)) {
        *error = "short XLogData message";
        return false;
      }
      stats->server_wal_end = data.wal_end;
      stats->received_lsn = data.data_start;
      if (data.data_start > stats->decoded_lsn) {
        stats->decoded_lsn = data.data_start;
      }
      stats->bytes_received += message.size();
      last_received_ = std::max(last_received_, data.data_start);
      std::string err =
          decoder_->Decode(data.payload, data.data_start, &record_);
      if (!err.empty()) {
        // Counted and logged with its position; a message the decoder
        // does not understand cannot be turned into an event. Inside a
        // transaction it may have been a change of the table: the
        // transaction ends as a barrier.
        ++stats->decode_errors;
        LogError(std::string("cannot decode a ") + slot_spec_.plugin +
                     " message",
                 {{"lsn", FormatLsn(data.data_start)},
                  {"error", err},
                  {"message", format_.pgoutput ? HexPrefix(data.payload, 128)
                                               : std::string(data.payload.substr(0, 256))}});
        if (format_.pgoutput) {
          assembler_.MarkBrokenOrNext();
        } else {
          assembler_.MarkBroken();
        }
        return true;
      }
      // What the loop has taken is the line below which a transaction is a
      // re-send: dropped here, unassembled.
      assembler_.set_last_commit_lsn(receiver->last_commit());
      TransactionAssembler::Outcome outcome;
      err = assembler_.Feed(record_, &txn_, &outcome);
      if (!err.empty()) {
        *error = "out-of-order " + slot_spec_.plugin + " stream: " + err;
        return false;
      }
      if (outcome == TransactionAssembler::Outcome::kCommitted) {
        txn_.full_xid = WidenXid(txn_.xid);
        receiver->Commit(&txn_);
      } else if (outcome == TransactionAssembler::Outcome::kDuplicate) {
        ++stats->duplicate_transactions;
      }
      return true;
    }
    case 'k': {
      PrimaryKeepalive keepalive;
      if (!ParsePrimaryKeepalive(message, &keepalive)) {
        *error = "short keepalive message";
        return false;
      }
      stats->server_wal_end = keepalive.wal_end;
      // A keepalive's walEnd is where the walsender has decoded to: every
      // commit record before it has been sent, and the next one starts at
      // or after it. Between transactions, the stream has passed walEnd-1.
      if (!assembler_.in_transaction()) {
        if (keepalive.wal_end > stats->decoded_lsn) {
          stats->decoded_lsn = keepalive.wal_end;
        }
        if (keepalive.wal_end > 0) receiver->Passed(keepalive.wal_end - 1);
      }
      if (keepalive.reply_requested) {
        return SendKeepaliveReply(keepalive.wal_end, error);
      }
      return true;
    }
    default:
      LogWarn("unknown replication message",
              {{"type", std::string(1, ReplicationMessageType(message))}});
      return true;
  }
}

bool PostgresSource::Confirm(uint64_t flush, bool want_position,
                             std::string* error) {
  StandbyStatusUpdate update;
  update.write = std::max(last_received_, flush);
  update.flush = flush;
  update.apply = flush;
  update.send_time_unix_us = NowUnixMicros();
  update.reply_requested = want_position;
  if (!repl_->Write(EncodeStandbyStatusUpdate(update), error)) {
    *error = "cannot send a standby status update: " + *error;
    return false;
  }
  return true;
}

// A reply to a keepalive that asked for one: write = the walsender's
// position, flush = 0 (invalid, so the slot is not moved). A walsender that
// is shutting down waits until the standby reports its sent position, and
// the timed updates hold flush back to the replay window, so without this a
// fast shutdown of PostgreSQL would wait for walwatch forever.
bool PostgresSource::SendKeepaliveReply(uint64_t wal_end, std::string* error) {
  StandbyStatusUpdate reply;
  reply.write = wal_end;
  reply.send_time_unix_us = NowUnixMicros();
  if (!repl_->Write(EncodeStandbyStatusUpdate(reply), error)) {
    *error = "cannot answer a keepalive: " + *error;
    return false;
  }
  return true;
}

bool PostgresSource::Wait(Clock::duration timeout, std::string* error) {
  // ppoll, whose timeout is not rounded up to a millisecond as poll's would
  // be (the timer slack, 50 us by default, still applies).
  const auto timeout_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  const timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
                    static_cast<long>(timeout_ns % 1000000000)};
  pollfd fds[3] = {{repl_->socket(), POLLIN, 0},
                   {wake_fd_, POLLIN, 0},
                   {stop_.fd(), POLLIN, 0}};
  int r = ppoll(fds, 3, &ts, nullptr);
  if (r < 0 && errno != EINTR) {
    *error = std::string("ppoll: ") + std::strerror(errno);
    return false;
  }
  if (stop_.raised()) return true;
  if (fds[1].revents) {
    uint64_t count;
    ssize_t n = read(wake_fd_, &count, sizeof(count));
    (void)n;
  }
  if (fds[0].revents && !repl_->ConsumeInput(error)) return false;
  return true;
}

void PostgresSource::Wake() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof(one));
  (void)n;
}

bool PostgresSource::WalsenderBusy(int pid, std::string* state) {
  if (pid <= 0) return false;
  // A live server answers at once; a partitioned one must not delay the
  // reconnect by more than a few seconds.
  constexpr int kSideSeconds = 5;
  PgConn side = ConnectPg(opt_.conninfo, /*replication=*/false,
                          std::min(opt_.connect_timeout_seconds, kSideSeconds));
  if (PQstatus(side.get()) != CONNECTION_OK) return false;
  std::string err;
  // A walsender waits on these while it streams; busy, it waits on none
  // or on its spill files (ReorderBuffer*). Its own role may see them.
  PgResult r = PgQuery(
      side.get(),
      "SELECT coalesce(wait_event, '') FROM pg_stat_activity "
      "WHERE pid = $1 AND backend_type = 'walsender' AND coalesce(wait_event, "
      "'') NOT IN ('WalSenderMain', 'WalSenderWaitForWAL', "
      "'WalSenderWriteData')",
      {std::to_string(pid)}, &err, &stop_, std::chrono::seconds(kSideSeconds));
  if (!r || PQntuples(r.get()) != 1) return false;
  *state = PQgetvalue(r.get(), 0, 0);
  return true;
}

bool PostgresSource::BusyWhileSilent(std::chrono::seconds silence) {
  // Silence from a walsender that is working is not a partition:
  // reconnecting would only make a new walsender decode the same
  // transaction again, as silently, for ever.
  std::string state;
  const int pid = repl_->backend_pid();
  if (!WalsenderBusy(pid, &state)) return false;
  if (!waiting_for_busy_walsender_) {
    LogInfo("the walsender sends nothing while it decodes a large "
            "transaction of other tables; waiting for it",
            {{"walsender_pid", pid},
             {"wait_event", state},
             {"silent_seconds", static_cast<uint64_t>(silence.count())}});
    waiting_for_busy_walsender_ = true;
  }
  return true;
}

void PostgresSource::Close() {
  repl_.reset();
  decoder_->Reset();
  assembler_.Reset();
}

}  // namespace walwatch
