// PgoutputDecoder against its header's contract, on messages written here
// byte by byte as PostgreSQL's documentation gives them: each kind of
// message, streams (protocol version 2 on), every cut and corruption of
// them, and the capture's changes (tests/data/wal2json_v2_capture.jsonl)
// decoding to the row images Wal2JsonDecoder gives. The same builder writes
// the seed corpus of tests/fuzz/pgoutput_fuzz.cc (at the end).
#include "cdc/postgres/pgoutput_decoder.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "cdc/postgres/lsn.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "tests/unit/wal2json_capture.h"

namespace walwatch {
namespace {

using testing_capture::ReadCaptureLines;
using State = ColumnValue::State;

// ---------------------------------------------------------------------------
// pgoutput's messages, written as PostgreSQL's documentation ("Logical
// Replication Message Formats") gives them: integers big-endian, strings
// NUL-terminated, columns of a tuple as 'n' (null), 'u' (unchanged TOAST
// value) or 't' (Int32 length, text).

struct Datum {
  char kind;  // 'n', 'u', 't'
  std::string text;
};
Datum Text(std::string text) { return Datum{'t', std::move(text)}; }
const Datum kNull{'n', ""};
const Datum kUnchanged{'u', ""};
using Tuple = std::vector<Datum>;

// A column of a Relation message.
struct RelColumn {
  std::string name;
  uint32_t type_oid;
  bool key;  // flag 1: part of the replica identity
};
constexpr uint32_t kInt8Oid = 20;
constexpr uint32_t kTextOid = 25;
constexpr uint32_t kTimestamptzOid = 1184;
constexpr uint32_t kJsonbOid = 3802;

// Inside a stream block (protocol version 2 on): the xid that a change,
// Relation, Type or logical message carries first.
using StreamXid = std::optional<uint32_t>;

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

std::string Begin(uint64_t final_lsn, int64_t pg_time, uint32_t xid) {
  return PgMessage('B').Int64(final_lsn).Int64(pg_time).Int32(xid);
}
std::string Commit(uint64_t lsn, uint64_t end_lsn, int64_t pg_time) {
  return PgMessage('C').Int8(0).Int64(lsn).Int64(end_lsn).Int64(pg_time);
}
std::string Origin(uint64_t lsn, std::string_view name) {
  return PgMessage('O').Int64(lsn).String(name);
}
std::string Relation(uint32_t id, std::string_view ns, std::string_view name,
                     const std::vector<RelColumn>& columns,
                     StreamXid xid = std::nullopt, char replident = 'f') {
  PgMessage m('R');
  m.Xid(xid).Int32(id).String(ns).String(name);
  m.Int8(static_cast<uint8_t>(replident));
  m.Int16(static_cast<uint16_t>(columns.size()));
  for (const RelColumn& c : columns) {
    m.Int8(c.key ? 1 : 0).String(c.name).Int32(c.type_oid).Int32(UINT32_MAX);
  }
  return m;
}
std::string Type(uint32_t oid, std::string_view ns, std::string_view name,
                 StreamXid xid = std::nullopt) {
  return PgMessage('Y').Xid(xid).Int32(oid).String(ns).String(name);
}
std::string LogicalMessage(bool transactional, uint64_t lsn,
                           std::string_view prefix, std::string_view content,
                           StreamXid xid = std::nullopt) {
  PgMessage m('M');
  m.Xid(xid).Int8(transactional ? 1 : 0).Int64(lsn).String(prefix);
  std::string s = m.Int32(static_cast<uint32_t>(content.size()));
  return s.append(content);
}
std::string Insert(uint32_t rel, const Tuple& row, StreamXid xid = std::nullopt) {
  return PgMessage('I').Xid(xid).Int32(rel).Int8('N').TupleData(row);
}
// old_kind: 'O' (the old row, REPLICA IDENTITY FULL), 'K' (its key), or 0
// (none sent).
std::string Update(uint32_t rel, char old_kind, const Tuple& old_row,
                   const Tuple& new_row, StreamXid xid = std::nullopt) {
  PgMessage m('U');
  m.Xid(xid).Int32(rel);
  if (old_kind) m.Int8(static_cast<uint8_t>(old_kind)).TupleData(old_row);
  return m.Int8('N').TupleData(new_row);
}
std::string Delete(uint32_t rel, char old_kind, const Tuple& old_row,
                   StreamXid xid = std::nullopt) {
  return PgMessage('D').Xid(xid).Int32(rel).Int8(static_cast<uint8_t>(old_kind))
      .TupleData(old_row);
}
std::string Truncate(const std::vector<uint32_t>& rels,
                     StreamXid xid = std::nullopt) {
  PgMessage m('T');
  m.Xid(xid).Int32(static_cast<uint32_t>(rels.size())).Int8(0);
  for (uint32_t r : rels) m.Int32(r);
  return m;
}
std::string StreamStart(uint32_t xid, bool first) {
  return PgMessage('S').Int32(xid).Int8(first ? 1 : 0);
}
std::string StreamStop() { return PgMessage('E'); }
std::string StreamCommit(uint32_t xid, uint64_t lsn, uint64_t end_lsn,
                         int64_t pg_time) {
  return PgMessage('c').Int32(xid).Int8(0).Int64(lsn).Int64(end_lsn)
      .Int64(pg_time);
}
std::string StreamAbort(uint32_t xid, uint32_t subxid) {
  return PgMessage('A').Int32(xid).Int32(subxid);
}
// Protocol version 4 with streaming = parallel: the abort's LSN and time.
std::string StreamAbort(uint32_t xid, uint32_t subxid, uint64_t abort_lsn,
                        int64_t pg_time) {
  return PgMessage('A').Int32(xid).Int32(subxid).Int64(abort_lsn)
      .Int64(pg_time);
}

// ---------------------------------------------------------------------------
// Rows.

constexpr uint32_t kResourcesRel = 16385;
constexpr uint32_t kOtherRel = 16390;

constexpr int64_t kDayStartUs = 1796217696000000;  // 2026-12-02 13:21:36 UTC
constexpr int64_t kUnixEpochInPgUs = -946684800 * int64_t{1000000};

// µs since 2000-01-01, as pgoutput sends times.
int64_t PgTime(int64_t unix_us) { return unix_us + kUnixEpochInPgUs; }

constexpr char kObject[] = R"({"kind": "Pod", "metadata": {"name": "p"}})";

// A table with the nine mapped columns (the default mapping's names), an
// unmapped key column first and an unmapped one among them.
std::vector<RelColumn> PodColumns() {
  return {{"id", kInt8Oid, true},       {"group", kTextOid, false},
          {"version", kTextOid, false}, {"resource", kTextOid, false},
          {"kind", kTextOid, false},    {"cluster", kTextOid, false},
          {"namespace", kTextOid, false}, {"name", kTextOid, false},
          {"owner_uid", kTextOid, false}, {"uid", kTextOid, false},
          {"object", kJsonbOid, false}};
}
Tuple PodRow(const std::string& name, const std::string& object = kObject) {
  return {Text("7"),    Text(""),      Text("v1"), Text("pods"),
          Text("Pod"),  Text("c1"),    Text("ns"), Text(name),
          Text(""),     Text("u-" + name), Text(object)};
}

class PgoutputDecoderTest : public ::testing::Test {
 protected:
  PgoutputDecoderTest() : mapping_(DefaultTableMapping()), decoder_(mapping_) {}

  LogicalRecord DecodeOk(const std::string& message, uint64_t wal_start = 0) {
    LogicalRecord r;
    std::string err = decoder_.Decode(message, wal_start, &r);
    EXPECT_EQ(err, "") << "message of " << message.size() << " bytes, type "
                       << (message.empty() ? '-' : message[0]);
    return r;
  }
  std::string DecodeError(const std::string& message, uint64_t wal_start = 0) {
    LogicalRecord r;
    std::string err = decoder_.Decode(message, wal_start, &r);
    EXPECT_NE(err, "") << "accepted a message of " << message.size()
                       << " bytes, type "
                       << (message.empty() ? '-' : message[0]);
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    return err;
  }
  void AnnouncePods() {
    DecodeOk(Relation(kResourcesRel, "public", "resources", PodColumns()));
  }

