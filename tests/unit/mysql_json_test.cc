// DecodeMysqlJson on values built byte by byte from MySQL's documented
// binary JSON format (sql-common/json_binary.h), compared with the text
// MySQL 8's Json_wrapper::to_string prints (read in its source; no MySQL 8
// server exists here to compare with).
#include "cdc/mysql/mysql_json.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/support/mysql_json_builder.h"

namespace walwatch::mysql {
namespace {

using namespace json_builder;  // NOLINT: the encoder is the test's language

std::string Decode(const std::string& binary) {
  std::string text;
  std::string err = DecodeMysqlJson(binary, &text);
  EXPECT_EQ(err, "");
  return text;
}

std::string DecodeError(const std::string& binary) {
  std::string text;
  return DecodeMysqlJson(binary, &text);
}

// MySQL's decimal2bin: digit groups of 9 in 4 bytes (fewer digits in fewer
// bytes), big-endian, inverted for a negative number, the first bit flipped.
std::string DecimalBinary(const std::string& value, int precision, int scale) {
  static const int kDig2Bytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
  bool negative = value[0] == '-';
  std::string digits = negative ? value.substr(1) : value;
  size_t dot = digits.find('.');
  std::string int_part =
      dot == std::string::npos ? digits : digits.substr(0, dot);
  std::string frac_part =
      dot == std::string::npos ? "" : digits.substr(dot + 1);
  int intg = precision - scale;
  int_part =
      std::string(static_cast<size_t>(intg) - int_part.size(), '0') + int_part;
  frac_part += std::string(static_cast<size_t>(scale) - frac_part.size(), '0');
  std::string out;
  auto put = [&](const std::string& group, int bytes) {
    uint32_t v = group.empty() ? 0 : static_cast<uint32_t>(std::stoul(group));
    if (negative) v = ~v;
    for (int i = bytes - 1; i >= 0; --i)
      out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  int lead = intg % 9;
  if (lead > 0)
    put(int_part.substr(0, static_cast<size_t>(lead)), kDig2Bytes[lead]);
  for (int i = lead; i < intg; i += 9)
    put(int_part.substr(static_cast<size_t>(i), 9), 4);
  int full = scale / 9 * 9;
  for (int i = 0; i < full; i += 9)
    put(frac_part.substr(static_cast<size_t>(i), 9), 4);
  if (scale % 9 > 0)
    put(frac_part.substr(static_cast<size_t>(full)), kDig2Bytes[scale % 9]);
  out[0] = static_cast<char>(out[0] ^ 0x80);
  return std::string(1, static_cast<char>(precision)) +
         std::string(1, static_cast<char>(scale)) + out;
}

int64_t PackDateTime(int year, int month, int day, int hour, int minute,
                     int second, int micros) {
  int64_t ymd = ((static_cast<int64_t>(year) * 13 + month) << 5) | day;
  int64_t hms = (hour << 12) | (minute << 6) | second;
  return (((ymd << 17) | hms) << 24) + micros;
}

int64_t PackTime(bool negative, int hour, int minute, int second, int micros) {
  int64_t hms = (static_cast<int64_t>(hour) << 12) | (minute << 6) | second;
  int64_t packed = (hms << 24) + micros;
  return negative ? -packed : packed;
}

// ---- Scalars ---------------------------------------------------------------

TEST(MysqlJson, Literals) {
  EXPECT_EQ(Decode(Doc(Null())), "null");
  EXPECT_EQ(Decode(Doc(True())), "true");
  EXPECT_EQ(Decode(Doc(False())), "false");
  // An empty value is JSON null, as MySQL reads it.
  EXPECT_EQ(Decode(""), "null");
  EXPECT_NE(DecodeError(Doc(Literal(3))).find("unknown literal 3"),
            std::string::npos);
}

TEST(MysqlJson, Integers) {
  EXPECT_EQ(Decode(Doc(Int16(-32768))), "-32768");
  EXPECT_EQ(Decode(Doc(Uint16(65535))), "65535");
  EXPECT_EQ(Decode(Doc(Int32(std::numeric_limits<int32_t>::min()))),
            "-2147483648");
  EXPECT_EQ(Decode(Doc(Uint32(4294967295u))), "4294967295");
  EXPECT_EQ(Decode(Doc(Int64(std::numeric_limits<int64_t>::min()))),
            "-9223372036854775808");
  EXPECT_EQ(Decode(Doc(Uint64(std::numeric_limits<uint64_t>::max()))),
            "18446744073709551615");
  EXPECT_EQ(Decode(Doc(Int64(0))), "0");
}

TEST(MysqlJson, DoublesAsMyGcvtPrintsThem) {
  struct Case {
    double value;
    const char* text;
  } cases[] = {
      {1.0, "1.0"},
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {0.1, "0.1"},
      {-2.5, "-2.5"},
      {3.14159, "3.14159"},
      {1e14, "100000000000000.0"},  // f format up to 15 digits before the point
      {123456789012345.6, "123456789012345.6"},
      {1e15, "1e15"},  // then e format, no '+', no padding
      {1.23e20, "1.23e20"},
      {9007199254740992.0, "9.007199254740992e15"},
      {1e-5, "0.00001"},
      {1e-15, "0.000000000000001"},  // f format down to 10^-15
      {1e-16, "1e-16"},
      {1.5e-7, "0.00000015"},
      {1.5e-16, "1.5e-16"},
      {1.7976931348623157e308, "1.7976931348623157e308"},
      {5e-324, "5e-324"},
      {-1.25e-100, "-1.25e-100"},
      {0.30000000000000004,
       "0.30000000000000004"},  // the shortest digits that read back
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Decode(Doc(Double(c.value))), c.text) << c.value;
  }
  EXPECT_NE(DecodeError(Doc(Double(std::nan("")))).find("not finite"),
            std::string::npos);
  EXPECT_NE(DecodeError(Doc(Double(INFINITY))).find("not finite"),
            std::string::npos);
}

TEST(MysqlJson, StringEscapesAsDoubleQuoteWritesThem) {
  EXPECT_EQ(Decode(Doc(Str(""))), R"("")");
  EXPECT_EQ(Decode(Doc(Str("plain"))), R"("plain")");
  EXPECT_EQ(Decode(Doc(Str("q\"b\\s/"))), R"("q\"b\\s/")");
  EXPECT_EQ(Decode(Doc(Str("\b\f\n\r\t"))), R"("\b\f\n\r\t")");
  EXPECT_EQ(Decode(Doc(Str(std::string("\x00\x01\x1f\x7f", 4)))),
            "\"\\u0000\\u0001\\u001f\x7f\"");
}

TEST(MysqlJson, UnicodePassesThroughUnescaped) {
  EXPECT_EQ(Decode(Doc(Str("é日本😀"))), "\"é日本😀\"");
  EXPECT_EQ(Decode(Doc(Str("\xf4\x8f\xbf\xbf"))),
            "\"\xf4\x8f\xbf\xbf\"");  // U+10FFFF
}

TEST(MysqlJson, InvalidUtf8IsAnError) {
  const char* bad[] = {
      "\xc0\x80",          // overlong NUL
      "\x80",              // lone continuation byte
      "\xe2\x82",          // truncated
      "\xed\xa0\x80",      // a surrogate
      "\xf4\x90\x80\x80",  // above U+10FFFF
      "\xff",
  };
  for (const char* s : bad) {
    EXPECT_NE(DecodeError(Doc(Str(s))).find("invalid UTF-8"), std::string::npos)
        << s;
  }
}

TEST(MysqlJson, LongStringsUseLongerLengths) {
  std::string s200(200, 'a');      // two length bytes
  std::string s20000(20000, 'b');  // three
  EXPECT_EQ(Decode(Doc(Str(s200))), "\"" + s200 + "\"");
  EXPECT_EQ(Decode(Doc(Str(s20000))), "\"" + s20000 + "\"");
  EXPECT_EQ(VarLen(20000).size(), 3u);
}

// ---- Containers ------------------------------------------------------------

TEST(MysqlJson, ObjectsAndArraysUseMysqlSeparators) {
  V v = Object(
      {{"a", Int16(1)},
       {"bb", Str("x")},
       {"ccc", Array({True(), Null(), Uint16(7), Double(2.0), Str("y")})}});
  EXPECT_EQ(Decode(Doc(v)),
            R"({"a": 1, "bb": "x", "ccc": [true, null, 7, 2.0, "y"]})");
  EXPECT_EQ(Decode(Doc(Object({}))), "{}");
  EXPECT_EQ(Decode(Doc(Array({}))), "[]");
  EXPECT_EQ(Decode(Doc(Array({Object({}), Array({})}))), "[{}, []]");
}

TEST(MysqlJson, KeysPrintInStoredOrderEscaped) {
  // MySQL stores keys by length, then bytes; the text shows that order.
  V v = Object({{"b", Int16(1)}, {"a\"", Int16(2)}, {"\n", Int16(3)}});
  EXPECT_EQ(Decode(Doc(v)), R"({"b": 1, "a\"": 2, "\n": 3})");
}

TEST(MysqlJson, LargeFormatPrintsLikeSmall) {
  std::vector<std::pair<std::string, V>> members = {{"i32", Int32(-70000)},
                                                    {"u32", Uint32(70000)},
                                                    {"s", Str("v")},
                                                    {"n", Null()}};
  std::string expected =
      R"({"i32": -70000, "u32": 70000, "s": "v", "n": null})";
  EXPECT_EQ(Decode(Doc(Container(true, false, members))), expected);
  EXPECT_EQ(Decode(Doc(Container(true, true, members))),
            expected);  // int32s inlined
  EXPECT_EQ(Decode(Doc(Array({Int32(5), Int16(-1)}, true))), "[5, -1]");
}

TEST(MysqlJson, LargeDocumentsDecodeWhole) {
  // Past 64 KiB a document needs the large format.
  std::vector<V> items;
  std::string expected = "[";
  for (int i = 0; i < 10000; ++i) {
    std::string s = "item-" + std::to_string(i) + "-\xc3\xa9";
    items.push_back(Object({{"i", Int32(i)}, {"s", Str(s)}}, true));
    if (i > 0) expected += ", ";
    expected += "{\"i\": " + std::to_string(i) + ", \"s\": \"" + s + "\"}";
  }
  expected += "]";
  std::string doc = Doc(Array(items, true));
  ASSERT_GT(doc.size(), 65536u);
  EXPECT_EQ(Decode(doc), expected);
}

TEST(MysqlJson, DepthIsBoundedAtMysqlsLimit) {
  auto nested = [](int depth) {
    V v = Array({});
    for (int i = 1; i < depth; ++i) v = Array({v});
    return Doc(v);
  };
  std::string text = Decode(nested(kMysqlJsonMaxDepth));
  EXPECT_EQ(text, std::string(100, '[') + std::string(100, ']'));
  EXPECT_NE(DecodeError(nested(kMysqlJsonMaxDepth + 1))
                .find("nesting deeper than 100"),
            std::string::npos);
}

// ---- Opaque values ---------------------------------------------------------

TEST(MysqlJson, DecimalsPrintWithTheirScaleUnquoted) {
  // decimal2bin's documented example: DECIMAL(14,4) 1234567890.1234.
  std::string bin = DecimalBinary("1234567890.1234", 14, 4);
  EXPECT_EQ(bin.substr(2), std::string("\x81\x0d\xfb\x38\xd2\x04\xd2", 7));
  EXPECT_EQ(DecimalBinary("-1234567890.1234", 14, 4).substr(2),
            std::string("\x7e\xf2\x04\xc7\x2d\xfb\x2d", 7));
  EXPECT_EQ(Decode(Doc(Opaque(246, bin))), "1234567890.1234");
  EXPECT_EQ(Decode(Doc(Opaque(246, DecimalBinary("-1234567890.1234", 14, 4)))),
            "-1234567890.1234");
  EXPECT_EQ(Decode(Doc(Opaque(246, DecimalBinary("3.5", 3, 2)))), "3.50");
  EXPECT_EQ(Decode(Doc(Opaque(246, DecimalBinary("0.5", 2, 1)))), "0.5");
  EXPECT_EQ(Decode(Doc(Opaque(246, DecimalBinary("42", 5, 0)))), "42");
  EXPECT_EQ(Decode(Doc(Opaque(246, DecimalBinary("0", 5, 0)))), "0");
  std::string big = std::string(35, '9') + "." + std::string(30, '9');
  EXPECT_EQ(Decode(Doc(Opaque(246, DecimalBinary(big, 65, 30)))), big);
  EXPECT_EQ(Decode(Doc(Array({Opaque(246, DecimalBinary("1.10", 3, 2))}))),
            "[1.10]");
}

TEST(MysqlJson, BadDecimalsAreErrors) {
  std::string bin = DecimalBinary("1.5", 3, 1);
  EXPECT_NE(DecodeError(Doc(Opaque(246, bin.substr(0, bin.size() - 1))))
                .find("bytes, not"),
            std::string::npos);
  std::string wide = bin;
  wide[0] = 70;  // precision 70
  EXPECT_NE(DecodeError(Doc(Opaque(246, wide))).find("out of range"),
            std::string::npos);
  std::string digits = DecimalBinary("999999999.0", 18, 9);
  digits[2] = static_cast<char>(0xff);  // a 9-digit group above 999999999
  digits[3] = static_cast<char>(0xff);
  EXPECT_NE(DecodeError(Doc(Opaque(246, digits))).find("bad DECIMAL digits"),
            std::string::npos);
}

TEST(MysqlJson, TemporalValuesPrintWithSixFractionalDigits) {
  auto packed = [](int64_t v) { return Le(static_cast<uint64_t>(v), 8); };
  EXPECT_EQ(
      Decode(Doc(Opaque(12, packed(PackDateTime(2015, 1, 15, 23, 24, 25, 0))))),
      R"("2015-01-15 23:24:25.000000")");
  EXPECT_EQ(Decode(Doc(Opaque(
                7, packed(PackDateTime(2038, 1, 19, 3, 14, 7, 123456))))),
            R"("2038-01-19 03:14:07.123456")");
  EXPECT_EQ(
      Decode(Doc(Opaque(10, packed(PackDateTime(1999, 12, 31, 0, 0, 0, 0))))),
      R"("1999-12-31")");
  EXPECT_EQ(
      Decode(Doc(Opaque(11, packed(PackTime(false, 12, 34, 56, 789000))))),
      R"("12:34:56.789000")");
  EXPECT_EQ(Decode(Doc(Opaque(11, packed(PackTime(true, 838, 59, 59, 0))))),
            R"("-838:59:59.000000")");
  EXPECT_NE(DecodeError(Doc(Opaque(12, "1234"))).find("not 8"),
            std::string::npos);
  EXPECT_NE(DecodeError(
                Doc(Opaque(12, packed(PackDateTime(2015, 1, 15, 25, 0, 0, 0)))))
                .find("bad date or time"),
            std::string::npos);
}

TEST(MysqlJson, OtherOpaqueValuesAreBase64) {
  EXPECT_EQ(Decode(Doc(Opaque(253, "as a string"))), R"("as a string")");
  EXPECT_EQ(Decode(Doc(Opaque(252, "\xca\xfe"))), R"("base64:type252:yv4=")");
  EXPECT_EQ(Decode(Doc(Opaque(15, "abc"))), R"("base64:type15:YWJj")");
  EXPECT_EQ(Decode(Doc(Opaque(16, "a"))), R"("base64:type16:YQ==")");
  // MySQL's base64 breaks lines at 76 characters: escaped as \n.
  std::string data(60, 'x');  // 20 groups, 80 characters
  std::string groups;
  for (int i = 0; i < 19; ++i) groups += "eHh4";
  EXPECT_EQ(Decode(Doc(Opaque(252, data))),
            "\"base64:type252:" + groups + "\\neHh4\"");
}

// ---- Malformed input
// ---------------------------------------------------------

TEST(MysqlJson, MalformedInputIsAClearError) {
  struct Case {
    std::string binary;
    const char* expect;
  } cases[] = {
      {std::string("\x00\x01", 2), "truncated object header"},
      {std::string("\x02\x01\x00\xff\x00", 5),
       "array of 255 bytes where 4 remain"},
      {std::string("\x02\x05\x00\x04\x00", 5), "header of 5 entries is larger"},
      {std::string("\x05\x01", 2), "truncated int16"},
      {std::string("\x0b\x00\x00", 3), "truncated double"},
      {std::string("\x0c\x05"
                   "abc",
                   5),
       "string longer than its value"},
      {std::string("\x0c\x80\x80\x80\x80\x80", 6), "unterminated length"},
      {std::string("\x0c\xff\xff\xff\xff\x7f", 6), "length beyond 32 bits"},
      {std::string("\x0d", 1), "unknown value type 13"},
      {std::string("\x0f", 1), "truncated opaque value"},
      {std::string("\x0f\xfc\x05"
                   "ab",
                   5),
       "opaque value longer than its value"},
      // One value whose offset points into the header.
      {std::string("\x02\x01\x00\x07\x00\x0c\x01\x00", 8),
       "value 0 lies outside its array"},
      // One key past the end of its object.
      {std::string("\x00\x01\x00\x0b\x00\x0b\x00\x05\x00\x04\x00\x00", 12),
       "key 0 lies outside its object"},
  };
  for (const Case& c : cases) {
    std::string err = DecodeError(c.binary);
    EXPECT_NE(err.find(c.expect), std::string::npos) << err;
    EXPECT_EQ(err.rfind("binary JSON: ", 0), 0u) << err;
    EXPECT_NE(err.find(" at byte "), std::string::npos) << err;
  }
}

TEST(MysqlJson, ValuesSharingBytesCannotExpandWithoutBound) {
  // Every level's two elements point at the same child: 2^40 leaves in a
  // few hundred bytes. The output bound stops it.
  V v = Array({Str("leaf")});
  std::string doc;
  {
    // Build by hand: each array of two entries with one offset.
    std::string child = Doc(v).substr(1);
    uint8_t child_type = 0x02;
    for (int level = 0; level < 40; ++level) {
      const size_t header = 4 + 2 * 3;
      std::string bytes = Le(2, 2) + Le(header + child.size(), 2);
      for (int k = 0; k < 2; ++k)
        bytes += std::string(1, static_cast<char>(child_type)) + Le(header, 2);
      bytes += child;
      child = bytes;
      if (child.size() > 60000) break;
    }
    doc = std::string(1, '\x02') + child;
  }
  std::string text;
  std::string err = DecodeMysqlJson(doc, &text);
  EXPECT_NE(err.find("grows past"), std::string::npos) << err;
  EXPECT_LE(text.size(), 16 * doc.size() + 64 + 4096);
}

}  // namespace
}  // namespace walwatch::mysql
