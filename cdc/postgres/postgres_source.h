// PostgresSource is the ChangeSource (cdc/change_source.h) of a PostgreSQL
// database: logical replication of the mapped table's changes from a slot
// of wal2json (format-version 2, the default) or of pgoutput (through a
// publication; protocol versions 1 to 4, large transactions streamed
// before their commit), on a primary or, from PostgreSQL 16 on, a standby.
//   * Startup (pg_startup.cc): checks the server and the table, creates the
//     slot if it is missing (dropping one the server invalidated), reads
//     where it starts and the xid from which the handoff can classify
//     (PgHandoff), loads the resource catalog, and starts streaming,
//     waiting out a slot still held by a previous walwatch's walsender.
//   * The stream (postgres_source.cc): XLogData decoded by the plugin's
//     LogicalDecoder (Wal2JsonDecoder, PgoutputDecoder) and assembled by TransactionAssembler into whole transactions, xids
//     widened to 64 bits; keepalives as positions passed between
//     transactions, and answered when they ask; status updates as the
//     loop's confirmations; a walsender busy decoding in silence told from
//     a dead connection on a side connection.
//   * Slots lost, moved or behind (slot_recovery.cc): a slot moved past
//     what walwatch confirmed, or lost and recreated, is a Gap; one
//     recreated below what walwatch served (a failover to a server that was
//     behind) is a HistoryReset with a fence, and the WAL is pushed past
//     the fence.
// Positions are LSNs; a transaction's RV base is the LSN of its commit
// record.
//
// Threads and ownership: as ChangeSource says. The catalog and the
// PgHandoff must outlive the source.
#ifndef WALWATCH_CDC_POSTGRES_POSTGRES_SOURCE_H_
#define WALWATCH_CDC_POSTGRES_POSTGRES_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cdc/change_source.h"
#include "cdc/postgres/logical_decoder.h"
#include "cdc/postgres/replication_connection.h"
#include "cdc/postgres/slot_spec.h"
#include "cdc/postgres/transaction_assembler.h"
#include "schema/table_mapping.h"

namespace walwatch {

class PgHandoff;
class ResourceCatalog;

struct PostgresSourceOptions {
  std::string conninfo;  // libpq conninfo; empty: PG* environment variables
  std::string slot = "walwatch";
  // The slot's output plugin: wal2json, or pgoutput through `publication`
  // (empty: named as the slot) with `pgoutput_protocol` (0: the highest
  // the server offers).
  bool pgoutput = false;
  std::string publication;
  int pgoutput_protocol = 0;
  // Create the slot as a failover slot (PostgreSQL 17 and later).
  bool slot_failover = false;
  TableMapping mapping;
  int connect_timeout_seconds = 10;
  // How long START_REPLICATION, and a query on the replication connection,
  // may go unanswered.
  std::chrono::milliseconds receive_timeout{std::chrono::seconds(60)};
  // Most bytes of row data one transaction may hold while it is assembled.
  // A larger one keeps only what it touched: a loss (CommitPolicy).
  size_t max_transaction_bytes = 128u << 20;
};

class PostgresSource final : public ChangeSource {
 public:
  // `connector` opens the replication connections; null: libpq's, to
  // options.conninfo.
  PostgresSource(PostgresSourceOptions options, ResourceCatalog* catalog,
                 PgHandoff* handoff,
                 std::unique_ptr<ReplicationConnector> connector = nullptr);
  ~PostgresSource() override;
  PostgresSource(const PostgresSource&) = delete;
  PostgresSource& operator=(const PostgresSource&) = delete;

  // Before Run: the highest WAL position seen on the server (the slot
  // monitor's). After a failover to a server that was behind, RVs up to it
  // may have been served by other replicas, so the fence covers them.
  void SetHighestServerWal(std::function<uint64_t()> highest);

  // ChangeSource.
  const char* database() const override { return "PostgreSQL"; }
  LogField stream_field() const override { return {"slot", opt_.slot}; }
  PositionFormatter position_formatter() const override;
  std::string Prepare(ReplicationStats* stats, StreamStart* start) override;
  bool connected() const override { return repl_ != nullptr; }
  Reconnected Reconnect(ChangeReceiver* receiver, std::string* error) override;
  void Recover(ChangeReceiver* receiver, const std::string& error) override;
  Step Next(ChangeReceiver* receiver, std::string* error) override;
  bool Wait(Clock::duration timeout, std::string* error) override;
  bool Confirm(uint64_t flush, bool want_position,
               std::string* error) override;
  uint64_t received() const override { return last_received_; }
  bool BusyWhileSilent(std::chrono::seconds silence) override;
  void Close() override;
  void Wake() override;
  void Stop() override { stop_.Raise(); }
  const StopSignal& stop_signal() const override { return stop_; }