  TableMapping mapping_;
  PgoutputDecoder decoder_;
};

void ExpectNoColumns(const RowImage& image) {
  for (const ColumnValue& f : image.fields) {
    EXPECT_EQ(f, (ColumnValue{State::kAbsent, ""}));
  }
}

TEST_F(PgoutputDecoderTest, BeginCarriesTheCommitPositionTimeAndXid) {
  LogicalRecord r = DecodeOk(Begin(0x1558570, PgTime(kDayStartUs + 726676), 746),
                             0x1558000);
  EXPECT_EQ(r.action, RecordAction::kBegin);
  EXPECT_EQ(r.xid, 746u);
  EXPECT_EQ(r.lsn, 0x1558570u);  // the commit record's, not wal_start
  EXPECT_EQ(r.next_lsn, 0u);     // pgoutput's Begin has no end position
  EXPECT_EQ(r.timestamp_us, kDayStartUs + 726676);
  EXPECT_FALSE(r.mapped_table);
  EXPECT_FALSE(r.columns.present);
  EXPECT_FALSE(r.identity.present);
}

TEST_F(PgoutputDecoderTest, CommitCarriesCommitAndEndPositions) {
  LogicalRecord r = DecodeOk(
      Commit(0x1558570, 0x15585A0, PgTime(kDayStartUs + 726676)), 0x1558570);
  EXPECT_EQ(r.action, RecordAction::kCommit);
  EXPECT_EQ(r.lsn, 0x1558570u);
  EXPECT_EQ(r.next_lsn, 0x15585A0u);
  EXPECT_EQ(r.timestamp_us, kDayStartUs + 726676);
  EXPECT_EQ(r.xid, 0u);  // Commit does not name its transaction
}

TEST(PgoutputEpoch, TimesCountFrom2000) {
  EXPECT_EQ(PgEpochToUnixMicros(0), 946684800 * int64_t{1000000});
  EXPECT_EQ(PgEpochToUnixMicros(kUnixEpochInPgUs), 0);
  EXPECT_EQ(PgEpochToUnixMicros(-1), 946684800 * int64_t{1000000} - 1);
  // 2026-12-02 13:21:36.5 UTC.
  EXPECT_EQ(PgEpochToUnixMicros(849532896500000), kDayStartUs + 500000);
}

TEST_F(PgoutputDecoderTest, TimesBeforeTheEpochAndFarAhead) {
  // Int64 fields are signed: a time before 2000 is negative on the wire.
  LogicalRecord r = DecodeOk(Begin(0x10, -1, 1));
  EXPECT_EQ(r.timestamp_us, 946684800 * int64_t{1000000} - 1);
  r = DecodeOk(Commit(0x10, 0x20, PgTime(253402300799 * int64_t{1000000})));
  EXPECT_EQ(r.timestamp_us, 253402300799 * int64_t{1000000});
}

TEST_F(PgoutputDecoderTest, RelationsAreKeptButAreNoRecordOfTheirOwn) {
  EXPECT_EQ(decoder_.relation_count(), 0u);
  LogicalRecord r = DecodeOk(
      Relation(kResourcesRel, "public", "resources", PodColumns()), 0x500);
  EXPECT_EQ(r.action, RecordAction::kMessage);
  EXPECT_FALSE(r.mapped_table);
  EXPECT_FALSE(r.columns.present);
  EXPECT_EQ(decoder_.relation_count(), 1u);
  // Announced again (the server does after a schema change): replaced.
  DecodeOk(Relation(kResourcesRel, "public", "resources", PodColumns()));
  EXPECT_EQ(decoder_.relation_count(), 1u);
  DecodeOk(Relation(kOtherRel, "public", "other", PodColumns()));
  EXPECT_EQ(decoder_.relation_count(), 2u);
}

TEST_F(PgoutputDecoderTest, InsertOfTheMappedTable) {
  AnnouncePods();
  LogicalRecord r = DecodeOk(Insert(kResourcesRel, PodRow("p")), 0x1558288);
  EXPECT_EQ(r.action, RecordAction::kInsert);
  EXPECT_EQ(r.lsn, 0x1558288u);  // the XLogData's start
  EXPECT_EQ(r.xid, 0u);          // outside a stream block: no xid
  EXPECT_TRUE(r.mapped_table);
  ASSERT_TRUE(r.columns.present);
  EXPECT_FALSE(r.identity.present);
  ExpectNoColumns(r.identity);
  const RowImage& c = r.columns;
  EXPECT_EQ(c[MappedField::kGroup], (ColumnValue{State::kValue, ""}));
  EXPECT_EQ(c[MappedField::kVersion], (ColumnValue{State::kValue, "v1"}));
  EXPECT_EQ(c[MappedField::kResource], (ColumnValue{State::kValue, "pods"}));
  EXPECT_EQ(c[MappedField::kKind], (ColumnValue{State::kValue, "Pod"}));
  EXPECT_EQ(c[MappedField::kCluster], (ColumnValue{State::kValue, "c1"}));
  EXPECT_EQ(c[MappedField::kNamespace], (ColumnValue{State::kValue, "ns"}));
  EXPECT_EQ(c[MappedField::kName], (ColumnValue{State::kValue, "p"}));
  EXPECT_EQ(c[MappedField::kUid], (ColumnValue{State::kValue, "u-p"}));
  EXPECT_EQ(c[MappedField::kObject], (ColumnValue{State::kValue, kObject}));
}

TEST_F(PgoutputDecoderTest, ObjectTextLeavesSimdjsonsPadding) {
  AnnouncePods();
  for (size_t size : {size_t{2}, size_t{100}, size_t{20000}}) {
    std::string object = "{\"x\": \"" + std::string(size, 'a') + "\"}";
    LogicalRecord r = DecodeOk(Insert(kResourcesRel, PodRow("p", object)));
    const std::string& text = r.columns[MappedField::kObject].text;
    EXPECT_EQ(text, object);
    EXPECT_GE(text.capacity(), text.size() + simdjson::SIMDJSON_PADDING);
    // It parses in place.
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc;
    ASSERT_EQ(parser.iterate(text.data(), text.size(), text.capacity()).get(doc),
              simdjson::SUCCESS);
    std::string_view x;
    EXPECT_EQ(doc["x"].get_string().get(x), simdjson::SUCCESS);
    EXPECT_EQ(x.size(), size);
  }
}

TEST_F(PgoutputDecoderTest, UpdateWithTheOldRow) {
  AnnouncePods();
  LogicalRecord r = DecodeOk(
      Update(kResourcesRel, 'O', PodRow("old"), PodRow("new")), 0x15585A0);
  EXPECT_EQ(r.action, RecordAction::kUpdate);
  EXPECT_EQ(r.lsn, 0x15585A0u);
  EXPECT_TRUE(r.mapped_table);
  ASSERT_TRUE(r.columns.present);
  ASSERT_TRUE(r.identity.present);
  EXPECT_EQ(r.columns[MappedField::kName].text, "new");
  EXPECT_EQ(r.identity[MappedField::kName].text, "old");
  EXPECT_EQ(r.identity[MappedField::kUid].text, "u-old");
  EXPECT_EQ(r.identity[MappedField::kObject], (ColumnValue{State::kValue, kObject}));
}

TEST_F(PgoutputDecoderTest, UpdateWithoutAnOldTuple) {
  // REPLICA IDENTITY DEFAULT and the key unchanged: only the new row.
  AnnouncePods();
  LogicalRecord r = DecodeOk(Update(kResourcesRel, 0, {}, PodRow("new")));
  EXPECT_EQ(r.action, RecordAction::kUpdate);
  EXPECT_TRUE(r.columns.present);
  EXPECT_FALSE(r.identity.present);
  ExpectNoColumns(r.identity);
}

// The key of REPLICA IDENTITY DEFAULT or USING INDEX: pgoutput sends the
// columns outside the key as nulls; they are absent, as wal2json leaves them
// out, and never null.
std::vector<RelColumn> KeyedByClusterAndUid() {
  std::vector<RelColumn> cols = PodColumns();
  for (RelColumn& c : cols) c.key = c.name == "cluster" || c.name == "uid";
  return cols;
}
Tuple KeyOnly(const std::string& name) {
  Tuple t(PodColumns().size(), kNull);
  t[5] = Text("c1");
  t[9] = Text("u-" + name);
  return t;
}

TEST_F(PgoutputDecoderTest, UpdateWithTheOldKeyLeavesOtherColumnsAbsent) {
  DecodeOk(Relation(kResourcesRel, "public", "resources", KeyedByClusterAndUid(),
                    std::nullopt, 'i'));
  LogicalRecord r =
      DecodeOk(Update(kResourcesRel, 'K', KeyOnly("old"), PodRow("new")));
  ASSERT_TRUE(r.identity.present);
  EXPECT_EQ(r.identity[MappedField::kCluster], (ColumnValue{State::kValue, "c1"}));
  EXPECT_EQ(r.identity[MappedField::kUid], (ColumnValue{State::kValue, "u-old"}));
  for (MappedField f : {MappedField::kGroup, MappedField::kVersion,
                        MappedField::kResource, MappedField::kKind,
                        MappedField::kNamespace, MappedField::kName,
                        MappedField::kObject}) {
    EXPECT_EQ(r.identity[f], (ColumnValue{State::kAbsent, ""}))
        << kMappedFieldNames[static_cast<size_t>(f)];
  }
  // The new row is whole: its nulls would be nulls.
  EXPECT_EQ(r.columns[MappedField::kName].text, "new");
  EXPECT_EQ(r.columns[MappedField::kObject].state, State::kValue);
}

TEST_F(PgoutputDecoderTest, DeleteWithTheOldRowOrItsKey) {
  AnnouncePods();
  LogicalRecord full = DecodeOk(Delete(kResourcesRel, 'O', PodRow("d")), 0x700);
  EXPECT_EQ(full.action, RecordAction::kDelete);
  EXPECT_EQ(full.lsn, 0x700u);
  EXPECT_TRUE(full.mapped_table);
  EXPECT_FALSE(full.columns.present);
  ExpectNoColumns(full.columns);
  ASSERT_TRUE(full.identity.present);
  EXPECT_EQ(full.identity[MappedField::kName].text, "d");
  EXPECT_EQ(full.identity[MappedField::kObject].text, kObject);

  DecodeOk(Relation(kResourcesRel, "public", "resources", KeyedByClusterAndUid()));
  LogicalRecord key = DecodeOk(Delete(kResourcesRel, 'K', KeyOnly("d")));
  ASSERT_TRUE(key.identity.present);
  EXPECT_EQ(key.identity[MappedField::kUid], (ColumnValue{State::kValue, "u-d"}));
  EXPECT_EQ(key.identity[MappedField::kName], (ColumnValue{State::kAbsent, ""}));
  EXPECT_EQ(key.identity[MappedField::kObject], (ColumnValue{State::kAbsent, ""}));
}

TEST_F(PgoutputDecoderTest, UnchangedToastIsAbsentAndNullIsNull) {
  AnnouncePods();
  Tuple row = PodRow("p");
  row[10] = kUnchanged;  // object
  row[6] = kNull;        // namespace
  LogicalRecord r = DecodeOk(Update(kResourcesRel, 'O', PodRow("p"), row));
  ASSERT_TRUE(r.columns.present);
  EXPECT_EQ(r.columns[MappedField::kObject], (ColumnValue{State::kAbsent, ""}));
  EXPECT_EQ(r.columns[MappedField::kNamespace], (ColumnValue{State::kNull, ""}));
  EXPECT_EQ(r.columns[MappedField::kName], (ColumnValue{State::kValue, "p"}));
  EXPECT_EQ(r.identity[MappedField::kObject], (ColumnValue{State::kValue, kObject}));
  // A text of zero bytes is a value, not a null.
  EXPECT_EQ(r.columns[MappedField::kGroup], (ColumnValue{State::kValue, ""}));
}

TEST_F(PgoutputDecoderTest, ColumnsAreMatchedByNameInAnyOrder) {
  TableMapping m;
  ASSERT_EQ(ParseTableMapping(R"({"schema": "k8s", "table": "objs", "columns": {
      "group": "api_group", "version": "api_version", "resource": "res",
      "kind": "knd", "cluster": "cl", "namespace": "ns", "name": "nm",
      "uid": "id", "object": "doc"}})",
                              &m),
            "");
  PgoutputDecoder decoder(m);
  // An order unlike the mapping's, unmapped columns between, and no
  // api_group at all.
  const std::vector<RelColumn> cols = {
      {"doc", kJsonbOid, false},   {"extra_obj", kJsonbOid, false},
      {"nm", kTextOid, false},     {"extra_arr", kJsonbOid, false},
      {"id", kTextOid, true},      {"ns", kTextOid, false},
      {"knd", kTextOid, false},    {"cl", kTextOid, false},
      {"res", kTextOid, false},    {"api_version", kTextOid, false},
      {"extra_num", kInt8Oid, false}};
  const Tuple row = {Text(R"({"metadata": {"name": "n\\x"}})"),
                     Text(R"({"a": [1, {"b": null}]})"),
                     Text("n\\x"),
                     Text("[1, 2, \"x\"]"),
                     Text("42"),
                     kNull,
                     Text("Kind\xc3\xa9"),
                     Text("true"),
                     Text("-1.5e3"),
                     Text("v1"),
                     Text("7")};
  LogicalRecord r;
  ASSERT_EQ(decoder.Decode(Relation(5, "k8s", "objs", cols), 0, &r), "");
  ASSERT_EQ(decoder.Decode(Insert(5, row), 0x20, &r), "");
  EXPECT_TRUE(r.mapped_table);
  ASSERT_TRUE(r.columns.present);
  EXPECT_EQ(r.columns[MappedField::kObject],
            (ColumnValue{State::kValue, R"({"metadata": {"name": "n\\x"}})"}));
  EXPECT_EQ(r.columns[MappedField::kName], (ColumnValue{State::kValue, "n\\x"}));
  EXPECT_EQ(r.columns[MappedField::kUid], (ColumnValue{State::kValue, "42"}));
  EXPECT_EQ(r.columns[MappedField::kNamespace], (ColumnValue{State::kNull, ""}));
  EXPECT_EQ(r.columns[MappedField::kKind],
            (ColumnValue{State::kValue, "Kind\xc3\xa9"}));
  EXPECT_EQ(r.columns[MappedField::kCluster], (ColumnValue{State::kValue, "true"}));
  EXPECT_EQ(r.columns[MappedField::kResource],
            (ColumnValue{State::kValue, "-1.5e3"}));
  EXPECT_EQ(r.columns[MappedField::kVersion], (ColumnValue{State::kValue, "v1"}));
  EXPECT_EQ(r.columns[MappedField::kGroup], (ColumnValue{State::kAbsent, ""}));

  // The same columns reversed decode to the same row.
  std::vector<RelColumn> reversed_cols(cols.rbegin(), cols.rend());
  Tuple reversed_row(row.rbegin(), row.rend());
  LogicalRecord b;
  ASSERT_EQ(decoder.Decode(Relation(5, "k8s", "objs", reversed_cols), 0, &b), "");
  ASSERT_EQ(decoder.Decode(Insert(5, reversed_row), 0x20, &b), "");
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    EXPECT_EQ(r.columns.fields[i], b.columns.fields[i]) << kMappedFieldNames[i];
  }
}

