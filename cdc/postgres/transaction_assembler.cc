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
RowAction RowActionOf(RecordAction action) {
  switch (action) {
    case RecordAction::kUpdate: return RowAction::kUpdate;
    case RecordAction::kDelete: return RowAction::kDelete;
    default: return RowAction::kInsert;
  }
}

}  // namespace

void TransactionAssembler::Reset() {
  in_txn_ = false;
  duplicate_ = false;
  current_ = Building();
  in_stream_ = false;
  streams_.clear();
  held_bytes_ = 0;
  // A new connection decodes afresh: what the lost message could have
  // broken is sent again.
  next_broken_ = false;
}

void TransactionAssembler::MarkBrokenOrNext() {
  if (in_txn_ || in_stream_) {
    MarkBroken();
  } else {
    next_broken_ = true;
  }
}

void TransactionAssembler::MarkBroken() {
  if (in_txn_) {
    if (!duplicate_) current_.txn.broken = true;
  } else if (in_stream_) {
    // A re-sent stream is known only at its commit: it is dropped there
    // whether broken or not.
    streams_[stream_xid_].txn.broken = true;
  }
}

bool TransactionAssembler::Touch(const RowImage& image, Transaction* txn) {
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
  txn->touched.insert(std::move(key));
  return true;
}

void TransactionAssembler::TouchChange(const RowImage& columns,
                                       const RowImage& identity,
                                       Transaction* txn) {
  // Both images: an UPDATE may move an object between clusters.
  bool known = Touch(columns, txn);
  known = Touch(identity, txn) || known;
  if (!known) txn->touched_unknown = true;
}

std::string TransactionAssembler::FeedChange(LogicalRecord& record,
                                             Building* b) {
  Transaction& t = b->txn;
  if (t.overflowed) {
    TouchChange(record.columns, record.identity, &t);
    return "";
  }
  size_t bytes = ChangeMemoryBytes(record.columns, record.identity);
  if (held_bytes_ + bytes > max_transaction_bytes_) {
    // Keep nothing more than what it touched: the watches of those
    // resources (and clusters) must relist.
    t.overflowed = true;
    for (const RowChange& c : t.changes) TouchChange(c.columns, c.identity, &t);
    TouchChange(record.columns, record.identity, &t);
    Release(*b);
    t.changes.clear();
    t.changes.shrink_to_fit();
    t.bytes = 0;
    b->subxids.clear();
    b->subxids.shrink_to_fit();
    return "";
  }
  t.bytes += bytes;
  held_bytes_ += bytes;
  t.changes.push_back(RowChange{RowActionOf(record.action), record.lsn,
                                std::move(record.columns),
                                std::move(record.identity)});
  if (in_stream_) b->subxids.push_back(record.xid);
  return "";
}

void TransactionAssembler::Finish(Building* b, uint64_t commit_lsn,
                                  Transaction* txn, Outcome* outcome) {
  Release(*b);
  // A transaction at or below the last commit appended is a re-send.
  if (commit_lsn <= last_commit_lsn_) {
    ++duplicates_dropped_;
    *outcome = Outcome::kDuplicate;
    return;
  }
  last_commit_lsn_ = commit_lsn;
  if (next_broken_) {
    b->txn.broken = true;
    next_broken_ = false;
  }
  *txn = std::move(b->txn);
  *outcome = Outcome::kCommitted;
}

