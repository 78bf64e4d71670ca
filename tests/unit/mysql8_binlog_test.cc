// BinlogReader's MySQL 8 paths, run on binlog bytes built from MySQL 8.0's
// documented format (support/mysql8_binlog_builder.h) through the real
// reader: BinlogReader::OpenBytes, so Connector/C's own parsing of every
// event and row (its file mode) comes first, as it does for a server's
// stream. No MySQL server exists here (Debian 12 ships none): what these
// bytes show is what MySQL's sources say a server writes, not what one was
// seen to write.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cdc/event_builder.h"
#include "cdc/mysql/binlog_position.h"
#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/row_change_conversion.h"
#include "cdc/transaction.h"
#include "schema/table_mapping.h"
#include "tests/unit/support/mysql8_binlog_builder.h"
#include "tests/unit/support/mysql_json_builder.h"

namespace walwatch::mysql {
namespace {

using mysql8::Mysql8BinlogBuilder;
using mysql8::ResourceRow;
using mysql8::ResourcesColumns;
using mysql8::ResourcesImage;
using mysql8::Uuid;
namespace jb = json_builder;

constexpr uint64_t kTableId = 92;
const Uuid kUuid = {0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1,
                    0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42, 0x95, 0x62};
const char kFile[] = "binlog.000007";

// Columns read, and their indexes in a row image.
enum Col : size_t { kId, kName, kUid, kObject, kEvents, kCreated, kDeleted };

BinlogReaderOptions Options() {
  BinlogReaderOptions o;
  o.database = "clusterpedia";
  o.table = "resources";
  o.columns = {"id",     "name",       "uid",       "object",
               "events", "created_at", "deleted_at"};
  return o;
}

// A Pod as MySQL stores it: an object's keys sorted by length, then bytes.
std::string PodObject(const std::string& rv) {
  return jb::Doc(jb::Object({
      {"kind", jb::Str("Pod")},
      {"spec",
       jb::Object({{"nodeName", jb::Str("n1")}, {"priority", jb::Int32(-5)}})},
      {"metadata",
       jb::Object(
           {{"uid", jb::Str("u-1")},
            {"name", jb::Str("web-1")},
            {"labels", jb::Object({{"app", jb::Str("caf\xc3\xa9")}})},
            {"namespace", jb::Str("default")},
            {"annotations", jb::Object({{"note", jb::Str("say \"hi\"\n")}})},
            {"resourceVersion", jb::Str(rv)}})},
      {"apiVersion", jb::Str("v1")},
  }));
}

// The text a SELECT of that object shows on MySQL 8.
std::string PodText(const std::string& rv) {
  return "{\"kind\": \"Pod\", \"spec\": {\"nodeName\": \"n1\", \"priority\": "
         "-5}, \"metadata\": {\"uid\": \"u-1\", \"name\": \"web-1\", "
         "\"labels\": {\"app\": \"caf\xc3\xa9\"}, \"namespace\": \"default\", "
         "\"annotations\": {\"note\": \"say \\\"hi\\\"\\n\"}, "
         "\"resourceVersion\": \"" +
         rv + "\"}, \"apiVersion\": \"v1\"}";
}

ResourceRow Pod(const std::string& rv) {
  ResourceRow r;
  r.id = 7;
  r.resource_version = rv;
  r.object = PodObject(rv);
  return r;
}

// Where each event of the file went: the positions a test checks.
struct Layout {
  size_t previous_gtids = 0;
  size_t insert_gtid = 0, insert_end = 0;
  size_t update_end = 0, noop_end = 0, delete_end = 0;
  size_t rotate = 0;
};

// A MySQL 8 binlog file: FORMAT_DESCRIPTION, PREVIOUS_GTIDS, then four
// transactions on `resources` (insert, update, an update of the events
// columns only, delete), each GTID, BEGIN, TABLE_MAP, ROWS v2, XID, and a
// ROTATE to the next file.
std::string Binlog(Layout* at) {
  Mysql8BinlogBuilder b;
  b.FormatDescription();
  at->previous_gtids = b.PreviousGtids({{kUuid, {{1, 42}}}});
  const auto columns = ResourcesColumns();
  const ResourceRow v1 = Pod("100");
  ResourceRow v2 = Pod("101");
  ResourceRow v2_events = v2;
  v2_events.events_null = false;
  v2_events.events = jb::Doc(jb::Object({{"a", jb::Int16(1)}}));

  // The transaction of GTID kUuid:gno (sequence number gno - 41, after the
  // one before it) with `rows`; *end: where its XID ends. Returns where its
  // GTID event starts.
  auto transaction = [&](uint64_t gno, uint64_t xid,
                         const std::function<void()>& rows, size_t* end) {
    const size_t gtid = b.Gtid(kUuid, gno, gno - 42, gno - 41);
    b.Query("", "BEGIN");
    b.TableMap(kTableId, "clusterpedia", "resources", columns);
    rows();
    b.Xid(xid);
    *end = b.size();
    return gtid;
  };
  const size_t n = columns.size();
  at->insert_gtid = transaction(
      42, 1001, [&] { b.WriteRows(kTableId, n, {ResourcesImage(v1)}); },
      &at->insert_end);
  transaction(
      43, 1002,
      [&] {
        b.UpdateRows(kTableId, n, {{ResourcesImage(v1), ResourcesImage(v2)}});
      },
      &at->update_end);
  transaction(
      44, 1003,
      [&] {
        b.UpdateRows(kTableId, n,
                     {{ResourcesImage(v2), ResourcesImage(v2_events)}});
      },
      &at->noop_end);
  transaction(
      45, 1004, [&] { b.DeleteRows(kTableId, n, {ResourcesImage(v2_events)}); },
      &at->delete_end);

  at->rotate = b.Rotate("binlog.000008");
  return b.bytes();
}

// Every item of `binlog`, and the status that ended the reading.
BinlogStatus ReadAll(const std::string& binlog, std::vector<BinlogItem>* out,
                     BinlogReaderOptions options = Options()) {
  BinlogReader reader(MysqlConnParams(), options);
  BinlogStatus s = reader.OpenBytes(binlog, kFile);
  while (s.ok()) {
    BinlogItem item;
    s = reader.Next(&item);
    if (s.ok()) out->push_back(std::move(item));
  }
  return s;
}

TEST(Mysql8Binlog, AnInsertUpdateAndDeleteReadAsASelectShowsThem) {
  Layout at;
  std::vector<BinlogItem> items;
  BinlogStatus end = ReadAll(Binlog(&at), &items);
  EXPECT_EQ(end.kind, BinlogErrorKind::kEnd) << end.message;
  ASSERT_EQ(items.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(items[i].type, BinlogItem::Type::kTransaction) << i;
    ASSERT_EQ(items[i].transaction.changes.size(), 1u) << i;
  }

  const BinlogTransaction& insert = items[0].transaction;
  const BinlogRowChange& added = insert.changes[0];
  EXPECT_EQ(added.kind, BinlogRowChange::Kind::kInsert);
  EXPECT_TRUE(added.before.empty());
  ASSERT_EQ(added.after.size(), Options().columns.size());
  EXPECT_EQ(added.after[kId].text, "7");
  EXPECT_EQ(added.after[kName].text, "web-1");
  EXPECT_EQ(added.after[kUid].text, "u-1");
  EXPECT_EQ(added.after[kObject].text, PodText("100"));
  EXPECT_TRUE(added.after[kEvents].is_null);
  EXPECT_EQ(added.after[kCreated].text, "2026-12-04 10:11:12.345");
  EXPECT_TRUE(added.after[kDeleted].is_null);

  const BinlogTransaction& update = items[1].transaction;
  EXPECT_EQ(update.changes[0].kind, BinlogRowChange::Kind::kUpdate);
  EXPECT_EQ(update.changes[0].before, added.after);
  EXPECT_EQ(update.changes[0].after[kObject].text, PodText("101"));

  // Event recording: only `events` changes; the object is the same text.
  const BinlogRowChange& noop = items[2].transaction.changes[0];
  EXPECT_EQ(noop.kind, BinlogRowChange::Kind::kUpdate);
  EXPECT_EQ(noop.before[kObject], noop.after[kObject]);
  EXPECT_TRUE(noop.before[kEvents].is_null);
  EXPECT_EQ(noop.after[kEvents].text, "{\"a\": 1}");

  const BinlogRowChange& deleted = items[3].transaction.changes[0];
  EXPECT_EQ(deleted.kind, BinlogRowChange::Kind::kDelete);
  EXPECT_EQ(deleted.before, noop.after);
  EXPECT_TRUE(deleted.after.empty());
}

TEST(Mysql8Binlog, ATransactionHasItsGtidAndEndsAtItsXid) {
  Layout at;
  std::vector<BinlogItem> items;
  BinlogStatus end = ReadAll(Binlog(&at), &items);
  EXPECT_EQ(end.kind, BinlogErrorKind::kEnd) << end.message;
  ASSERT_EQ(items.size(), 5u);
  const size_t ends[] = {at.insert_end, at.update_end, at.noop_end,
                         at.delete_end};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const BinlogTransaction& t = items[i].transaction;
    EXPECT_EQ(t.gtid.flavor, Gtid::Flavor::kMySql);
    EXPECT_EQ(t.gtid.source_uuid, kUuid);
    EXPECT_EQ(t.gtid.sequence, 42 + i);
    EXPECT_EQ(t.gtid.ToString(),
              "3e11fa47-71ca-11e1-9e33-c80aa9429562:" + std::to_string(42 + i));
    EXPECT_EQ(t.xid, 1001 + i);
    EXPECT_EQ(t.commit.file, kFile);
    EXPECT_EQ(t.commit.pos, ends[i]);  // the end of the XID event
    EXPECT_EQ(items[i].position, t.commit);
    EXPECT_EQ(t.begin.pos, i == 0 ? at.insert_gtid : ends[i - 1]);
    EXPECT_EQ(t.commit_time, 1796380272u);
    EXPECT_GT(t.changes[0].position.pos, t.begin.pos);
    EXPECT_LT(t.changes[0].position.pos, t.commit.pos);
  }
  // PREVIOUS_GTIDS gave nothing: the first item is the first transaction,
  // which begins after it.
  EXPECT_GT(items[0].transaction.begin.pos, at.previous_gtids);
  // The ROTATE at the file's end: a rotation to the next file's start.
  EXPECT_EQ(items[4].type, BinlogItem::Type::kRotation);
  EXPECT_EQ(items[4].position.file, "binlog.000008");
  EXPECT_EQ(items[4].position.pos, 4u);
}

TEST(Mysql8Binlog, ResumePositionIsTheLastCommit) {
  Layout at;
  const std::string binlog = Binlog(&at);
  BinlogReader reader(MysqlConnParams(), Options());
  ASSERT_TRUE(reader.OpenBytes(binlog, kFile).ok());
  BinlogItem item;
  ASSERT_TRUE(reader.Next(&item).ok());
  EXPECT_EQ(reader.resume_position().file, kFile);
  EXPECT_EQ(reader.resume_position().pos, at.insert_end);
  ASSERT_TRUE(reader.Next(&item).ok());
  EXPECT_EQ(reader.resume_position().pos, at.update_end);
}

TEST(Mysql8Binlog, WithoutGtidsATransactionHasNone) {
  // gtid_mode=OFF: ANONYMOUS_GTID opens each transaction.
  Mysql8BinlogBuilder b;
  b.FormatDescription();
  b.PreviousGtids({});
  const auto columns = ResourcesColumns();
  b.AnonymousGtid(0, 1);
  b.Query("", "BEGIN");
  b.TableMap(kTableId, "clusterpedia", "resources", columns);
  b.WriteRows(kTableId, columns.size(), {ResourcesImage(Pod("100"))});
  b.Xid(9);
  const size_t commit = b.size();
  std::vector<BinlogItem> items;
  BinlogStatus end = ReadAll(b.bytes(), &items);
  EXPECT_EQ(end.kind, BinlogErrorKind::kEnd) << end.message;
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].transaction.gtid.flavor, Gtid::Flavor::kNone);
  EXPECT_EQ(items[0].transaction.commit.pos, commit);
  ASSERT_EQ(items[0].transaction.changes.size(), 1u);
  EXPECT_EQ(items[0].transaction.changes[0].after[kObject].text,
            PodText("100"));
}

