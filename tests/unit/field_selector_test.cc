#include "watchserver/field_selector.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/support/counting_new.h"
#include "tests/unit/support/test_event.h"

namespace walwatch {
namespace {

// ---- helpers ----

FieldSelector MustParseFields(const std::string& text) {
  FieldSelector s;
  std::string err = FieldSelector::Parse(text, &s);
  EXPECT_EQ(err, "") << "selector: " << text;
  return s;
}

std::string FieldError(const std::string& text) {
  FieldSelector s;
  std::string err = FieldSelector::Parse(text, &s);
  EXPECT_NE(err, "") << "selector should not parse: " << text;
  return err;
}

bool FieldsMatch(const std::string& text, const Event& e) {
  return MustParseFields(text).Matches(e);
}

TEST(FieldSelector, EmptySelectsEverything) {
  TestEvent e = MakeEvent("c1", "ns1", "n1");
  for (const char* text : {"", ",", ",,,"}) {
    FieldSelector s = MustParseFields(text);
    EXPECT_TRUE(s.Empty()) << text;
    EXPECT_TRUE(s.Matches(e));
  }
  EXPECT_TRUE(FieldSelector().Matches(e));
  // apimachinery drops a term with an empty field and an empty value.
  for (const char* text : {"=", "==", "!=", "=,==,!="}) {
    FieldSelector s = MustParseFields(text);
    EXPECT_TRUE(s.Empty()) << text;
    EXPECT_TRUE(s.Matches(e)) << text;
  }
  EXPECT_TRUE(FieldsMatch("!=,metadata.name=n1", e));
  EXPECT_EQ(FieldError("=x"), "field label not supported: ");
}

TEST(FieldSelector, NameAndNamespaceOperators) {
  TestEvent e = MakeEvent("c1", "ns1", "n1");
  EXPECT_TRUE(FieldsMatch("metadata.name=n1", e));
  EXPECT_TRUE(FieldsMatch("metadata.name==n1", e));
  EXPECT_FALSE(FieldsMatch("metadata.name!=n1", e));
  EXPECT_FALSE(FieldsMatch("metadata.name=n2", e));
  EXPECT_FALSE(FieldsMatch("metadata.name==n2", e));
  EXPECT_TRUE(FieldsMatch("metadata.name!=n2", e));
  EXPECT_TRUE(FieldsMatch("metadata.namespace=ns1", e));
  EXPECT_FALSE(FieldsMatch("metadata.namespace=ns2", e));
  EXPECT_TRUE(FieldsMatch("metadata.namespace!=ns2", e));
  // Values are exact: no trimming, case-sensitive.
  EXPECT_FALSE(FieldsMatch("metadata.name= n1", e));
  EXPECT_FALSE(FieldsMatch("metadata.name=N1", e));
}

TEST(FieldSelector, ClusterScopedObjectsHaveAnEmptyNamespace) {
  TestEvent cluster_scoped = MakeEvent("c1", "", "node-1");
  TestEvent namespaced = MakeEvent("c1", "ns1", "n1");
  EXPECT_TRUE(FieldsMatch("metadata.namespace=", cluster_scoped));
  EXPECT_FALSE(FieldsMatch("metadata.namespace=", namespaced));
  EXPECT_TRUE(FieldsMatch("metadata.namespace!=", namespaced));
  EXPECT_FALSE(FieldsMatch("metadata.namespace!=", cluster_scoped));
}

TEST(FieldSelector, ClusterFieldNames) {
  TestEvent e = MakeEvent("c1", "ns1", "n1");
  for (const char* field :
       {"cluster",
        "metadata.annotations['shadow.clusterpedia.io/cluster-name']",
        "metadata.annotations[\"shadow.clusterpedia.io/cluster-name\"]",
        ".metadata.annotations['shadow.clusterpedia.io/cluster-name']"}) {
    std::string f(field);
    EXPECT_TRUE(FieldsMatch(f + "=c1", e)) << f;
    EXPECT_TRUE(FieldsMatch(f + "==c1", e)) << f;
    EXPECT_FALSE(FieldsMatch(f + "!=c1", e)) << f;
    EXPECT_FALSE(FieldsMatch(f + "=c2", e)) << f;
    EXPECT_TRUE(FieldsMatch(f + "!=c2", e)) << f;
  }
}

TEST(FieldSelector, CombinationsAreAnded) {
  TestEvent e = MakeEvent("c1", "ns1", "n1");
  EXPECT_TRUE(
      FieldsMatch("metadata.name=n1,metadata.namespace=ns1,cluster=c1", e));
  EXPECT_FALSE(FieldsMatch("metadata.name=n1,metadata.namespace=ns2", e));
  EXPECT_FALSE(FieldsMatch("metadata.name=n1,cluster!=c1", e));
  EXPECT_TRUE(FieldsMatch("metadata.name!=x,metadata.name!=y", e));
  EXPECT_FALSE(FieldsMatch("metadata.name=n1,metadata.name=n2", e));
  EXPECT_TRUE(FieldsMatch(",metadata.name=n1,,cluster=c1,", e));  // empty terms
}

TEST(FieldSelector, Escapes) {
  EXPECT_TRUE(FieldsMatch("metadata.name=a\\,b", MakeEvent("c", "n", "a,b")));
  EXPECT_TRUE(FieldsMatch("metadata.name=a\\=b", MakeEvent("c", "n", "a=b")));
  EXPECT_TRUE(FieldsMatch("metadata.name=a\\\\b", MakeEvent("c", "n", "a\\b")));
  EXPECT_TRUE(FieldsMatch("metadata.name=\\\\", MakeEvent("c", "n", "\\")));
  EXPECT_TRUE(FieldsMatch("metadata.name=x\\,y\\=z\\\\,cluster=c",
                          MakeEvent("c", "n", "x,y=z\\")));
  // An escaped comma does not split terms.
  EXPECT_EQ(FieldError("metadata.name=a\\,cluster=c"),
            "invalid field selector: unescaped character in value: '='");
  EXPECT_TRUE(FieldsMatch("metadata.name=a\\,cluster\\=c",
                          MakeEvent("x", "n", "a,cluster=c")));
  // "==" is an operator, so the value does not start with '='.
  EXPECT_TRUE(FieldsMatch("metadata.name==a", MakeEvent("c", "n", "a")));
  EXPECT_TRUE(FieldsMatch("metadata.name=\\=a", MakeEvent("c", "n", "=a")));
  // Non-ASCII passes through.
  EXPECT_TRUE(FieldsMatch("metadata.name=é\\,ü", MakeEvent("c", "n", "é,ü")));
}

TEST(FieldSelector, EscapeErrors) {
  EXPECT_EQ(FieldError("metadata.name=a\\x"),
            "invalid field selector: invalid escape sequence: \\x");
  EXPECT_EQ(FieldError("metadata.name=a\\"),
            "invalid field selector: invalid escape sequence: \\");
  EXPECT_EQ(FieldError("metadata.name=a\\é"),
            "invalid field selector: invalid escape sequence: \\é");
  EXPECT_EQ(FieldError("metadata.name=a=b"),
            "invalid field selector: unescaped character in value: '='");
  EXPECT_EQ(FieldError("metadata.name!==a"),
            "invalid field selector: unescaped character in value: '='");
  EXPECT_EQ(FieldError("metadata.name===a"),
            "invalid field selector: unescaped character in value: '='");
}

TEST(FieldSelector, TermsWithoutOperator) {
  EXPECT_EQ(
      FieldError("metadata.name"),
      "invalid selector: 'metadata.name'; can't understand 'metadata.name'");
  EXPECT_EQ(FieldError("metadata.name=a,b"),
            "invalid selector: 'metadata.name=a,b'; can't understand 'b'");
  EXPECT_EQ(FieldError("metadata.name in (a)"),
            "invalid selector: 'metadata.name in (a)'; can't understand "
            "'metadata.name in (a)'");
  EXPECT_EQ(FieldError("metadata.name=a\\,b"
                       ",x\n"),
            "invalid selector: 'metadata.name=a\\,b,x\\x0a'; can't understand "
            "'x\\x0a'");
}

TEST(FieldSelector, UnsupportedFields) {
  EXPECT_EQ(FieldError("status.phase=Running"),
            "field label not supported: status.phase");
  EXPECT_EQ(FieldError("metadata.cluster=c1"),
            "field label not supported: metadata.cluster");
  EXPECT_EQ(FieldError("metadata.labels.app=x"),
            "field label not supported: metadata.labels.app");
  EXPECT_EQ(FieldError("=x"), "field label not supported: ");
  // Field names are exact: no trimming, case-sensitive.
  EXPECT_EQ(FieldError(" metadata.name=x"),
            "field label not supported:  metadata.name");
  EXPECT_EQ(FieldError("metadata.name =x"),
            "field label not supported: metadata.name ");
  EXPECT_EQ(FieldError("Metadata.Name=x"),
            "field label not supported: Metadata.Name");
  EXPECT_EQ(FieldError("metadata.annotations['other']=x"),
            "field label not supported: metadata.annotations['other']");
  // Terms are checked in sorted order, after all have parsed.
  EXPECT_EQ(FieldError("z=1,metadata.name=x,b=2"),
            "field label not supported: b");
  EXPECT_EQ(FieldError("a.b=c,metadata.name"),
            "invalid selector: 'a.b=c,metadata.name'; can't understand "
            "'metadata.name'");
}

TEST(FieldSelector, MatchesDoesNotAllocate) {
  FieldSelector s =
      MustParseFields("metadata.name=n1,metadata.namespace!=x,cluster=c1");
  TestEvent fields = MakeEvent("c1", "ns1", "n1");
  const Event& e = fields;
  g_allocations = 0;
  g_count_allocations = true;
  bool matched = true;
  for (int i = 0; i < 1000; ++i) matched = matched && s.Matches(e);
  g_count_allocations = false;
  EXPECT_TRUE(matched);
  EXPECT_EQ(g_allocations.load(), 0);
}

}  // namespace
}  // namespace walwatch
