// ChangeSource is the seam between walwatch's database-neutral replication
// loop (ReplicationStream, cdc/replication_stream.h) and one database's log
// of committed changes. A source reads that log (PostgreSQL: wal2json over a
// logical replication slot, cdc/postgres/postgres_source.h; MariaDB: the
// binlog), turns it into whole Transactions (cdc/transaction.h) in commit
// order, and hands them to a ChangeReceiver, which the loop implements.
// Everything after that is the loop's, and the same for every database: the
// commit policy, events, the sink, what to confirm and when, batching and
// wakes, reconnect timing, dedup, stats.
//
// Positions. A source names every point of its stream by a uint64 that grows
// along commit order: a transaction's commit_lsn (its events' RV base), a
// position the stream has passed, what the loop confirms. On PostgreSQL they
// are LSNs; a binlog source maps (file, offset) or a GTID to one. c - 1 must
// lie strictly between a commit c and the commit before it. A source whose
// positions mean nothing on another server (a binlog's file and offset are
// the server's own) gives each server's history a range of numbers of its
// own, up to a ceiling (StreamStart, HistoryReset): an RV above it, of
// another history, is refused at once, not waited for.
//
// Confirming. The loop confirms `flush` (Confirm): the database, or the
// source's own bookkeeping, may drop what comes before it, and a source that
// opens again (after a reconnect, or a restart of walwatch) must deliver
// every transaction that commits at or after the last position confirmed.
// The loop holds it back to the oldest transaction of its replay window, so
// that a restart rebuilds that window (PostgreSQL: the slot's
// confirmed_flush_lsn; a binlog source reads again from that far back).
// Re-sent transactions are the loop's to drop (ChangeReceiver::last_commit).
//
// Threads and blocking:
//  * One thread, the replication thread, calls Prepare, then (in the loop's
//    Run) the stream's methods: connected, Reconnect, Recover, Next, Wait,
//    Confirm, received, BusyWhileSilent, Close. The receiver's methods are
//    called only from inside those calls, on that thread.
//  * Prepare, Reconnect, Recover and BusyWhileSilent may block on the
//    database (each says how long); Wait blocks up to its timeout; Next,
//    Confirm and Close do not wait for the database (Confirm writes to a
//    socket). Every wait ends once Stop() is called.
//  * Wake, Stop and stop_signal may be called from any thread; Stop is
//    async-signal-safe (a signal handler stops a startup). database,
//    stream_field and position_formatter too, and never change.
// Ownership: whoever builds the source (main, through its database's entry
// point, e.g. cdc/postgres/postgres.h) keeps it alive until the loop's Run
// has returned; the loop only borrows it.
#ifndef WALWATCH_CDC_CHANGE_SOURCE_H_
#define WALWATCH_CDC_CHANGE_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/base/stop_signal.h"
#include "cdc/model/event_sink.h"
#include "cdc/transaction.h"

namespace walwatch {

struct ReplicationStats;

// Where a stream opens (ChangeSource::Prepare).
struct StreamStart {
  // The stream continues after this position: the EventSink's floor.
  uint64_t floor_rv = 0;
  // The highest RV of this history: what the stream gives out lies in
  // (floor_rv, ceiling_rv] until a HistoryReset.
  uint64_t ceiling_rv = kNoRvCeiling;
};

// What a ChangeSource reports to the loop that drives it.
class ChangeReceiver {
 public:
  virtual ~ChangeReceiver() = default;

  // The next whole transaction in commit order, of the mapped table or not
  // (one with no changes still moves the stream's position). The receiver
  // may move from *txn. A source sets full_xid if its handoff needs it.
  virtual void Commit(Transaction* txn) = 0;

  // Between transactions, the stream has passed `position`: every
  // transaction not yet delivered commits after it (PostgreSQL: a
  // keepalive's walEnd - 1; a binlog source: a heartbeat's position). Never
  // called inside a transaction.
  virtual void Passed(uint64_t position) = 0;

  // What committed up to `position` is lost to the stream, which continues
  // after it (PostgreSQL: a slot recreated, or moved by someone else): every
  // watcher relists.
  virtual void Gap(uint64_t position) = 0;

  // The database's history changed under what was served (PostgreSQL: a
  // slot recreated after a failover to a server that was behind; a binlog
  // source: another server): the stream continues after `new_floor`, the
  // new history's RVs lie at or below `ceiling_rv` (kNoRvCeiling, or the
  // new server's range), and the RVs in (new_floor, fence_hi] may name
  // positions of either history. Every watcher relists, and the positions
  // that only ever grow start again.
  virtual void HistoryReset(uint64_t new_floor, uint64_t fence_hi,
                            uint64_t ceiling_rv) = 0;

