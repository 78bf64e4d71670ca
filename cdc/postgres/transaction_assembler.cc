#include "cdc/postgres/transaction_assembler.h"

#include <utility>

#include "cdc/postgres/lsn.h"

namespace walwatch {

TransactionAssembler::TransactionAssembler(size_t max_transaction_bytes,
                                           uint64_t last_commit_lsn)
    : max_transaction_bytes_(max_transaction_bytes),
      last_commit_lsn_(last_commit_lsn) {}

namespace {

// I, U and D; the other actions never become a row change.
RowAction RowActionOf(Wal2JsonAction action) {
  switch (action) {
    case Wal2JsonAction::kUpdate: return RowAction::kUpdate;
    case Wal2JsonAction::kDelete: return RowAction::kDelete;
    default: return RowAction::kInsert;
  }
}

}  // namespace

void TransactionAssembler::Reset() {
  in_txn_ = false;
  duplicate_ = false;
  current_ = Transaction();
}

bool TransactionAssembler::Touch(const RowImage& image) {
  // No old row (INSERT), no new one (DELETE), or the column missing from
  // the image (an UPDATE's unchanged TOAST value; an old row without
  // REPLICA IDENTITY FULL).
  if (!image.present) return false;
  std::array<std::string, 4> key;
  const MappedField fields[] = {MappedField::kGroup, MappedField::kVersion,
                                MappedField::kResource, MappedField::kCluster};
  for (size_t i = 0; i < 4; ++i) {
    const ColumnValue& v = image[fields[i]];
    if (v.state == ColumnValue::State::kAbsent) return false;
    if (v.state == ColumnValue::State::kValue) key[i] = v.text;
  }
  current_.touched.insert(std::move(key));
  return true;
}

void TransactionAssembler::TouchChange(const RowImage& columns,
                                       const RowImage& identity) {
  // Both images: an UPDATE may move an object between clusters.
  bool known = Touch(columns);
  known = Touch(identity) || known;
  if (!known) current_.touched_unknown = true;
}

std::string TransactionAssembler::Feed(Wal2JsonRecord& record,
                                       Transaction* txn, Outcome* outcome) {
  *outcome = Outcome::kPending;
  switch (record.action) {
    case Wal2JsonAction::kBegin:
      if (in_txn_) {
        std::string err = "begin of transaction " +
                          std::to_string(record.xid) + " inside transaction " +
                          std::to_string(current_.xid);
        Reset();
        return err;
      }
      in_txn_ = true;
      current_ = Transaction();
      current_.xid = record.xid;
      current_.commit_lsn = record.lsn;  // B carries the commit record's LSN
      current_.end_lsn = record.next_lsn;
      current_.commit_time_us = record.timestamp_us;
      // A transaction at or below the last commit appended is a re-send:
      // skip its changes without keeping them.
      duplicate_ = record.lsn <= last_commit_lsn_;
      return "";

    case Wal2JsonAction::kCommit: {
      if (!in_txn_) return "commit at " + FormatLsn(record.lsn) + " outside a transaction";
      if (record.lsn != current_.commit_lsn) {
        std::string err = "commit LSN " + FormatLsn(record.lsn) +
                          " differs from its begin's " +
                          FormatLsn(current_.commit_lsn);
        Reset();
        return err;
      }
      in_txn_ = false;
      if (duplicate_) {
        ++duplicates_dropped_;
        *outcome = Outcome::kDuplicate;
        current_ = Transaction();
        return "";
      }
      last_commit_lsn_ = current_.commit_lsn;
      *txn = std::move(current_);
      current_ = Transaction();
      *outcome = Outcome::kCommitted;
      return "";
    }

    case Wal2JsonAction::kInsert:
    case Wal2JsonAction::kUpdate:
    case Wal2JsonAction::kDelete:
      if (!in_txn_) return "change at " + FormatLsn(record.lsn) + " outside a transaction";
      if (duplicate_ || !record.mapped_table) return "";
      if (current_.overflowed) {
        TouchChange(record.columns, record.identity);
        return "";
      }
      {
        size_t bytes = ChangeMemoryBytes(record.columns, record.identity);
        if (current_.bytes + bytes > max_transaction_bytes_) {
          // Keep nothing more than what it touched: the watches of those
          // resources (and clusters) must relist.
          current_.overflowed = true;
          for (const RowChange& c : current_.changes) {
            TouchChange(c.columns, c.identity);
          }
          TouchChange(record.columns, record.identity);
          current_.changes.clear();
          current_.changes.shrink_to_fit();
          current_.bytes = 0;
          return "";
        }
        current_.bytes += bytes;
        current_.changes.push_back(RowChange{RowActionOf(record.action),
                                             record.lsn,
                                             std::move(record.columns),
                                             std::move(record.identity)});
      }
      return "";

    case Wal2JsonAction::kTruncate:
      if (!in_txn_) return "truncate outside a transaction";
      if (!duplicate_ && record.mapped_table) current_.truncated = true;
      return "";

    case Wal2JsonAction::kMessage:
      return "";
  }
  return "";
}

}  // namespace walwatch
