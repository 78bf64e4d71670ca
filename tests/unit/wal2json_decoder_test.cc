#include "cdc/postgres/wal2json_decoder.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cdc/postgres/lsn.h"
#include "tests/unit/wal2json_capture.h"

namespace walwatch {
namespace {

using testing_capture::ReadCaptureLines;
using testing_capture::ReplaceFirst;
using State = ColumnValue::State;

// The jsonb texts in the capture, as jsonb_out wrote them (before wal2json
// escaped them into a JSON string).
constexpr char kObjectN1500[] =
    R"({"kind": "Pod", "spec": {"n": 1500}, "metadata": {"uid": "u1", "name": "p1", "labels": {"app": "x \"q\""}, "namespace": "default", "annotations": {"shadow.clusterpedia.io/cluster-name": "c1"}, "resourceVersion": "100"}, "apiVersion": "v1"})";
constexpr char kObjectN2[] =
    R"({"kind": "Pod", "spec": {"n": 2}, "metadata": {"uid": "u1", "name": "p1", "labels": {"app": "x \"q\""}, "namespace": "default", "annotations": {"shadow.clusterpedia.io/cluster-name": "c1"}, "resourceVersion": "100"}, "apiVersion": "v1"})";
constexpr char kObjectEmptyMeta[] = R"({"metadata": {}})";

constexpr int64_t kDayStartUs = 1796217696000000;  // 2026-12-02 13:21:36 UTC

uint64_t Lsn(const char* text) {
  auto v = ParseLsn(text);
  EXPECT_TRUE(v.has_value()) << text;
  return v.value_or(0);
}

// The value of column `name` in the `tuple` of a capture line, decoded by an
// independent JSON parser.
std::string ColumnOf(const std::string& line, const char* tuple,
                     const char* name) {
  auto doc = nlohmann::json::parse(line);
  for (const auto& c : doc.at(tuple)) {
    if (c.at("name") == name) return c.at("value").get<std::string>();
  }
  ADD_FAILURE() << "no column " << name;
  return "";
}

class Wal2JsonDecoderTest : public ::testing::Test {
 protected:
  Wal2JsonDecoderTest()
      : mapping_(DefaultTableMapping()),
        decoder_(mapping_),
        lines_(ReadCaptureLines()) {}

  LogicalRecord DecodeOk(const std::string& line) {
    LogicalRecord r;
    std::string err = decoder_.Decode(line, &r);
    EXPECT_EQ(err, "") << line.substr(0, 200);
    return r;
  }
  // Line n of the capture file (1-based).
  const std::string& Line(size_t n) { return lines_.at(n - 1); }

  TableMapping mapping_;
  Wal2JsonDecoder decoder_;
  std::vector<std::string> lines_;
};

TEST_F(Wal2JsonDecoderTest, CaptureHasTheDescribedLines) {
  ASSERT_EQ(lines_.size(), 27u);
}

struct Expected {
  size_t line;
  RecordAction action;
  uint32_t xid;
  const char* lsn;
  const char* next_lsn;  // nullptr: none (a change record)
  int64_t micros;        // fraction of the commit time after kDayStartUs
  bool mapped_table;
  bool columns;
  bool identity;
};

