// PgoutputDecoder against its header's contract, one kind of message at a
// time, on messages written byte by byte as PostgreSQL's documentation gives
// them (tests/unit/support/pgoutput_builder.h): Begin and Commit, Relations
// and the tuples of changes (the mapped table's columns by name, keys,
// TOAST, nulls, other tables), Truncate, Origin, Type and logical messages,
// and streams (protocol version 2 on). What the decoder refuses and cut or
// corrupted input: pgoutput_malformed_test.cc; the capture's changes and
// the fuzz seeds: pgoutput_wal2json_test.cc.
#include "cdc/postgres/pgoutput_decoder.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <simdjson.h>

#include "schema/table_mapping.h"
#include "tests/unit/support/pgoutput_fixture.h"

namespace walwatch {
namespace {

using namespace testing_pgoutput;  // NOLINT: the tests' language
using State = ColumnValue::State;

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

}  // namespace
}  // namespace walwatch
