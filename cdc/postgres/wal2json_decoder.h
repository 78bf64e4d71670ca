// Wal2JsonDecoder turns one wal2json format-version 2 message (one JSON
// object per change) into a Wal2JsonRecord, keeping only the columns the
// TableMapping names, as the neutral row images of cdc/transaction.h. It is
// the decoder's hot path: simdjson On-Demand with
// one reused parser, each field read once.
//
// Thread safety: a decoder is used by one thread (the replication thread).
// The TableMapping must outlive it.
#ifndef WALWATCH_CDC_POSTGRES_WAL2JSON_DECODER_H_
#define WALWATCH_CDC_POSTGRES_WAL2JSON_DECODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cdc/transaction.h"
#include "schema/table_mapping.h"

namespace walwatch {

enum class Wal2JsonAction : char {
  kBegin = 'B',
  kCommit = 'C',
  kInsert = 'I',
  kUpdate = 'U',
  kDelete = 'D',
  kTruncate = 'T',
  kMessage = 'M',
};

struct Wal2JsonRecord {
  Wal2JsonAction action = Wal2JsonAction::kMessage;
  uint32_t xid = 0;
  // B and C: start of the commit record. I/U/D/T: start of the change record.
  uint64_t lsn = 0;
  uint64_t next_lsn = 0;     // B and C: end of the commit record
  int64_t timestamp_us = 0;  // commit time, µs since the Unix epoch
  bool mapped_table = false;  // I/U/D/T: schema.table is the mapped table
  RowImage columns;
  RowImage identity;
};

class Wal2JsonDecoder {
 public:
  explicit Wal2JsonDecoder(const TableMapping& mapping);
  ~Wal2JsonDecoder();
  Wal2JsonDecoder(const Wal2JsonDecoder&) = delete;
  Wal2JsonDecoder& operator=(const Wal2JsonDecoder&) = delete;

  // Decodes `message` into `*out` (fully overwritten). Returns "" on success,
  // or a one-line description of what is wrong with the message.
  std::string Decode(std::string_view message, Wal2JsonRecord* out);

 private:
  std::string DecodeMessage(std::string_view message, Wal2JsonRecord* out);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses PostgreSQL's ISO timestamptz output in UTC, as wal2json writes it
// with DateStyle=ISO and TimeZone=UTC: "2026-12-02 13:21:36.726676+00".
// Returns false if `text` is not of that form.
bool ParsePgTimestamp(std::string_view text, int64_t* unix_micros);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_WAL2JSON_DECODER_H_