TEST_F(Wal2JsonDecoderTest, DecodesEveryCapturedLine) {
  using A = RecordAction;
  const Expected expected[] = {
      {1, A::kBegin, 746, "0/1558570", "0/15585A0", 726676, false, false, false},
      {2, A::kInsert, 746, "0/1558288", nullptr, 726676, true, true, false},
      {3, A::kCommit, 746, "0/1558570", "0/15585A0", 726676, false, false, false},
      {4, A::kBegin, 747, "0/15588B0", "0/15588E0", 727887, false, false, false},
      {5, A::kUpdate, 747, "0/15585A0", nullptr, 727887, true, true, true},
      {6, A::kCommit, 747, "0/15588B0", "0/15588E0", 727887, false, false, false},
      {7, A::kBegin, 748, "0/1558BF8", "0/1558C28", 728325, false, false, false},
      {8, A::kUpdate, 748, "0/15588E0", nullptr, 728325, true, true, true},
      {9, A::kCommit, 748, "0/1558BF8", "0/1558C28", 728325, false, false, false},
      {10, A::kBegin, 749, "0/1558C68", "0/1558C98", 728711, false, false, false},
      {11, A::kCommit, 749, "0/1558C68", "0/1558C98", 728711, false, false, false},
      {12, A::kBegin, 750, "0/155BFD0", "0/155C000", 731554, false, false, false},
      {13, A::kUpdate, 750, "0/155BDB8", nullptr, 731554, true, true, true},
      {14, A::kCommit, 750, "0/155BFD0", "0/155C000", 731554, false, false, false},
      {15, A::kBegin, 751, "0/155EEC0", "0/155EEF0", 732170, false, false, false},
      {16, A::kUpdate, 751, "0/155C050", nullptr, 732170, true, true, true},
      {17, A::kCommit, 751, "0/155EEC0", "0/155EEF0", 732170, false, false, false},
      {18, A::kBegin, 752, "0/155F0B0", "0/155F0E0", 732933, false, false, false},
      {19, A::kInsert, 752, "0/155EEF0", nullptr, 732933, true, true, false},
      {20, A::kDelete, 752, "0/155F018", nullptr, 732933, true, false, true},
      {21, A::kCommit, 752, "0/155F0B0", "0/155F0E0", 732933, false, false, false},
      {22, A::kBegin, 753, "0/1562050", "0/1562080", 733325, false, false, false},
      {23, A::kDelete, 753, "0/155F0E0", nullptr, 733325, true, false, true},
      {24, A::kCommit, 753, "0/1562050", "0/1562080", 733325, false, false, false},
      {25, A::kBegin, 754, "0/1562F30", "0/15630F8", 735582, false, false, false},
      {26, A::kTruncate, 754, "0/1562F00", nullptr, 735582, true, false, false},
      {27, A::kCommit, 754, "0/1562F30", "0/15630F8", 735582, false, false, false},
  };
  ASSERT_EQ(lines_.size(), std::size(expected));
  for (const Expected& e : expected) {
    SCOPED_TRACE("line " + std::to_string(e.line));
    LogicalRecord r = DecodeOk(Line(e.line));
    EXPECT_EQ(r.action, e.action);
    EXPECT_EQ(r.xid, e.xid);
    EXPECT_EQ(r.lsn, Lsn(e.lsn));
    EXPECT_EQ(r.next_lsn, e.next_lsn ? Lsn(e.next_lsn) : 0);
    EXPECT_EQ(r.timestamp_us, kDayStartUs + e.micros);
    EXPECT_EQ(r.mapped_table, e.mapped_table);
    EXPECT_EQ(r.columns.present, e.columns);
    EXPECT_EQ(r.identity.present, e.identity);
    if (!e.columns) {
      for (const auto& f : r.columns.fields) EXPECT_EQ(f.state, State::kAbsent);
    }
    if (!e.identity) {
      for (const auto& f : r.identity.fields) {
        EXPECT_EQ(f.state, State::kAbsent);
      }
    }
  }
  // Spot-check decimal values against FACTS: B and C carry the commit LSN.
  EXPECT_EQ(DecodeOk(Line(1)).lsn, 22381936u);
  EXPECT_EQ(DecodeOk(Line(3)).next_lsn, 22381984u);
}

TEST_F(Wal2JsonDecoderTest, InsertColumns) {
  LogicalRecord r = DecodeOk(Line(2));
  const RowImage& c = r.columns;
  EXPECT_EQ(c[MappedField::kGroup], (ColumnValue{State::kValue, ""}));
  EXPECT_EQ(c[MappedField::kVersion], (ColumnValue{State::kValue, "v1"}));
  EXPECT_EQ(c[MappedField::kResource], (ColumnValue{State::kValue, "pods"}));
  EXPECT_EQ(c[MappedField::kKind], (ColumnValue{State::kValue, "Pod"}));
  EXPECT_EQ(c[MappedField::kCluster], (ColumnValue{State::kValue, "c1"}));
  EXPECT_EQ(c[MappedField::kNamespace], (ColumnValue{State::kValue, "default"}));
  EXPECT_EQ(c[MappedField::kName], (ColumnValue{State::kValue, "p1"}));
  EXPECT_EQ(c[MappedField::kUid], (ColumnValue{State::kValue, "u1"}));
  EXPECT_EQ(c[MappedField::kObject].state, State::kValue);
}