TEST_F(PgoutputDecoderTest, OtherTablesAreNotMaterialised) {
  for (auto [ns, table] : {std::pair<const char*, const char*>{"public", "other"},
                           {"other", "resources"},
                           {"public", "Resources"},
                           {"public", "resources2"},
                           {"", "resources"}}) {
    SCOPED_TRACE(std::string(ns) + "." + table);
    decoder_.Reset();
    DecodeOk(Relation(kOtherRel, ns, table, PodColumns()));
    for (const std::string& change :
         {Insert(kOtherRel, PodRow("x")),
          Update(kOtherRel, 'O', PodRow("x"), PodRow("y")),
          Delete(kOtherRel, 'O', PodRow("x"))}) {
      LogicalRecord r = DecodeOk(change, 0x10);
      EXPECT_EQ(static_cast<char>(r.action), change[0]);
      EXPECT_EQ(r.lsn, 0x10u);
      EXPECT_FALSE(r.mapped_table);
      ExpectNoColumns(r.columns);
      ExpectNoColumns(r.identity);
    }
  }
}

TEST_F(PgoutputDecoderTest, TruncateIsOfTheMappedTableWhenItNamesIt) {
  AnnouncePods();
  DecodeOk(Relation(kOtherRel, "public", "other", PodColumns()));
  LogicalRecord r = DecodeOk(Truncate({kOtherRel, kResourcesRel}), 0x1562F00);
  EXPECT_EQ(r.action, RecordAction::kTruncate);
  EXPECT_EQ(r.lsn, 0x1562F00u);
  EXPECT_TRUE(r.mapped_table);
  EXPECT_FALSE(r.columns.present);
  EXPECT_FALSE(r.identity.present);
  EXPECT_FALSE(DecodeOk(Truncate({kOtherRel})).mapped_table);
  EXPECT_FALSE(DecodeOk(Truncate({})).mapped_table);
  // A relation never announced cannot be the mapped table (pgoutput sends
  // a Relation before the Truncate of a table it replicates).
  EXPECT_FALSE(DecodeOk(Truncate({kOtherRel, 999})).mapped_table);
  // CASCADE and RESTART IDENTITY change nothing.
  std::string cascade = Truncate({kResourcesRel});
  cascade[5] = 3;
  EXPECT_TRUE(DecodeOk(cascade).mapped_table);
}

TEST_F(PgoutputDecoderTest, OriginTypeAndLogicalMessagesAreNothingToAssemble) {
  for (const std::string& m :
       {Origin(0x1234, "node_a"), Type(16500, "public", "mood"),
        LogicalMessage(true, 0x99, "prefix", "content"),
        LogicalMessage(false, 0x99, "p", std::string("\0\x01\xff", 3)),
        LogicalMessage(false, 0x99, "", "")}) {
    SCOPED_TRACE(std::string(1, m[0]));
    LogicalRecord r = DecodeOk(m, 0x400);
    EXPECT_EQ(r.action, RecordAction::kMessage);
    EXPECT_FALSE(r.mapped_table);
    EXPECT_FALSE(r.columns.present);
    EXPECT_FALSE(r.identity.present);
  }
  EXPECT_EQ(decoder_.relation_count(), 0u);
}

