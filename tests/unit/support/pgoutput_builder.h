// pgoutput's messages, written byte by byte as PostgreSQL's documentation
// ("Logical Replication Message Formats") gives them: integers big-endian,
// strings NUL-terminated, the columns of a tuple as 'n' (null), 'u'
// (unchanged TOAST value) or 't' (Int32 length, text). For PgoutputDecoder's
// tests (tests/unit/pgoutput_*_test.cc), which also write the seed corpus of
// tests/fuzz/pgoutput_fuzz.cc with it, and for decoder_bench's pgoutput
// corpus (tests/bench/decoder_bench.cc).
//
// The messages are inline, in this header, because the benchmark links no
// test support; what the decoder's tests share besides (the pods table, its
// rows, the fixture) is pgoutput_fixture.h's.
//
// Thread safety: none needed; values, and functions that make them.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_PGOUTPUT_BUILDER_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_PGOUTPUT_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cdc/postgres/pgoutput_decoder.h"
#include "schema/table_mapping.h"

namespace walwatch::testing_pgoutput {

// A column of a tuple.
struct Datum {
  char kind;  // 'n', 'u', 't' ('b', binary, only to be refused)
  std::string text;
};
inline Datum Text(std::string text) { return Datum{'t', std::move(text)}; }
inline const Datum kNull{'n', ""};
inline const Datum kUnchanged{'u', ""};
using Tuple = std::vector<Datum>;

// A column of a Relation message.
struct RelColumn {
  std::string name;
  uint32_t type_oid;
  bool key;  // flag 1: part of the replica identity
};
inline constexpr uint32_t kInt8Oid = 20;
inline constexpr uint32_t kTextOid = 25;
inline constexpr uint32_t kTimestamptzOid = 1184;
inline constexpr uint32_t kJsonbOid = 3802;

// Inside a stream block (protocol version 2 on): the xid that a change,
// Relation, Type or logical message carries first.
using StreamXid = std::optional<uint32_t>;

// One message, field by field; converts to its bytes.
class PgMessage {
 public:
  explicit PgMessage(char type) { Int8(static_cast<uint8_t>(type)); }

