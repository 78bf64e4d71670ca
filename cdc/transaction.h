// The database-neutral form of what a change source reads: row images of the
// mapped table (columns by MappedField, never by position), the row changes
// they make up, and whole transactions in commit order. A source builds
// these from its own stream (PostgreSQL: wal2json through
// cdc/postgres/transaction_assembler.h); from here on, through the commit
// policy and the EventBuilder into the EventSink, nothing depends on which
// database wrote them.
//
// Positions: a transaction's commit_lsn is its commit position as a uint64
// that grows along commit order, and the base of its events' RVs
// (PROTOCOL.md "resourceVersion"): on PostgreSQL the LSN of the commit
// record. commit_lsn - 1 must lie strictly between two commits, so that a
// transaction's earlier events can carry it.
//
// Plain values; thread safety is the holder's.
#ifndef WALWATCH_CDC_TRANSACTION_H_
#define WALWATCH_CDC_TRANSACTION_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "schema/table_mapping.h"

namespace walwatch {

// One mapped column of a row image.
struct ColumnValue {
  enum class State : uint8_t {
    kAbsent,  // not in the tuple: for `columns` of an UPDATE, an unchanged
              // TOAST value (wal2json omits it entirely)
    kNull,
    kValue,
  };
  State state = State::kAbsent;
  // Strings unescaped once (for json/jsonb: the JSON text itself); numbers
  // and booleans as their JSON token. When it holds a json object, its
  // capacity leaves simdjson's padding so it can be parsed in place.
  std::string text;

  bool operator==(const ColumnValue& o) const {
    return state == o.state && text == o.text;
  }
  bool operator!=(const ColumnValue& o) const { return !(*this == o); }
};

// The mapped columns of one tuple: a row's new image or its old one.
struct RowImage {
  bool present = false;  // the source gave this image at all
  std::array<ColumnValue, kMappedFieldCount> fields;

  const ColumnValue& operator[](MappedField f) const {
    return fields[static_cast<size_t>(f)];
  }
  ColumnValue& operator[](MappedField f) {
    return fields[static_cast<size_t>(f)];
  }
};

enum class RowAction : char {
  kInsert = 'I',
  kUpdate = 'U',
  kDelete = 'D',
};

struct RowChange {
  RowAction action;
  uint64_t lsn;       // the change's position in the source (for messages)
  RowImage columns;   // the new row (INSERT, UPDATE)
  RowImage identity;  // the old row (UPDATE, DELETE): under PostgreSQL's
                      // REPLICA IDENTITY FULL, or a binlog's full image, all
                      // of it
};

struct Transaction {
  // The source's transaction id as its messages name it (PostgreSQL: the
  // 32-bit xid), and as an id unique within one history of the database,
  // which the source's handoff compares (PostgreSQL: the xid widened to 64
  // bits with its epoch; set by the source). 0 if none.
  uint32_t xid = 0;
  uint64_t full_xid = 0;
  uint64_t commit_lsn = 0;  // the commit position: the RV base (see above)
  uint64_t end_lsn = 0;     // where reading again starts after this commit
  int64_t commit_time_us = 0;
  std::vector<RowChange> changes;  // of the mapped table, in order
  // The transaction truncated the mapped table (or changed it by DDL):
  // watchers must relist.
  bool truncated = false;
  // The transaction held more than the source's max_transaction_bytes; its
  // changes were not kept, so watchers must relist: those of what it
  // changed, `touched`, the (group, version, resource, cluster) of each
  // change's old and new row, or every watcher if touched_unknown (a row
  // without those columns).
  bool overflowed = false;
  std::set<std::array<std::string, 4>> touched;
  bool touched_unknown = false;
  // A record inside the transaction could not be decoded: a change may be
  // missing, so watchers must relist.
  bool broken = false;
  size_t bytes = 0;  // bytes of the kept changes
};

// How a source writes its positions in log lines and error messages
// (PostgreSQL: FormatLsn's "16/B374D848").
using PositionFormatter = std::string (*)(uint64_t position);

// Bytes a change holds in memory (its strings' capacity and its own size):
// what a source's max_transaction_bytes bounds.
size_t ChangeMemoryBytes(const RowImage& columns, const RowImage& identity);

}  // namespace walwatch

#endif  // WALWATCH_CDC_TRANSACTION_H_