TEST_F(PgoutputDecoderTest, ChangeOfAnUnannouncedRelationIsAnError) {
  AnnouncePods();
  for (const std::string& change :
       {Insert(kOtherRel, PodRow("x")),
        Update(kOtherRel, 'O', PodRow("x"), PodRow("y")),
        Delete(kOtherRel, 'O', PodRow("x"))}) {
    std::string err = DecodeError(change);
    EXPECT_NE(err.find(std::to_string(kOtherRel)), std::string::npos) << err;
  }
  // The announced one still decodes.
  EXPECT_TRUE(DecodeOk(Insert(kResourcesRel, PodRow("p"))).mapped_table);
}

TEST_F(PgoutputDecoderTest, TupleMustHaveItsRelationsColumns) {
  AnnouncePods();
  Tuple short_row = PodRow("p");
  short_row.pop_back();
  DecodeError(Insert(kResourcesRel, short_row));
  Tuple long_row = PodRow("p");
  long_row.push_back(Text("x"));
  DecodeError(Insert(kResourcesRel, long_row));
  DecodeError(Update(kResourcesRel, 'O', short_row, PodRow("p")));
  DecodeError(Delete(kResourcesRel, 'O', long_row));
}

TEST_F(PgoutputDecoderTest, ResetForgetsRelationsAndTheStream) {
  AnnouncePods();
  DecodeOk(Relation(kOtherRel, "public", "other", PodColumns()));
  DecodeOk(StreamStart(900, true));
  decoder_.Reset();
  EXPECT_EQ(decoder_.relation_count(), 0u);
  DecodeError(Insert(kResourcesRel, PodRow("p")));
  // Announced again on the new connection; outside a stream, no xid.
  AnnouncePods();
  LogicalRecord r = DecodeOk(Insert(kResourcesRel, PodRow("p")));
  EXPECT_TRUE(r.mapped_table);
  EXPECT_EQ(r.xid, 0u);
  EXPECT_EQ(r.columns[MappedField::kName].text, "p");
}

TEST_F(PgoutputDecoderTest, RejectedRelationIsNotKept) {
  // A Relation that is not what the decoder thinks it is cannot say where
  // the columns of later changes are: those must fail, not decode by it.
  DecodeError(Relation(kResourcesRel, "public", "resources", PodColumns()) +
              std::string(1, '\0'));
  EXPECT_EQ(decoder_.relation_count(), 0u);
  DecodeError(Insert(kResourcesRel, PodRow("p")));
  // Nor does it replace one announced before.
  AnnouncePods();
  std::vector<RelColumn> shifted = PodColumns();
  std::swap(shifted[7], shifted[9]);  // name <-> uid
  DecodeError(Relation(kResourcesRel, "public", "resources", shifted) + "x");
  LogicalRecord r = DecodeOk(Insert(kResourcesRel, PodRow("p")));
  EXPECT_EQ(r.columns[MappedField::kName].text, "p");
  EXPECT_EQ(r.columns[MappedField::kUid].text, "u-p");
}

TEST_F(PgoutputDecoderTest, UnmappedColumnsAndKindsAreSkipped) {
  // 'u' and 'n' in unmapped columns, and a mapped column missing from the
  // table, decode.
  std::vector<RelColumn> cols = {{"name", kTextOid, true},
                                 {"blob", kTextOid, false},
                                 {"uid", kTextOid, false},
                                 {"gone", kTextOid, false}};
  DecodeOk(Relation(kResourcesRel, "public", "resources", cols));
  LogicalRecord r = DecodeOk(
      Insert(kResourcesRel, {Text("n"), kUnchanged, Text("u"), kNull}));
  EXPECT_EQ(r.columns[MappedField::kName].text, "n");
  EXPECT_EQ(r.columns[MappedField::kUid].text, "u");
  EXPECT_EQ(r.columns[MappedField::kObject], (ColumnValue{State::kAbsent, ""}));
}

TEST_F(PgoutputDecoderTest, RecordIsFullyOverwritten) {
  AnnouncePods();
  LogicalRecord r;
  ASSERT_EQ(decoder_.Decode(Update(kResourcesRel, 'O', PodRow("a"), PodRow("b")),
                            0x10, &r),
            "");
  ASSERT_TRUE(r.identity.present);
  ASSERT_EQ(decoder_.Decode(Insert(kResourcesRel, PodRow("c")), 0x20, &r), "");
  EXPECT_FALSE(r.identity.present);
  ExpectNoColumns(r.identity);
  ASSERT_EQ(decoder_.Decode(Begin(0x100, 0, 5), 0x30, &r), "");
  EXPECT_EQ(r.action, RecordAction::kBegin);
  EXPECT_FALSE(r.mapped_table);
  EXPECT_FALSE(r.columns.present);
  ExpectNoColumns(r.columns);
  ASSERT_EQ(decoder_.Decode(StreamAbort(8, 9), 0x40, &r), "");
  EXPECT_EQ(r.lsn, 0u);
  EXPECT_EQ(r.timestamp_us, 0);
  EXPECT_EQ(r.next_lsn, 0u);
  ASSERT_EQ(decoder_.Decode(Origin(0x5, "o"), 0x50, &r), "");
  EXPECT_EQ(r.action, RecordAction::kMessage);
  EXPECT_EQ(r.xid, 0u);
  EXPECT_EQ(r.subxid, 0u);
}

// ---------------------------------------------------------------------------
// Streams of in-progress transactions (protocol version 2 on).

TEST_F(PgoutputDecoderTest, StreamBlocksCarryTheirXids) {
  LogicalRecord start = DecodeOk(StreamStart(900, true), 0x1000);
  EXPECT_EQ(start.action, RecordAction::kStreamStart);
  EXPECT_EQ(start.xid, 900u);
  // Relation, Type and logical message name the transaction first.
  DecodeOk(Relation(kResourcesRel, "public", "resources", PodColumns(), 900));
  EXPECT_EQ(decoder_.relation_count(), 1u);
  EXPECT_EQ(DecodeOk(Type(16500, "public", "mood", 900)).action,
            RecordAction::kMessage);
  EXPECT_EQ(DecodeOk(LogicalMessage(true, 0x1010, "p", "c", 900)).action,
            RecordAction::kMessage);
  // Changes of the transaction and of a subtransaction.
  LogicalRecord ins = DecodeOk(Insert(kResourcesRel, PodRow("a"), 900), 0x1100);
  EXPECT_EQ(ins.action, RecordAction::kInsert);
  EXPECT_EQ(ins.xid, 900u);
  EXPECT_EQ(ins.lsn, 0x1100u);
  EXPECT_TRUE(ins.mapped_table);
  EXPECT_EQ(ins.columns[MappedField::kName].text, "a");
  LogicalRecord upd = DecodeOk(
      Update(kResourcesRel, 'O', PodRow("a"), PodRow("b"), 901), 0x1200);
  EXPECT_EQ(upd.xid, 901u);
  EXPECT_EQ(upd.identity[MappedField::kName].text, "a");
  EXPECT_EQ(upd.columns[MappedField::kName].text, "b");
  LogicalRecord del = DecodeOk(Delete(kResourcesRel, 'O', PodRow("b"), 902));
  EXPECT_EQ(del.xid, 902u);
  EXPECT_EQ(del.identity[MappedField::kUid].text, "u-b");
  LogicalRecord trunc = DecodeOk(Truncate({kResourcesRel}, 900), 0x1300);
  EXPECT_EQ(trunc.action, RecordAction::kTruncate);
  EXPECT_EQ(trunc.xid, 900u);
  EXPECT_TRUE(trunc.mapped_table);
  EXPECT_EQ(DecodeOk(StreamStop()).action, RecordAction::kStreamStop);

  // Between blocks, an ordinary transaction: no xid prefixes.
  EXPECT_EQ(DecodeOk(Begin(0x2000, 0, 905)).xid, 905u);
  LogicalRecord plain = DecodeOk(Insert(kResourcesRel, PodRow("z")));
  EXPECT_EQ(plain.xid, 0u);
  EXPECT_EQ(plain.columns[MappedField::kName].text, "z");
  DecodeOk(Commit(0x2000, 0x2030, 0));

  // The next block, then the commit.
  EXPECT_EQ(DecodeOk(StreamStart(900, false)).xid, 900u);
  EXPECT_EQ(DecodeOk(Insert(kResourcesRel, PodRow("c"), 900)).xid, 900u);
  DecodeOk(StreamStop());
  LogicalRecord commit = DecodeOk(
      StreamCommit(900, 0x3000, 0x3030, PgTime(kDayStartUs + 5)), 0x3000);
  EXPECT_EQ(commit.action, RecordAction::kStreamCommit);
  EXPECT_EQ(commit.xid, 900u);
  EXPECT_EQ(commit.lsn, 0x3000u);
  EXPECT_EQ(commit.next_lsn, 0x3030u);
  EXPECT_EQ(commit.timestamp_us, kDayStartUs + 5);
}

