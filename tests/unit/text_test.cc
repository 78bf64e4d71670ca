#include "cdc/base/text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace walwatch {
namespace {

TEST(Text, PercentDecode) {
  std::string out;
  EXPECT_TRUE(PercentDecode("a%20b+c", false, &out));
  EXPECT_EQ(out, "a b+c");
  EXPECT_TRUE(PercentDecode("a%20b+c", true, &out));
  EXPECT_EQ(out, "a b c");
  EXPECT_TRUE(PercentDecode("%e2%9C%93", false, &out));
  EXPECT_EQ(out, "\xe2\x9c\x93");
  EXPECT_FALSE(PercentDecode("%", false, &out));
  EXPECT_FALSE(PercentDecode("%a", false, &out));
  EXPECT_FALSE(PercentDecode("%ag", false, &out));
}

TEST(Text, Utf8LeadLength) {
  EXPECT_EQ(Utf8LeadLength('a'), 1u);
  EXPECT_EQ(Utf8LeadLength(0xC3), 2u);
  EXPECT_EQ(Utf8LeadLength(0xE2), 3u);
  EXPECT_EQ(Utf8LeadLength(0xF0), 4u);
  for (unsigned char no_lead : {0x80, 0xBF, 0xC0, 0xC1, 0xF5, 0xFF}) {
    EXPECT_EQ(Utf8LeadLength(no_lead), 0u) << static_cast<int>(no_lead);
  }
}

TEST(Text, Utf8SequenceLengthGivesMaximalIllFormedSubparts) {
  size_t consumed = 0;
  EXPECT_EQ(Utf8SequenceLength("\xc3\xa9", 0, &consumed), 2u);  // é
  EXPECT_EQ(Utf8SequenceLength("\xe2\x9c\x93", 0, &consumed), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0, &consumed), 4u);
  // A truncated sequence: its bytes so far are one subpart.
  EXPECT_EQ(Utf8SequenceLength("\xe2\x9c", 0, &consumed), 0u);
  EXPECT_EQ(consumed, 2u);
  // An overlong lead, a surrogate, a stray continuation byte: one byte.
  EXPECT_EQ(Utf8SequenceLength("\xe0\x80\x80", 0, &consumed), 0u);
  EXPECT_EQ(consumed, 1u);
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80", 0, &consumed), 0u);
  EXPECT_EQ(consumed, 1u);
  EXPECT_EQ(Utf8SequenceLength("\x80", 0, &consumed), 0u);
  EXPECT_EQ(consumed, 1u);
}

TEST(Text, KeywordValuesAreSplitAsLibpqDoes) {
  std::vector<KeywordValue> kv;
  const std::string text =
      "host=db  port = 3306 password='a b\\'c' user=w\\ x ssl-ca=";
  ASSERT_TRUE(ParseKeywordValues(text, &kv));
  ASSERT_EQ(kv.size(), 5u);
  EXPECT_EQ(kv[0].key, "host");
  EXPECT_EQ(kv[0].value, "db");
  EXPECT_EQ(kv[1].key, "port");
  EXPECT_EQ(kv[1].value, "3306");
  EXPECT_EQ(kv[2].value, "a b'c");
  EXPECT_EQ(text.substr(kv[2].value_begin, kv[2].value_end - kv[2].value_begin),
            "'a b\\'c'");
  EXPECT_EQ(kv[3].value, "w x");
  EXPECT_EQ(kv[4].key, "ssl-ca");
  EXPECT_EQ(kv[4].value, "");
  EXPECT_TRUE(ParseKeywordValues("  ", &kv));
  EXPECT_TRUE(kv.empty());
  EXPECT_FALSE(ParseKeywordValues("host", &kv));
  EXPECT_FALSE(ParseKeywordValues("password='open", &kv));
}

}  // namespace
}  // namespace walwatch