TEST_F(Wal2JsonDecoderTest, ObjectIsUnescapedExactlyOnce) {
  LogicalRecord r = DecodeOk(Line(2));
  const std::string& obj = r.columns[MappedField::kObject].text;
  // The jsonb text itself: the label's quotes stay escaped once (\"q\"),
  // the object's own quotes are bare.
  EXPECT_EQ(obj, kObjectN1500);
  EXPECT_NE(obj.find(R"("app": "x \"q\"")"), std::string::npos);
  EXPECT_EQ(obj.find(R"(\\)"), std::string::npos);
  // It parses as the object it was, label included.
  auto parsed = nlohmann::json::parse(obj);
  EXPECT_EQ(parsed["metadata"]["labels"]["app"], "x \"q\"");
  EXPECT_EQ(parsed["spec"]["n"], 1500);
  // The decoder keeps simdjson's padding behind an object (header contract).
  EXPECT_GE(r.columns[MappedField::kObject].text.capacity(),
            obj.size() + 64);
}

TEST_F(Wal2JsonDecoderTest, UpdateHasNewColumnsAndOldIdentity) {
  LogicalRecord r = DecodeOk(Line(5));
  EXPECT_EQ(r.columns[MappedField::kObject].text, kObjectN2);
  EXPECT_EQ(r.identity[MappedField::kObject].text, kObjectN1500);
  EXPECT_EQ(r.identity[MappedField::kUid], (ColumnValue{State::kValue, "u1"}));
  EXPECT_EQ(r.identity[MappedField::kName], (ColumnValue{State::kValue, "p1"}));
}

TEST_F(Wal2JsonDecoderTest, BigObjectMatchesIndependentDecoding) {
  LogicalRecord r = DecodeOk(Line(13));
  std::string expected = ColumnOf(Line(13), "columns", "object");
  ASSERT_EQ(expected.size(), 19447u);
  EXPECT_EQ(r.columns[MappedField::kObject].text, expected);
  EXPECT_EQ(r.columns[MappedField::kObject].text.rfind("{\"big\": \"c4ca4238", 0),
            0u);
  EXPECT_EQ(r.identity[MappedField::kObject].text, kObjectN2);
}

TEST_F(Wal2JsonDecoderTest, ToastOmittedObjectIsAbsentFromColumnsOnly) {
  LogicalRecord r = DecodeOk(Line(16));
  ASSERT_TRUE(r.columns.present);
  EXPECT_EQ(r.columns[MappedField::kObject].state, State::kAbsent);
  EXPECT_EQ(r.columns[MappedField::kObject].text, "");
  // The other mapped columns are there.
  EXPECT_EQ(r.columns[MappedField::kUid], (ColumnValue{State::kValue, "u1"}));
  EXPECT_EQ(r.columns[MappedField::kKind], (ColumnValue{State::kValue, "Pod"}));
  // The old row under REPLICA IDENTITY FULL has it.
  ASSERT_TRUE(r.identity.present);
  EXPECT_EQ(r.identity[MappedField::kObject].state, State::kValue);
  EXPECT_EQ(r.identity[MappedField::kObject].text,
            ColumnOf(Line(16), "identity", "object"));
  EXPECT_EQ(r.identity[MappedField::kObject].text.size(), 19447u);
}

TEST_F(Wal2JsonDecoderTest, TwoRowTransactionAndDeleteWithFullOldRow) {
  LogicalRecord ins = DecodeOk(Line(19));
  EXPECT_EQ(ins.columns[MappedField::kObject].text, kObjectEmptyMeta);
  EXPECT_EQ(ins.columns[MappedField::kGroup].text, "apps");
  EXPECT_EQ(ins.columns[MappedField::kKind].text, "Deployment");
  LogicalRecord del = DecodeOk(Line(20));
  EXPECT_EQ(del.identity[MappedField::kObject].text, kObjectEmptyMeta);
  EXPECT_EQ(del.identity[MappedField::kName].text, "d1");
  LogicalRecord del_big = DecodeOk(Line(23));
  EXPECT_EQ(del_big.identity[MappedField::kObject].text,
            ColumnOf(Line(23), "identity", "object"));
  EXPECT_EQ(del_big.identity[MappedField::kUid].text, "u1");
}

TEST_F(Wal2JsonDecoderTest, RecordIsFullyOverwritten) {
  LogicalRecord r;
  ASSERT_EQ(decoder_.Decode(Line(5), &r), "");
  ASSERT_TRUE(r.identity.present);
  ASSERT_EQ(decoder_.Decode(Line(2), &r), "");
  EXPECT_FALSE(r.identity.present);
  for (const auto& f : r.identity.fields) {
    EXPECT_EQ(f, (ColumnValue{State::kAbsent, ""}));
  }
  ASSERT_EQ(decoder_.Decode(Line(1), &r), "");
  EXPECT_EQ(r.action, RecordAction::kBegin);
  EXPECT_FALSE(r.mapped_table);
  EXPECT_FALSE(r.columns.present);
  for (const auto& f : r.columns.fields) {
    EXPECT_EQ(f, (ColumnValue{State::kAbsent, ""}));
  }
}

// A change record built by hand, in wal2json's v2 layout.
std::string Change(char action, uint32_t xid, const char* lsn,
                   const std::string& schema, const std::string& table,
                   const std::string& columns, const std::string& identity) {
  std::string s = std::string("{\"action\":\"") + action +
                  "\",\"xid\":" + std::to_string(xid) +
                  ",\"timestamp\":\"2026-12-02 13:21:36.5+00\",\"lsn\":\"" +
                  lsn + "\",\"schema\":\"" + schema + "\",\"table\":\"" +
                  table + "\"";
  if (!columns.empty()) s += ",\"columns\":" + columns;
  if (!identity.empty()) s += ",\"identity\":" + identity;
  return s + "}";
}

std::string BeginOrCommit(char action, uint32_t xid, const char* lsn,
                          const char* next_lsn) {
  return std::string("{\"action\":\"") + action +
         "\",\"xid\":" + std::to_string(xid) +
         ",\"timestamp\":\"2026-12-02 13:21:36.5+00\",\"lsn\":\"" + lsn +
         "\",\"nextlsn\":\"" + next_lsn + "\"}";
}

constexpr char kPodColumns[] =
    R"([{"name":"group","value":""},{"name":"version","value":"v1"},)"
    R"({"name":"resource","value":"pods"},{"name":"kind","value":"Pod"},)"
    R"({"name":"cluster","value":"c1"},{"name":"namespace","value":"ns"},)"
    R"({"name":"name","value":"p"},{"name":"uid","value":"u"},)"
    R"({"name":"object","value":"{\"metadata\": {}}"}])";