TEST_F(PgoutputDecoderTest, StreamAbortInBothLengths) {
  LogicalRecord sub = DecodeOk(StreamAbort(900, 901));
  EXPECT_EQ(sub.action, RecordAction::kStreamAbort);
  EXPECT_EQ(sub.xid, 900u);
  EXPECT_EQ(sub.subxid, 901u);
  LogicalRecord whole = DecodeOk(StreamAbort(900, 900));
  EXPECT_EQ(whole.xid, 900u);
  EXPECT_EQ(whole.subxid, 900u);
  // Version 4, streaming = parallel: the abort's LSN and time follow.
  LogicalRecord v4 =
      DecodeOk(StreamAbort(900, 903, 0x4000, PgTime(kDayStartUs)));
  EXPECT_EQ(v4.action, RecordAction::kStreamAbort);
  EXPECT_EQ(v4.xid, 900u);
  EXPECT_EQ(v4.subxid, 903u);
  // Neither length: an error.
  std::string odd = StreamAbort(900, 901) + std::string(8, '\0');
  DecodeError(odd);
  DecodeError(StreamAbort(900, 901) + std::string(1, '\0'));
  DecodeError(StreamAbort(900, 901, 0x4000, 0) + std::string(1, '\0'));
}

TEST_F(PgoutputDecoderTest, StreamBlocksOutOfPlaceAreErrors) {
  // Without the block's bounds the xid prefixes would be misread.
  DecodeError(StreamStop());
  DecodeOk(StreamStart(900, true));
  DecodeError(StreamStart(901, true));
}

TEST_F(PgoutputDecoderTest, TwoPhaseMessagesAreRefused) {
  // Begin Prepare, Prepare, Commit Prepared, Rollback Prepared, Stream
  // Prepare: walwatch never enables two_phase.
  const std::string gid("gid-1\0", 6);
  const std::string begin_prepare =
      std::string(PgMessage('b').Int64(0x100).Int64(0x130).Int64(0).Int32(7)) + gid;
  const std::string prepare =
      std::string(PgMessage('P').Int8(0).Int64(0x100).Int64(0x130).Int64(0).Int32(7)) +
      gid;
  const std::string commit_prepared =
      std::string(PgMessage('K').Int8(0).Int64(0x200).Int64(0x230).Int64(0).Int32(7)) +
      gid;
  const std::string rollback_prepared =
      std::string(
          PgMessage('r').Int8(0).Int64(0x130).Int64(0x230).Int64(0).Int64(0).Int32(7)) +
      gid;
  const std::string stream_prepare =
      std::string(PgMessage('p').Int8(0).Int64(0x100).Int64(0x130).Int64(0).Int32(7)) +
      gid;
  for (const std::string& m :
       {begin_prepare, prepare, commit_prepared, rollback_prepared, stream_prepare}) {
    SCOPED_TRACE(std::string(1, m[0]));
    DecodeError(m);
  }
}

TEST_F(PgoutputDecoderTest, UnknownMessagesAndColumnKindsAreErrors) {
  AnnouncePods();
  for (char type : {'X', 'Z', 'w', 'k', '\0', '{'}) {
    DecodeError(std::string(1, type) + std::string(20, '\0'));
  }
  DecodeError("");
  // Binary columns: walwatch asks for text.
  Tuple row = PodRow("p");
  row[7] = Datum{'b', "p"};
  DecodeError(Insert(kResourcesRel, row));
  row[7] = Datum{'x', ""};
  DecodeError(Insert(kResourcesRel, row));
  // An Insert's tuple must be 'N', an Update's old one 'K' or 'O', a
  // Delete's 'K' or 'O'.
  std::string ins = Insert(kResourcesRel, PodRow("p"));
  ins[5] = 'O';
  DecodeError(ins);
  std::string del = Delete(kResourcesRel, 'O', PodRow("p"));
  del[5] = 'N';
  DecodeError(del);
  std::string upd = Update(kResourcesRel, 'O', PodRow("a"), PodRow("b"));
  upd[5] = 'X';
  DecodeError(upd);
  // Still usable.
  EXPECT_EQ(DecodeOk(Insert(kResourcesRel, PodRow("p"))).columns[MappedField::kName].text,
            "p");
}

// ---------------------------------------------------------------------------
// Malformed input: every cut of every kind of message is an error, never a
// crash, and the decoder stays usable.

struct Sample {
  const char* what;
  bool in_stream;       // decoded inside a stream block
  std::string message;  // valid there
};

std::vector<Sample> Samples() {
  std::string big(19447, 'x');
  big.front() = '{';
  big.back() = '}';
  return {
      {"begin", false, Begin(0x1558570, PgTime(kDayStartUs), 746)},
      {"commit", false, Commit(0x1558570, 0x15585A0, PgTime(kDayStartUs))},
      {"origin", false, Origin(0x99, "node")},
      {"relation", false,
       Relation(kOtherRel, "public", "other", KeyedByClusterAndUid())},
      {"type", false, Type(16500, "public", "mood")},
      {"message", false, LogicalMessage(true, 0x99, "prefix", "content")},
      {"insert", false, Insert(kResourcesRel, PodRow("p"))},
      {"insert with nulls and toast", false,
       Insert(kResourcesRel, {Text("1"), kNull, kUnchanged, Text("x"), kNull,
                              kNull, kNull, kNull, kNull, kNull, kUnchanged})},
      {"update", false, Update(kResourcesRel, 'O', PodRow("a"), PodRow("b"))},
      {"update, key", false, Update(kResourcesRel, 'K', KeyOnly("a"), PodRow("b"))},
      {"update, new only", false, Update(kResourcesRel, 0, {}, PodRow("b"))},
      {"update, big object", false,
       Update(kResourcesRel, 'O', PodRow("a"), PodRow("b", big))},
      {"delete", false, Delete(kResourcesRel, 'O', PodRow("d"))},
      {"truncate", false, Truncate({kResourcesRel, kOtherRel})},
      {"stream start", false, StreamStart(900, true)},
      {"stream commit", false, StreamCommit(900, 0x3000, 0x3030, 0)},
      {"stream abort", false, StreamAbort(900, 901)},
      {"stream stop", true, StreamStop()},
      {"stream relation", true,
       Relation(kOtherRel, "public", "other", PodColumns(), 900)},
      {"stream type", true, Type(16500, "public", "mood", 900)},
      {"stream message", true, LogicalMessage(true, 0x99, "p", "c", 900)},
      {"stream insert", true, Insert(kResourcesRel, PodRow("p"), 901)},
      {"stream update", true,
       Update(kResourcesRel, 'O', PodRow("a"), PodRow("b"), 901)},
      {"stream delete", true, Delete(kResourcesRel, 'K', KeyOnly("d"), 901)},
      {"stream truncate", true, Truncate({kResourcesRel}, 900)},
  };
}

class PgoutputDecoderMalformedTest : public PgoutputDecoderTest {
 protected:
  // A fresh connection, the relation announced, inside a block or not.
  void SetUpState(bool in_stream) {
    decoder_.Reset();
    LogicalRecord r;
    ASSERT_EQ(decoder_.Decode(Relation(kResourcesRel, "public", "resources",
                                       KeyedByClusterAndUid()),
                              0, &r),
              "");
    if (in_stream) {
      ASSERT_EQ(decoder_.Decode(StreamStart(900, true), 0, &r), "");
    }
  }
  void ExpectUsable() {
    SetUpState(false);
    LogicalRecord r;
    ASSERT_EQ(decoder_.Decode(Insert(kResourcesRel, PodRow("ok")), 0x9, &r), "");
    EXPECT_EQ(r.columns[MappedField::kName].text, "ok");
    EXPECT_EQ(r.columns[MappedField::kObject].text, kObject);
  }
};

TEST_F(PgoutputDecoderMalformedTest, SamplesAreValid) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(s.what);
    SetUpState(s.in_stream);
    DecodeOk(s.message);
  }
}

TEST_F(PgoutputDecoderMalformedTest, EveryCutIsAnError) {
  size_t cuts = 0;
  for (const Sample& s : Samples()) {
    const std::string& m = s.message;
    size_t checked = 0;
    for (size_t len = 0; len < m.size(); ++len) {
      // Every cut of a short message; of the big one, its first and last
      // 300 bytes and a stride between.
      if (m.size() > 4000 && len > 300 && len + 300 < m.size() && len % 61) {
        continue;
      }
      // The one cut that is itself a message: v4's Stream Abort cut to v2's.
      if (m[0] == 'A' && len == 9) continue;
      SCOPED_TRACE(std::string(s.what) + " cut to " + std::to_string(len) +
                   " of " + std::to_string(m.size()));
      SetUpState(s.in_stream);
      DecodeError(m.substr(0, len));
      ++checked;
      if (HasFailure()) return;  // one report is enough
    }
    EXPECT_GT(checked, 0u);
    cuts += checked;
    ExpectUsable();
  }
  EXPECT_GT(cuts, 2000u);
  // v4's Stream Abort is in Samples() only as v2's: cut the long one too.
  const std::string v4 = StreamAbort(900, 901, 0x4000, 7);
  for (size_t len = 0; len < v4.size(); ++len) {
    if (len == 9) continue;
    SetUpState(false);
    DecodeError(v4.substr(0, len));
  }
}

