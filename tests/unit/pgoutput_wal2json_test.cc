// PgoutputDecoder next to Wal2JsonDecoder: the capture's changes
// (tests/data/wal2json_v2_capture.jsonl), as pgoutput sends them for the
// same table (tests/unit/support/pgoutput_builder.h), decode to the row
// images Wal2JsonDecoder gives. And the seed corpus of
// tests/fuzz/pgoutput_fuzz.cc, written by the same builder (at the end).
#include "cdc/postgres/pgoutput_decoder.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cdc/postgres/lsn.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "schema/table_mapping.h"
#include "tests/unit/support/pgoutput_fixture.h"
#include "tests/unit/wal2json_capture.h"

namespace walwatch {
namespace {

using testing_capture::ReadCaptureLines;
using namespace testing_pgoutput;  // NOLINT: the tests' language
using State = ColumnValue::State;

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
// is written by the builder (tests/unit/support/pgoutput_builder.h) in that
// target's framing (each message after its Int32 length; 0xFFFFFFFF: the
// connection is lost). This test checks the files are what the builder
// writes and that each seed's messages decode; to (re)write them:
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
