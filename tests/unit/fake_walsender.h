// FakeWalsender plays a PostgreSQL walsender for the replication loop's unit
// tests: it is the PostgresSource's ReplicationConnector
// (cdc/postgres/replication_connection.h), and its connections carry
// recorded wal2json output (tests/data/wal2json_v2_capture.jsonl) as
// XLogData, so that the loop, the source, the decoder, the assembler and the
// protocol run as they do against PostgreSQL, without it.
//
// It behaves as FACTS.md says a walsender does:
//   * Its WAL is a list of transactions in commit order (Add), each the
//     CopyData messages a walsender sends for it: B, the changes and C as
//     XLogData (dataStart: the first change's LSN for B, the change's own,
//     nextlsn for C), and any keepalive a test puts among them.
//   * Start (START_REPLICATION from the slot) re-sends every transaction
//     whose commit is at or after the slot's confirmed_flush, and what is
//     added later as it comes.
//   * A status update ('r') with a flush moves confirmed_flush forward; one
//     that asks for a reply is answered with a keepalive whose walEnd is the
//     end of what was sent. Every status update is recorded.
// Tests steer it: Cut() ends the open connection (a lost connection), after
// some more messages if asked; FallBackTo() moves confirmed_flush back at
// the next start, as PostgreSQL 15 may after a restart; Send() puts one
// message on the open connection.
//
// Threads: the replication thread uses the connector and its connections;
// a test's thread calls the rest. One mutex guards it all.
#ifndef WALWATCH_TESTS_UNIT_FAKE_WALSENDER_H_
#define WALWATCH_TESTS_UNIT_FAKE_WALSENDER_H_

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cdc/base/clock.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/replication_connection.h"
#include "cdc/postgres/replication_protocol.h"

namespace walwatch {
namespace testing_walsender {

// The value of "key":"X/Y" in a wal2json line, as an LSN; 0 if absent.
inline uint64_t LsnField(std::string_view line, std::string_view key) {
  std::string pattern = "\"" + std::string(key) + "\":\"";
  size_t at = line.find(pattern);
  if (at == std::string_view::npos) return 0;
  at += pattern.size();
  size_t end = line.find('"', at);
  return ParseLsn(line.substr(at, end - at)).value_or(0);
}

// One transaction of the fake WAL: its commit, the end of its commit
// record, and the CopyData messages that carry it.
struct WalTransaction {
  uint64_t commit = 0;
  uint64_t end = 0;
  std::vector<std::string> messages;
};

// A transaction from its wal2json lines, B first and C last (XLogData each,
// walEnd `wal_end`). A line "k:<walEnd>" or "k?:<walEnd>" becomes a
// keepalive among them, the second asking for a reply.
inline WalTransaction TransactionOf(const std::vector<std::string>& lines,
                                    uint64_t wal_end) {
  WalTransaction t;
  t.commit = LsnField(lines.front(), "lsn");
  t.end = LsnField(lines.front(), "nextlsn");
  uint64_t first_change = 0;
  for (size_t i = 1; i < lines.size() && first_change == 0; ++i) {
    if (lines[i].rfind("k", 0) != 0) first_change = LsnField(lines[i], "lsn");
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("k", 0) == 0) {
      PrimaryKeepalive k;
      k.reply_requested = line.rfind("k?:", 0) == 0;
      k.wal_end = std::stoull(line.substr(line.find(':') + 1));
      t.messages.push_back(EncodePrimaryKeepalive(k));
      continue;
    }
    XLogData d;
    if (i == 0) {
      d.data_start = first_change != 0 ? first_change : t.commit;
    } else if (i + 1 == lines.size()) {
      d.data_start = t.end;
    } else {
      d.data_start = LsnField(line, "lsn");
    }
    d.wal_end = wal_end;
    d.send_time_unix_us = NowUnixMicros();
    d.payload = line;
    t.messages.push_back(EncodeXLogData(d));
  }
  return t;
}

// The capture's transactions: lines split at each C.
inline std::vector<std::vector<std::string>> SplitTransactions(
    const std::vector<std::string>& lines) {
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> current;
  for (const std::string& line : lines) {
    current.push_back(line);
    if (line.find("\"action\":\"C\"") != std::string::npos) {
      out.push_back(std::move(current));
      current.clear();
    }
  }
  return out;
}

class FakeWalsender final : public ReplicationConnector {
 public:
  // The slot starts at `confirmed_flush` (its stream continues after
  // confirmed_flush - 1).
  explicit FakeWalsender(uint64_t confirmed_flush)
      : state_(std::make_shared<State>()) {
    state_->confirmed_flush = confirmed_flush;
  }

