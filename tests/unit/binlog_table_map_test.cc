// BinlogTableMap (column names and types from TABLE_MAP parts, and the
// types handed to Connector/C instead of those it mis-reads), FormatValue,
// binlog positions and the proposed resourceVersion.
#include "cdc/mysql/binlog_table_map.h"

#include <mysql.h>
#include <mariadb_rpl.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "cdc/mysql/binlog_position.h"

namespace walwatch::mysql {
namespace {

std::string Names(std::initializer_list<std::string> names) {
  std::string out;
  for (const std::string& n : names) {
    out.push_back(static_cast<char>(n.size()));
    out += n;
  }
  return out;
}

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

TEST(BinlogTableMap, ReadsNamesTypesAndMetadata) {
  // id BIGINT UNSIGNED, name VARCHAR(253) (utf8mb4: 1012 bytes), object
  // LONGTEXT, created DATETIME(3), score INT (signed), ratio DOUBLE.
  std::string types = Bytes({kTypeLongLong, kTypeVarchar, kTypeBlob,
                             kTypeDateTime2, kTypeLong, kTypeDouble});
  std::string meta = Bytes({0xf4, 0x03, 4, 3, 8});
  BinlogTableMap m;
  ASSERT_EQ(BinlogTableMap::Parse(
                18, "db", "t", types, meta,
                Names({"id", "name", "object", "created", "score", "ratio"}),
                Bytes({0x80}), &m),
            "");
  ASSERT_EQ(m.columns().size(), 6u);
  EXPECT_EQ(m.table_id(), 18u);
  EXPECT_EQ(m.ColumnIndex("object"), 2);
  EXPECT_EQ(m.ColumnIndex("Object"), -1);
  EXPECT_EQ(m.ColumnIndex("missing"), -1);
  EXPECT_EQ(m.columns()[1].meta, 1012);
  EXPECT_EQ(m.columns()[2].meta, 4);
  EXPECT_EQ(m.columns()[3].meta, 3);
  // SIGNEDNESS: one bit per numeric column, high bit first.
  EXPECT_TRUE(m.columns()[0].is_unsigned);
  EXPECT_FALSE(m.columns()[4].is_unsigned);
  EXPECT_FALSE(m.columns()[5].is_unsigned);
  // Nothing here needs rewriting.
  EXPECT_EQ(m.normalized_types(), types);
  EXPECT_EQ(m.normalized_metadata(), meta);
}

TEST(BinlogTableMap, WithoutNamesTheFixIsBinlogRowMetadata) {
  BinlogTableMap m;
  std::string err =
      BinlogTableMap::Parse(1, "db", "t", Bytes({kTypeLong}), "", "", "", &m);
  EXPECT_NE(err.find("binlog_row_metadata = FULL"), std::string::npos) << err;
  err = BinlogTableMap::Parse(1, "db", "t", Bytes({kTypeLong, kTypeLong}), "",
                              Names({"a"}), "", &m);
  EXPECT_NE(err.find("column names end after 1 of 2"), std::string::npos)
      << err;
  err = BinlogTableMap::Parse(1, "db", "t", Bytes({kTypeTime}), "",
                              Names({"t"}), "", &m);
  EXPECT_NE(err.find("does not read"), std::string::npos) << err;
  err = BinlogTableMap::Parse(1, "db", "t", Bytes({kTypeVarchar}), Bytes({1}),
                              Names({"v"}), "", &m);
  EXPECT_NE(err.find("metadata ends"), std::string::npos) << err;
}

TEST(BinlogTableMap, RewritesTheTypesConnectorCMisreads) {
  // CHAR(10) utf8mb4 (40 bytes), CHAR(100) utf8mb4 (400 bytes: the length's
  // high bits folded into byte 0), ENUM of 1 byte, SET of 3 bytes, JSON,
  // GEOMETRY.
  std::string types = Bytes({kTypeString, kTypeString, kTypeString, kTypeString,
                             kTypeJson, kTypeGeometry});
  const int b0_400 = kTypeString ^ (((400 >> 8) & 0x3) << 4);
  std::string meta = Bytes(
      {kTypeString, 40, b0_400, 400 & 0xff, kTypeEnum, 1, kTypeSet, 3, 4, 4});
  BinlogTableMap m;
  ASSERT_EQ(
      BinlogTableMap::Parse(1, "db", "t", types, meta,
                            Names({"c10", "c100", "e", "s", "j", "g"}), "", &m),
      "");
  EXPECT_EQ(m.columns()[0].real_type, kTypeString);
  EXPECT_EQ(m.columns()[0].max_length, 40u);
  EXPECT_EQ(m.columns()[1].max_length, 400u);
  EXPECT_EQ(m.columns()[2].real_type, kTypeEnum);
  EXPECT_EQ(m.columns()[3].real_type, kTypeSet);
  EXPECT_EQ(m.normalized_types(), Bytes({kTypeVarchar, kTypeVarchar, kTypeTiny,
                                         kTypeInt24, kTypeBlob, kTypeBlob}));
  EXPECT_EQ(m.normalized_metadata(),
            Bytes({40, 0, 400 & 0xff, 400 >> 8, 4, 4}));
}

MARIADB_RPL_VALUE Integer(uint64_t u) {
  MARIADB_RPL_VALUE v;
  std::memset(&v, 0, sizeof(v));
  v.val.ull = u;
  return v;
}

std::string Format(const BinlogColumn& c, const MARIADB_RPL_VALUE& v) {
  std::string out;
  EXPECT_EQ(FormatValue(c, v, &out), "");
  return out;
}

TEST(BinlogTableMap, FormatsValuesAsSelectShowsThem) {
  BinlogColumn tiny{"t", kTypeTiny};
  EXPECT_EQ(Format(tiny, Integer(0xff)),
            "-1");  // Connector/C's ull holds the byte
  tiny.is_unsigned = true;
  EXPECT_EQ(Format(tiny, Integer(0xff)), "255");
  BinlogColumn big{"b", kTypeLongLong};
  EXPECT_EQ(Format(big, Integer(~uint64_t{0})), "-1");
  big.is_unsigned = true;
  EXPECT_EQ(Format(big, Integer(~uint64_t{0})), "18446744073709551615");
  BinlogColumn i24{"m", kTypeInt24};
  EXPECT_EQ(Format(i24, Integer(0x800000)), "-8388608");

  MARIADB_RPL_VALUE d = Integer(0);
  d.val.d = 0.1;
  EXPECT_EQ(Format(BinlogColumn{"d", kTypeDouble}, d), "0.1");

  MARIADB_RPL_VALUE t = Integer(0);
  t.val.tm.year = 2026;
  t.val.tm.month = 12;
  t.val.tm.day = 6;
  t.val.tm.hour = 19;
  t.val.tm.minute = 41;
  t.val.tm.second = 46;
  t.val.tm.second_part = 897000;
  BinlogColumn dt{"created_at", kTypeDateTime2};
  dt.meta = 3;
  EXPECT_EQ(Format(dt, t), "2026-12-06 19:41:46.897");
  dt.meta = 0;
  EXPECT_EQ(Format(dt, t), "2026-12-06 19:41:46");

  MARIADB_RPL_VALUE ts = Integer(0);
  ts.val.ts.second = 1796586106;
  ts.val.ts.second_part = 5;
  BinlogColumn tsc{"ts", kTypeTimestamp2};
  tsc.meta = 6;
  EXPECT_EQ(Format(tsc, ts), "2026-12-06 19:41:46.000005");

  std::string text = "{\"a\": 1}";
  MARIADB_RPL_VALUE s = Integer(0);
  s.val.str.str = text.data();
  s.val.str.length = text.size();
  EXPECT_EQ(Format(BinlogColumn{"object", kTypeBlob}, s), text);

  // MySQL's binary JSON: a small object {"a": 1}.
  std::string binary = Bytes({0x00, 1, 0, 12, 0, 11, 0, 1, 0, 0x05, 1, 0, 'a'});
  s.val.str.str = binary.data();
  s.val.str.length = binary.size();
  EXPECT_EQ(Format(BinlogColumn{"object", kTypeJson}, s), "{\"a\": 1}");
  std::string err;
  binary[1] = 9;  // nine members in 12 bytes
  std::string out;
  err = FormatValue(BinlogColumn{"object", kTypeJson}, s, &out);
  EXPECT_NE(err.find("column object: binary JSON"), std::string::npos) << err;
}

// DECIMAL(20,6) as MySQL's decimal2bin writes it: 14 integer digits (a
// group of 5 in 3 bytes, one of 9 in 4), 6 fraction digits in 3 bytes; the
// sign bit inverted, every byte of a negative value inverted.
std::string Decimal20_6(bool negative, uint32_t int_high, uint32_t int_low,
                        uint32_t frac) {
  std::string b = Bytes(
      {int((int_high >> 16) & 0xff), int((int_high >> 8) & 0xff),
       int(int_high & 0xff), int(int_low >> 24), int((int_low >> 16) & 0xff),
       int((int_low >> 8) & 0xff), int(int_low & 0xff),
       int((frac >> 16) & 0xff), int((frac >> 8) & 0xff), int(frac & 0xff)});
  b[0] = static_cast<char>(b[0] ^ 0x80);
  if (negative) {
    for (char& c : b) c = static_cast<char>(~c);
  }
  return b;
}

TEST(BinlogTableMap, DecimalGoesToConnectorCAsBitsAndIsDecodedHere) {
  // Connector/C 3.3.20 fails this DECIMAL(20,6)'s rows; it gets the
  // value's 10 bytes as a BIT(80), and FormatValue decodes them.
  BinlogTableMap m;
  ASSERT_EQ(BinlogTableMap::Parse(1, "db", "t", Bytes({kTypeNewDecimal}),
                                  Bytes({20, 6}), Names({"d"}), "", &m),
            "");
  EXPECT_EQ(m.normalized_types(), Bytes({kTypeBit}));
  EXPECT_EQ(m.normalized_metadata(), Bytes({0, 10}));
  const BinlogColumn& d = m.columns()[0];

  auto format = [&](const std::string& bytes) {
    MARIADB_RPL_VALUE v = Integer(0);
    v.val.str.str = const_cast<char*>(bytes.data());
    v.val.str.length = bytes.size();
    std::string out;
    std::string err = FormatValue(d, v, &out);
    return err.empty() ? out : "error: " + err;
  };
  EXPECT_EQ(format(Decimal20_6(false, 0, 12345, 678901)), "12345.678901");
  EXPECT_EQ(format(Decimal20_6(true, 0, 12345, 678901)), "-12345.678901");
  EXPECT_EQ(format(Decimal20_6(false, 0, 0, 500000)), "0.500000");
  EXPECT_EQ(format(Decimal20_6(false, 0, 0, 0)), "0.000000");
  EXPECT_EQ(format(Decimal20_6(false, 99999, 999999999, 999999)),
            "99999999999999.999999");
  EXPECT_EQ(format(Decimal20_6(false, 1, 0, 1)), "1000000000.000001");
  // A group above its digits, or the wrong length, is an error.
  EXPECT_EQ(format(Decimal20_6(false, 0, 1000000000, 0)).rfind("error: ", 0),
            0u);
  EXPECT_EQ(format("\x80").rfind("error: column d: a DECIMAL(20,6) of 1", 0),
            0u);
  // No integer digits: a SELECT shows the 0 (Connector/C writes ".9").
  ASSERT_EQ(BinlogTableMap::Parse(1, "db", "t", Bytes({kTypeNewDecimal}),
                                  Bytes({1, 1}), Names({"d"}), "", &m),
            "");
  MARIADB_RPL_VALUE nine = Integer(0);
  std::string nine_bytes = Bytes({0x80 | 9});
  nine.val.str.str = nine_bytes.data();
  nine.val.str.length = nine_bytes.size();
  std::string out;
  EXPECT_EQ(FormatValue(m.columns()[0], nine, &out), "");
  EXPECT_EQ(out, "0.9");
  // A precision MySQL never writes is refused at the TABLE_MAP.
  std::string err =
      BinlogTableMap::Parse(1, "db", "t", Bytes({kTypeNewDecimal}),
                            Bytes({66, 0}), Names({"d"}), "", &m);
  EXPECT_NE(err.find("DECIMAL(66,0)"), std::string::npos) << err;
}

TEST(BinlogPosition, FileNumbersAndVersions) {
  EXPECT_EQ(BinlogFileNumber("mariadb-bin.000003"), 3u);
  EXPECT_EQ(BinlogFileNumber("binlog.1234567"), 1234567u);
  EXPECT_FALSE(BinlogFileNumber("binlog"));
  EXPECT_FALSE(BinlogFileNumber("binlog."));
  EXPECT_FALSE(BinlogFileNumber("binlog.00a1"));
  // The decimal reads back as history, file and offset.
  EXPECT_EQ(BinlogVersion(0, {"mariadb-bin.000003", 12345}), 30000012345u);
  EXPECT_EQ(BinlogVersion(7, {"mariadb-bin.000003", 12345}),
            70000030000012345u);
  // Increasing along commit order across rotation.
  EXPECT_LT(*BinlogVersion(7, {"b.000003", 4294967295u}),
            *BinlogVersion(7, {"b.000004", 4}));
  EXPECT_EQ((BinlogPosition{"b.000001", 4}).ToString(), "b.000001:4");
}

TEST(BinlogPosition, WhatAVersionCannotHoldIsRefusedWithTheReason) {
  std::string why;
  EXPECT_FALSE(BinlogVersion(0, {"b.000003", kBinlogVersionFileFactor}, &why));
  EXPECT_NE(why.find("past 10^10"), std::string::npos) << why;
  EXPECT_FALSE(BinlogVersion(0, {"nonumber", 4}, &why));
  EXPECT_NE(why.find("has no number"), std::string::npos) << why;
  // Servers number their files with six digits; past them the version
  // would run into the history's digits.
  EXPECT_TRUE(BinlogVersion(0, {"b.999999", 4}));
  EXPECT_FALSE(BinlogVersion(0, {"b.1000000", 4}, &why));
  EXPECT_NE(why.find("RESET MASTER"), std::string::npos) << why;
  EXPECT_FALSE(BinlogVersion(kBinlogHistories, {"b.000001", 4}, &why));
  EXPECT_NE(why.find("history"), std::string::npos) << why;
}

TEST(BinlogPosition, EachServerIdHasARangeOfItsOwn) {
  // The largest version there is fits a uint64.
  const std::optional<uint64_t> top =
      BinlogVersion(kBinlogHistories - 1, {"b.999999", 4294967295u});
  ASSERT_TRUE(top.has_value());
  EXPECT_LE(*top, BinlogHistoryCeiling(kBinlogHistories - 1));
  EXPECT_GT(BinlogHistoryCeiling(kBinlogHistories - 1),
            BinlogHistoryFloor(kBinlogHistories - 1));
  // Ranges do not overlap, and every version lies in its history's.
  for (uint64_t h : {uint64_t{0}, uint64_t{1}, uint64_t{1842}}) {
    EXPECT_LT(BinlogHistoryCeiling(h), BinlogHistoryFloor(h + 1)) << h;
    const uint64_t v = *BinlogVersion(h, {"b.999999", 4294967295u});
    EXPECT_GE(v, BinlogHistoryFloor(h)) << h;
    EXPECT_LE(v, BinlogHistoryCeiling(h)) << h;
    EXPECT_EQ(HistoryOfVersion(v), h);
    EXPECT_EQ(PositionOfVersion(v),
              999999 * kBinlogVersionFileFactor + 4294967295u);
  }
  // Ids as operators number servers (1, 2, 3; 1000 + ordinal; a site
  // prefix per data centre) keep apart; ids 1844 apart share a range.
  for (uint64_t a : {1u, 2u, 3u, 1000u, 1001u, 2001u, 3001u}) {
    for (uint64_t b : {1u, 2u, 3u, 1000u, 1001u, 2001u, 3001u}) {
      if (a != b) {
        EXPECT_NE(BinlogHistory(a), BinlogHistory(b)) << a << " " << b;
      }
    }
  }
  EXPECT_EQ(BinlogHistory(1), BinlogHistory(1 + kBinlogHistories));
  EXPECT_EQ(BinlogHistory(4294967295u), 4294967295u % kBinlogHistories);
}

TEST(BinlogPosition, GtidsPrintAsTheServersDo) {
  Gtid g;
  EXPECT_EQ(g.ToString(), "");
  g.flavor = Gtid::Flavor::kMariaDb;
  g.domain_id = 0;
  g.server_id = 1;
  g.sequence = 25;
  EXPECT_EQ(g.ToString(), "0-1-25");
  Gtid m;
  m.flavor = Gtid::Flavor::kMySql;
  const unsigned char uuid[16] = {0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca,
                                  0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a,
                                  0xa9, 0x42, 0x95, 0x62};
  std::memcpy(m.source_uuid.data(), uuid, 16);
  m.sequence = 23;
  EXPECT_EQ(m.ToString(), "3e11fa47-71ca-11e1-9e33-c80aa9429562:23");
}

}  // namespace
}  // namespace walwatch::mysql