TEST_F(PgoutputDecoderMalformedTest, TrailingBytesAreAnError) {
  for (const Sample& s : Samples()) {
    for (const std::string& tail :
         {std::string(1, '\0'), std::string("x"), std::string(8, '\0'),
          std::string(16, '\0')}) {
      // v2's Stream Abort and 16 bytes is v4's.
      if (s.message[0] == 'A' && tail.size() == 16) continue;
      SCOPED_TRACE(std::string(s.what) + " and " + std::to_string(tail.size()) +
                   " bytes");
      SetUpState(s.in_stream);
      DecodeError(s.message + tail);
    }
  }
  ExpectUsable();
}

TEST_F(PgoutputDecoderMalformedTest, CorruptedBytesNeverCrash) {
  // Each byte of each sample replaced by values that upset lengths, counts
  // and kinds; whatever the result, decoding returns, an error is one line,
  // and a record that decodes keeps the contract's shape.
  const uint8_t replacements[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 'n', 'u', 't',
                                  'N',  'K',  'O'};
  size_t errors = 0, decoded = 0;
  for (const Sample& s : Samples()) {
    const std::string& base = s.message;
    size_t stride = base.size() > 4000 ? 97 : 1;
    for (size_t pos = 0; pos < base.size(); pos += stride) {
      for (uint8_t c : replacements) {
        std::string m = base;
        m[pos] = static_cast<char>(c);
        SetUpState(s.in_stream);
        LogicalRecord r;
        std::string err = decoder_.Decode(m, 0x77, &r);
        if (!err.empty()) {
          ++errors;
          EXPECT_EQ(err.find('\n'), std::string::npos) << err;
          continue;
        }
        ++decoded;
        if (!r.mapped_table) {
          ExpectNoColumns(r.columns);
          ExpectNoColumns(r.identity);
        }
        const ColumnValue& object = r.columns[MappedField::kObject];
        if (object.state == State::kValue) {
          EXPECT_GE(object.text.capacity(),
                    object.text.size() + simdjson::SIMDJSON_PADDING);
        }
      }
    }
  }
  EXPECT_GT(errors, 1000u);
  EXPECT_GT(decoded, 100u);  // replaced texts and xids still decode
  ExpectUsable();
}

TEST_F(PgoutputDecoderMalformedTest, RandomBytesNeverCrash) {
  std::mt19937 rng(20261202);
  SetUpState(false);
  for (int i = 0; i < 20000; ++i) {
    if (i % 1000 == 0) SetUpState(i % 2000 == 0);
    std::string m(rng() % 64, '\0');
    for (char& c : m) c = static_cast<char>(rng());
    // Mostly a known type first, so the bodies get read.
    if (!m.empty() && rng() % 4) m[0] = "BCORYMIUDTSEcAbPKrp"[rng() % 19];
    LogicalRecord r;
    std::string err = decoder_.Decode(m, 0, &r);
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
  ExpectUsable();
}

// ---------------------------------------------------------------------------
// The same change through wal2json and through pgoutput gives the same row
// images: the capture's changes (tests/data/wal2json_v2_capture.jsonl), as
// pgoutput sends them for the same table.

// The capture's table as pgoutput's Relation announces it. REPLICA
// IDENTITY FULL: every column flagged as key.
std::vector<RelColumn> CaptureColumns(const std::vector<std::string>& lines) {
  std::vector<RelColumn> cols;
  const auto insert = nlohmann::json::parse(lines.at(1));
  for (const auto& c : insert.at("columns")) {
    std::string name = c.at("name");
    uint32_t oid = kTextOid;
    if (name == "id") oid = kInt8Oid;
    if (name == "object" || name == "events" || name == "event_resource_versions") {
      oid = kJsonbOid;
    }
    if (name.size() > 3 && name.compare(name.size() - 3, 3, "_at") == 0) {
      oid = kTimestamptzOid;
    }
    cols.push_back({name, oid, true});
  }
  return cols;
}

// A wal2json tuple as pgoutput's TupleData over `cols`: what wal2json
// leaves out (an unchanged TOAST value) is 'u'; a number is its text.
Tuple TupleOf(const nlohmann::json& tuple, const std::vector<RelColumn>& cols) {
  Tuple out(cols.size(), kUnchanged);
  for (const auto& c : tuple) {
    size_t i = 0;
    while (i < cols.size() && cols[i].name != c.at("name")) ++i;
    if (i == cols.size()) {
      ADD_FAILURE() << "no column " << c.at("name");
      continue;
    }
    const auto& v = c.at("value");
    if (v.is_null()) {
      out[i] = kNull;
    } else if (v.is_string()) {
      out[i] = Text(v.get<std::string>());
    } else {
      out[i] = Text(v.dump());
    }
  }
  return out;
}

// The change of a wal2json capture line as pgoutput sends it.
std::string PgoutputOf(const std::string& line, uint32_t rel,
                       const std::vector<RelColumn>& cols) {
  auto doc = nlohmann::json::parse(line);
  const std::string action = doc.at("action");
  switch (action[0]) {
    case 'I':
      return Insert(rel, TupleOf(doc.at("columns"), cols));
    case 'U':
      return doc.contains("identity")
                 ? Update(rel, 'O', TupleOf(doc.at("identity"), cols),
                          TupleOf(doc.at("columns"), cols))
                 : Update(rel, 0, {}, TupleOf(doc.at("columns"), cols));
    case 'D':
      return Delete(rel, 'O', TupleOf(doc.at("identity"), cols));
    case 'T':
      return Truncate({rel});
  }
  ADD_FAILURE() << "not a change: " << line.substr(0, 100);
  return "";
}

void ExpectSameRecord(const LogicalRecord& w, const LogicalRecord& p) {
  EXPECT_EQ(p.action, w.action);
  EXPECT_EQ(p.lsn, w.lsn);
  EXPECT_EQ(p.mapped_table, w.mapped_table);
  EXPECT_EQ(p.columns.present, w.columns.present);
  EXPECT_EQ(p.identity.present, w.identity.present);
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    EXPECT_EQ(p.columns.fields[i], w.columns.fields[i])
        << "columns." << kMappedFieldNames[i];
    EXPECT_EQ(p.identity.fields[i], w.identity.fields[i])
        << "identity." << kMappedFieldNames[i];
  }
}

TEST_F(PgoutputDecoderTest, CaptureChangesDecodeAsWal2JsonDecodesThem) {
  const std::vector<std::string> lines = ReadCaptureLines();
  ASSERT_EQ(lines.size(), 27u);
  const std::vector<RelColumn> cols = CaptureColumns(lines);
  ASSERT_EQ(cols.size(), 17u);
  DecodeOk(Relation(kResourcesRel, "public", "resources", cols));
  Wal2JsonDecoder wal2json(mapping_);
  size_t changes = 0;
  for (size_t n = 1; n <= lines.size(); ++n) {
    const std::string& line = lines[n - 1];
    LogicalRecord w;
    ASSERT_EQ(wal2json.Decode(line, &w), "");
    if (w.action == RecordAction::kBegin || w.action == RecordAction::kCommit) {
      continue;
    }
    SCOPED_TRACE("capture line " + std::to_string(n));
    LogicalRecord p = DecodeOk(PgoutputOf(line, kResourcesRel, cols), w.lsn);
    ExpectSameRecord(w, p);
    ++changes;
  }
  // 2 inserts, 4 updates (one with its object omitted), 2 deletes, a
  // truncate.
  EXPECT_EQ(changes, 9u);
}

