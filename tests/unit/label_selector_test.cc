#include "watchserver/label_selector.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/support/counting_new.h"
#include "tests/unit/support/test_event.h"

namespace walwatch {
namespace {

// ---- helpers ----

LabelSelector MustParseLabels(const std::string& text) {
  LabelSelector s;
  std::string err = LabelSelector::Parse(text, &s);
  EXPECT_EQ(err, "") << "selector: " << text;
  return s;
}

bool LabelsMatch(const std::string& text, const LabelList& labels) {
  return MustParseLabels(text).Matches(labels);
}

std::string LabelError(const std::string& text) {
  LabelSelector s;
  std::string err = LabelSelector::Parse(text, &s);
  EXPECT_NE(err, "") << "selector should not parse: " << text;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

bool HasPrefix(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const LabelList kNone = {};
const LabelList kAB = {{"a", "b"}};
const LabelList kAC = {{"a", "c"}};
const LabelList kAEmpty = {{"a", ""}};

// ---- LabelSelector: operators ----

TEST(LabelSelector, EmptySelectsEverything) {
  for (const char* text : {"", " ", "\t", " \r\n\t "}) {
    LabelSelector s = MustParseLabels(text);
    EXPECT_TRUE(s.Empty()) << text;
    EXPECT_TRUE(s.Matches(kNone));
    EXPECT_TRUE(s.Matches(kAB));
    EXPECT_EQ(s.ToString(), "");
  }
  EXPECT_TRUE(LabelSelector().Matches(kAB));
  EXPECT_TRUE(LabelSelector().Empty());
}

TEST(LabelSelector, Equals) {
  EXPECT_TRUE(LabelsMatch("a=b", kAB));
  EXPECT_FALSE(LabelsMatch("a=b", kAC));
  EXPECT_FALSE(LabelsMatch("a=b", kNone));
  EXPECT_FALSE(LabelsMatch("a=b", {{"x", "b"}}));
  EXPECT_TRUE(LabelsMatch("a=b", {{"x", "y"}, {"a", "b"}, {"z", "w"}}));
  EXPECT_FALSE(MustParseLabels("a=b").Empty());
}

TEST(LabelSelector, DoubleEquals) {
  EXPECT_TRUE(LabelsMatch("a==b", kAB));
  EXPECT_FALSE(LabelsMatch("a==b", kAC));
  EXPECT_FALSE(LabelsMatch("a==b", kNone));
}

TEST(LabelSelector, NotEqualsSelectsObjectsWithoutTheKey) {
  EXPECT_FALSE(LabelsMatch("a!=b", kAB));
  EXPECT_TRUE(LabelsMatch("a!=b", kAC));
  EXPECT_TRUE(LabelsMatch("a!=b", kNone));
  EXPECT_TRUE(LabelsMatch("a!=b", {{"other", "b"}}));
}

TEST(LabelSelector, In) {
  EXPECT_TRUE(LabelsMatch("a in (b,c)", kAB));
  EXPECT_TRUE(LabelsMatch("a in (b,c)", kAC));
  EXPECT_FALSE(LabelsMatch("a in (b,c)", {{"a", "d"}}));
  EXPECT_FALSE(LabelsMatch("a in (b,c)", kNone));
  EXPECT_TRUE(LabelsMatch("a in (b)", kAB));
}

TEST(LabelSelector, NotInSelectsObjectsWithoutTheKey) {
  EXPECT_FALSE(LabelsMatch("a notin (b,c)", kAB));
  EXPECT_FALSE(LabelsMatch("a notin (b,c)", kAC));
  EXPECT_TRUE(LabelsMatch("a notin (b,c)", {{"a", "d"}}));
  EXPECT_TRUE(LabelsMatch("a notin (b,c)", kNone));
}

TEST(LabelSelector, Exists) {
  EXPECT_TRUE(LabelsMatch("a", kAB));
  EXPECT_TRUE(LabelsMatch("a", kAEmpty));
  EXPECT_FALSE(LabelsMatch("a", kNone));
  EXPECT_FALSE(LabelsMatch("a", {{"ab", "x"}}));
}

TEST(LabelSelector, DoesNotExist) {
  EXPECT_FALSE(LabelsMatch("!a", kAB));
  EXPECT_FALSE(LabelsMatch("!a", kAEmpty));
  EXPECT_TRUE(LabelsMatch("!a", kNone));
  EXPECT_TRUE(LabelsMatch("!a", {{"b", "a"}}));
  EXPECT_TRUE(LabelsMatch("! a", kNone));  // whitespace after '!'
}

TEST(LabelSelector, GreaterAndLessThan) {
  EXPECT_TRUE(LabelsMatch("a>5", {{"a", "6"}}));
  EXPECT_FALSE(LabelsMatch("a>5", {{"a", "5"}}));
  EXPECT_FALSE(LabelsMatch("a>5", {{"a", "4"}}));
  EXPECT_TRUE(LabelsMatch("a<5", {{"a", "4"}}));
  EXPECT_FALSE(LabelsMatch("a<5", {{"a", "5"}}));
  // The object's value is read as strconv.ParseInt reads it.
  EXPECT_TRUE(LabelsMatch("a<5", {{"a", "-7"}}));
  EXPECT_TRUE(LabelsMatch("a>5", {{"a", "+7"}}));
  EXPECT_TRUE(LabelsMatch("a>5", {{"a", "0006"}}));
  EXPECT_TRUE(LabelsMatch("a>0", {{"a", "9223372036854775807"}}));
  EXPECT_TRUE(LabelsMatch("a<0", {{"a", "-9223372036854775808"}}));
  // Missing, non-integer or out-of-range values never match, either way.
  for (const char* v : {"x", "", "5.0", "0x10", "1_0", " 6",
                        "9223372036854775808", "-9223372036854775809", "-"}) {
    EXPECT_FALSE(LabelsMatch("a>0", {{"a", v}})) << v;
    EXPECT_FALSE(LabelsMatch("a<99", {{"a", v}})) << v;
  }
  EXPECT_FALSE(LabelsMatch("a>5", kNone));
  EXPECT_FALSE(LabelsMatch("a<5", kNone));
  EXPECT_TRUE(LabelsMatch("a < 9223372036854775807", {{"a", "1"}}));
}

TEST(LabelSelector, EmptyValues) {
  // "a=" selects a="" only, not objects without a.
  EXPECT_TRUE(LabelsMatch("a=", kAEmpty));
  EXPECT_FALSE(LabelsMatch("a=", kNone));
  EXPECT_FALSE(LabelsMatch("a=", kAB));
  EXPECT_TRUE(LabelsMatch("a==,b", {{"a", ""}, {"b", "x"}}));
  EXPECT_TRUE(LabelsMatch("a!=", kAB));
  EXPECT_TRUE(LabelsMatch("a!=", kNone));
  EXPECT_FALSE(LabelsMatch("a!=", kAEmpty));
  // "()" is the set {""}.
  EXPECT_TRUE(LabelsMatch("a in ()", kAEmpty));
  EXPECT_FALSE(LabelsMatch("a in ()", kAB));
  EXPECT_TRUE(LabelsMatch("a notin ()", kAB));
  EXPECT_FALSE(LabelsMatch("a notin ()", kAEmpty));
  // A comma followed by a comma takes both (apimachinery's
  // parseIdentifiersList), so what follows ",," must be a value or a comma:
  // "(,,,)" parses, "(,,)" and "(x,,)" do not (see SyntaxErrors).
  for (const char* text : {"a in (,b)", "a in (b,)", "a in (b,,c)", "a in (,)",
                           "a in (,,,)", "a in (b,,,)", "a in (,,b)"}) {
    EXPECT_TRUE(LabelsMatch(text, kAEmpty)) << text;
  }
  EXPECT_TRUE(LabelsMatch("a in (,b)", kAB));
  EXPECT_EQ(MustParseLabels("a in (b,,c)").ToString(), "a in (,b,c)");
  EXPECT_EQ(MustParseLabels("a in (,)").ToString(), "a in ()");
  EXPECT_EQ(MustParseLabels("a in (x,)").ToString(), "a in (,x)");
  EXPECT_EQ(MustParseLabels("a in (,,,)").ToString(), "a in ()");
  EXPECT_EQ(MustParseLabels("a=").ToString(), "a=");
}

TEST(LabelSelector, CombinationsAreAnded) {
  const std::string text = "app=web,tier in (fe,be),!legacy,env,ver notin (1)";
  LabelList all = {{"app", "web"}, {"tier", "fe"}, {"env", "prod"}};
  EXPECT_TRUE(LabelsMatch(text, all));
  LabelList wrong_app = all;
  wrong_app[0].second = "db";
  EXPECT_FALSE(LabelsMatch(text, wrong_app));
  LabelList legacy = all;
  legacy.emplace_back("legacy", "true");
  EXPECT_FALSE(LabelsMatch(text, legacy));
  LabelList no_env = {{"app", "web"}, {"tier", "be"}};
  EXPECT_FALSE(LabelsMatch(text, no_env));
  LabelList bad_ver = all;
  bad_ver.emplace_back("ver", "1");
  EXPECT_FALSE(LabelsMatch(text, bad_ver));
  LabelList good_ver = all;
  good_ver.emplace_back("ver", "2");
  EXPECT_TRUE(LabelsMatch(text, good_ver));
  // Contradictions parse and select nothing.
  EXPECT_FALSE(LabelsMatch("a=b,a=c", kAB));
  EXPECT_FALSE(LabelsMatch("a,!a", kAB));
  EXPECT_FALSE(LabelsMatch("a,!a", kNone));
  EXPECT_TRUE(LabelsMatch("a=b,a in (b,c),a!=c", kAB));
}

TEST(LabelSelector, Whitespace) {
  for (const char* text :
       {"a=b", " a=b ", "a = b", "a\t=\tb", "\r\na==\nb\n", "a =b", "a= b"}) {
    EXPECT_TRUE(LabelsMatch(text, kAB)) << text;
    EXPECT_FALSE(LabelsMatch(text, kAC)) << text;
  }
  EXPECT_TRUE(
      LabelsMatch("  a  in  (  b  ,  c  )  ,  d  ", {{"a", "c"}, {"d", ""}}));
  EXPECT_TRUE(LabelsMatch("a in(b)", kAB));
  EXPECT_TRUE(LabelsMatch("a notin(b)", kAC));
  EXPECT_TRUE(LabelsMatch("a=b , !c", kAB));
  EXPECT_TRUE(LabelsMatch("a ,b", {{"a", ""}, {"b", ""}}));
}

TEST(LabelSelector, InAndNotinAreKeywordsOnlyWhereAnOperatorIs) {
  EXPECT_TRUE(LabelsMatch("in in (in)", {{"in", "in"}}));
  EXPECT_TRUE(LabelsMatch("notin notin (notin)", {{"notin", "x"}}));
  EXPECT_FALSE(LabelsMatch("notin notin (notin)", {{"notin", "notin"}}));
  EXPECT_TRUE(LabelsMatch("x=in", {{"x", "in"}}));
  EXPECT_TRUE(LabelsMatch("x in (notin,in)", {{"x", "notin"}}));
  EXPECT_TRUE(LabelsMatch("in", {{"in", ""}}));
  EXPECT_TRUE(LabelsMatch("!notin", kNone));
  EXPECT_TRUE(LabelsMatch("a,in", {{"a", ""}, {"in", ""}}));
}

TEST(LabelSelector, PrefixedKeys) {
  EXPECT_TRUE(LabelsMatch("app.kubernetes.io/name=web",
                          {{"app.kubernetes.io/name", "web"}}));
  EXPECT_TRUE(LabelsMatch("example.com/My_Key.v-1 in (X)",
                          {{"example.com/My_Key.v-1", "X"}}));
  EXPECT_TRUE(LabelsMatch("!k8s.io/x", {{"x", "y"}}));
  EXPECT_TRUE(LabelsMatch("A", {{"A", ""}}));
  EXPECT_FALSE(LabelsMatch("A", {{"a", ""}}));  // keys are case-sensitive
}

TEST(LabelSelector, LengthLimits) {
  const std::string name63(63, 'k');
  const std::string value63(63, 'v');
  EXPECT_TRUE(LabelsMatch(name63 + "=" + value63, {{name63, value63}}));
  std::string prefix253;
  while (prefix253.size() < 253) prefix253 += "abcdefgh.";
  prefix253.resize(253);
  ASSERT_NE(prefix253.back(), '.');
  EXPECT_TRUE(
      LabelsMatch(prefix253 + "/" + name63, {{prefix253 + "/" + name63, ""}}));

  std::string err = LabelError(std::string(64, 'k') + "=x");
  EXPECT_TRUE(Contains(err, "name part must be no more than 63 bytes")) << err;
  err = LabelError("a=" + std::string(64, 'v'));
  EXPECT_EQ(err,
            "unable to parse requirement: values[0][a]: Invalid value: \"" +
                std::string(64, 'v') + "\": must be no more than 63 bytes");
  // Values are indexed in sorted order, as apimachinery sorts the set first.
  err = LabelError("a in (" + std::string(64, 'v') + ",0)");
  EXPECT_TRUE(Contains(err, "values[1][a]")) << err;
  err = LabelError("a" + prefix253 + "/x");
  EXPECT_TRUE(Contains(err, "prefix part must be no more than 253 bytes"))
      << err;
}

TEST(LabelSelector, SetsOfManyValues) {
  std::string text = "a in (";
  for (int i = 0; i < 40; ++i) text += (i ? "," : "") + std::to_string(i * 3);
  text += ")";
  LabelSelector s = MustParseLabels(text);
  for (int i = 0; i < 120; ++i) {
    EXPECT_EQ(s.Matches({{"a", std::to_string(i)}}), i % 3 == 0) << i;
  }
  EXPECT_FALSE(s.Matches(kNone));
  LabelSelector n = MustParseLabels("a notin (" + text.substr(6));
  EXPECT_TRUE(n.Matches({{"a", "1"}}));
  EXPECT_FALSE(n.Matches({{"a", "117"}}));
  EXPECT_TRUE(n.Matches(kNone));
}

TEST(LabelSelector, RepeatedLabelKeyLastWins) {
  LabelList dup = {{"a", "x"}, {"a", "b"}};
  EXPECT_TRUE(LabelsMatch("a=b", dup));
  EXPECT_FALSE(LabelsMatch("a=x", dup));
}

TEST(LabelSelector, ToStringIsCanonical) {
  EXPECT_EQ(MustParseLabels(
                "z=1, a in (c,b,c), !m, k, e==2, x!=3, n notin (q), g>1, l<2")
                .ToString(),
            "a in (b,c),e==2,g>1,k,l<2,!m,n notin (q),x!=3,z=1");
}

TEST(LabelSelector, NulByteEndsTheSelectorWhereATokenMayStart) {
  // As the apiserver's lexer, which reads a NUL byte as end of input.
  LabelSelector s = MustParseLabels(std::string("a=b \0!!garbage", 14));
  EXPECT_EQ(s.ToString(), "a=b");
  EXPECT_EQ(LabelError(std::string("a=b, \0c", 7)),
            "found '', expected: identifier after ','");
  // Inside an identifier or a run of symbols it ends that token, and lexing
  // goes on after it.
  EXPECT_EQ(LabelError(std::string("a=b\0c", 5)),
            "found 'c', expected: ',' or 'end of string'");
  EXPECT_EQ(MustParseLabels(std::string("a=b,\0c", 6)).ToString(), "a=b,c");
}

// ---- LabelSelector: errors ----

TEST(LabelSelector, InvalidValueMessage) {
  EXPECT_EQ(
      LabelError("app=-x"),
      "unable to parse requirement: values[0][app]: Invalid value: \"-x\": "
      "a valid label must be an empty string or consist of alphanumeric "
      "characters, '-', '_' or '.', and must start and end with an "
      "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
      "regex used for validation is "
      "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
  for (const char* text : {"a=x-", "a=.x", "a=x/y", "a=x:y", "a!=_x",
                           "a in (ok,b@d)", "a notin (é)", "a=\"x\""}) {
    std::string err = LabelError(text);
    EXPECT_TRUE(HasPrefix(err, "unable to parse requirement: values["))
        << text << ": " << err;
  }
}

TEST(LabelSelector, SeveralInvalidValuesAreListed) {
  std::string err = LabelError("a in (-x,-y)");
  EXPECT_TRUE(HasPrefix(
      err,
      "unable to parse requirement: [values[0][a]: Invalid value: \"-x\": "))
      << err;
  EXPECT_TRUE(Contains(err, ", values[1][a]: Invalid value: \"-y\": ")) << err;
  EXPECT_EQ(err.back(), ']');
}

TEST(LabelSelector, InvalidKeys) {
  struct Case {
    const char* text;
    const char* part;
  } cases[] = {
      {"-a=b", "key: Invalid value: \"-a\": name part must consist of"},
      {"a-=b", "name part must consist of"},
      {"a$=b", "name part must consist of"},
      {"a.=b", "name part must consist of"},
      {"_a", "name part must consist of"},
      {"!-a", "key: Invalid value: \"-a\""},
      {"/a=b", "prefix part must be non-empty"},
      {"a/=b", "name part must be non-empty"},
      {"a/b/c=d", "a valid label key must consist of"},
      {"Example.com/a=b", "prefix part a lowercase RFC 1123 subdomain"},
      {"ex_ample.com/a", "prefix part a lowercase RFC 1123 subdomain"},
      {"example..com/a", "prefix part a lowercase RFC 1123 subdomain"},
      {"-example.com/a in (x)", "prefix part a lowercase RFC 1123 subdomain"},
      {"a\x01=b", "key: Invalid value: \"a\\x01\""},
  };
  for (const Case& c : cases) {
    std::string err = LabelError(c.text);
    EXPECT_TRUE(HasPrefix(err, "unable to parse requirement: "))
        << c.text << ": " << err;
    EXPECT_TRUE(Contains(err, c.part)) << c.text << ": " << err;
  }
  // Both problems of an empty name are reported, as apimachinery does.
  std::string err = LabelError("a/");
  EXPECT_TRUE(
      Contains(err, "name part must be non-empty; name part must consist of"))
      << err;
}

TEST(LabelSelector, SyntaxErrors) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      // Empty requirements and trailing commas.
      {",", "found ',', expected: !, identifier, or 'end of string'"},
      {",a", "found ',', expected: !, identifier, or 'end of string'"},
      {"a=b,", "found '', expected: identifier after ','"},
      {"a,", "found '', expected: identifier after ','"},
      {"a=b,,c=d", "found ',', expected: identifier after ','"},
      {"a=b, ", "found '', expected: identifier after ','"},
      {"=b", "found '=', expected: !, identifier, or 'end of string'"},
      {"(a)", "found '(', expected: !, identifier, or 'end of string'"},
      // '!' needs a key, and takes no value.
      {"!", "unable to parse requirement: found '', expected: identifier"},
      {"!!a", "unable to parse requirement: found '!', expected: identifier"},
      {"!a=b", "found '=', expected: ',' or 'end of string'"},
      {"!a in (b)", "found 'in', expected: ',' or 'end of string'"},
      // Missing or unknown operators.
      {"a b",
       "unable to parse requirement: found 'b', expected: in, notin, =, ==, "
       "!=, gt, lt"},
      {"a!b",
       "unable to parse requirement: found '!', expected: in, notin, =, ==, "
       "!=, gt, lt"},
      {"a (b)",
       "unable to parse requirement: found '(', expected: in, notin, =, ==, "
       "!=, gt, lt"},
      {"a=b c", "found 'c', expected: ',' or 'end of string'"},
      {"a=b=c", "found '=', expected: ',' or 'end of string'"},
      {"a===b", "unable to parse requirement: found '=', expected: identifier"},
      {"a!==b", "unable to parse requirement: found '=', expected: identifier"},
      {"a=!b", "unable to parse requirement: found '!', expected: identifier"},
      {"a=(b)", "unable to parse requirement: found '(', expected: identifier"},
      {"a=,", "found '', expected: identifier after ','"},
      // in/notin without parentheses.
      {"a in b", "unable to parse requirement: found 'b' expected: '('"},
      {"a notin b,c", "unable to parse requirement: found 'b' expected: '('"},
      {"a in", "unable to parse requirement: found '' expected: '('"},
      {"a in=b", "unable to parse requirement: found '=' expected: '('"},
      // Unbalanced parentheses.
      {"a in (b",
       "unable to parse requirement: found '', expected: ',' or ')'"},
      {"a in (b,",
       "unable to parse requirement: found '', expected: ',', or identifier"},
      {"a in (",
       "unable to parse requirement: found '', expected: ',', ')' or "
       "identifier"},
      {"a in ((b)",
       "unable to parse requirement: found '(', expected: ',', ')' or "
       "identifier"},
      {"a in (b))", "found ')', expected: ',' or 'end of string'"},
      {"a in (b c)",
       "unable to parse requirement: found 'c', expected: ',' or ')'"},
      {"a in (b=c)",
       "unable to parse requirement: found '=', expected: ',' or ')'"},
      {"a in (b,=)",
       "unable to parse requirement: found '=', expected: ',', or identifier"},
      // ",," takes both commas, so ')' right after them is not a value.
      {"a in (x,,)",
       "unable to parse requirement: found ')', expected: ',', or identifier"},
      {"a in (,,)",
       "unable to parse requirement: found ')', expected: ',', or identifier"},
      {"a notin (,,)",
       "unable to parse requirement: found ')', expected: ',', or identifier"},
      {"a in (x,,y,,)",
       "unable to parse requirement: found ')', expected: ',', or identifier"},
      {"a in (,,,,)",
       "unable to parse requirement: found ')', expected: ',', or identifier"},
      {"a)",
       "unable to parse requirement: found ')', expected: in, notin, =, ==, "
       "!=, gt, lt"},
      // Gt/Lt need one integer.
      {"a>b",
       "unable to parse requirement: values[0]: Invalid value: \"b\": for "
       "'Gt', 'Lt' operators, the value must be an integer"},
      {"a>",
       "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', "
       "'Lt' operators, the value must be an integer"},
      {"a<99999999999999999999",
       "unable to parse requirement: values[0]: Invalid value: "
       "\"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be "
       "an integer"},
      {"a>=1", "unable to parse requirement: found '=', expected: identifier"},
      {"a<>1", "unable to parse requirement: found '>', expected: identifier"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(LabelError(c.text), c.error) << "selector: " << c.text;
  }
  // A non-integer that is also not a label value: both problems, listed.
  std::string err = LabelError("a>-x");
  EXPECT_TRUE(HasPrefix(err,
                        "unable to parse requirement: [values[0]: Invalid "
                        "value: \"-x\": for 'Gt'"))
      << err;
  EXPECT_TRUE(
      Contains(err, "values[0][a]: Invalid value: \"-x\": a valid label"))
      << err;
  // Negative bounds are integers but not label values.
  EXPECT_TRUE(HasPrefix(LabelError("a>-1"),
                        "unable to parse requirement: values[0][a]:"));
}

TEST(LabelSelector, ErrorsStayOnOneLine) {
  for (const std::string& text :
       {std::string("a=b\x01"), std::string("a=\x0b"), std::string("\x7f"),
        std::string("a in (\x1b[2J)"), std::string("a,\x0c")}) {
    std::string err = LabelError(text);
    for (char c : err) {
      unsigned char u = static_cast<unsigned char>(c);
      EXPECT_FALSE(u < 0x20 || u == 0x7f) << "control char in: " << err;
    }
  }
}

TEST(LabelSelector, FailedParseLeavesTheSelectorUnchanged) {
  LabelSelector s = MustParseLabels("a=b");
  EXPECT_NE(LabelSelector::Parse("a in (", &s), "");
  EXPECT_EQ(s.ToString(), "a=b");
}

TEST(LabelSelector, MatchesDoesNotAllocate) {
  LabelSelector s = MustParseLabels(
      "app.kubernetes.io/name in (a,b,c,d,e,f,g,h,i,j,web),tier!=db,!legacy,"
      "env,replicas>2,zone notin (x)");
  LabelList labels = {{"app.kubernetes.io/name", "web"},
                      {"env", "prod"},
                      {"replicas", "3"},
                      {"tier", "fe"},
                      {"pod-template-hash", "5d8f7c9b6"}};
  g_allocations = 0;
  g_count_allocations = true;
  bool matched = true;
  for (int i = 0; i < 1000; ++i) matched = matched && s.Matches(labels);
  g_count_allocations = false;
  EXPECT_TRUE(matched);
  EXPECT_EQ(g_allocations.load(), 0);
}

TEST(LabelSelector, AnEventsPackedLabelsMatchAsTheirList) {
  // The last value of a repeated key counts, in both forms.
  const LabelList lists[] = {kNone, kAB, kAC, kAEmpty,
                             {{"a", "x"}, {"a", "b"}},
                             {{"a", "b"}, {"a", "x"}},
                             {{"app", "web"}, {"tier", "fe"}, {"n", "7"}}};
  const char* selectors[] = {"",      "a",        "!a",       "a=b",
                             "a!=b",  "a in (b,c)", "a notin (b)", "n>5",
                             "n<5",   "app=web,tier in (fe)"};
  for (const LabelList& list : lists) {
    TestEvent fields = MakeEvent("c", "n", "x", list);
    const Event& event = fields;
    EXPECT_EQ(event.labels().ToList(), list);
    for (const char* text : selectors) {
      LabelSelector s = MustParseLabels(text);
      EXPECT_EQ(s.Matches(event.labels()), s.Matches(list)) << text;
    }
  }
  // A list whose last "a" is "b" matches a=b: the packed form agrees.
  TestEvent repeated = MakeEvent("c", "n", "x", {{"a", "x"}, {"a", "b"}});
  EXPECT_TRUE(MustParseLabels("a=b").Matches(
      static_cast<const Event&>(repeated).labels()));
}

}  // namespace
}  // namespace walwatch