TEST_F(Wal2JsonDecoderTest, OtherTableLeavesImagesEmpty) {
  for (auto [schema, table] :
       {std::pair<const char*, const char*>{"public", "other"},
        {"other", "resources"},
        {"public", "Resources"},
        {"public", "resources2"}}) {
    SCOPED_TRACE(std::string(schema) + "." + table);
    LogicalRecord r =
        DecodeOk(Change('U', 9, "0/10", schema, table, kPodColumns, kPodColumns));
    EXPECT_EQ(r.action, RecordAction::kUpdate);
    EXPECT_FALSE(r.mapped_table);
    EXPECT_FALSE(r.columns.present);
    EXPECT_FALSE(r.identity.present);
    for (const auto& f : r.columns.fields) EXPECT_EQ(f.state, State::kAbsent);
    for (const auto& f : r.identity.fields) EXPECT_EQ(f.state, State::kAbsent);
    EXPECT_EQ(r.lsn, 16u);
  }
  // The same record on the mapped table is kept.
  LogicalRecord r = DecodeOk(
      Change('U', 9, "0/10", "public", "resources", kPodColumns, kPodColumns));
  EXPECT_TRUE(r.mapped_table);
  EXPECT_EQ(r.columns[MappedField::kName].text, "p");
  EXPECT_EQ(r.identity[MappedField::kObject].text, kObjectEmptyMeta);
}

TEST_F(Wal2JsonDecoderTest, CustomMappingDecodesByNameInAnyOrder) {
  TableMapping m;
  ASSERT_EQ(ParseTableMapping(R"({"schema": "k8s", "table": "objs", "columns": {
      "group": "api_group", "version": "api_version", "resource": "res",
      "kind": "knd", "cluster": "cl", "namespace": "ns", "name": "nm",
      "uid": "id", "object": "doc"}})",
                              &m),
            "");
  Wal2JsonDecoder decoder(m);
  // Columns in an order unlike the mapping's, with unmapped columns of
  // every JSON type between them, "type" keys, and spacing.
  const std::string columns =
      R"([ {"name": "doc", "type": "jsonb", "value": "{\"metadata\": {\"name\": \"n\\\\x\"}}"},)"
      R"( {"name": "extra_obj", "value": {"a": [1, {"b": null}]}},)"
      R"( {"name": "nm", "value": "n\\x"},)"
      R"( {"name": "extra_arr", "value": [1, 2, "x"]},)"
      R"( {"name": "id", "type": "bigint", "value": 42 },)"
      R"( {"name": "ns", "value": null},)"
      R"( {"name": "knd", "value": "Kind\u00e9"},)"
      R"( {"name": "cl", "value": true},)"
      R"( {"name": "res", "value": -1.5e3},)"
      R"( {"name": "api_version", "value": "v1"},)"
      R"( {"name": "extra_num", "value": 7} ])";
  // "api_group" is not in the tuple at all.
  LogicalRecord r;
  ASSERT_EQ(decoder.Decode(Change('I', 5, "0/20", "k8s", "objs", columns, ""), &r),
            "");
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

  // The default mapping's table is another table for this decoder.
  LogicalRecord other;
  ASSERT_EQ(decoder.Decode(Line(2), &other), "");
  EXPECT_FALSE(other.mapped_table);
  EXPECT_FALSE(other.columns.present);
}