TEST(Mysql8Binlog, RowsOfAPartitionedTableAndManyRowsRead) {
  // extra_row_info carries the partition (v2 ROWS of a partitioned table),
  // and one event carries several rows.
  Mysql8BinlogBuilder b;
  b.FormatDescription();
  const auto columns = ResourcesColumns();
  ResourceRow a = Pod("100"), c = Pod("200");
  c.id = 18446744073709551615u;  // BIGINT UNSIGNED's top: SIGNEDNESS read
  c.name = "web-2";
  mysql8::PartitionInfo part{3, 1};
  b.Gtid(kUuid, 50, 0, 1);
  b.Query("", "BEGIN");
  b.TableMap(kTableId, "clusterpedia", "resources", columns);
  b.WriteRows(kTableId, columns.size(), {ResourcesImage(a), ResourcesImage(c)},
              &part);
  b.UpdateRows(kTableId, columns.size(),
               {{ResourcesImage(a), ResourcesImage(c)},
                {ResourcesImage(c), ResourcesImage(a)}},
               &part);
  b.DeleteRows(kTableId, columns.size(), {ResourcesImage(c)}, &part);
  b.Xid(10);
  std::vector<BinlogItem> items;
  BinlogStatus end = ReadAll(b.bytes(), &items);
  EXPECT_EQ(end.kind, BinlogErrorKind::kEnd) << end.message;
  ASSERT_EQ(items.size(), 1u);
  const auto& changes = items[0].transaction.changes;
  ASSERT_EQ(changes.size(), 5u);
  EXPECT_EQ(changes[1].after[kName].text, "web-2");
  EXPECT_EQ(changes[1].after[kId].text, "18446744073709551615");
  EXPECT_EQ(changes[2].before[kName].text, "web-1");
  EXPECT_EQ(changes[2].after[kName].text, "web-2");
  EXPECT_EQ(changes[3].after[kId].text, "7");
  EXPECT_EQ(changes[4].kind, BinlogRowChange::Kind::kDelete);
  EXPECT_EQ(changes[4].before[kObject].text, PodText("200"));
}

