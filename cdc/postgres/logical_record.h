// LogicalRecord: one message of a logical decoding output plugin, decoded.
// Both decoders (wal2json_decoder.h, pgoutput_decoder.h) write it and the
// TransactionAssembler reads it, so nothing past the decoder knows which
// plugin the slot uses.
//
// A record is a transaction's begin or commit, a change of a table (with the
// mapped columns of its images), or, from pgoutput's protocol version 2 on,
// a large transaction streamed before its commit: StreamStart, its changes,
// StreamStop, repeated, then StreamCommit or StreamAbort. wal2json never
// streams.
//
// Plain values; thread safety is the holder's.
#ifndef WALWATCH_CDC_POSTGRES_LOGICAL_RECORD_H_
#define WALWATCH_CDC_POSTGRES_LOGICAL_RECORD_H_

#include <cstdint>

#include "cdc/transaction.h"

namespace walwatch {

enum class RecordAction : char {
  kBegin = 'B',
  kCommit = 'C',
  kInsert = 'I',
  kUpdate = 'U',
  kDelete = 'D',
  kTruncate = 'T',
  // Nothing for the assembler: a logical message, pgoutput's Relation,
  // Type and Origin messages.
  kMessage = 'M',
  kStreamStart = 'S',
  kStreamStop = 'E',
  kStreamCommit = 'c',
  kStreamAbort = 'A',
};

struct LogicalRecord {
  RecordAction action = RecordAction::kMessage;
  // B, C, StreamCommit: the transaction. StreamStart and StreamAbort: the
  // streamed (top-level) transaction. A change inside a stream: the
  // (sub)transaction that made it. Otherwise 0.
  uint32_t xid = 0;
  // StreamAbort: the subtransaction rolled back, or xid itself when the
  // whole transaction was.
  uint32_t subxid = 0;
  // B, C and StreamCommit: start of the commit record. A change: start of
  // its own record.
  uint64_t lsn = 0;
  uint64_t next_lsn = 0;      // B, C, StreamCommit: end of the commit record
  int64_t timestamp_us = 0;   // commit time, µs since the Unix epoch
  bool mapped_table = false;  // I/U/D/T: the change is of the mapped table
  RowImage columns;
  RowImage identity;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_LOGICAL_RECORD_H_
