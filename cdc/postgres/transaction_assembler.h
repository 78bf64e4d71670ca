// TransactionAssembler groups decoded records (cdc/postgres/logical_record.h)
// into whole transactions (cdc/transaction.h) in commit order, drops
// transactions already seen (the server re-sends after a reconnect, and on
// PG15 even from before the last confirmed position), and bounds the bytes
// transactions may hold while they are built.
//
// Two shapes of input:
//   * Begin, changes, Commit: one transaction at a time (wal2json, and
//     pgoutput for a transaction decoded at its commit).
//   * Streams (pgoutput, protocol version 2 on): a transaction larger than
//     the server's logical_decoding_work_mem is sent before its commit, in
//     blocks (StreamStart, changes, StreamStop) that may interleave with
//     other streamed transactions' blocks and with whole transactions that
//     commit meanwhile. Its changes are held until StreamCommit, which makes
//     it a whole transaction at its place in commit order; StreamAbort
//     drops it, or only the changes of the subtransaction it names. A
//     StreamCommit of a transaction with no block held (all its changes
//     were of other tables) is an empty transaction.
// max_transaction_bytes bounds the bytes held by all transactions being
// built together (the open one and every open stream): the change that
// would pass it makes its own transaction overflow (cdc/transaction.h).
//
// Thread safety: used by the replication thread only.
#ifndef WALWATCH_CDC_POSTGRES_TRANSACTION_ASSEMBLER_H_
#define WALWATCH_CDC_POSTGRES_TRANSACTION_ASSEMBLER_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cdc/postgres/logical_record.h"
#include "cdc/transaction.h"

namespace walwatch {

class TransactionAssembler {
 public:
  // last_commit_lsn: transactions committing at or below it are duplicates.
  TransactionAssembler(size_t max_transaction_bytes, uint64_t last_commit_lsn);

  enum class Outcome {
    kPending,    // the record was taken; no transaction ended
    kCommitted,  // *txn holds a whole new transaction
    kDuplicate,  // a re-sent transaction ended and was dropped
  };

  // Takes one decoded record. On error (a record out of place) every
  // transaction being built is dropped and a one-line description
  // returned; the caller must reconnect so the server re-sends from the
  // last confirmed position.
  std::string Feed(LogicalRecord& record, Transaction* txn, Outcome* outcome);

  // Forgets the transactions being built, as after a lost connection (the
  // server decodes again from the slot's restart point, and streams again
  // from their start those it had streamed).
  void Reset();

  // A record of the open transaction (or stream block) could not be
  // decoded, and so could not be fed: its transaction ends as broken. A
  // re-sent (duplicate) transaction stays dropped. Outside a transaction it
  // does nothing.
  void MarkBroken();
  // As MarkBroken, and outside a transaction the next transaction to commit
  // ends as broken: pgoutput's messages depend on the ones before them (a
  // stream block's start, a relation), so a message that could not be
  // decoded between transactions may have been one a later change needed.
  void MarkBrokenOrNext();

  // Records a commit the log already holds, e.g. after a restart.
  void set_last_commit_lsn(uint64_t lsn) { last_commit_lsn_ = lsn; }
  uint64_t last_commit_lsn() const { return last_commit_lsn_; }

  uint64_t duplicates_dropped() const { return duplicates_dropped_; }
  // Inside Begin..Commit or a stream block: a keepalive's position is not
  // between records of the stream.
  bool in_transaction() const { return in_txn_ || in_stream_; }
  // Streamed transactions begun and not yet committed or aborted.
  size_t open_streams() const { return streams_.size(); }
  size_t held_bytes() const { return held_bytes_; }

 private:
  // A transaction being built.
  struct Building {
    Transaction txn;
    // Streams: the subtransaction of each kept change, for StreamAbort.
    std::vector<uint32_t> subxids;
  };

  std::string FeedChange(LogicalRecord& record, Building* b);
  // Ends `b` at its commit: a new transaction into *txn, or a duplicate.
  void Finish(Building* b, uint64_t commit_lsn, Transaction* txn,
              Outcome* outcome);
  // Forgets `b`'s bytes.
  void Release(const Building& b) { held_bytes_ -= b.txn.bytes; }
  // Adds the resource and cluster of `image` to txn->touched; false if the
  // image lacks them.
  static bool Touch(const RowImage& image, Transaction* txn);
  // Touch of both images of a change (touched_unknown if neither has them).
  static void TouchChange(const RowImage& columns, const RowImage& identity,
                          Transaction* txn);

  const size_t max_transaction_bytes_;
  uint64_t last_commit_lsn_;
  bool in_txn_ = false;
  bool duplicate_ = false;  // the open Begin..Commit is a re-send
  bool next_broken_ = false;  // MarkBrokenOrNext outside a transaction
  Building current_;
  bool in_stream_ = false;
  uint32_t stream_xid_ = 0;  // the open block's transaction
  std::unordered_map<uint32_t, Building> streams_;
  size_t held_bytes_ = 0;  // kept changes' bytes, of current_ and streams_
  uint64_t duplicates_dropped_ = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_TRANSACTION_ASSEMBLER_H_
