// TransactionAssembler groups wal2json records (B, changes, C) into whole
// transactions in commit order, drops transactions already seen (the server
// re-sends after a reconnect, and on PG15 even from before the last confirmed
// position), and bounds the bytes a transaction may hold while it is built.
//
// Thread safety: used by the replication thread only.
#ifndef WALWATCH_CDC_TRANSACTION_ASSEMBLER_H_
#define WALWATCH_CDC_TRANSACTION_ASSEMBLER_H_

#include <cstdint>
#include <string>
#include <array>
#include <set>
#include <vector>

#include "cdc/wal2json_decoder.h"

namespace walwatch {

struct RowChange {
  Wal2JsonAction action;  // kInsert, kUpdate or kDelete
  uint64_t lsn;           // start of the change record (for error messages)
  RowImage columns;
  RowImage identity;
};

struct Transaction {
  uint32_t xid = 0;
  uint64_t full_xid = 0;    // xid widened to 64 bits (set by the caller)
  uint64_t commit_lsn = 0;  // start of the commit record: the RV base
  uint64_t end_lsn = 0;     // end of the commit record
  int64_t commit_time_us = 0;
  std::vector<RowChange> changes;  // of the mapped table, in order
  // The transaction truncated the mapped table: watchers must relist.
  bool truncated = false;
  // The transaction held more than max_transaction_bytes; its changes were
  // not kept, so watchers must relist: those of what it changed, `touched`,
  // the (group, version, resource, cluster) of each change's old and new
  // row, or every watcher if touched_unknown (a row without those columns).
  bool overflowed = false;
  std::set<std::array<std::string, 4>> touched;
  bool touched_unknown = false;
  // A record inside the transaction could not be decoded: a change may be
  // missing, so watchers must relist (set through MarkBroken).
  bool broken = false;
  size_t bytes = 0;  // bytes of the kept changes
};

// Bytes a change holds in memory (its strings' capacity and its own size):
// what max_transaction_bytes bounds.
size_t ChangeMemoryBytes(const RowImage& columns, const RowImage& identity);

class TransactionAssembler {
 public:
  // last_commit_lsn: transactions committing at or below it are duplicates.
  TransactionAssembler(size_t max_transaction_bytes, uint64_t last_commit_lsn);

  enum class Outcome {
    kPending,    // the record was taken; no transaction ended
    kCommitted,  // *txn holds a whole new transaction
    kDuplicate,  // a re-sent transaction ended and was dropped
  };

  // Takes one decoded record. On error (a record out of place) the partial
  // transaction is dropped and a one-line description returned; the caller
  // must reconnect so the server re-sends from the last confirmed position.
  std::string Feed(Wal2JsonRecord& record, Transaction* txn, Outcome* outcome);

  // Forgets a partial transaction, as after a lost connection.
  void Reset();

  // A record of the open transaction could not be decoded (and so could not
  // be fed): the transaction ends as broken. A re-sent (duplicate)
  // transaction stays dropped. Outside a transaction it does nothing.
  void MarkBroken() {
    if (in_txn_ && !duplicate_) current_.broken = true;
  }

  // Records a commit the log already holds, e.g. after a restart.
  void set_last_commit_lsn(uint64_t lsn) { last_commit_lsn_ = lsn; }
  uint64_t last_commit_lsn() const { return last_commit_lsn_; }

  uint64_t duplicates_dropped() const { return duplicates_dropped_; }
  bool in_transaction() const { return in_txn_; }

 private:
  // Adds the resource and cluster of `image` to current_.touched; false if
  // the image lacks them.
  bool Touch(const RowImage& image);
  // Touch of both images of a change (touched_unknown if neither has them).
  void TouchChange(const RowImage& columns, const RowImage& identity);

  const size_t max_transaction_bytes_;
  uint64_t last_commit_lsn_;
  bool in_txn_ = false;
  bool duplicate_ = false;
  Transaction current_;
  uint64_t duplicates_dropped_ = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_TRANSACTION_ASSEMBLER_H_
