#include "watchserver/watch_filter.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/support/counting_new.h"
#include "tests/unit/support/test_event.h"
#include "watchserver/watch_request.h"

namespace walwatch {
namespace {

WatchFilterSpec DeploymentsSpec() {
  WatchFilterSpec spec;
  spec.group = "apps";
  spec.version = "v1";
  spec.resource = "deployments";
  return spec;
}

WatchFilter MustCreate(const WatchFilterSpec& spec) {
  WatchFilter f;
  std::string err = WatchFilter::Create(spec, &f);
  EXPECT_EQ(err, "");
  return f;
}

TEST(WatchFilter, ResourceMustMatchExactly) {
  WatchFilter f = MustCreate(DeploymentsSpec());
  TestEvent e = MakeEvent("c1", "ns1", "n1");
  EXPECT_TRUE(f.Matches(e));
  TestEvent other = e;
  other.group = "extensions";
  EXPECT_FALSE(f.Matches(other));
  other = e;
  other.version = "v1beta1";
  EXPECT_FALSE(f.Matches(other));
  other = e;
  other.resource = "replicasets";
  EXPECT_FALSE(f.Matches(other));
  other = e;
  other.resource = "deployments/status";
  EXPECT_FALSE(f.Matches(other));

  WatchFilterSpec core;
  core.version = "v1";
  core.resource = "pods";
  WatchFilter pods = MustCreate(core);
  TestEvent pod = MakeEvent("c1", "ns1", "p1");
  pod.group = "";
  pod.resource = "pods";
  EXPECT_TRUE(pods.Matches(pod));
  EXPECT_FALSE(pods.Matches(e));
}

TEST(WatchFilter, ClusterAndNamespace) {
  WatchFilterSpec spec = DeploymentsSpec();
  spec.cluster = "c1";
  WatchFilter by_cluster = MustCreate(spec);
  EXPECT_TRUE(by_cluster.Matches(MakeEvent("c1", "ns1", "n1")));
  EXPECT_TRUE(by_cluster.Matches(MakeEvent("c1", "ns2", "n1")));
  EXPECT_FALSE(by_cluster.Matches(MakeEvent("c2", "ns1", "n1")));

  spec.ns = "ns1";
  WatchFilter by_both = MustCreate(spec);
  EXPECT_TRUE(by_both.Matches(MakeEvent("c1", "ns1", "n1")));
  EXPECT_FALSE(by_both.Matches(MakeEvent("c1", "ns2", "n1")));
  EXPECT_FALSE(by_both.Matches(MakeEvent("c2", "ns1", "n1")));
  EXPECT_FALSE(by_both.Matches(MakeEvent("c1", "", "n1")));

  spec.cluster.clear();
  WatchFilter by_ns = MustCreate(spec);
  EXPECT_TRUE(by_ns.Matches(MakeEvent("c1", "ns1", "n1")));
  EXPECT_TRUE(by_ns.Matches(MakeEvent("c2", "ns1", "n1")));
  EXPECT_FALSE(by_ns.Matches(MakeEvent("c1", "ns2", "n1")));
}

TEST(WatchFilter, SelectorsAreAndedWithScope) {
  WatchFilterSpec spec = DeploymentsSpec();
  spec.cluster = "c1";
  spec.label_selector = "app in (web,api),!canary";
  spec.field_selector = "metadata.name!=skip";
  WatchFilter f = MustCreate(spec);
  EXPECT_TRUE(f.Matches(MakeEvent("c1", "ns1", "n1", {{"app", "web"}})));
  EXPECT_TRUE(f.Matches(MakeEvent("c1", "ns2", "n2", {{"app", "api"}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c1", "ns1", "n1", {{"app", "db"}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c1", "ns1", "n1", {})));
  EXPECT_FALSE(f.Matches(
      MakeEvent("c1", "ns1", "n1", {{"app", "web"}, {"canary", ""}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c1", "ns1", "skip", {{"app", "web"}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c2", "ns1", "n1", {{"app", "web"}})));
  EXPECT_EQ(f.label_selector().ToString(), "app in (api,web),!canary");
  EXPECT_FALSE(f.field_selector().Empty());
  EXPECT_EQ(f.spec().cluster, "c1");
}

TEST(WatchFilter, ClusterFromPathAndFieldSelectorBothApply) {
  WatchFilterSpec spec = DeploymentsSpec();
  spec.cluster = "c1";
  spec.field_selector = "cluster=c2";
  WatchFilter f = MustCreate(spec);
  EXPECT_FALSE(f.Matches(MakeEvent("c1", "ns1", "n1")));
  EXPECT_FALSE(f.Matches(MakeEvent("c2", "ns1", "n1")));

  spec.cluster.clear();
  spec.field_selector = "cluster!=c2,metadata.namespace=ns1";
  WatchFilter g = MustCreate(spec);
  EXPECT_TRUE(g.Matches(MakeEvent("c1", "ns1", "n1")));
  EXPECT_FALSE(g.Matches(MakeEvent("c2", "ns1", "n1")));
  EXPECT_FALSE(g.Matches(MakeEvent("c1", "ns2", "n1")));
}

TEST(WatchFilter, Errors) {
  WatchFilterSpec spec = DeploymentsSpec();
  spec.label_selector = "a in (b";
  spec.field_selector = "status.phase=x";
  WatchFilter f = MustCreate(DeploymentsSpec());
  // The label selector is reported first, as the apiserver decodes it first.
  EXPECT_EQ(WatchFilter::Create(spec, &f),
            "unable to parse requirement: found '', expected: ',' or ')'");
  spec.label_selector = "a";
  EXPECT_EQ(WatchFilter::Create(spec, &f),
            "field label not supported: status.phase");
  // A failed Create leaves the filter as it was.
  EXPECT_TRUE(f.label_selector().Empty());
  EXPECT_TRUE(f.field_selector().Empty());
  EXPECT_TRUE(f.Matches(MakeEvent("c", "n", "x")));
}

TEST(WatchFilter, SelectorsAreBounded) {
  WatchFilterSpec spec = DeploymentsSpec();
  // The longest selector taken: a set of names, as a list of objects would
  // give.
  std::string in = "app in (a0";
  for (int i = 1; in.size() + 12 < kMaxSelectorBytes; ++i) {
    in += ",a" + std::to_string(i);
  }
  in += ")";
  ASSERT_LE(in.size(), kMaxSelectorBytes);
  ASSERT_GT(in.size(), kMaxSelectorBytes - 12);
  spec.label_selector = in;
  WatchFilter f;
  EXPECT_EQ(WatchFilter::Create(spec, &f), "");
  spec.label_selector = std::string(kMaxSelectorBytes + 1, 'a');
  EXPECT_EQ(WatchFilter::Create(spec, &f),
            "labelSelector is 65537 bytes long; walwatch takes at most 65536");
  spec.label_selector = "";
  spec.field_selector = "metadata.name=" + std::string(kMaxSelectorBytes, 'a');
  EXPECT_EQ(WatchFilter::Create(spec, &f),
            "fieldSelector is 65550 bytes long; walwatch takes at most 65536");
}

TEST(WatchFilter, FromWatchRequest) {
  // What ParseRequest makes of
  // /clusters/c1/apis/apps/v1/namespaces/ns1/deployments?watch=1
  //   &labelSelector=app%20in%20(web)&fieldSelector=metadata.name%3Dn1
  WatchRequest w;
  w.group = "apps";
  w.version = "v1";
  w.resource = "deployments";
  w.cluster = "c1";
  w.ns = "ns1";
  w.label_selector = "app in (web)";
  w.field_selector = "metadata.name=n1";
  WatchFilter f;
  ASSERT_EQ(WatchFilter::Create(w, &f), "");
  EXPECT_TRUE(f.Matches(MakeEvent("c1", "ns1", "n1", {{"app", "web"}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c1", "ns1", "n2", {{"app", "web"}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c2", "ns1", "n1", {{"app", "web"}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c1", "ns2", "n1", {{"app", "web"}})));
  EXPECT_FALSE(f.Matches(MakeEvent("c1", "ns1", "n1", {{"app", "api"}})));
  w.label_selector = "app in web";
  EXPECT_EQ(WatchFilter::Create(w, &f),
            "unable to parse requirement: found 'web' expected: '('");
}

TEST(WatchFilter, MatchesDoesNotAllocate) {
  WatchFilterSpec spec = DeploymentsSpec();
  spec.cluster = "c1";
  spec.label_selector = "app=web,!canary";
  spec.field_selector = "metadata.name!=x";
  WatchFilter f = MustCreate(spec);
  TestEvent fields = MakeEvent("c1", "ns1", "n1", {{"app", "web"}});
  const Event& e = fields;
  g_allocations = 0;
  g_count_allocations = true;
  bool matched = true;
  for (int i = 0; i < 1000; ++i) matched = matched && f.Matches(e);
  g_count_allocations = false;
  EXPECT_TRUE(matched);
  EXPECT_EQ(g_allocations.load(), 0);
}

}  // namespace
}  // namespace walwatch