  // The commit position of the last transaction taken, or passed: one that
  // commits at or below it is a re-send. A source may drop such a
  // transaction early, without keeping its rows (and count it in
  // stats()->duplicate_transactions); the receiver drops any that reach it.
  virtual uint64_t last_commit() const = 0;

  // Everything up to this position has been served to watchers (the sink's
  // current RV).
  virtual uint64_t served_rv() const = 0;

  // The stream's counters and gauges; a source keeps its own part of them
  // (what it received, decode errors, slot recreations).
  virtual ReplicationStats* stats() = 0;
};

class ChangeSource {
 public:
  virtual ~ChangeSource() = default;

  // For log lines: the database ("PostgreSQL"), and the field that names
  // this stream ({"slot", "walwatch"}).
  virtual const char* database() const = 0;
  virtual LogField stream_field() const = 0;
  // How positions are written in log lines and messages.
  virtual PositionFormatter position_formatter() const = 0;

  // Checks the database, makes ready what the stream needs (PostgreSQL: the
  // slot), loads the resource catalog, and opens the stream. Returns "" and
  // sets *start (the position the stream continues after, and its
  // history's ceiling), or one line that names the fix. May block for
  // minutes (a server that is down, a slot held by a previous walwatch's
  // walsender), until Stop().
  virtual std::string Prepare(ReplicationStats* stats, StreamStart* start) = 0;

  // Whether the stream is open.
  virtual bool connected() const = 0;

  enum class Reconnected {
    kOpen,     // the stream is open again
    kFailed,   // *error says why; the loop logs it, then calls Recover
    kNotYet,   // not tried: the source could not make ready to (it logged
               // why); the loop tries again after its backoff
  };
  // Opens the stream again after it was lost, from the last position
  // confirmed. What it finds lost on the way (a gap, a history that went
  // back) it reports through `receiver` before it returns. Blocks up to the
  // source's connect and receive timeouts.
  virtual Reconnected Reconnect(ChangeReceiver* receiver,
                                std::string* error) = 0;
  // After Reconnect failed with `error`: repairs what the failure says it
  // can (PostgreSQL: recreates a lost or missing slot, which is a Gap or a
  // HistoryReset). May block like Reconnect.
  virtual void Recover(ChangeReceiver* receiver, const std::string& error) = 0;

  enum class Step {
    kMessage,  // one message was handled (it may have ended a transaction)
    kIdle,     // nothing has arrived: Wait
    kEnd,      // the stream ended or failed (*error): the loop closes it
  };
  // Reads and handles at most one message of the open stream, without
  // waiting; what it completes goes to `receiver`.
  virtual Step Next(ChangeReceiver* receiver, std::string* error) = 0;

  // Waits until Next may have more, `timeout` has passed, or Wake() or
  // Stop() was called; it may also return early. False with *error if the
  // connection failed.
  virtual bool Wait(Clock::duration timeout, std::string* error) = 0;

  // Confirms `flush` (see the header comment). The loop never moves it
  // backwards within one history, and never past the sink's current RV + 1.
  // With `want_position`, asks the database to report its position soon
  // (PostgreSQL: replyRequested, answered by a keepalive: Passed). False
  // with *error if the connection failed.
  virtual bool Confirm(uint64_t flush, bool want_position,
                       std::string* error) = 0;

  // The newest position received on this connection, 0 right after it
  // opened: the replay window's byte limit counts back from it.
  virtual uint64_t received() const = 0;

  // The stream has carried nothing for `silence`, past the loop's receive
  // timeout. True if the server is alive and working nonetheless
  // (PostgreSQL: a walsender decoding a large transaction of other tables,
  // which sends nothing meanwhile): the loop waits another timeout instead
  // of reconnecting. Blocks a few seconds at most.
  virtual bool BusyWhileSilent(std::chrono::seconds silence) = 0;

  // Closes the stream, forgetting a transaction in progress.
  virtual void Close() = 0;

  // Any thread: ends a Wait.
  virtual void Wake() = 0;
  // Any thread, async-signal-safe: ends every wait of the source, and of
  // the loop (which waits on stop_signal()), for good.
  virtual void Stop() = 0;
  virtual const StopSignal& stop_signal() const = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_CHANGE_SOURCE_H_
