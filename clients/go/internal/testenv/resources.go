package testenv

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one resource type the Writer writes: a row's group, version
// and resource columns, its kind column, and whether its objects live in a
// namespace (Clusterpedia stores a cluster-scoped object with namespace "").
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// APIVersion is the objects' apiVersion: "v1" for the core group,
// "group/version" else.
func (r Resource) APIVersion() string { return r.GVR.GroupVersion().String() }

// Well-known resources, for tests that write or watch one of them.
var (
	Pods        = Resource{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod", true}
	ConfigMaps  = Resource{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", true}
	Namespaces  = Resource{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "Namespace", false}
	Nodes       = Resource{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "Node", false}
	Deployments = Resource{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", true}
	ReplicaSets = Resource{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "ReplicaSet", true}
	// Widgets is a custom resource: walwatch knows its kind only from the
	// table (or --kinds).
	Widgets = Resource{schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, "Widget", true}
)

// DefaultResources are the resource types of a real cluster that
// Clusterpedia collects, 21 of them: the core group's pods (the hot one),
// configmaps, secrets, services, endpoints, serviceaccounts,
// persistentvolumeclaims and the cluster-scoped namespaces and nodes;
// apps/v1 deployments, replicasets, statefulsets, daemonsets; batch/v1
// jobs, cronjobs; networking.k8s.io/v1 ingresses, networkpolicies;
// rbac.authorization.k8s.io/v1 roles and the cluster-scoped clusterroles;
// storage.k8s.io/v1 storageclasses (cluster-scoped); and one custom
// resource, example.com/v1 widgets. Events are left out: Clusterpedia
// records them in the `events` column of the objects they are about, which
// the Writer does.
//
// Owners come before what they own (deployments, replicasets, pods), so
// that seeding in this order gives pods a ReplicaSet to belong to.
func DefaultResources() []Resource {
	core := func(resource, kind string, namespaced bool) Resource {
		return Resource{schema.GroupVersionResource{Version: "v1", Resource: resource}, kind, namespaced}
	}
	group := func(g, v, resource, kind string, namespaced bool) Resource {
		return Resource{schema.GroupVersionResource{Group: g, Version: v, Resource: resource}, kind, namespaced}
	}
	return []Resource{
		Namespaces,
		Nodes,
		Deployments,
		ReplicaSets,
		Pods,
		ConfigMaps,
		core("secrets", "Secret", true),
		core("services", "Service", true),
		core("endpoints", "Endpoints", true),
		core("serviceaccounts", "ServiceAccount", true),
		core("persistentvolumeclaims", "PersistentVolumeClaim", true),
		group("apps", "v1", "statefulsets", "StatefulSet", true),
		group("apps", "v1", "daemonsets", "DaemonSet", true),
		group("batch", "v1", "jobs", "Job", true),
		group("batch", "v1", "cronjobs", "CronJob", true),
		group("networking.k8s.io", "v1", "ingresses", "Ingress", true),
		group("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true),
		group("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
		group("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false),
		group("storage.k8s.io", "v1", "storageclasses", "StorageClass", false),
		Widgets,
	}
}