  // Appends a transaction to the WAL; the open connection sends it at once.
  void Add(WalTransaction txn) {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->open) state_->open->Queue(txn.messages, txn.end);
    state_->wal.push_back(std::move(txn));
  }
  // Puts one message on the open connection (none: nothing happens).
  void Send(std::string message) {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->open) state_->open->Queue({std::move(message)}, 0);
  }
  // The open connection ends after `after` more messages; without one open,
  // the next one does.
  void Cut(size_t after = 0) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->cut_after = after;
    state_->cut = true;
  }
  // At the next Start, the slot's confirmed_flush falls back to `lsn`.
  void FallBackTo(uint64_t lsn) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->fall_back_to = lsn;
  }

  std::vector<StandbyStatusUpdate> status_updates() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->updates;
  }
  uint64_t confirmed_flush() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->confirmed_flush;
  }
  int starts() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->starts;
  }
  // Whether a connection is open and has sent all it was given.
  bool drained() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->open && state_->open->queue.empty();
  }

  Started Start(const std::string& slot, const StreamFormat& format,
                uint32_t previous_timeline, const StopSignal& stop) override {
    auto connection = std::make_unique<Connection>(state_);
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->starts;
    if (state_->fall_back_to != 0) {
      state_->confirmed_flush = state_->fall_back_to;
      state_->fall_back_to = 0;
    }
    Started started;
    started.slot_confirmed_flush = state_->confirmed_flush;
    for (const WalTransaction& t : state_->wal) {
      if (t.commit >= state_->confirmed_flush) {
        connection->Queue(t.messages, t.end);
      }
    }
    state_->open = connection.get();
    started.connection = std::move(connection);
    return started;
  }

 private:
  class Connection;
  struct State {
    mutable std::mutex mu;
    std::vector<WalTransaction> wal;
    uint64_t confirmed_flush = 0;
    uint64_t fall_back_to = 0;
    std::vector<StandbyStatusUpdate> updates;
    Connection* open = nullptr;
    bool cut = false;
    size_t cut_after = 0;
    int starts = 0;
  };

  class Connection final : public ReplicationConnection {
   public:
    explicit Connection(std::shared_ptr<State> state)
        : state_(std::move(state)),
          fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
    ~Connection() override {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->open == this) state_->open = nullptr;
      close(fd_);
    }

    // Under the state's lock.
    void Queue(const std::vector<std::string>& messages, uint64_t end) {
      for (const std::string& m : messages) queue.push_back(m);
      sent_end_ = std::max(sent_end_, end);
      uint64_t one = 1;
      ssize_t n = write(fd_, &one, sizeof(one));
      (void)n;
    }

    ReadStatus Read(std::string_view* message, std::string* error) override {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->cut && state_->cut_after == 0) {
        state_->cut = false;
        *error = "server closed the connection unexpectedly";
        return ReadStatus::kEnd;
      }
      if (queue.empty()) return ReadStatus::kWouldBlock;
      if (state_->cut) --state_->cut_after;
      current_ = std::move(queue.front());
      queue.pop_front();
      *message = current_;
      return ReadStatus::kMessage;
    }

    bool ConsumeInput(std::string* error) override {
      uint64_t count;
      ssize_t n = read(fd_, &count, sizeof(count));
      (void)n;
      return true;
    }

    bool Write(std::string_view message, std::string* error) override {
      StandbyStatusUpdate update;
      if (!ParseStandbyStatusUpdate(message, &update)) {
        *error = "not a status update";
        return false;
      }
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->updates.push_back(update);
      if (update.flush > state_->confirmed_flush) {
        state_->confirmed_flush = update.flush;
      }
      if (update.reply_requested) {
        PrimaryKeepalive k;
        k.wal_end = sent_end_;
        Queue({EncodePrimaryKeepalive(k)}, 0);
      }
      return true;
    }

    int socket() const override { return fd_; }
    int backend_pid() const override { return 0; }

    std::deque<std::string> queue;  // under the state's lock

   private:
    const std::shared_ptr<State> state_;
    const int fd_;
    uint64_t sent_end_ = 0;  // under the state's lock
    std::string current_;    // the message Read gave last
  };

  const std::shared_ptr<State> state_;
};

}  // namespace testing_walsender
}  // namespace walwatch

#endif  // WALWATCH_TESTS_UNIT_FAKE_WALSENDER_H_