  PgMessage& Int8(uint8_t v) {
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  PgMessage& Int16(uint16_t v) { return Big(v, 2); }
  PgMessage& Int32(uint32_t v) { return Big(v, 4); }
  PgMessage& Int64(uint64_t v) { return Big(v, 8); }
  PgMessage& String(std::string_view s) {
    bytes_.append(s);
    bytes_.push_back('\0');
    return *this;
  }
  PgMessage& Xid(StreamXid xid) { return xid ? Int32(*xid) : *this; }
  PgMessage& TupleData(const Tuple& columns) {
    Int16(static_cast<uint16_t>(columns.size()));
    for (const Datum& d : columns) {
      Int8(static_cast<uint8_t>(d.kind));
      if (d.kind == 't' || d.kind == 'b') {
        Int32(static_cast<uint32_t>(d.text.size()));
        bytes_.append(d.text);
      }
    }
    return *this;
  }

  operator std::string() const { return bytes_; }  // NOLINT: a builder

 private:
  PgMessage& Big(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) {
      bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    return *this;
  }

  std::string bytes_;
};

inline std::string Begin(uint64_t final_lsn, int64_t pg_time, uint32_t xid) {
  return PgMessage('B').Int64(final_lsn).Int64(pg_time).Int32(xid);
}
inline std::string Commit(uint64_t lsn, uint64_t end_lsn, int64_t pg_time) {
  return PgMessage('C').Int8(0).Int64(lsn).Int64(end_lsn).Int64(pg_time);
}
inline std::string Origin(uint64_t lsn, std::string_view name) {
  return PgMessage('O').Int64(lsn).String(name);
}
// replident: 'd' (default), 'n' (nothing), 'f' (full), 'i' (index).
inline std::string Relation(uint32_t id, std::string_view ns,
                            std::string_view name,
                            const std::vector<RelColumn>& columns,
                            StreamXid xid = std::nullopt,
                            char replident = 'f') {
  PgMessage m('R');
  m.Xid(xid).Int32(id).String(ns).String(name);
  m.Int8(static_cast<uint8_t>(replident));
  m.Int16(static_cast<uint16_t>(columns.size()));
  for (const RelColumn& c : columns) {
    m.Int8(c.key ? 1 : 0).String(c.name).Int32(c.type_oid).Int32(UINT32_MAX);
  }
  return m;
}
inline std::string Type(uint32_t oid, std::string_view ns,
                        std::string_view name, StreamXid xid = std::nullopt) {
  return PgMessage('Y').Xid(xid).Int32(oid).String(ns).String(name);
}
inline std::string LogicalMessage(bool transactional, uint64_t lsn,
                                  std::string_view prefix,
                                  std::string_view content,
                                  StreamXid xid = std::nullopt) {
  PgMessage m('M');
  m.Xid(xid).Int8(transactional ? 1 : 0).Int64(lsn).String(prefix);
  std::string s = m.Int32(static_cast<uint32_t>(content.size()));
  return s.append(content);
}
inline std::string Insert(uint32_t rel, const Tuple& row,
                          StreamXid xid = std::nullopt) {
  return PgMessage('I').Xid(xid).Int32(rel).Int8('N').TupleData(row);
}
// old_kind: 'O' (the old row, REPLICA IDENTITY FULL), 'K' (its key), or 0
// (none sent).
inline std::string Update(uint32_t rel, char old_kind, const Tuple& old_row,
                          const Tuple& new_row, StreamXid xid = std::nullopt) {
  PgMessage m('U');
  m.Xid(xid).Int32(rel);
  if (old_kind) m.Int8(static_cast<uint8_t>(old_kind)).TupleData(old_row);
  return m.Int8('N').TupleData(new_row);
}
inline std::string Delete(uint32_t rel, char old_kind, const Tuple& old_row,
                          StreamXid xid = std::nullopt) {
  return PgMessage('D').Xid(xid).Int32(rel).Int8(static_cast<uint8_t>(old_kind))
      .TupleData(old_row);
}
inline std::string Truncate(const std::vector<uint32_t>& rels,
                            StreamXid xid = std::nullopt) {
  PgMessage m('T');
  m.Xid(xid).Int32(static_cast<uint32_t>(rels.size())).Int8(0);
  for (uint32_t r : rels) m.Int32(r);
  return m;
}
inline std::string StreamStart(uint32_t xid, bool first) {
  return PgMessage('S').Int32(xid).Int8(first ? 1 : 0);
}
inline std::string StreamStop() { return PgMessage('E'); }
inline std::string StreamCommit(uint32_t xid, uint64_t lsn, uint64_t end_lsn,
                                int64_t pg_time) {
  return PgMessage('c').Int32(xid).Int8(0).Int64(lsn).Int64(end_lsn)
      .Int64(pg_time);
}
inline std::string StreamAbort(uint32_t xid, uint32_t subxid) {
  return PgMessage('A').Int32(xid).Int32(subxid);
}
// Protocol version 4 with streaming = parallel: the abort's LSN and time.
inline std::string StreamAbort(uint32_t xid, uint32_t subxid,
                               uint64_t abort_lsn, int64_t pg_time) {
  return PgMessage('A').Int32(xid).Int32(subxid).Int64(abort_lsn)
      .Int64(pg_time);
}

inline constexpr int64_t kUnixEpochInPgUs = -946684800 * int64_t{1000000};

// µs since 2000-01-01, as pgoutput sends times.
inline constexpr int64_t PgTime(int64_t unix_us) {
  return unix_us + kUnixEpochInPgUs;
}

}  // namespace walwatch::testing_pgoutput

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_PGOUTPUT_BUILDER_H_
