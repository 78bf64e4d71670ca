#include "cdc/postgres/lsn.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace walwatch {
namespace {

TEST(Lsn, ParsesPostgresForm) {
  EXPECT_EQ(ParseLsn("16/B374D848"), std::optional<uint64_t>(0x16B374D848ull));
  EXPECT_EQ(ParseLsn("0/0"), std::optional<uint64_t>(0));
  EXPECT_EQ(ParseLsn("0/1558570"), std::optional<uint64_t>(22381936));
  EXPECT_EQ(ParseLsn("FFFFFFFF/FFFFFFFF"), std::optional<uint64_t>(UINT64_MAX));
  EXPECT_EQ(ParseLsn("1/0"), std::optional<uint64_t>(uint64_t{1} << 32));
  // Lower case is PostgreSQL's input form too.
  EXPECT_EQ(ParseLsn("16/b374d848"), std::optional<uint64_t>(0x16B374D848ull));
  EXPECT_EQ(ParseLsn("00000001/00000002"),
            std::optional<uint64_t>((uint64_t{1} << 32) | 2));
}

TEST(Lsn, FormatsPostgresForm) {
  EXPECT_EQ(FormatLsn(0), "0/0");
  EXPECT_EQ(FormatLsn(0x16B374D848ull), "16/B374D848");
  EXPECT_EQ(FormatLsn(22381936), "0/1558570");
  EXPECT_EQ(FormatLsn(UINT64_MAX), "FFFFFFFF/FFFFFFFF");
  EXPECT_EQ(FormatLsn(uint64_t{1} << 32), "1/0");
}

TEST(Lsn, RoundTrips) {
  const uint64_t values[] = {0,
                             1,
                             0xFFFFFFFFull,
                             uint64_t{1} << 32,
                             0x16B374D848ull,
                             0x0123456789ABCDEFull,
                             UINT64_MAX - 1,
                             UINT64_MAX};
  for (uint64_t v : values) {
    std::string text = FormatLsn(v);
    EXPECT_EQ(ParseLsn(text), std::optional<uint64_t>(v)) << text;
  }
  for (const char* text : {"0/1558570", "16/B374D848", "A/0", "0/15630F8"}) {
    auto v = ParseLsn(text);
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_EQ(FormatLsn(*v), text);
  }
}

TEST(Lsn, RejectsBadForms) {
  const char* bad[] = {
      "",          "/",          "0",          "0/",         "/0",
      "1/2/3",     "G/0",        "0/G",        "0x1/2",      " 1/2",
      "1/2 ",      "1 /2",       "+1/2",       "-1/2",       "1/-2",
      "123456789/0",             "0/123456789",             "1.5/2",
      "1//2",      "16\\B374D848",
  };
  for (const char* text : bad) {
    EXPECT_EQ(ParseLsn(text), std::nullopt) << "\"" << text << "\"";
  }
  // An embedded NUL is not a trailing terminator.
  EXPECT_EQ(ParseLsn(std::string_view("1/2\0", 4)), std::nullopt);
}

TEST(ResourceVersion, ParsesDecimal) {
  EXPECT_EQ(ParseResourceVersion("0"), std::optional<uint64_t>(0));
  EXPECT_EQ(ParseResourceVersion("1"), std::optional<uint64_t>(1));
  EXPECT_EQ(ParseResourceVersion("22381936"), std::optional<uint64_t>(22381936));
  EXPECT_EQ(ParseResourceVersion("18446744073709551615"),
            std::optional<uint64_t>(UINT64_MAX));
  EXPECT_EQ(ParseResourceVersion("18446744073709551614"),
            std::optional<uint64_t>(UINT64_MAX - 1));
  EXPECT_EQ(ParseResourceVersion("10000000000000000000"),
            std::optional<uint64_t>(10000000000000000000ull));
}

TEST(ResourceVersion, MatchesFormattedLsn) {
  // An RV is the LSN's uint64 in decimal.
  EXPECT_EQ(ParseResourceVersion(std::to_string(*ParseLsn("0/1558570"))),
            ParseLsn("0/1558570"));
}

TEST(ResourceVersion, RejectsLeadingZeros) {
  EXPECT_EQ(ParseResourceVersion("00"), std::nullopt);
  EXPECT_EQ(ParseResourceVersion("01"), std::nullopt);
  EXPECT_EQ(ParseResourceVersion("0018446744073709551615"), std::nullopt);
}

TEST(ResourceVersion, RejectsSignsAndSpaces) {
  for (const char* text : {"+1", "-1", "-0", "+0", " 1", "1 ", " ", "1 2",
                           "\t1", "1\n"}) {
    EXPECT_EQ(ParseResourceVersion(text), std::nullopt) << "\"" << text << "\"";
  }
}

TEST(ResourceVersion, RejectsOverflow) {
  EXPECT_EQ(ParseResourceVersion("18446744073709551616"), std::nullopt);
  EXPECT_EQ(ParseResourceVersion("18446744073709551620"), std::nullopt);
  EXPECT_EQ(ParseResourceVersion("19999999999999999999"), std::nullopt);
  EXPECT_EQ(ParseResourceVersion("99999999999999999999"), std::nullopt);
  EXPECT_EQ(ParseResourceVersion("100000000000000000000"), std::nullopt);
  EXPECT_EQ(ParseResourceVersion("184467440737095516150"), std::nullopt);
}

TEST(ResourceVersion, RejectsEmptyAndNonDigits) {
  for (const char* text : {"", "a", "1a", "a1", "0x10", "1.5", "1e3", "1,000",
                           "0/1558570", "\xd9\xa1" /* Arabic-Indic one */}) {
    EXPECT_EQ(ParseResourceVersion(text), std::nullopt) << "\"" << text << "\"";
  }
  EXPECT_EQ(ParseResourceVersion(std::string_view("1\0", 2)), std::nullopt);
}

}  // namespace
}  // namespace walwatch