TEST_F(PgoutputDecoderTest, KeyIdentityDecodesAsWal2JsonDecodesIt) {
  // REPLICA IDENTITY USING INDEX on (cluster, uid): wal2json's identity
  // holds the key's columns only, pgoutput's 'K' tuple holds nulls for the
  // others.
  const std::string key_identity =
      R"([{"name":"cluster","value":"c1"},{"name":"uid","value":"u-a"}])";
  const std::string columns =
      R"([{"name":"id","value":7},{"name":"group","value":""},{"name":"version","value":"v1"},)"
      R"({"name":"resource","value":"pods"},{"name":"kind","value":"Pod"},)"
      R"({"name":"cluster","value":"c1"},{"name":"namespace","value":"ns"},)"
      R"({"name":"name","value":"b"},{"name":"owner_uid","value":""},)"
      R"({"name":"uid","value":"u-b"},)"
      R"({"name":"object","value":"{\"kind\": \"Pod\", \"metadata\": {\"name\": \"p\"}}"}])";
  const std::string head =
      R"({"action":"X","xid":9,"lsn":"0/10","schema":"public","table":"resources")";
  std::string update = head + ",\"columns\":" + columns +
                       ",\"identity\":" + key_identity + "}";
  update[11] = 'U';
  std::string del = head + ",\"identity\":" + key_identity + "}";
  del[11] = 'D';

  Wal2JsonDecoder wal2json(mapping_);
  DecodeOk(Relation(kResourcesRel, "public", "resources", KeyedByClusterAndUid(),
                    std::nullopt, 'i'));
  LogicalRecord w, p;
  ASSERT_EQ(wal2json.Decode(update, &w), "");
  p = DecodeOk(Update(kResourcesRel, 'K', KeyOnly("a"), PodRow("b")), 0x10);
  {
    SCOPED_TRACE("update");
    ExpectSameRecord(w, p);
  }
  ASSERT_EQ(wal2json.Decode(del, &w), "");
  p = DecodeOk(Delete(kResourcesRel, 'K', KeyOnly("a")), 0x10);
  {
    SCOPED_TRACE("delete");
    ExpectSameRecord(w, p);
  }
}

TEST_F(PgoutputDecoderTest, OtherTableDecodesAsWal2JsonDecodesIt) {
  // wal2json skips another table's tuples unread: no image at all.
  const std::vector<std::string> lines = ReadCaptureLines();
  const std::vector<RelColumn> cols = CaptureColumns(lines);
  DecodeOk(Relation(kOtherRel, "public", "other", cols));
  Wal2JsonDecoder wal2json(mapping_);
  for (size_t n : {2, 5, 20}) {
    SCOPED_TRACE("capture line " + std::to_string(n) + " on public.other");
    std::string line = lines[n - 1];
    ASSERT_TRUE(testing_capture::ReplaceFirst(&line, "\"table\":\"resources\"",
                                              "\"table\":\"other\""));
    LogicalRecord w;
    ASSERT_EQ(wal2json.Decode(line, &w), "");
    ASSERT_FALSE(w.mapped_table);
    LogicalRecord p = DecodeOk(PgoutputOf(line, kOtherRel, cols), w.lsn);
    ExpectSameRecord(w, p);
  }
}


// ---------------------------------------------------------------------------
// The seed corpus of tests/fuzz/pgoutput_fuzz.cc, tests/fuzz/corpus/pgoutput/,
// is written by the builder above in that target's framing (each message
// after its Int32 length; 0xFFFFFFFF: the connection is lost). This test
// checks the files are what the builder writes and that each seed's
// messages decode; to (re)write them:
//   WALWATCH_WRITE_PGOUTPUT_SEEDS=1 postgres_unit_test
//       --gtest_filter='PgoutputFuzzSeeds.*'

class SeedWriter {
 public:
  SeedWriter& Add(const std::string& message) {
    Length(static_cast<uint32_t>(message.size()));
    bytes_ += message;
    steps_.push_back(message);
    return *this;
  }
  SeedWriter& Add(const std::vector<std::string>& messages) {
    for (const std::string& m : messages) Add(m);
    return *this;
  }
  SeedWriter& Reconnect() {
    Length(UINT32_MAX);
    steps_.push_back(std::nullopt);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }
  // The messages in order; nullopt where the connection is lost.
  const std::vector<std::optional<std::string>>& steps() const { return steps_; }

 private:
  void Length(uint32_t n) {
    for (int i = 3; i >= 0; --i) bytes_.push_back(static_cast<char>(n >> (8 * i)));
  }
  std::string bytes_;
  std::vector<std::optional<std::string>> steps_;
};

struct Seed {
  std::string name;
  SeedWriter frames;
  bool decodes = true;      // every message decodes
  std::string mapping = "";  // a first line: a table mapping
};

// The capture's lines [first, last] (1-based) as pgoutput sends them.
std::vector<std::string> CaptureMessages(const std::vector<std::string>& lines,
                                         const std::vector<RelColumn>& cols,
                                         size_t first, size_t last) {
  std::vector<std::string> out;
  for (size_t n = first; n <= last; ++n) {
    auto doc = nlohmann::json::parse(lines[n - 1]);
    const std::string action = doc.at("action");
    if (action == "B" || action == "C") {
      int64_t unix_us = 0;
      EXPECT_TRUE(ParsePgTimestamp(doc.at("timestamp").get<std::string>(), &unix_us));
      uint64_t lsn = *ParseLsn(doc.at("lsn").get<std::string>());
      uint64_t next = *ParseLsn(doc.at("nextlsn").get<std::string>());
      out.push_back(action == "B"
                        ? Begin(lsn, PgTime(unix_us), doc.at("xid").get<uint32_t>())
                        : Commit(lsn, next, PgTime(unix_us)));
    } else {
      out.push_back(PgoutputOf(lines[n - 1], kResourcesRel, cols));
    }
  }
  return out;
}

