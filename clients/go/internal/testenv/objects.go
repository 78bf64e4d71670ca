package testenv

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// PaddingAnnotation holds each object's padding (WriterConfig.Pad): random
// text, incompressible as real specs and statuses mostly are not, in an
// annotation so that it survives decoding into typed objects.
const PaddingAnnotation = "testenv.walwatch.io/padding"

// ClusterNameAnnotation is the annotation Clusterpedia stores on every
// object, naming its member cluster.
const ClusterNameAnnotation = "shadow.clusterpedia.io/cluster-name"

// object is the Writer's model of one stored object: what its row holds.
type object struct {
	res                      Resource
	cluster, namespace, name string
	uid                      string
	rv                       uint64 // metadata.resourceVersion: the member cluster's counter
	created                  time.Time
	deleting                 *time.Time // metadata.deletionTimestamp; also the deleted_at column
	labels                   map[string]string
	owner                    *ownerRef // the controller, if any
	gen                      int       // bumped by every change of spec or status
	app                      string
	pad                      string
	podIP, node              string
	written                  string // the object column as last written
}

// ownerRef is an object's controller.
type ownerRef struct {
	apiVersion, kind, name, uid string
}

func (o *object) key() objectKey {
	return objectKey{cluster: o.cluster, gvr: o.res.GVR.String(), namespace: o.namespace, name: o.name}
}

// objectKey is the table's unique key: cluster, group, version, resource,
// namespace, name.
type objectKey struct {
	cluster, gvr, namespace, name string
}

// ownerUID is the owner_uid column: the controller's uid, or "".
func (o *object) ownerUID() string {
	if o.owner == nil {
		return ""
	}
	return o.owner.uid
}

var images = []string{"nginx", "redis", "busybox", "envoyproxy/envoy", "ghcr.io/example/api", "registry.k8s.io/pause"}

func (o *object) image() string {
	return fmt.Sprintf("%s:1.%d", images[len(o.app)%len(images)], 1+o.gen%9)
}

// json is the object as the collector stores it in the `object` column.
func (o *object) json() string {
	meta := map[string]any{
		"name":              o.name,
		"uid":               o.uid,
		"resourceVersion":   strconv.FormatUint(o.rv, 10),
		"creationTimestamp": o.created.UTC().Format(time.RFC3339),
	}
	if o.res.Namespaced {
		meta["namespace"] = o.namespace
	}
	if len(o.labels) > 0 {
		meta["labels"] = o.labels
	}
	annotations := map[string]string{ClusterNameAnnotation: o.cluster}
	if o.pad != "" {
		annotations[PaddingAnnotation] = o.pad
	}
	meta["annotations"] = annotations
	if o.deleting != nil {
		meta["deletionTimestamp"] = o.deleting.UTC().Format(time.RFC3339)
		meta["deletionGracePeriodSeconds"] = 30
	}
	if o.owner != nil {
		meta["ownerReferences"] = []any{map[string]any{
			"apiVersion":         o.owner.apiVersion,
			"kind":               o.owner.kind,
			"name":               o.owner.name,
			"uid":                o.owner.uid,
			"controller":         true,
			"blockOwnerDeletion": true,
		}}
	}
	obj := map[string]any{"apiVersion": o.res.APIVersion(), "kind": o.res.Kind, "metadata": meta}
	o.body(obj, meta)
	text, err := json.Marshal(obj)
	if err != nil {
		panic(err) // maps of strings, numbers and slices always marshal
	}
	return string(text)
}