TEST_F(Wal2JsonDecoderTest, ColumnOrderDoesNotMatter) {
  // The capture's INSERT with its columns reversed decodes to the same row.
  // ordered_json keeps wal2json's key order (schema and table first).
  auto doc = nlohmann::ordered_json::parse(Line(2));
  auto& cols = doc["columns"];
  std::reverse(cols.begin(), cols.end());
  std::string reversed = doc.dump();
  LogicalRecord a = DecodeOk(Line(2));
  LogicalRecord b = DecodeOk(reversed);
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    EXPECT_EQ(a.columns.fields[i], b.columns.fields[i]) << kMappedFieldNames[i];
  }
  EXPECT_EQ(b.columns[MappedField::kObject].text, kObjectN1500);
}

TEST_F(Wal2JsonDecoderTest, InterleavedTransactionsDecode) {
  // Transaction 801 began first and wrote its change at a lower LSN, but
  // committed after 800: change LSNs go down across transactions.
  const std::string lines[] = {
      BeginOrCommit('B', 800, "0/3000", "0/3030"),
      Change('I', 800, "0/2800", "public", "resources", kPodColumns, ""),
      BeginOrCommit('C', 800, "0/3000", "0/3030"),
      BeginOrCommit('B', 801, "0/3100", "0/3130"),
      Change('I', 801, "0/2000", "public", "resources", kPodColumns, ""),
      BeginOrCommit('C', 801, "0/3100", "0/3130"),
  };
  const uint64_t lsns[] = {0x3000, 0x2800, 0x3000, 0x3100, 0x2000, 0x3100};
  const uint32_t xids[] = {800, 800, 800, 801, 801, 801};
  for (size_t i = 0; i < std::size(lines); ++i) {
    LogicalRecord r = DecodeOk(lines[i]);
    EXPECT_EQ(r.lsn, lsns[i]) << i;
    EXPECT_EQ(r.xid, xids[i]) << i;
    EXPECT_EQ(r.timestamp_us, kDayStartUs + 500000) << i;
  }
}

TEST_F(Wal2JsonDecoderTest, MessageAndUnknownKeysAreAccepted) {
  LogicalRecord r = DecodeOk(
      R"({"action":"M","xid":7,"lsn":"0/AA","transactional":true,"prefix":"p","content":"{\"x\": 1}"})");
  EXPECT_EQ(r.action, RecordAction::kMessage);
  EXPECT_EQ(r.lsn, 0xAAu);
  EXPECT_FALSE(r.mapped_table);
  // A non-transactional message, exactly as wal2json 2.5 writes it with
  // include-xids and include-timestamp: both are null.
  LogicalRecord n = DecodeOk(
      R"({"action":"M","xid":null,"timestamp":null,"lsn":"0/19030570","transactional":false,"prefix":"probe","content":"hello"})");
  EXPECT_EQ(n.action, RecordAction::kMessage);
  EXPECT_EQ(n.xid, 0u);
  EXPECT_EQ(n.lsn, 0x19030570u);
  // Null is not a number or text elsewhere.
  LogicalRecord bad;
  EXPECT_NE(decoder_.Decode(R"({"action":"B","xid":nul,"lsn":"0/1"})", &bad),
            "");
  EXPECT_NE(decoder_.Decode(R"({"action":"B","xid":"7","lsn":"0/1"})", &bad),
            "");
  EXPECT_NE(decoder_.Decode(
                R"({"action":"B","xid":1,"timestamp":nullx,"lsn":"0/1"})",
                &bad),
            "");
  // Keys a newer wal2json might add, before and after the tuples.
  LogicalRecord u = DecodeOk(
      R"({"action":"U","xid":1,"origin":{"a":[1]},"lsn":"0/1","schema":"public","table":"resources","pk":[{"name":"id","type":"bigint"}],"columns":)" +
      std::string(kPodColumns) + R"(,"future":[{"x":null}]})");
  EXPECT_TRUE(u.mapped_table);
  EXPECT_EQ(u.columns[MappedField::kUid].text, "u");
}