 private:
  // Opens the replication connection and starts streaming (repl_), or
  // returns why not (start_failed_after_connect_, start_sqlstate_).
  std::string StartStreaming();
  // One CopyData message: XLogData or a keepalive.
  bool HandleMessage(std::string_view message, ChangeReceiver* receiver,
                     std::string* error);
  // A reply to a keepalive that asked for one.
  bool SendKeepaliveReply(uint64_t wal_end, std::string* error);
  // The 64-bit xid nearest to the last one seen.
  uint64_t WidenXid(uint32_t xid);
  // Whether the walsender `pid` is alive and busy (not waiting for WAL, for
  // our messages or to write): decoding a large transaction whose changes
  // are all filtered out, which on PostgreSQL 15 sends nothing for as long
  // as it takes. Asked on a connection of its own; false if that fails.
  bool WalsenderBusy(int pid, std::string* state);

  // slot_recovery.cc.
  // Recreates a lost or missing slot (nothing if it came back by itself).
  // From just before the slot is created until FinishSlotRecreation has
  // read it back and acted on it, slot_recreation_pending_ holds: an answer
  // lost to a dropped connection must not lose the barrier or the reset.
  std::string RecreateSlot(ChangeReceiver* receiver);
  // Reads the recreated slot (its position, and the xmax read after it)
  // and reports the gap or the history reset. Clears the pending flag once
  // done; on error it stays, for the next attempt.
  std::string FinishSlotRecreation(ChangeReceiver* receiver);
  // The slot was recreated at `new_floor`, below what walwatch has served:
  // PostgreSQL's history went back. Resets the history with a fence over
  // the ambiguous RVs, and pushes the server's WAL past the fence so that
  // new RVs are unambiguous at once.
  void ResetHistory(ChangeReceiver* receiver, uint64_t new_floor,
                    uint64_t next_xid, uint64_t old_server_wal);
  // After a reconnect to a server on another timeline (a promoted
  // standby): if the new history left the old timeline at or below what
  // walwatch served, ResetHistory; else the stream goes on with no relist
  // (a failover slot synced far enough). Returns an error if the check
  // could not be made (the caller retries).
  std::string CheckTimelineChange(ChangeReceiver* receiver);

  const PostgresSourceOptions opt_;
  ResourceCatalog* const catalog_;
  PgHandoff* const handoff_;
  const std::unique_ptr<ReplicationConnector> connector_;
  // Stop(): ends the poll, the backoff wait, START_REPLICATION and every
  // query the source waits on.
  StopSignal stop_;
  const int wake_fd_;  // an eventfd: Wake() ends a Wait
  // The slot as walwatch makes it, and what START_REPLICATION asks for.
  const SlotSpec slot_spec_;
  const StreamFormat format_;
  const std::unique_ptr<LogicalDecoder> decoder_;
  TransactionAssembler assembler_;
  LogicalRecord record_;
  Transaction txn_;
  std::unique_ptr<ReplicationConnection> repl_;
  // The highest XLogData start received on this connection.
  uint64_t last_received_ = 0;
  // The slot's confirmed_flush_lsn, read just before START_REPLICATION (0
  // if it could not be read).
  uint64_t slot_confirmed_flush_ = 0;
  bool start_failed_after_connect_ = false;
  // The SQLSTATE of the last START_REPLICATION error ("" if none, or if the
  // connection failed before an answer).
  std::string start_sqlstate_;
  uint64_t xid_reference_ = 0;  // a recent full xid, to widen 32-bit ones
  bool slot_recreation_pending_ = false;
  // highest_server_wal_() as it was just before the slot was created: what
  // the server had written before the recreation. Read after it, it would
  // include the writes the new slot streams, and a recreation on the same
  // server would be taken for a history that went back.
  uint64_t server_wal_before_recreation_ = 0;
  // The highest WAL position the slot monitor saw on the server (0 if
  // unknown): what other replicas may have served, for the fence.
  std::function<uint64_t()> highest_server_wal_;
  // The server's timeline as the last connection found it (0: unknown),
  // and a change of timeline (a failover) not yet checked against what
  // walwatch served: from which timeline, and where it ended in the new
  // one's history (0 if unknown).
  uint32_t timeline_ = 0;
  uint32_t timeline_changed_from_ = 0;
  uint64_t old_timeline_end_ = 0;
  // Logged once per silence (BusyWhileSilent).
  bool waiting_for_busy_walsender_ = false;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_POSTGRES_SOURCE_H_