// A file whose second transaction is `second` (events after its GTID);
// the first is a plain insert.
std::string WithSecondTransaction(
    const std::function<void(Mysql8BinlogBuilder*)>& second) {
  Mysql8BinlogBuilder b;
  b.FormatDescription();
  b.PreviousGtids({{kUuid, {{1, 42}}}});
  const auto columns = ResourcesColumns();
  b.Gtid(kUuid, 42, 0, 1);
  b.Query("", "BEGIN");
  b.TableMap(kTableId, "clusterpedia", "resources", columns);
  b.WriteRows(kTableId, columns.size(), {ResourcesImage(Pod("100"))});
  b.Xid(1);
  b.Gtid(kUuid, 43, 1, 2);
  second(&b);
  return b.bytes();
}

// Connector/C 3.3.20 parses neither of the next two events: it refuses
// them itself, as CR_UNKNOWN_BINLOG_EVENT (5020, "Unknown event type (40)
// with flag 'not_ignorable'"), before the reader sees them. Its
// mariadb_rpl.h ends MySQL's event types at PARTIAL_UPDATE_ROWS_EVENT (39,
// MYSQL_EVENTS_END = 40: TRANSACTION_PAYLOAD is not in its enum at all),
// its parser has no case for either, and MySQL writes them without
// LOG_EVENT_IGNORABLE_F, the one flag that makes it pass an unknown event
// through. Before the reader named the type from the refused event's own
// bytes, both came out as kCorrupt from OpenBytes (and as kUnsupported
// without a fix from a server).
TEST(Mysql8Binlog, ACompressedTransactionIsUnsupportedAndNamesTheSetting) {
  // binlog_transaction_compression=ON: after its GTID, the transaction's
  // events come zstd-compressed in one TRANSACTION_PAYLOAD event.
  const std::string binlog = WithSecondTransaction([](Mysql8BinlogBuilder* b) {
    b->TransactionPayload(
        std::string("\x28\xb5\x2f\xfd", 4) + std::string(40, '\x11'), 300);
  });
  std::vector<BinlogItem> items;
  BinlogStatus s = ReadAll(binlog, &items);
  EXPECT_EQ(s.kind, BinlogErrorKind::kUnsupported) << s.message;
  EXPECT_NE(s.message.find("binlog_transaction_compression"), std::string::npos)
      << s.message;
  ASSERT_EQ(items.size(), 1u);  // the transaction before it
}

