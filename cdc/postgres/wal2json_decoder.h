// Wal2JsonDecoder turns one wal2json format-version 2 message (one JSON
// object per change) into a LogicalRecord, keeping only the columns the
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

#include "cdc/postgres/logical_decoder.h"
#include "schema/table_mapping.h"

namespace walwatch {

class Wal2JsonDecoder final : public LogicalDecoder {
 public:
  explicit Wal2JsonDecoder(const TableMapping& mapping);
  ~Wal2JsonDecoder() override;
  Wal2JsonDecoder(const Wal2JsonDecoder&) = delete;
  Wal2JsonDecoder& operator=(const Wal2JsonDecoder&) = delete;

  // LogicalDecoder. `wal_start` is unused: wal2json writes each change's
  // position into the message.
  std::string Decode(std::string_view message, uint64_t wal_start,
                     LogicalRecord* out) override;
  std::string Decode(std::string_view message, LogicalRecord* out) {
    return Decode(message, 0, out);
  }

 private:
  std::string DecodeMessage(std::string_view message, LogicalRecord* out);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses PostgreSQL's ISO timestamptz output in UTC, as wal2json writes it
// with DateStyle=ISO and TimeZone=UTC: "2026-12-02 13:21:36.726676+00".
// Returns false if `text` is not of that form.
bool ParsePgTimestamp(std::string_view text, int64_t* unix_micros);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_WAL2JSON_DECODER_H_