// Every decode of a malformed message returns a one-line error and leaves
// the decoder usable.
class Wal2JsonDecoderErrorTest : public Wal2JsonDecoderTest {
 protected:
  void ExpectError(const std::string& message, const std::string& needle = "") {
    LogicalRecord r;
    std::string err = decoder_.Decode(message, &r);
    EXPECT_FALSE(err.empty()) << "accepted: " << message.substr(0, 300);
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    if (!needle.empty()) {
      EXPECT_NE(err.find(needle), std::string::npos)
          << "error \"" << err << "\" lacks \"" << needle << "\"";
    }
    // Still usable.
    LogicalRecord ok;
    EXPECT_EQ(decoder_.Decode(Line(2), &ok), "");
    EXPECT_EQ(ok.columns[MappedField::kObject].text, kObjectN1500);
  }
};

TEST_F(Wal2JsonDecoderErrorTest, NotJson) {
  ExpectError("");
  ExpectError(" ");
  ExpectError("not json");
  ExpectError("B");
  ExpectError("[]");
  ExpectError("[{\"action\":\"B\"}]");
  ExpectError("\"action\"");
  ExpectError("null");
  ExpectError("42");
  ExpectError("{\"action\":\"B\",}");
  ExpectError("{\"action\" \"B\"}");
  ExpectError("{'action':'B'}");
  ExpectError(std::string("{\"action\":\"B\0\"}", 15));
  ExpectError("\xff\xfe{}");
}

TEST_F(Wal2JsonDecoderErrorTest, MissingAction) {
  ExpectError("{}", "action");
  ExpectError(R"({"xid":1,"lsn":"0/1","nextlsn":"0/2"})", "action");
}

TEST_F(Wal2JsonDecoderErrorTest, UnknownAction) {
  for (const char* a : {"X", "b", "", "BC", "II", " ", "\\u0058"}) {
    ExpectError(std::string(R"({"action":")") + a + R"(","lsn":"0/1"})",
                "action");
  }
}

TEST_F(Wal2JsonDecoderErrorTest, NulActionIsRejected) {
  // "\u0000" unescapes to one NUL byte, which is no action either.
  ExpectError(R"({"action":"\u0000","lsn":"0/1","nextlsn":"0/2"})", "action");
}

TEST_F(Wal2JsonDecoderErrorTest, WrongTypes) {
  ExpectError(R"({"action":66,"lsn":"0/1"})", "action");
  ExpectError(R"({"action":null,"lsn":"0/1"})", "action");
  ExpectError(R"({"action":["B"],"lsn":"0/1"})", "action");
  ExpectError(R"({"action":"B","xid":"746","lsn":"0/1"})", "xid");
  ExpectError(R"({"action":"B","xid":-1,"lsn":"0/1"})", "xid");
  ExpectError(R"({"action":"B","xid":1.5,"lsn":"0/1"})", "xid");
  ExpectError(R"({"action":"B","xid":4294967296,"lsn":"0/1"})", "xid");
  ExpectError(R"({"action":"B","xid":1,"lsn":22381936})", "LSN");
  ExpectError(R"({"action":"B","xid":1,"lsn":"0/1","nextlsn":null})", "LSN");
  ExpectError(R"({"action":"B","xid":1,"lsn":"0/1","timestamp":1796217696})",
              "timestamp");
  ExpectError(R"({"action":"I","xid":1,"lsn":"0/1","schema":1,"table":"resources"})",
              "schema");
  ExpectError(R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":["resources"]})",
              "table");
  ExpectError(
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":"resources","columns":{"name":"uid","value":"u"}})",
      "array");
  ExpectError(
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":"resources","columns":["uid"]})",
      "column");
  ExpectError(
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":"resources","columns":[{"name":5,"value":"u"}]})",
      "name");
  ExpectError(
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":"resources","columns":[{"value":"u"}]})");
  ExpectError(
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":"resources","columns":[{"type":"text"}]})",
      "name");
  // A mapped column's value must be a scalar.
  ExpectError(
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":"resources","columns":[{"name":"uid","value":["u"]}]})",
      "value");
  ExpectError(
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"public","table":"resources","identity":[{"name":"object","value":{"metadata":{}}}]})",
      "value");
}

