// PgoutputDecoder turns one message of pgoutput, PostgreSQL's built-in
// output plugin (the logical replication protocol, "Logical Replication
// Message Formats" in PostgreSQL's documentation), into a LogicalRecord with
// the same row images as Wal2JsonDecoder gives for the same change, so that
// both plugins yield the same events and the same RVs.
//
//   * Protocol versions 1 to 4. From version 2 on, a change, Relation, Type
//     or logical message inside a stream block (StreamStart .. StreamStop)
//     carries its (sub)transaction's xid; StreamAbort carries the abort's
//     position and time when the server sends them (streaming = parallel,
//     version 4): told apart by the message's length.
//   * Relation messages are kept (relation id -> mapped columns by name,
//     never by position); a change of a relation not announced on this
//     connection is an error. Relations are forgotten at Reset (a new
//     connection announces them again).
//   * Tuples in text format, as walwatch asks (binary 'false'): a mapped
//     column's text is copied once into the row image, with simdjson's
//     padding behind the object column; unmapped columns are skipped. An
//     unchanged TOAST value ('u') is absent, as wal2json omits it. In an old
//     key ('K', REPLICA IDENTITY DEFAULT or USING INDEX) the columns that
//     are not part of the key are absent too (pgoutput sends them as null;
//     wal2json leaves them out).
//   * A change's position is its XLogData's start (pgoutput does not repeat
//     it in the message); Begin and Commit carry the commit record's.
//   * Two-phase messages are refused: walwatch never enables two_phase.
//
// Thread safety: used by one thread (the replication thread). The
// TableMapping must outlive it.
#ifndef WALWATCH_CDC_POSTGRES_PGOUTPUT_DECODER_H_
#define WALWATCH_CDC_POSTGRES_PGOUTPUT_DECODER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cdc/postgres/logical_decoder.h"
#include "schema/table_mapping.h"

namespace walwatch {

class PgoutputDecoder final : public LogicalDecoder {
 public:
  explicit PgoutputDecoder(const TableMapping& mapping);
  PgoutputDecoder(const PgoutputDecoder&) = delete;
  PgoutputDecoder& operator=(const PgoutputDecoder&) = delete;

  // LogicalDecoder.
  std::string Decode(std::string_view message, uint64_t wal_start,
                     LogicalRecord* out) override;
  void Reset() override;

  // Relations announced on this connection (for tests).
  size_t relation_count() const { return relations_.size(); }

 private:
  struct Relation {
    bool mapped = false;  // schema.table is the mapped table
    // Per column, by position in the tuple: its MappedField, or -1.
    std::vector<int8_t> fields;
    // Per column: part of the replica identity key (flag 1).
    std::vector<bool> key;
  };

  class Reader;
  std::string DecodeMessage(Reader& in, uint64_t wal_start,
                            LogicalRecord* out);
  std::string DecodeRelation(Reader& in);
  std::string DecodeTuple(Reader& in, const Relation& rel, bool old_key,
                          RowImage* image);
  // The relation a change names, or an error.
  std::string FindRelation(Reader& in, const Relation** rel);

  const TableMapping& mapping_;
  std::unordered_map<uint32_t, Relation> relations_;
  // A Relation message's, kept once the whole message has been read.
  bool have_pending_relation_ = false;
  uint32_t pending_relation_id_ = 0;
  Relation pending_relation_;
  bool in_stream_ = false;  // between StreamStart and StreamStop
};

// pgoutput's timestamps: µs since 2000-01-01 00:00 UTC, to µs since the
// Unix epoch.
inline int64_t PgEpochToUnixMicros(int64_t pg_micros) {
  return pg_micros + int64_t{946684800} * 1000000;
}

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_PGOUTPUT_DECODER_H_
