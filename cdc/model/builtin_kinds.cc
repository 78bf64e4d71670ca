#include "cdc/model/builtin_kinds.h"

#include <cctype>

namespace walwatch {

namespace {

struct BuiltinResource {
  std::string_view group, resource, kind;
};

// Kubernetes' API reference (v1.34, https://kubernetes.io/docs/reference/
// kubernetes-api/) and the groups' types.go, including the versions and
// groups older member clusters still serve (extensions/v1beta1,
// policy/v1beta1 podsecuritypolicies). The versions each is served in are
// noted for the reader; lookups ignore them.
constexpr BuiltinResource kBuiltinResources[] = {
    // core v1
    {"", "bindings", "Binding"},
    {"", "componentstatuses", "ComponentStatus"},
    {"", "configmaps", "ConfigMap"},
    {"", "endpoints", "Endpoints"},
    {"", "events", "Event"},
    {"", "limitranges", "LimitRange"},
    {"", "namespaces", "Namespace"},
    {"", "nodes", "Node"},
    {"", "persistentvolumeclaims", "PersistentVolumeClaim"},
    {"", "persistentvolumes", "PersistentVolume"},
    {"", "pods", "Pod"},
    {"", "podtemplates", "PodTemplate"},
    {"", "replicationcontrollers", "ReplicationController"},
    {"", "resourcequotas", "ResourceQuota"},
    {"", "secrets", "Secret"},
    {"", "serviceaccounts", "ServiceAccount"},
    {"", "services", "Service"},
    // admissionregistration.k8s.io v1, v1beta1, v1alpha1
    {"admissionregistration.k8s.io", "mutatingwebhookconfigurations",
     "MutatingWebhookConfiguration"},
    {"admissionregistration.k8s.io", "validatingwebhookconfigurations",
     "ValidatingWebhookConfiguration"},
    {"admissionregistration.k8s.io", "validatingadmissionpolicies",
     "ValidatingAdmissionPolicy"},
    {"admissionregistration.k8s.io", "validatingadmissionpolicybindings",
     "ValidatingAdmissionPolicyBinding"},
    {"admissionregistration.k8s.io", "mutatingadmissionpolicies",
     "MutatingAdmissionPolicy"},
    {"admissionregistration.k8s.io", "mutatingadmissionpolicybindings",
     "MutatingAdmissionPolicyBinding"},
    // apiextensions.k8s.io v1, v1beta1
    {"apiextensions.k8s.io", "customresourcedefinitions",
     "CustomResourceDefinition"},
    // apiregistration.k8s.io v1, v1beta1
    {"apiregistration.k8s.io", "apiservices", "APIService"},
    // apps v1, v1beta1, v1beta2
    {"apps", "controllerrevisions", "ControllerRevision"},
    {"apps", "daemonsets", "DaemonSet"},
    {"apps", "deployments", "Deployment"},
    {"apps", "replicasets", "ReplicaSet"},
    {"apps", "statefulsets", "StatefulSet"},
    // authentication.k8s.io v1 (create-only reviews, for completeness)
    {"authentication.k8s.io", "tokenreviews", "TokenReview"},
    {"authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview"},
    // authorization.k8s.io v1
    {"authorization.k8s.io", "localsubjectaccessreviews",
     "LocalSubjectAccessReview"},
    {"authorization.k8s.io", "selfsubjectaccessreviews",
     "SelfSubjectAccessReview"},
    {"authorization.k8s.io", "selfsubjectrulesreviews",
     "SelfSubjectRulesReview"},
    {"authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview"},
    // autoscaling v1, v2, v2beta1, v2beta2
    {"autoscaling", "horizontalpodautoscalers", "HorizontalPodAutoscaler"},
    // batch v1, v1beta1
    {"batch", "cronjobs", "CronJob"},
    {"batch", "jobs", "Job"},
    // certificates.k8s.io v1, v1beta1, v1alpha1
    {"certificates.k8s.io", "certificatesigningrequests",
     "CertificateSigningRequest"},
    {"certificates.k8s.io", "clustertrustbundles", "ClusterTrustBundle"},
    {"certificates.k8s.io", "podcertificaterequests",
     "PodCertificateRequest"},
    // coordination.k8s.io v1, v1beta1, v1alpha2
    {"coordination.k8s.io", "leases", "Lease"},
    {"coordination.k8s.io", "leasecandidates", "LeaseCandidate"},
    // discovery.k8s.io v1, v1beta1
    {"discovery.k8s.io", "endpointslices", "EndpointSlice"},
    // events.k8s.io v1, v1beta1
    {"events.k8s.io", "events", "Event"},
    // extensions v1beta1 (removed in 1.16..1.22; older clusters)
    {"extensions", "daemonsets", "DaemonSet"},
    {"extensions", "deployments", "Deployment"},
    {"extensions", "ingresses", "Ingress"},
    {"extensions", "networkpolicies", "NetworkPolicy"},
    {"extensions", "podsecuritypolicies", "PodSecurityPolicy"},
    {"extensions", "replicasets", "ReplicaSet"},
    // flowcontrol.apiserver.k8s.io v1, v1beta1..v1beta3
    {"flowcontrol.apiserver.k8s.io", "flowschemas", "FlowSchema"},
    {"flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations",
     "PriorityLevelConfiguration"},
    // internal.apiserver.k8s.io v1alpha1
    {"internal.apiserver.k8s.io", "storageversions", "StorageVersion"},
    // networking.k8s.io v1, v1beta1, v1alpha1
    {"networking.k8s.io", "ingressclasses", "IngressClass"},
    {"networking.k8s.io", "ingresses", "Ingress"},
    {"networking.k8s.io", "ipaddresses", "IPAddress"},
    {"networking.k8s.io", "networkpolicies", "NetworkPolicy"},
    {"networking.k8s.io", "servicecidrs", "ServiceCIDR"},
    // node.k8s.io v1, v1beta1
    {"node.k8s.io", "runtimeclasses", "RuntimeClass"},
    // policy v1, v1beta1
    {"policy", "poddisruptionbudgets", "PodDisruptionBudget"},
    {"policy", "podsecuritypolicies", "PodSecurityPolicy"},
    // rbac.authorization.k8s.io v1, v1beta1
    {"rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding"},
    {"rbac.authorization.k8s.io", "clusterroles", "ClusterRole"},
    {"rbac.authorization.k8s.io", "rolebindings", "RoleBinding"},
    {"rbac.authorization.k8s.io", "roles", "Role"},
    // resource.k8s.io v1, v1beta1, v1beta2, v1alpha3
    {"resource.k8s.io", "deviceclasses", "DeviceClass"},
    {"resource.k8s.io", "devicetaintrules", "DeviceTaintRule"},
    {"resource.k8s.io", "resourceclaims", "ResourceClaim"},
    {"resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplate"},
    {"resource.k8s.io", "resourceslices", "ResourceSlice"},
    // scheduling.k8s.io v1, v1beta1
    {"scheduling.k8s.io", "priorityclasses", "PriorityClass"},
    // storage.k8s.io v1, v1beta1
    {"storage.k8s.io", "csidrivers", "CSIDriver"},
    {"storage.k8s.io", "csinodes", "CSINode"},
    {"storage.k8s.io", "csistoragecapacities", "CSIStorageCapacity"},
    {"storage.k8s.io", "storageclasses", "StorageClass"},
    {"storage.k8s.io", "volumeattachments", "VolumeAttachment"},
    {"storage.k8s.io", "volumeattributesclasses", "VolumeAttributesClass"},
    // storagemigration.k8s.io v1alpha1
    {"storagemigration.k8s.io", "storageversionmigrations",
     "StorageVersionMigration"},
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<std::string_view> BuiltinKind(std::string_view group,
                                            std::string_view resource) {
  for (const BuiltinResource& r : kBuiltinResources) {
    if (r.group == group && r.resource == resource) return r.kind;
  }
  return std::nullopt;
}

std::string GuessKind(std::string_view resource) {
  std::string kind(resource);
  if (EndsWith(kind, "ies") && kind.size() > 3) {
    kind.replace(kind.size() - 3, 3, "y");
  } else if (EndsWith(kind, "sses") || EndsWith(kind, "shes") ||
             EndsWith(kind, "ches") || EndsWith(kind, "xes")) {
    kind.resize(kind.size() - 2);
  } else if (EndsWith(kind, "s") && !EndsWith(kind, "ss") && kind.size() > 1) {
    kind.pop_back();
  }
  if (!kind.empty()) {
    kind[0] = static_cast<char>(
        std::toupper(static_cast<unsigned char>(kind[0])));
  }
  return kind;
}

}  // namespace walwatch