TEST(Mysql8Binlog, APartialJsonUpdateIsUnsupportedAndNamesTheSetting) {
  // binlog_row_value_options=PARTIAL_JSON: UPDATEs of JSON columns come as
  // PARTIAL_UPDATE_ROWS events.
  const std::string binlog = WithSecondTransaction([](Mysql8BinlogBuilder* b) {
    const auto columns = ResourcesColumns();
    b->Query("", "BEGIN");
    b->TableMap(kTableId, "clusterpedia", "resources", columns);
    b->PartialUpdateRows(kTableId, columns.size(), ResourcesImage(Pod("100")),
                         ResourcesImage(Pod("101")));
    b->Xid(2);
  });
  std::vector<BinlogItem> items;
  BinlogStatus s = ReadAll(binlog, &items);
  EXPECT_EQ(s.kind, BinlogErrorKind::kUnsupported) << s.message;
  EXPECT_NE(s.message.find("binlog_row_value_options"), std::string::npos)
      << s.message;
  ASSERT_EQ(items.size(), 1u);
}

TEST(Mysql8Binlog, EveryCutIsCorruptOrAnEarlierEnd) {
  Layout at;
  const std::string whole = Binlog(&at);
  std::set<size_t> event_ends;
  for (size_t e = 4; e + 13 <= whole.size();) {
    e += static_cast<uint8_t>(whole[e + 9]) |
         (static_cast<uint8_t>(whole[e + 10]) << 8);
    event_ends.insert(e);
  }
  const size_t commits[] = {at.insert_end, at.update_end, at.noop_end,
                            at.delete_end};
  for (size_t cut = 4; cut < whole.size(); ++cut) {
    SCOPED_TRACE(cut);
    std::vector<BinlogItem> items;
    BinlogStatus s = ReadAll(whole.substr(0, cut), &items);
    // Cut between events: the end, after every transaction it holds whole.
    // Cut inside an event: corrupt, found before anything is read.
    if (event_ends.count(cut) != 0 || cut == 4) {
      EXPECT_EQ(s.kind, BinlogErrorKind::kEnd) << s.message;
      size_t whole_transactions = 0;
      for (size_t c : commits) whole_transactions += c <= cut ? 1 : 0;
      EXPECT_EQ(items.size(), whole_transactions);
    } else {
      EXPECT_EQ(s.kind, BinlogErrorKind::kCorrupt) << s.message;
      EXPECT_TRUE(items.empty());
    }
    EXPECT_EQ(s.message.find('\n'), std::string::npos) << s.message;
  }
}

