#include "cdc/model/builtin_kinds.h"

#include <gtest/gtest.h>

namespace walwatch {
namespace {

TEST(BuiltinKinds, KnowsTheKindsOfKubernetesResources) {
  const struct {
    const char* group;
    const char* resource;
    const char* kind;
  } kCases[] = {
      {"", "pods", "Pod"},
      {"", "endpoints", "Endpoints"},
      {"", "componentstatuses", "ComponentStatus"},
      {"", "persistentvolumeclaims", "PersistentVolumeClaim"},
      {"", "events", "Event"},
      {"apps", "deployments", "Deployment"},
      {"apps", "statefulsets", "StatefulSet"},
      {"batch", "cronjobs", "CronJob"},
      {"networking.k8s.io", "ingresses", "Ingress"},
      {"networking.k8s.io", "ingressclasses", "IngressClass"},
      {"rbac.authorization.k8s.io", "clusterrolebindings",
       "ClusterRoleBinding"},
      {"storage.k8s.io", "csistoragecapacities", "CSIStorageCapacity"},
      {"policy", "poddisruptionbudgets", "PodDisruptionBudget"},
      {"autoscaling", "horizontalpodautoscalers", "HorizontalPodAutoscaler"},
      {"coordination.k8s.io", "leases", "Lease"},
      {"discovery.k8s.io", "endpointslices", "EndpointSlice"},
      {"events.k8s.io", "events", "Event"},
      {"admissionregistration.k8s.io", "validatingwebhookconfigurations",
       "ValidatingWebhookConfiguration"},
      {"apiextensions.k8s.io", "customresourcedefinitions",
       "CustomResourceDefinition"},
      {"apiregistration.k8s.io", "apiservices", "APIService"},
      {"scheduling.k8s.io", "priorityclasses", "PriorityClass"},
      {"node.k8s.io", "runtimeclasses", "RuntimeClass"},
      {"certificates.k8s.io", "certificatesigningrequests",
       "CertificateSigningRequest"},
      {"flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations",
       "PriorityLevelConfiguration"},
      {"resource.k8s.io", "resourceclaims", "ResourceClaim"},
      {"extensions", "ingresses", "Ingress"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.group) + " " + c.resource);
    std::optional<std::string_view> kind = BuiltinKind(c.group, c.resource);
    ASSERT_TRUE(kind.has_value());
    EXPECT_EQ(*kind, c.kind);
  }
}

TEST(BuiltinKinds, GroupMatters) {
  // deployments are not core; pods are not apps.
  EXPECT_FALSE(BuiltinKind("", "deployments").has_value());
  EXPECT_FALSE(BuiltinKind("apps", "pods").has_value());
  EXPECT_FALSE(BuiltinKind("example.com", "widgets").has_value());
  EXPECT_FALSE(BuiltinKind("", "").has_value());
}

TEST(BuiltinKinds, GuessKindSingularizesAndCapitalizes) {
  EXPECT_EQ(GuessKind("widgets"), "Widget");
  EXPECT_EQ(GuessKind("policies"), "Policy");
  EXPECT_EQ(GuessKind("classes"), "Class");
  EXPECT_EQ(GuessKind("meshes"), "Mesh");
  EXPECT_EQ(GuessKind("patches"), "Patch");
  EXPECT_EQ(GuessKind("boxes"), "Box");
  EXPECT_EQ(GuessKind("databases"), "Database");
  EXPECT_EQ(GuessKind("sizes"), "Size");
  EXPECT_EQ(GuessKind("access"), "Access");
  EXPECT_EQ(GuessKind("sheep"), "Sheep");
  // Where the words begin is lost in a lower-case plural.
  EXPECT_EQ(GuessKind("foobars"), "Foobar");
  // Never empty for a non-empty name.
  EXPECT_EQ(GuessKind("s"), "S");
  EXPECT_EQ(GuessKind("ies"), "Ie");
  EXPECT_EQ(GuessKind("x"), "X");
}

}  // namespace
}  // namespace walwatch
