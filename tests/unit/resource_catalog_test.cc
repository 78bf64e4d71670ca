#include "cdc/model/resource_catalog.h"

#include <gtest/gtest.h>

namespace walwatch {
namespace {

TEST(ResourceCatalog, SeenWinsOverDeclaredWinsOverBuiltin) {
  ResourceCatalog catalog;
  const GroupVersionResource pods{"", "v1", "pods"};
  ResolvedKind k = catalog.Resolve(pods);
  EXPECT_EQ(k.kind, "Pod");
  EXPECT_EQ(k.source, KindSource::kBuiltin);

  catalog.Declare(pods, "DeclaredPod");
  k = catalog.Resolve(pods);
  EXPECT_EQ(k.kind, "DeclaredPod");
  EXPECT_EQ(k.source, KindSource::kDeclared);

  catalog.Add(pods, "SeenPod");
  k = catalog.Resolve(pods);
  EXPECT_EQ(k.kind, "SeenPod");
  EXPECT_EQ(k.source, KindSource::kSeen);
}

TEST(ResourceCatalog, ASeenRowWithoutKindDoesNotHideOtherSources) {
  ResourceCatalog catalog;
  const GroupVersionResource widgets{"example.com", "v1", "widgets"};
  catalog.Add(widgets, "");
  ResolvedKind k = catalog.Resolve(widgets);
  EXPECT_EQ(k.kind, "Widget");
  EXPECT_EQ(k.source, KindSource::kGuessed);
  catalog.Declare(widgets, "WidGet");
  EXPECT_EQ(catalog.Resolve(widgets).kind, "WidGet");
  catalog.Add(widgets, "Widget");
  EXPECT_EQ(catalog.Resolve(widgets).source, KindSource::kSeen);
  EXPECT_EQ(catalog.Resolve(widgets).kind, "Widget");
}

TEST(ResourceCatalog, TheFirstSeenKindStays) {
  ResourceCatalog catalog;
  const GroupVersionResource r{"example.com", "v1", "foobars"};
  catalog.Add(r, "FooBar");
  catalog.Add(r, "Other");
  EXPECT_EQ(catalog.Resolve(r).kind, "FooBar");
}

TEST(ResourceCatalog, AnotherVersionOfTheSameGroupResourceNamesTheKind) {
  ResourceCatalog catalog;
  catalog.Add({"example.com", "v1beta1", "foobars"}, "FooBar");
  catalog.Declare({"example.com", "v1", "gizmos"}, "GizMo");
  ResolvedKind k = catalog.Resolve({"example.com", "v1", "foobars"});
  EXPECT_EQ(k.kind, "FooBar");
  EXPECT_EQ(k.source, KindSource::kOtherVersion);
  k = catalog.Resolve({"example.com", "v2", "gizmos"});
  EXPECT_EQ(k.kind, "GizMo");
  EXPECT_EQ(k.source, KindSource::kOtherVersion);
  // Another group is another resource.
  k = catalog.Resolve({"other.example.com", "v1", "foobars"});
  EXPECT_EQ(k.kind, "Foobar");
  EXPECT_EQ(k.source, KindSource::kGuessed);
}

TEST(ResourceCatalog, BuiltinWinsOverAnotherVersionSeen) {
  ResourceCatalog catalog;
  // A table written by hand with an odd kind in one version.
  catalog.Add({"apps", "v1beta1", "deployments"}, "OldDeployment");
  EXPECT_EQ(catalog.Resolve({"apps", "v1", "deployments"}).kind,
            "Deployment");
  EXPECT_EQ(catalog.Resolve({"apps", "v1beta1", "deployments"}).kind,
            "OldDeployment");
}

TEST(ResourceCatalog, ListHoldsOnlySeenResources) {
  ResourceCatalog catalog;
  catalog.Declare({"example.com", "v1", "widgets"}, "Widget");
  catalog.Add({"", "v1", "pods"}, "Pod");
  auto list = catalog.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].first.resource, "pods");
  EXPECT_EQ(list[0].second, "Pod");
}

TEST(ResourceCatalog, KindSourceNames) {
  EXPECT_STREQ(KindSourceName(KindSource::kSeen), "seen");
  EXPECT_STREQ(KindSourceName(KindSource::kDeclared), "declared");
  EXPECT_STREQ(KindSourceName(KindSource::kBuiltin), "builtin");
  EXPECT_STREQ(KindSourceName(KindSource::kOtherVersion), "other-version");
  EXPECT_STREQ(KindSourceName(KindSource::kGuessed), "guessed");
}

}  // namespace
}  // namespace walwatch
