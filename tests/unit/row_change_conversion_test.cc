// ToTransaction: a binlog transaction of the mapped table becomes the
// PostgreSQL path's Transaction (RowChange / RowImage by MappedField).
#include "cdc/mysql/row_change_conversion.h"

#include <simdjson.h>

#include <array>
#include <set>

#include <gtest/gtest.h>

namespace walwatch::mysql {
namespace {

static_assert(simdjson::SIMDJSON_PADDING == 64,
              "row_change_conversion.cc's kJsonPadding must follow simdjson");

std::vector<BinlogValue> Row(const std::string& name, const std::string& uid,
                             const std::string& object) {
  std::vector<BinlogValue> v(kMappedFieldCount);
  const std::string values[] = {"",        "v1", "pods", "Pod", "c1",
                                "default", name, uid,    object};
  for (size_t i = 0; i < kMappedFieldCount; ++i)
    v[i] = BinlogValue{false, values[i]};
  return v;
}

TEST(RowChangeConversion, MappedColumnsFollowMappedFieldOrder) {
  TableMapping m = DefaultTableMapping();
  std::vector<std::string> names = MappedColumnNames(m);
  ASSERT_EQ(names.size(), kMappedFieldCount);
  EXPECT_EQ(names[static_cast<size_t>(MappedField::kObject)],
            m.column(MappedField::kObject));
  EXPECT_EQ(names[static_cast<size_t>(MappedField::kUid)],
            m.column(MappedField::kUid));
}

TEST(RowChangeConversion, RowsBecomeRowImagesAndPositionsVersions) {
  BinlogTransaction in;
  in.commit = {"mariadb-bin.000003", 7741};
  in.commit_time = 1796586106;
  in.xid = 181;
  BinlogRowChange insert;
  insert.kind = BinlogRowChange::Kind::kInsert;
  insert.position = {"mariadb-bin.000003", 7095};
  insert.after = Row("p1", "u1", R"({"a": 1})");
  BinlogRowChange update;
  update.kind = BinlogRowChange::Kind::kUpdate;
  update.position = {"mariadb-bin.000003", 7200};
  update.before = Row("p1", "u1", R"({"a": 1})");
  update.after = Row("p1", "u2", R"({"a": 2})");
  update.after[2].is_null = true;
  BinlogRowChange remove;
  remove.kind = BinlogRowChange::Kind::kDelete;
  remove.position = {"mariadb-bin.000003", 7590};
  remove.before = Row("p1", "u2", R"({"a": 2})");
  in.changes = {insert, update, remove};

  Transaction out;
  // Read from a server of history 2 (server_id 2): its range.
  ASSERT_EQ(ToTransaction(in, 2, &out), "");
  EXPECT_EQ(out.commit_lsn, 20000030000007741u);
  EXPECT_EQ(out.end_lsn, 20000030000007741u);
  EXPECT_EQ(out.xid, 181u);
  EXPECT_EQ(out.commit_time_us, int64_t{1796586106} * 1000000);
  EXPECT_FALSE(out.truncated);
  ASSERT_EQ(out.changes.size(), 3u);

  const RowChange& i = out.changes[0];
  EXPECT_EQ(i.action, RowAction::kInsert);
  EXPECT_EQ(i.lsn, 20000030000007095u);
  EXPECT_TRUE(i.columns.present);
  EXPECT_FALSE(i.identity.present);
  EXPECT_EQ(i.columns[MappedField::kName].text, "p1");
  EXPECT_EQ(i.columns[MappedField::kObject].text, R"({"a": 1})");
  EXPECT_GE(
      i.columns[MappedField::kObject].text.capacity(),
      i.columns[MappedField::kObject].text.size() + simdjson::SIMDJSON_PADDING);
  EXPECT_EQ(i.columns[MappedField::kGroup].state, ColumnValue::State::kValue);

  const RowChange& u = out.changes[1];
  EXPECT_EQ(u.action, RowAction::kUpdate);
  EXPECT_EQ(u.identity[MappedField::kUid].text, "u1");
  EXPECT_EQ(u.columns[MappedField::kUid].text, "u2");
  EXPECT_EQ(u.columns[MappedField::kResource].state, ColumnValue::State::kNull);

  const RowChange& d = out.changes[2];
  EXPECT_EQ(d.action, RowAction::kDelete);
  EXPECT_FALSE(d.columns.present);
  EXPECT_TRUE(d.identity.present);
  EXPECT_EQ(d.identity[MappedField::kObject].text, R"({"a": 2})");
  EXPECT_GT(out.bytes, 0u);
}

TEST(RowChangeConversion, TableStatementsTruncate) {
  BinlogTransaction in;
  in.commit = {"b.000001", 100};
  in.table_statements.push_back({"cp", "TRUNCATE TABLE resources"});
  Transaction out;
  ASSERT_EQ(ToTransaction(in, 0, &out), "");
  EXPECT_TRUE(out.truncated);
}

// A transaction too large to keep: only the watches of what it touched
// relist (a cluster's removal leaves the other clusters' watches alone).
TEST(RowChangeConversion, AnOverflowTouchesItsKeysOnly) {
  BinlogTransaction big;
  big.commit = {"b.000001", 200};
  big.overflowed = true;
  big.touched = {{"", "v1", "pods", "c1"}, {"apps", "v1", "deployments", "c1"}};
  Transaction out;
  ASSERT_EQ(ToTransaction(big, 0, &out), "");
  EXPECT_TRUE(out.overflowed);
  EXPECT_FALSE(out.touched_unknown);
  const std::set<std::array<std::string, 4>> want = {
      {"", "v1", "pods", "c1"}, {"apps", "v1", "deployments", "c1"}};
  EXPECT_EQ(out.touched, want);

  // Read without the key columns: what it touched is unknown, so every
  // watch relists.
  BinlogTransaction unkeyed;
  unkeyed.commit = {"b.000001", 300};
  unkeyed.overflowed = true;
  unkeyed.touched = {{}};
  ASSERT_EQ(ToTransaction(unkeyed, 0, &out), "");
  EXPECT_TRUE(out.touched_unknown);
  unkeyed.touched.clear();
  ASSERT_EQ(ToTransaction(unkeyed, 0, &out), "");
  EXPECT_TRUE(out.touched_unknown);

  big.touched_unknown = true;  // a row with a NULL key column
  ASSERT_EQ(ToTransaction(big, 0, &out), "");
  EXPECT_TRUE(out.touched_unknown);
}

TEST(RowChangeConversion, RowsReadWithOtherColumnsAreRefused) {
  BinlogTransaction in;
  in.commit = {"b.000001", 100};
  BinlogRowChange c;
  c.kind = BinlogRowChange::Kind::kInsert;
  c.after.resize(3);
  in.changes.push_back(c);
  Transaction out;
  EXPECT_NE(ToTransaction(in, 0, &out).find("mapping's columns"),
            std::string::npos);
  in.changes.clear();
  in.commit = {"nonumber", 100};
  EXPECT_NE(ToTransaction(in, 0, &out).find("has no number"),
            std::string::npos);
}

}  // namespace
}  // namespace walwatch::mysql