TEST_F(Wal2JsonDecoderErrorTest, BadLsn) {
  for (const char* lsn : {"", "0", "0/", "/1", "1/2/3", "G/1", "0x1/1",
                          "123456789/0", "0/1 "}) {
    ExpectError(std::string(R"({"action":"B","xid":1,"lsn":")") + lsn +
                    R"(","nextlsn":"0/2"})",
                "LSN");
    ExpectError(std::string(R"({"action":"C","xid":1,"lsn":"0/1","nextlsn":")") +
                    lsn + R"("})",
                "LSN");
    ExpectError(std::string(R"({"action":"I","xid":1,"lsn":")") + lsn +
                    R"(","schema":"public","table":"resources"})",
                "LSN");
  }
}

TEST_F(Wal2JsonDecoderErrorTest, BadTimestamp) {
  std::string line = Line(1);
  ASSERT_TRUE(ReplaceFirst(&line, "2026-12-02 13:21:36.726676+00",
                           "2026-12-02T13:21:36.726676Z"));
  ExpectError(line, "timestamp");
  line = Line(2);
  ASSERT_TRUE(ReplaceFirst(&line, "2026-12-02 13:21:36.726676+00",
                           "Wed Dec 02 13:21:36.726676 2026 UTC"));
  ExpectError(line, "timestamp");
}

TEST_F(Wal2JsonDecoderErrorTest, MissingRequiredParts) {
  // B and C need the commit LSN.
  ExpectError(R"({"action":"B","xid":1})", "lsn");
  ExpectError(R"({"action":"C","xid":1,"nextlsn":"0/2"})", "lsn");
  // Changes need schema and table.
  ExpectError(R"({"action":"I","xid":1,"lsn":"0/1","table":"resources"})",
              "schema");
  ExpectError(R"({"action":"D","xid":1,"lsn":"0/1","schema":"public"})",
              "schema");
  ExpectError(R"({"action":"T","xid":1,"lsn":"0/1"})", "schema");
  // Tuples before schema/table cannot be classified.
  ExpectError(std::string(R"({"action":"I","xid":1,"lsn":"0/1","columns":)") +
                  kPodColumns + R"(,"schema":"public","table":"resources"})",
              "columns");
}

TEST_F(Wal2JsonDecoderErrorTest, TruncatedCaptureLines) {
  for (size_t n = 1; n <= lines_.size(); ++n) {
    const std::string line = Line(n);
    // Every prefix of the short lines; a stride plus the tail of the long.
    size_t stride = line.size() > 4000 ? 61 : 1;
    for (size_t len = 0; len < line.size(); len += stride) {
      SCOPED_TRACE("line " + std::to_string(n) + " cut to " +
                   std::to_string(len));
      LogicalRecord r;
      EXPECT_NE(decoder_.Decode(std::string_view(line).substr(0, len), &r), "");
      if (HasFailure()) return;  // one report is enough
    }
    for (size_t len = line.size() > 200 ? line.size() - 200 : 0;
         len < line.size(); ++len) {
      SCOPED_TRACE("line " + std::to_string(n) + " cut to " +
                   std::to_string(len));
      LogicalRecord r;
      EXPECT_NE(decoder_.Decode(std::string_view(line).substr(0, len), &r), "");
      if (HasFailure()) return;
    }
  }
}

TEST_F(Wal2JsonDecoderErrorTest, CorruptedBytesNeverCrash) {
  // Flip bytes at many positions of a real change; whatever the result,
  // decoding must return (ASan/UBSan builds make this meaningful).
  const std::string base = Line(5);
  const char replacements[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '\0',
                               '\x80'};
  size_t errors = 0;
  for (size_t pos = 0; pos < base.size(); pos += 3) {
    for (char c : replacements) {
      std::string s = base;
      s[pos] = c;
      LogicalRecord r;
      if (!decoder_.Decode(s, &r).empty()) ++errors;
    }
  }
  EXPECT_GT(errors, 0u);
  LogicalRecord ok;
  EXPECT_EQ(decoder_.Decode(Line(5), &ok), "");
  EXPECT_EQ(ok.identity[MappedField::kObject].text, kObjectN1500);
}

TEST_F(Wal2JsonDecoderErrorTest, TrailingBytesAfterTheObject) {
  // wal2json sends exactly one object per message; anything after it means
  // the message is not what the decoder thinks it is.
  ExpectError(Line(1) + " x");
  ExpectError(Line(1) + "{}");
  ExpectError(Line(2) + "]");
}

