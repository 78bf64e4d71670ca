// LogicalDecoder: what PostgresSource asks of an output plugin's decoder. One
// message of the replication stream (an XLogData payload) in, one
// LogicalRecord out. wal2json (Wal2JsonDecoder, the default) and pgoutput
// (PgoutputDecoder) implement it.
//
// Thread safety: a decoder is used by one thread (the replication thread).
#ifndef WALWATCH_CDC_POSTGRES_LOGICAL_DECODER_H_
#define WALWATCH_CDC_POSTGRES_LOGICAL_DECODER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "cdc/postgres/logical_record.h"

namespace walwatch {

class LogicalDecoder {
 public:
  virtual ~LogicalDecoder() = default;

  // Decodes `message`, which the server sent as an XLogData starting at
  // `wal_start`, into `*out` (fully overwritten). Returns "" on success, or
  // a one-line description of what is wrong with the message.
  virtual std::string Decode(std::string_view message, uint64_t wal_start,
                             LogicalRecord* out) = 0;

  // A new replication connection starts: forget what the previous one said
  // (pgoutput's relations, and whether a stream was open).
  virtual void Reset() {}
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_LOGICAL_DECODER_H_