std::vector<Seed> FuzzSeeds() {
  const std::vector<std::string> lines = ReadCaptureLines();
  const std::vector<RelColumn> cols = CaptureColumns(lines);
  const std::string capture_rel = Relation(kResourcesRel, "public", "resources", cols);
  const std::string pod_rel = Relation(kResourcesRel, "public", "resources", PodColumns());
  const std::string keyed_rel = Relation(kResourcesRel, "public", "resources",
                                         KeyedByClusterAndUid(), std::nullopt, 'i');
  const std::string other_rel = Relation(kOtherRel, "public", "other", PodColumns());
  const int64_t t = PgTime(kDayStartUs);
  std::vector<Seed> seeds;
  auto add = [&](const char* name) -> SeedWriter& {
    seeds.push_back(Seed{name, SeedWriter()});
    return seeds.back().frames;
  };

  // The capture's small transactions (746-749, 752, 754), and each big one
  // alone (a seed stays under run-fuzz.sh's -max_len).
  add("capture-small.bin").Add(capture_rel)
      .Add(CaptureMessages(lines, cols, 1, 11))
      .Add(CaptureMessages(lines, cols, 18, 21))
      .Add(CaptureMessages(lines, cols, 25, 27));
  add("capture-750.bin").Add(capture_rel).Add(CaptureMessages(lines, cols, 12, 14));
  add("capture-751.bin").Add(capture_rel).Add(CaptureMessages(lines, cols, 15, 17));
  add("capture-753.bin").Add(capture_rel).Add(CaptureMessages(lines, cols, 22, 24));
  // A lost connection: the server announces the relation again and re-sends
  // what was not confirmed.
  add("capture-resent.bin").Add(capture_rel)
      .Add(CaptureMessages(lines, cols, 1, 6))
      .Reconnect().Add(capture_rel)
      .Add(CaptureMessages(lines, cols, 1, 11));

  // A transaction streamed in two blocks, a subtransaction's changes among
  // its own, an ordinary transaction committing between the blocks.
  add("stream-commit.bin")
      .Add(StreamStart(900, true)).Add(Relation(kResourcesRel, "public", "resources",
                                                PodColumns(), 900))
      .Add(Insert(kResourcesRel, PodRow("a"), 900))
      .Add(Insert(kResourcesRel, PodRow("b"), 901))
      .Add(StreamStop())
      .Add(Begin(0x2000, t, 905)).Add(Insert(kResourcesRel, PodRow("z")))
      .Add(Commit(0x2000, 0x2030, t))
      .Add(StreamStart(900, false))
      .Add(Update(kResourcesRel, 'O', PodRow("a"), PodRow("a2"), 900))
      .Add(Delete(kResourcesRel, 'O', PodRow("b"), 901))
      .Add(Truncate({kResourcesRel}, 900))
      .Add(StreamStop())
      .Add(StreamCommit(900, 0x3000, 0x3030, t + 1));
  // Subtransactions rolled back (v2's Stream Abort), then a whole streamed
  // transaction rolled back (v4's, with its position and time).
  add("stream-abort.bin").Add(pod_rel)
      .Add(StreamStart(900, true))
      .Add(Insert(kResourcesRel, PodRow("a"), 900))
      .Add(Insert(kResourcesRel, PodRow("b"), 901))
      .Add(Insert(kResourcesRel, PodRow("c"), 902))
      .Add(StreamStop())
      .Add(StreamAbort(900, 901))
      .Add(StreamStart(900, false))
      .Add(Insert(kResourcesRel, PodRow("d"), 902))
      .Add(StreamStop())
      .Add(StreamCommit(900, 0x3000, 0x3030, t))
      .Add(StreamStart(910, true))
      .Add(Insert(kResourcesRel, PodRow("e"), 910))
      .Add(StreamStop())
      .Add(StreamAbort(910, 910, 0x3100, t));
  // Two streams open at once; the later one commits first.
  add("stream-interleaved.bin").Add(pod_rel)
      .Add(StreamStart(900, true)).Add(Insert(kResourcesRel, PodRow("a"), 900))
      .Add(StreamStop())
      .Add(StreamStart(910, true)).Add(Insert(kResourcesRel, PodRow("b"), 910))
      .Add(StreamStop())
      .Add(StreamStart(900, false)).Add(Insert(kResourcesRel, PodRow("c"), 900))
      .Add(StreamStop())
      .Add(StreamCommit(910, 0x3000, 0x3030, t))
      .Add(StreamCommit(900, 0x3100, 0x3130, t));
  // The fuzz target's 32 KiB bound: a stream and a whole transaction, each
  // within it alone, pass it together; then a stream alone passes it.
  {
    SeedWriter& w = add("overflow.bin");
    w.Add(pod_rel).Add(StreamStart(900, true));
    const std::string object = "{\"pad\": \"" + std::string(1500, 'p') + "\"}";
    for (int i = 0; i < 9; ++i) {
      w.Add(Insert(kResourcesRel, PodRow("s" + std::to_string(i), object),
                   i % 2 ? 901 : 900));
    }
    w.Add(StreamStop()).Add(Begin(0x5000, t, 905));
    for (int i = 0; i < 9; ++i) {
      w.Add(Insert(kResourcesRel, PodRow("o" + std::to_string(i), object)));
    }
    w.Add(Commit(0x5000, 0x5030, t)).Add(StreamCommit(900, 0x6000, 0x6030, t));
    w.Add(StreamStart(910, true));
    for (int i = 0; i < 20; ++i) {
      w.Add(Insert(kResourcesRel, PodRow("b" + std::to_string(i), object), 910));
    }
    w.Add(StreamStop()).Add(StreamCommit(910, 0x7000, 0x7030, t));
  }
  // A lost connection in a stream's life: the server streams it again from
  // its start, and re-sends one that had committed (a duplicate).
  add("stream-resent.bin").Add(pod_rel)
      .Add(StreamStart(900, true)).Add(Insert(kResourcesRel, PodRow("a"), 900))
      .Add(StreamStop())
      .Add(StreamCommit(900, 0x3000, 0x3030, t))
      .Add(StreamStart(910, true)).Add(Insert(kResourcesRel, PodRow("b"), 910))
      .Reconnect().Add(pod_rel)
      .Add(StreamStart(900, true)).Add(Insert(kResourcesRel, PodRow("a"), 900))
      .Add(StreamStop())
      .Add(StreamCommit(900, 0x3000, 0x3030, t))
      .Add(StreamStart(910, true)).Add(Insert(kResourcesRel, PodRow("b"), 910))
      .Add(StreamStop())
      .Add(StreamCommit(910, 0x3100, 0x3130, t));
  // REPLICA IDENTITY USING INDEX: old keys, and an update that sends none.
  add("key-identity.bin").Add(keyed_rel)
      .Add(Begin(0x2000, t, 800))
      .Add(Insert(kResourcesRel, PodRow("a")))
      .Add(Update(kResourcesRel, 'K', KeyOnly("a"), PodRow("b")))
      .Add(Update(kResourcesRel, 0, {}, PodRow("b")))
      .Add(Delete(kResourcesRel, 'K', KeyOnly("b")))
      .Add(Commit(0x2000, 0x2030, t));
  {
    Tuple toasted = PodRow("a");
    toasted[10] = kUnchanged;
    toasted[6] = kNull;
    add("toast-and-nulls.bin").Add(pod_rel)
        .Add(Begin(0x2000, t, 800))
        .Add(Update(kResourcesRel, 'O', PodRow("a"), toasted))
        .Add(Commit(0x2000, 0x2030, t));
  }
  add("other-table.bin").Add(pod_rel).Add(other_rel)
      .Add(Begin(0x2000, t, 800))
      .Add(Insert(kOtherRel, PodRow("x")))
      .Add(Insert(kResourcesRel, PodRow("a")))
      .Add(Update(kOtherRel, 'O', PodRow("x"), PodRow("y")))
      .Add(Delete(kOtherRel, 'O', PodRow("y")))
      .Add(Truncate({kOtherRel}))
      .Add(Commit(0x2000, 0x2030, t))
      .Add(Begin(0x2100, t, 801))
      .Add(Truncate({kOtherRel, kResourcesRel}))
      .Add(Commit(0x2100, 0x2130, t));
  add("origin-type-message.bin")
      .Add(LogicalMessage(false, 0x1900, "probe", "hello"))
      .Add(Begin(0x2000, t, 800)).Add(Origin(0x77, "node_a"))
      .Add(Type(16500, "public", "mood")).Add(pod_rel)
      .Add(LogicalMessage(true, 0x1f00, "p", "c"))
      .Add(Insert(kResourcesRel, PodRow("a")))
      .Add(Commit(0x2000, 0x2030, t));
  // Messages that do not decode: the transaction they are in breaks.
  {
    Tuple binary = PodRow("a");
    binary[7] = Datum{'b', "a"};
    add("refused.bin").Add(pod_rel)
        .Add(Begin(0x2000, t, 800))
        .Add(Insert(kResourcesRel, PodRow("a")))
        .Add(Insert(kResourcesRel, binary))
        .Add(Insert(kOtherRel, PodRow("x")))
        .Add(Commit(0x2000, 0x2030, t))
        .Add(std::string(PgMessage('b').Int64(0x2100).Int64(0x2130).Int64(t).Int32(7)) +
             std::string("gid\0", 4))
        .Add(std::string(PgMessage('P').Int8(0).Int64(0x2100).Int64(0x2130).Int64(t)
                             .Int32(7)) +
             std::string("gid\0", 4));
    seeds.back().decodes = false;
  }
  // A mapping of another table, its columns in another order.
  {
    const std::vector<RelColumn> objs = {
        {"doc", kJsonbOid, false}, {"nm", kTextOid, false}, {"id", kTextOid, true},
        {"ns", kTextOid, false},   {"knd", kTextOid, false}, {"cl", kTextOid, false},
        {"res", kTextOid, false},  {"api_version", kTextOid, false},
        {"api_group", kTextOid, false}};
    add("custom-mapping.bin").Add(Relation(5, "k8s", "objs", objs))
        .Add(Begin(0x2000, t, 800))
        .Add(Insert(5, {Text(R"({"metadata": {"name": "n"}})"), Text("n"), Text("u"),
                        Text("ns"), Text("Pod"), Text("c1"), Text("pods"), Text("v1"),
                        Text("")}))
        .Add(Commit(0x2000, 0x2030, t));
    seeds.back().mapping =
        R"({"schema": "k8s", "table": "objs", "columns": {"group": "api_group", )"
        R"("version": "api_version", "resource": "res", "kind": "knd", "cluster": "cl", )"
        R"("namespace": "ns", "name": "nm", "uid": "id", "object": "doc"}})";
  }
  return seeds;
}

TEST(PgoutputFuzzSeeds, AreWhatTheBuilderWrites) {
  const std::string dir =
      std::string(WALWATCH_SOURCE_DIR) + "/tests/fuzz/corpus/pgoutput/";
  const char* write = std::getenv("WALWATCH_WRITE_PGOUTPUT_SEEDS");
  for (const Seed& seed : FuzzSeeds()) {
    SCOPED_TRACE(seed.name);
    std::string bytes = seed.mapping.empty() ? "" : seed.mapping + "\n";
    bytes += seed.frames.bytes();
    if (write && std::string(write) == "1") {
      std::ofstream out(dir + seed.name, std::ios::binary | std::ios::trunc);
      out << bytes;
      ASSERT_TRUE(out.good()) << dir + seed.name;
      continue;
    }
    std::ifstream in(dir + seed.name, std::ios::binary);
    std::string file((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    EXPECT_TRUE(file == bytes)
        << dir << seed.name << " is not what the builder writes (" << file.size()
        << " bytes, not " << bytes.size()
        << "); rewrite with WALWATCH_WRITE_PGOUTPUT_SEEDS=1";

    TableMapping mapping = DefaultTableMapping();
    if (!seed.mapping.empty()) {
      ASSERT_EQ(ParseTableMapping(seed.mapping, &mapping), "");
    }
    PgoutputDecoder decoder(mapping);
    size_t errors = 0;
    for (const auto& step : seed.frames.steps()) {
      if (!step) {
        decoder.Reset();
        continue;
      }
      LogicalRecord r;
      std::string err = decoder.Decode(*step, 0x100, &r);
      if (!err.empty()) ++errors;
      if (seed.decodes) {
        EXPECT_EQ(err, "");
      }
    }
    if (!seed.decodes) {
      EXPECT_GT(errors, 0u);
    }
  }
}

}  // namespace
}  // namespace walwatch
