// Wal2JsonDecoder turns one wal2json format-version 2 message (one JSON
// object per change) into a Wal2JsonRecord, keeping only the columns the
// TableMapping names. It is the decoder's hot path: simdjson On-Demand with
// one reused parser, each field read once.
//
// Thread safety: a decoder is used by one thread (the replication thread).
// The TableMapping must outlive it.
#ifndef WALWATCH_CDC_WAL2JSON_DECODER_H_
#define WALWATCH_CDC_WAL2JSON_DECODER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

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

// The mapped columns of one tuple (`columns` or `identity`).
struct RowImage {
  bool present = false;  // the array was in the record
  std::array<ColumnValue, kMappedFieldCount> fields;

  const ColumnValue& operator[](MappedField f) const {
    return fields[static_cast<size_t>(f)];
  }
  ColumnValue& operator[](MappedField f) {
    return fields[static_cast<size_t>(f)];
  }
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

// `text` with control characters written as \xNN, so that an error message
// that quotes its input stays one line.
std::string OneLine(std::string text);

// Parses PostgreSQL's ISO timestamptz output in UTC, as wal2json writes it
// with DateStyle=ISO and TimeZone=UTC: "2026-12-02 13:21:36.726676+00".
// Returns false if `text` is not of that form.
bool ParsePgTimestamp(std::string_view text, int64_t* unix_micros);

}  // namespace walwatch

#endif  // WALWATCH_CDC_WAL2JSON_DECODER_H_