TEST(Mysql8Binlog, EveryGarbledByteIsAnError) {
  // With checksums verified (the default), any byte changed anywhere in
  // any event fails the read: nothing wrong is read as right, nor skipped.
  Layout at;
  const std::string whole = Binlog(&at);
  // But one: the server version's 50th byte, which Connector/C sets to 0
  // (as MySQL does) before anything can check the FORMAT_DESCRIPTION's
  // checksum, so that no change to it is seen, nor read.
  const size_t version_end = 4 + 19 + 2 + 49;
  for (unsigned char mask : {0x5a, 0xff, 0x01}) {
    for (size_t i = 4; i < whole.size(); ++i) {
      if (i == version_end) continue;
      std::string garbled = whole;
      garbled[i] = static_cast<char>(garbled[i] ^ mask);
      std::vector<BinlogItem> items;
      BinlogStatus s = ReadAll(garbled, &items);
      EXPECT_NE(s.kind, BinlogErrorKind::kEnd)
          << "byte " << i << " ^ " << int{mask} << ": " << items.size()
          << " items";
      EXPECT_EQ(s.message.find('\n'), std::string::npos) << s.message;
    }
  }
}

TEST(Mysql8Binlog, GarbledBytesUncheckedNeverCrash) {
  // Without checksums (as the fuzz target reads): whatever the reader
  // makes of it, it ends, with one line.
  Layout at;
  const std::string whole = Binlog(&at);
  BinlogReaderOptions o = Options();
  o.verify_checksums = false;
  for (unsigned char mask : {0x5a, 0xff, 0x80}) {
    for (size_t i = 4; i < whole.size(); ++i) {
      std::string garbled = whole;
      garbled[i] = static_cast<char>(garbled[i] ^ mask);
      std::vector<BinlogItem> items;
      BinlogStatus s = ReadAll(garbled, &items, o);
      EXPECT_FALSE(s.ok());
      EXPECT_EQ(s.message.find('\n'), std::string::npos) << s.message;
    }
  }
}