// body adds the kind's own fields (spec, status, data, ...), shaped as
// Kubernetes serves them, and changing with gen.
func (o *object) body(obj, meta map[string]any) {
	created := o.created.UTC().Format(time.RFC3339)
	container := map[string]any{
		"name":  o.app,
		"image": o.image(),
		"ports": []any{map[string]any{"name": "http", "containerPort": 8080, "protocol": "TCP"}},
		"env":   []any{map[string]any{"name": "APP", "value": o.app}, map[string]any{"name": "LOG_LEVEL", "value": "info"}},
		"resources": map[string]any{
			"limits":   map[string]any{"cpu": "500m", "memory": "256Mi"},
			"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
		},
		"imagePullPolicy": "IfNotPresent",
	}
	podSpec := func(restart string) map[string]any {
		return map[string]any{
			"containers":                    []any{container},
			"restartPolicy":                 restart,
			"terminationGracePeriodSeconds": 30,
			"dnsPolicy":                     "ClusterFirst",
			"schedulerName":                 "default-scheduler",
		}
	}
	template := func(restart string) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"labels": map[string]string{"app": o.app}},
			"spec":     podSpec(restart),
		}
	}
	selector := map[string]any{"matchLabels": map[string]string{"app": o.app}}
	replicas := 1 + o.gen%4
	switch o.res.Kind {
	case "Pod":
		spec := podSpec("Always")
		spec["nodeName"] = o.node
		spec["serviceAccountName"] = "default"
		ready := o.deleting == nil
		obj["spec"] = spec
		obj["status"] = map[string]any{
			"phase": "Running",
			"conditions": []any{
				map[string]any{"type": "Initialized", "status": "True", "lastTransitionTime": created},
				map[string]any{"type": "Ready", "status": strconv.FormatBool(ready), "lastTransitionTime": created},
				map[string]any{"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
			},
			"podIP":     o.podIP,
			"podIPs":    []any{map[string]any{"ip": o.podIP}},
			"startTime": created,
			"containerStatuses": []any{map[string]any{
				"name": o.app, "ready": ready, "restartCount": o.gen - 1, "image": o.image(),
				"state": map[string]any{"running": map[string]any{"startedAt": created}},
			}},
			"qosClass": "Burstable",
		}
	case "Deployment", "ReplicaSet", "StatefulSet":
		meta["generation"] = o.gen
		obj["spec"] = map[string]any{"replicas": replicas, "selector": selector, "template": template("Always")}
		obj["status"] = map[string]any{"observedGeneration": o.gen, "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}
	case "DaemonSet":
		meta["generation"] = o.gen
		obj["spec"] = map[string]any{"selector": selector, "template": template("Always")}
		obj["status"] = map[string]any{"observedGeneration": o.gen, "desiredNumberScheduled": replicas, "numberReady": replicas}
	case "Job":
		obj["spec"] = map[string]any{"completions": 1, "parallelism": 1, "backoffLimit": 6, "template": template("Never")}
		obj["status"] = map[string]any{"active": o.gen % 2, "succeeded": 1 - o.gen%2, "startTime": created}
	case "CronJob":
		obj["spec"] = map[string]any{
			"schedule":    fmt.Sprintf("*/%d * * * *", 1+o.gen%30),
			"jobTemplate": map[string]any{"spec": map[string]any{"template": template("Never")}},
		}
		obj["status"] = map[string]any{}
	case "ConfigMap":
		obj["data"] = map[string]string{
			"app.properties":     fmt.Sprintf("app.name=%s\nrevision=%d\nlog.level=info\n", o.app, o.gen),
			"feature-flags.yaml": fmt.Sprintf("flags:\n  fastPath: true\n  rev: %d\n", o.gen),
		}
	case "Secret":
		obj["type"] = "Opaque"
		obj["data"] = map[string]string{"token": base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%s-token-%d", o.app, o.gen)))}
	case "Service":
		obj["spec"] = map[string]any{
			"type":      "ClusterIP",
			"clusterIP": fmt.Sprintf("10.96.%d.%d", len(o.name)%250, 2+o.gen%250),
			"ports":     []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}},
			"selector":  map[string]string{"app": o.app},
		}
		obj["status"] = map[string]any{"loadBalancer": map[string]any{}}
	case "Endpoints":
		obj["subsets"] = []any{map[string]any{
			"addresses": []any{map[string]any{"ip": fmt.Sprintf("10.244.%d.%d", o.gen%16, 2+len(o.name)%250)}},
			"ports":     []any{map[string]any{"name": "http", "port": 8080, "protocol": "TCP"}},
		}}
	case "ServiceAccount":
		obj["automountServiceAccountToken"] = o.gen%2 == 1
	case "PersistentVolumeClaim":
		obj["spec"] = map[string]any{
			"accessModes":      []string{"ReadWriteOnce"},
			"resources":        map[string]any{"requests": map[string]string{"storage": fmt.Sprintf("%dGi", o.gen)}},
			"storageClassName": "standard",
			"volumeMode":       "Filesystem",
		}
		obj["status"] = map[string]any{"phase": "Bound"}
	case "Namespace":
		phase := "Active"
		if o.deleting != nil {
			phase = "Terminating"
		}
		obj["spec"] = map[string]any{"finalizers": []string{"kubernetes"}}
		obj["status"] = map[string]any{"phase": phase}
	case "Node":
		obj["spec"] = map[string]any{"podCIDR": fmt.Sprintf("10.244.%d.0/24", len(o.name)%250)}
		obj["status"] = map[string]any{
			"capacity":    map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110"},
			"allocatable": map[string]string{"cpu": "3800m", "memory": "15Gi", "pods": "110"},
			"conditions":  []any{map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": created}},
			"nodeInfo":    map[string]any{"kubeletVersion": fmt.Sprintf("v1.32.%d", o.gen), "osImage": "Debian GNU/Linux 12 (bookworm)", "architecture": "amd64"},
		}
	case "Ingress":
		obj["spec"] = map[string]any{
			"ingressClassName": "nginx",
			"rules": []any{map[string]any{
				"host": fmt.Sprintf("%s-%d.example.com", o.app, o.gen),
				"http": map[string]any{"paths": []any{map[string]any{
					"path": "/", "pathType": "Prefix",
					"backend": map[string]any{"service": map[string]any{"name": o.app, "port": map[string]any{"number": 80}}},
				}}},
			}},
		}
		obj["status"] = map[string]any{"loadBalancer": map[string]any{}}
	case "NetworkPolicy":
		obj["spec"] = map[string]any{
			"podSelector": selector,
			"policyTypes": []string{"Ingress"},
			"ingress": []any{map[string]any{
				"from":  []any{map[string]any{"podSelector": map[string]any{}}},
				"ports": []any{map[string]any{"protocol": "TCP", "port": 8080 + o.gen%10}},
			}},
		}
	case "Role", "ClusterRole":
		verbs := []string{"get", "list", "watch"}
		if o.gen%2 == 0 {
			verbs = append(verbs, "update")
		}
		obj["rules"] = []any{map[string]any{"apiGroups": []string{""}, "resources": []string{"pods", "configmaps"}, "verbs": verbs}}
	case "StorageClass":
		obj["provisioner"] = "kubernetes.io/no-provisioner"
		obj["reclaimPolicy"] = "Delete"
		obj["volumeBindingMode"] = "WaitForFirstConsumer"
		obj["parameters"] = map[string]string{"revision": strconv.Itoa(o.gen)}
	default: // Widget and any custom resource
		meta["generation"] = o.gen
		obj["spec"] = map[string]any{"size": o.gen, "color": []string{"red", "green", "blue"}[o.gen%3]}
		obj["status"] = map[string]any{"observedGeneration": o.gen, "ready": o.deleting == nil}
	}
}

// eventJSON is a core/v1 Event about o, as the collector records it in the
// `events` column.
func eventJSON(o *object, name, uid, reason, message string, rv uint64, now time.Time) string {
	at := now.UTC().Format(time.RFC3339)
	namespace := o.namespace
	if namespace == "" {
		namespace = "default"
	}
	text, err := json.Marshal(map[string]any{
		"kind":       "Event",
		"apiVersion": "v1",
		"metadata": map[string]any{
			"name": name, "namespace": namespace, "uid": uid,
			"resourceVersion": strconv.FormatUint(rv, 10), "creationTimestamp": at,
		},
		"involvedObject": map[string]any{
			"kind": o.res.Kind, "namespace": o.namespace, "name": o.name, "uid": o.uid,
			"apiVersion": o.res.APIVersion(), "resourceVersion": strconv.FormatUint(o.rv, 10),
		},
		"reason":             reason,
		"message":            message,
		"source":             map[string]any{"component": "kubelet", "host": "node-1"},
		"firstTimestamp":     at,
		"lastTimestamp":      at,
		"count":              1,
		"type":               "Normal",
		"reportingComponent": "kubelet",
	})
	if err != nil {
		panic(err)
	}
	return string(text)
}