// ParsePgTimestamp: PostgreSQL's ISO output in UTC.
int64_t Ts(const char* text) {
  int64_t us = -1;
  EXPECT_TRUE(ParsePgTimestamp(text, &us)) << text;
  return us;
}

TEST(PgTimestamp, ParsesFractionalDigits) {
  EXPECT_EQ(Ts("2026-12-02 13:21:36.726676+00"), kDayStartUs + 726676);
  EXPECT_EQ(Ts("2026-12-02 13:21:36+00"), kDayStartUs);
  EXPECT_EQ(Ts("2026-12-02 13:21:36.7+00"), kDayStartUs + 700000);
  EXPECT_EQ(Ts("2026-12-02 13:21:36.73217+00"), kDayStartUs + 732170);
  EXPECT_EQ(Ts("2026-12-02 13:21:36.05+00"), kDayStartUs + 50000);
  EXPECT_EQ(Ts("2026-12-02 13:21:36.000001+00"), kDayStartUs + 1);
  EXPECT_EQ(Ts("2026-12-02 13:21:36.999999+00"), kDayStartUs + 999999);
}

TEST(PgTimestamp, ParsesOffsets) {
  // 13:21:36+05:30 is 07:51:36 UTC.
  EXPECT_EQ(Ts("2026-12-02 13:21:36+05:30"),
            kDayStartUs - (5 * 3600 + 30 * 60) * int64_t{1000000});
  EXPECT_EQ(Ts("2026-12-02 13:21:36.25-08"),
            kDayStartUs + 8 * 3600 * int64_t{1000000} + 250000);
  EXPECT_EQ(Ts("2026-12-02 13:21:36+00:00"), kDayStartUs);
  EXPECT_EQ(Ts("2026-12-02 13:21:36-00"), kDayStartUs);
  // Historical zones have second offsets (LMT).
  EXPECT_EQ(Ts("2026-12-02 13:21:36+00:19:32"),
            kDayStartUs - (19 * 60 + 32) * int64_t{1000000});
}

TEST(PgTimestamp, ParsesEdgesOfTheCalendar) {
  EXPECT_EQ(Ts("1970-01-01 00:00:00+00"), 0);
  EXPECT_EQ(Ts("1969-12-31 23:59:59.5+00"), -500000);
  EXPECT_EQ(Ts("2000-01-01 00:00:00+00"), 946684800 * int64_t{1000000});
  EXPECT_EQ(Ts("2024-02-29 12:00:00+00"), 1709208000 * int64_t{1000000});
  EXPECT_EQ(Ts("9999-12-31 23:59:59.999999+00"),
            253402300799 * int64_t{1000000} + 999999);
}

TEST(PgTimestamp, RejectsBadForms) {
  const char* bad[] = {
      "",
      "2026-12-02",
      "2026-12-02 13:21:36",             // no offset
      "2026-12-02 13:21:36.726676",      // no offset
      "2026-12-02T13:21:36+00",          // ISO 8601 'T'
      "2026-12-02 13:21:36Z",
      "2026-12-02 13:21:36 +00",
      "2026-12-02 13:21:36.+00",         // no fraction digits
      "2026-12-02 13:21:36.1234567+00",  // more than µs
      "2026-12-02 13:21:36+0",
      "2026-12-02 13:21:36+000",
      "2026-12-02 13:21:36+00:0",
      "2026-12-02 13:21:36+00:00:0",
      "2026-12-02 13:21:36+00:00:00:00",
      "2026-12-02 13:21:36-03:00:15.5",  // fractional offset
      "2026-12-02 13:21:36+00 ",
      "2026-12-02 13:21:36+00 BC",
      "2026-13-02 13:21:36+00",
      "2026-00-02 13:21:36+00",
      "2026-12-00 13:21:36+00",
      "2026-12-32 13:21:36+00",
      "2026-12-02 24:00:00+00",
      "2026-12-02 13:60:36+00",
      "2026-12-02 13:21:61+00",
      "2026-1-02 13:21:36+00",
      "26-12-02 13:21:36+00",
      "20261202 132136+00",
      "2026/12/02 13:21:36+00",
      "Wed Dec 02 13:21:36 2026 UTC",    // DateStyle Postgres
      "12/02/2026 13:21:36 UTC",         // DateStyle SQL
      "infinity",
      "-infinity",
      "10000-01-01 00:00:00+00",
  };
  for (const char* text : bad) {
    int64_t us = 12345;
    EXPECT_FALSE(ParsePgTimestamp(text, &us)) << "\"" << text << "\"";
  }
}

}  // namespace
}  // namespace walwatch