std::string TransactionAssembler::Feed(LogicalRecord& record,
                                       Transaction* txn, Outcome* outcome) {
  *outcome = Outcome::kPending;
  std::string err;
  switch (record.action) {
    case RecordAction::kBegin:
      if (in_txn_ || in_stream_) {
        err = "begin of transaction " + std::to_string(record.xid) +
              (in_txn_ ? " inside transaction " + std::to_string(current_.txn.xid)
                       : " inside a stream block");
        break;
      }
      in_txn_ = true;
      current_ = Building();
      current_.txn.xid = record.xid;
      current_.txn.commit_lsn = record.lsn;  // B carries the commit's LSN
      current_.txn.end_lsn = record.next_lsn;
      current_.txn.commit_time_us = record.timestamp_us;
      // A re-send: its changes are skipped without being kept.
      duplicate_ = record.lsn <= last_commit_lsn_;
      return "";

    case RecordAction::kCommit:
      if (!in_txn_) {
        err = "commit at " + FormatLsn(record.lsn) + " outside a transaction";
        break;
      }
      if (record.lsn != current_.txn.commit_lsn) {
        err = "commit LSN " + FormatLsn(record.lsn) + " differs from its begin's " +
              FormatLsn(current_.txn.commit_lsn);
        break;
      }
      in_txn_ = false;
      // pgoutput's Begin does not carry the commit record's end; its
      // Commit does. (wal2json's Begin does: kept.)
      if (current_.txn.end_lsn == 0) current_.txn.end_lsn = record.next_lsn;
      Finish(&current_, record.lsn, txn, outcome);
      current_ = Building();
      return "";

    case RecordAction::kInsert:
    case RecordAction::kUpdate:
    case RecordAction::kDelete:
    case RecordAction::kTruncate: {
      Building* b = nullptr;
      if (in_txn_) {
        if (!duplicate_) b = &current_;
      } else if (in_stream_) {
        b = &streams_[stream_xid_];
      } else {
        err = "change at " + FormatLsn(record.lsn) + " outside a transaction";
        break;
      }
      if (b == nullptr || !record.mapped_table) return "";
      if (record.action == RecordAction::kTruncate) {
        b->txn.truncated = true;
        return "";
      }
      return FeedChange(record, b);
    }

    case RecordAction::kStreamStart:
      if (in_txn_ || in_stream_) {
        err = "stream start of transaction " + std::to_string(record.xid) +
              (in_txn_ ? " inside a transaction" : " inside a stream block");
        break;
      }
      in_stream_ = true;
      stream_xid_ = record.xid;
      streams_.try_emplace(record.xid);
      return "";

    case RecordAction::kStreamStop:
      if (!in_stream_) {
        err = "stream stop outside a stream block";
        break;
      }
      in_stream_ = false;
      return "";

    case RecordAction::kStreamCommit: {
      if (in_txn_ || in_stream_) {
        err = "stream commit of transaction " + std::to_string(record.xid) +
              (in_txn_ ? " inside a transaction" : " inside a stream block");
        break;
      }
      Building b;
      if (auto it = streams_.find(record.xid); it != streams_.end()) {
        b = std::move(it->second);
        streams_.erase(it);
      }
      b.txn.xid = record.xid;
      b.txn.commit_lsn = record.lsn;
      b.txn.end_lsn = record.next_lsn;
      b.txn.commit_time_us = record.timestamp_us;
      Finish(&b, record.lsn, txn, outcome);
      return "";
    }

    case RecordAction::kStreamAbort: {
      if (in_txn_ || in_stream_) {
        err = "stream abort of transaction " + std::to_string(record.xid) +
              (in_txn_ ? " inside a transaction" : " inside a stream block");
        break;
      }
      auto it = streams_.find(record.xid);
      if (it == streams_.end()) return "";
      Building& b = it->second;
      if (record.subxid == record.xid) {
        Release(b);
        streams_.erase(it);
        return "";
      }
      // One subtransaction rolled back: its changes go. (What an
      // overflowed transaction touched stays: a relist too many is safe.)
      size_t kept = 0;
      for (size_t i = 0; i < b.txn.changes.size(); ++i) {
        if (b.subxids[i] == record.subxid) {
          size_t bytes = ChangeMemoryBytes(b.txn.changes[i].columns,
                                           b.txn.changes[i].identity);
          b.txn.bytes -= bytes;
          held_bytes_ -= bytes;
          continue;
        }
        if (kept != i) {
          b.txn.changes[kept] = std::move(b.txn.changes[i]);
          b.subxids[kept] = b.subxids[i];
        }
        ++kept;
      }
      b.txn.changes.resize(kept);
      b.subxids.resize(kept);
      return "";
    }

    case RecordAction::kMessage:
      return "";
  }
  if (err.empty()) err = "unknown record action";
  Reset();
  return err;
}

}  // namespace walwatch
