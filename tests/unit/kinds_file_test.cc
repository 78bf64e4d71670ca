#include "watchserver/kinds_file.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <gtest/gtest.h>

namespace walwatch {
namespace {

TEST(KindsFile, ParsesDeclarations) {
  std::vector<DeclaredKind> kinds;
  ASSERT_EQ(ParseKinds(R"([
      {"group": "example.com", "version": "v1", "resource": "widgets",
       "kind": "Widget"},
      {"version": "v1", "resource": "things", "kind": "Thing"},
      {"group": "", "version": "v1alpha1", "resource": "foo-bars",
       "kind": "FooBar"}])",
                       &kinds),
            "");
  ASSERT_EQ(kinds.size(), 3u);
  EXPECT_EQ(kinds[0].gvr.group, "example.com");
  EXPECT_EQ(kinds[0].gvr.version, "v1");
  EXPECT_EQ(kinds[0].gvr.resource, "widgets");
  EXPECT_EQ(kinds[0].kind, "Widget");
  EXPECT_EQ(kinds[1].gvr.group, "");  // core
  EXPECT_EQ(kinds[2].kind, "FooBar");
}

TEST(KindsFile, AnEmptyListIsFine) {
  std::vector<DeclaredKind> kinds{{{"a", "v1", "b"}, "B"}};
  EXPECT_EQ(ParseKinds("[]", &kinds), "");
  EXPECT_TRUE(kinds.empty());
}

TEST(KindsFile, RefusesWhatIsNotADeclaration) {
  const struct {
    const char* json;
    const char* error;
  } kCases[] = {
      {"", "not valid JSON"},
      {"[{\"kind\": ", "not valid JSON"},
      {"{}", "expected a JSON array"},
      {"[1]", "entry 0: expected an object"},
      {R"([{"version": "v1", "resource": "widgets"}])",
       "entry 0 (widgets v1): lacks \"kind\""},
      {R"([{"group": "example.com", "resource": "widgets", "kind": "W"}])",
       "entry 0 (widgets.example.com): lacks \"version\""},
      {R"([{"group": "example.com", "version": "v1", "kind": "W"}])",
       "entry 0: lacks \"resource\""},
      {R"([{"group": "example.com", "version": "v1", "resource": "widgets",
            "Kind": "Widget"}])",
       "entry 0 (widgets.example.com v1): unknown key \"Kind\""},
      {R"([{"group": "example.com", "version": 1, "resource": "widgets",
            "kind": "Widget"}])",
       "entry 0 (widgets.example.com): \"version\" must be a string"},
      {R"([{"group": "Example.com", "version": "v1", "resource": "widgets",
            "kind": "Widget"}])",
       "group \"Example.com\" must be lower-case"},
      {R"([{"version": "v1", "resource": "Widgets", "kind": "Widget"}])",
       "resource \"Widgets\" must be lower-case"},
      {R"([{"version": "v1", "resource": "a/b", "kind": "Widget"}])",
       "resource \"a/b\""},
      {R"([{"version": "", "resource": "widgets", "kind": "Widget"}])",
       "version \"\" must be"},
      {R"([{"version": "v1", "resource": "widgets", "kind": ""}])",
       "kind \"\" must be letters and digits"},
      {R"([{"version": "v1", "resource": "widgets", "kind": "Wid get"}])",
       "kind \"Wid get\""},
      {R"([{"version": "v1", "resource": "widgets", "kind": "Widget"},
           {"version": "v1", "resource": "widgets", "kind": "Widget"}])",
       "entry 1 (widgets v1): declared again (first in entry 0)"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.json);
    std::vector<DeclaredKind> kinds;
    std::string err = ParseKinds(c.json, &kinds);
    EXPECT_NE(err.find(c.error), std::string::npos) << err;
  }
}

TEST(KindsFile, LoadNamesTheFile) {
  char path[] = "/tmp/walwatch-kinds-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << R"([{"group":"example.com","version":"v1","resource":"widgets",)"
           R"("kind":"Widget"}])";
  }
  std::vector<DeclaredKind> kinds;
  EXPECT_EQ(LoadKindsFile(path, &kinds), "");
  ASSERT_EQ(kinds.size(), 1u);
  EXPECT_EQ(kinds[0].kind, "Widget");
  {
    std::ofstream out(path);
    out << "[{]";
  }
  EXPECT_EQ(LoadKindsFile(path, &kinds),
            std::string("--kinds ") + path + ": not valid JSON");
  unlink(path);
  EXPECT_EQ(LoadKindsFile(path, &kinds),
            std::string("--kinds ") + path + ": cannot read the file");
}

TEST(KindsFile, ADirectoryIsAnErrorNotACrash) {
  std::vector<DeclaredKind> kinds;
  std::string err = LoadKindsFile("/tmp", &kinds);
  EXPECT_EQ(err, "--kinds /tmp: is a directory, not a file");
}

}  // namespace
}  // namespace walwatch
