// The bridge from the binlog reader to the database-neutral row changes:
// a BinlogTransaction of the mapped table becomes the Transaction that
// cdc/transaction.h defines (RowChange, RowImage keyed by MappedField), so
// that the event path downstream (folding, row-to-event rules, the event
// log) takes both sources alike.
//
// Positions become the uint64 "LSNs" of that form through BinlogVersion
// (binlog_position.h): commit_lsn and end_lsn are the commit position's
// version, a change's lsn its ROWS event's. An UPDATE's old row and a
// DELETE's row go to `identity`, complete (binlog_row_image=FULL is like
// REPLICA IDENTITY FULL); nothing is ever kAbsent (the binlog has no TOAST).
// A statement naming the table (TRUNCATE, DDL) sets `truncated`: watchers
// relist. An overflowed transaction sets `overflowed`, with `touched` from
// the reader's kept keys: BinlogReaderOptions::key_columns must be
// OverflowKeyColumns(), else (or with a row without them) touched_unknown.
//
// Thread safety: pure functions.
#ifndef WALWATCH_CDC_MYSQL_ROW_CHANGE_CONVERSION_H_
#define WALWATCH_CDC_MYSQL_ROW_CHANGE_CONVERSION_H_

#include <string>
#include <vector>

#include "cdc/mysql/binlog_reader.h"
#include "cdc/transaction.h"
#include "schema/table_mapping.h"

namespace walwatch::mysql {

// The key_columns a BinlogReader keeps for an overflowed transaction:
// group, version, resource and cluster, in that order (Transaction::touched).
std::vector<size_t> OverflowKeyColumns();

// The columns a BinlogReader must read for `mapping`, in MappedField order,
// so that row image index i is MappedField i.
std::vector<std::string> MappedColumnNames(const TableMapping& mapping);

// Converts `in`, read with MappedColumnNames from a server of `history`
// (BinlogHistory), into `*out` (overwritten). Returns "" or one line (a
// position without a version: BinlogVersion).
std::string ToTransaction(const BinlogTransaction& in, uint64_t history,
                          Transaction* out);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_ROW_CHANGE_CONVERSION_H_