TEST(Mysql8Binlog, ConnectorCReadsOnlyTheFormatDescriptionOf8026AndLater) {
  // What Connector/C 3.3.20 does, not what walwatch wants: it refuses
  // ("Malformed packet", 5021) a MySQL FORMAT_DESCRIPTION whose own
  // post-header length is below 98, the value of 8.0.26 and later (41
  // event types). MySQL 8.0.20-8.0.25 write 97, earlier 8.0 96: their
  // binlogs cannot be read at all (seen here with the file's first event;
  // CheckServerVersion in mysql_checks.h refuses such a server at
  // startup). It is that byte, not the count: 40 types with the byte at 98
  // read, 41 with 97 do not (seen by hand).
  for (const auto& [version, types] :
       std::vector<std::pair<std::string, size_t>>{
           {"8.0.19", 39}, {"8.0.25", 40}, {"8.0.26", 41}, {"8.0.40", 41}}) {
    SCOPED_TRACE(version);
    Mysql8BinlogBuilder b;
    b.FormatDescription(version, types);
    const auto columns = ResourcesColumns();
    b.Gtid(kUuid, 42, 0, 1);
    b.Query("", "BEGIN");
    b.TableMap(kTableId, "clusterpedia", "resources", columns);
    b.WriteRows(kTableId, columns.size(), {ResourcesImage(Pod("100"))});
    b.Xid(1);
    std::vector<BinlogItem> items;
    BinlogStatus s = ReadAll(b.bytes(), &items);
    if (types < 41) {
      EXPECT_EQ(s.kind, BinlogErrorKind::kCorrupt) << s.message;
      EXPECT_NE(s.message.find("Malformed packet"), std::string::npos)
          << s.message;
      EXPECT_TRUE(items.empty());
    } else {
      EXPECT_EQ(s.kind, BinlogErrorKind::kEnd) << s.message;
      EXPECT_EQ(items.size(), 1u);
    }
  }
}

TEST(Mysql8Binlog, TheFuzzSeedIsThisFile) {
  // The mysql_binlog fuzz target starts from it (its database and table
  // are the seeds'). WALWATCH_WRITE_MYSQL8_SEED=1 writes it anew.
  Layout at;
  const std::string binlog = Binlog(&at);
  const std::string path = std::string(WALWATCH_SOURCE_DIR) +
                           "/tests/fuzz/corpus/mysql_binlog/mysql8.binlog";
  if (std::getenv("WALWATCH_WRITE_MYSQL8_SEED") != nullptr) {
    std::ofstream(path, std::ios::binary) << binlog;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), binlog);
}

TEST(Mysql8Binlog, TheRowsBecomeAddedModifiedNothingAndDeleted) {
  // On through the event path: the reader with the mapping's columns, the
  // conversion, and the row-to-event rules; event recording (only `events`
  // changed) gives no event.
  Layout at;
  const std::string binlog = Binlog(&at);
  BinlogReaderOptions o = Options();
  o.columns = MappedColumnNames(DefaultTableMapping());
  std::vector<BinlogItem> items;
  BinlogStatus end = ReadAll(binlog, &items, o);
  EXPECT_EQ(end.kind, BinlogErrorKind::kEnd) << end.message;
  ASSERT_EQ(items.size(), 5u);
  EventBuilder builder;
  const char* expected[] = {"ADDED", "MODIFIED", nullptr, "DELETED"};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    Transaction txn;
    ASSERT_EQ(ToTransaction(items[i].transaction, 0, &txn), "");
    EventBuilder::Result r;
    builder.Build(txn, &r);
    EXPECT_TRUE(r.errors.empty()) << r.errors[0];
    if (expected[i] == nullptr) {
      EXPECT_TRUE(r.events.empty());
      EXPECT_EQ(r.unchanged_updates, 1u);
      continue;
    }
    ASSERT_EQ(r.events.size(), 1u);
    const std::string wire(r.events[0]->wire());
    EXPECT_EQ(wire.rfind(std::string("{\"type\":\"") + expected[i] + "\"", 0),
              0u)
        << wire;
    const std::optional<uint64_t> rv =
        BinlogVersion(0, items[i].transaction.commit);
    ASSERT_TRUE(rv.has_value());
    EXPECT_EQ(r.events[0]->rv, *rv);
    // Spliced into the object as MySQL prints it (": " between key and
    // value).
    EXPECT_NE(wire.find("\"resourceVersion\": \"" + std::to_string(*rv) + "\""),
              std::string::npos)
        << wire;
  }
}

}  // namespace
}  // namespace walwatch::mysql
