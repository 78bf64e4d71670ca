// TransactionAssembler groups wal2json records (B, changes, C) into whole
// transactions (cdc/transaction.h) in commit order, drops transactions
// already seen (the server re-sends after a reconnect, and on PG15 even from
// before the last confirmed position), and bounds the bytes a transaction
// may hold while it is built.
//
// Thread safety: used by the replication thread only.
#ifndef WALWATCH_CDC_POSTGRES_TRANSACTION_ASSEMBLER_H_
#define WALWATCH_CDC_POSTGRES_TRANSACTION_ASSEMBLER_H_

#include <cstdint>
#include <string>

#include "cdc/transaction.h"
#include "cdc/postgres/wal2json_decoder.h"

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

#endif  // WALWATCH_CDC_POSTGRES_TRANSACTION_ASSEMBLER_H_
