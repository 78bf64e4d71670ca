#include "tests/tools/demo_objects.h"

#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>

namespace demo {

namespace {

void json_escape(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

const std::vector<std::string> kImages = {"nginx",
                                          "redis",
                                          "busybox",
                                          "envoyproxy/envoy",
                                          "ghcr.io/example/api",
                                          "registry.k8s.io/pause"};

std::string metadata_json(const Obj& o, const std::string& labels,
                          const std::string& owner_refs) {
  std::string m = "{";
  m += "\"name\":" + q(o.name);
  m += ",\"namespace\":" + q(o.ns);
  m += ",\"uid\":" + q(o.uid);
  m += ",\"resourceVersion\":" + q(std::to_string(o.rv));
  if (o.kind == Kind::Deployment)
    m += ",\"generation\":" + std::to_string(o.generation);
  m += ",\"creationTimestamp\":" + q(k8s_time(o.created));
  if (o.deleting) {
    m += ",\"deletionTimestamp\":" + q(k8s_time(*o.deleting));
    m += ",\"deletionGracePeriodSeconds\":30";
  }
  m += ",\"labels\":" + labels;
  m += ",\"annotations\":{\"shadow.clusterpedia.io/cluster-name\":" +
       q(o.cluster);
  if (o.kind == Kind::Deployment) {
    m += ",\"deployment.kubernetes.io/revision\":" +
         q(std::to_string(o.image_tag));
  }
  m += "}";
  if (!owner_refs.empty()) m += ",\"ownerReferences\":" + owner_refs;
  m += "}";
  return m;
}

std::string container_json(const Obj& o) {
  std::string image =
      kImages[std::hash<std::string>{}(o.app) % kImages.size()] + ":1." +
      std::to_string(o.image_tag);
  return "[{\"name\":" + q(o.app) + ",\"image\":" + q(image) +
         ",\"ports\":[{\"name\":\"http\",\"containerPort\":8080,\"protocol\":"
         "\"TCP\"}]"
         ",\"env\":[{\"name\":\"APP\",\"value\":" +
         q(o.app) +
         "},{\"name\":\"LOG_LEVEL\",\"value\":\"info\"}]"
         ",\"resources\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\"},"
         "\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}}"
         ",\"readinessProbe\":{\"httpGet\":{\"path\":\"/"
         "healthz\",\"port\":8080,\"scheme\":\"HTTP\"},"
         "\"periodSeconds\":10,\"timeoutSeconds\":1,\"successThreshold\":1,"
         "\"failureThreshold\":3}"
         ",\"terminationMessagePath\":\"/dev/"
         "termination-log\",\"terminationMessagePolicy\":\"File\""
         ",\"imagePullPolicy\":\"IfNotPresent\"}]";
}

}  // namespace

std::string q(const std::string& s) {
  std::string out;
  json_escape(out, s);
  return out;
}

std::string k8s_time(TimePoint tp) {
  std::time_t t = std::chrono::system_clock::to_time_t(tp);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

const TypeInfo& type_info(Kind k) {
  static const TypeInfo deploy{"apps", "v1", "deployments", "Deployment",
                               "apps/v1"};
  static const TypeInfo pod{"", "v1", "pods", "Pod", "v1"};
  static const TypeInfo cm{"", "v1", "configmaps", "ConfigMap", "v1"};
  switch (k) {
    case Kind::Deployment:
      return deploy;
    case Kind::Pod:
      return pod;
    case Kind::ConfigMap:
      return cm;
  }
  return pod;
}

std::string Random::alnum(int n, const char* alphabet) {
  size_t len = std::strlen(alphabet);
  std::string s;
  for (int i = 0; i < n; i++) s.push_back(alphabet[u64() % len]);
  return s;
}

std::string Random::uuid() {
  uint64_t a = u64(), b = u64();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 1
  char buf[40];
  std::snprintf(
      buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx",
      static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
      static_cast<unsigned>(a & 0xffff), static_cast<unsigned>(b >> 48),
      static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

const std::vector<std::string> kNamespaces = {"default", "kube-system",
                                              "team-a", "team-b"};
const std::vector<std::string> kApps = {"web",     "api",     "worker", "cache",
                                        "gateway", "billing", "search", "auth",
                                        "metrics", "frontend"};

std::string object_json(const Obj& o) {
  const TypeInfo& t = type_info(o.kind);
  std::string s = "{\"kind\":" + q(t.kind) +
                  ",\"apiVersion\":" + q(t.api_version) + ",\"metadata\":";
  std::string created = k8s_time(o.created);
  switch (o.kind) {
    case Kind::Deployment: {
      std::string labels = "{\"app\":" + q(o.app) + ",\"tier\":\"backend\"}";
      s += metadata_json(o, labels, "");
      s += ",\"spec\":{\"replicas\":" + std::to_string(o.replicas) +
           ",\"selector\":{\"matchLabels\":{\"app\":" + q(o.app) + "}}" +
           ",\"template\":{\"metadata\":{\"creationTimestamp\":null,\"labels\":"
           "{\"app\":" +
           q(o.app) + "}},\"spec\":{\"containers\":" + container_json(o) +
           ",\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
           "\"dnsPolicy\":\"ClusterFirst\",\"securityContext\":{},"
           "\"schedulerName\":\"default-scheduler\"}}" +
           ",\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{"
           "\"maxUnavailable\":\"25%\",\"maxSurge\":\"25%\"}}"
           ",\"revisionHistoryLimit\":10,\"progressDeadlineSeconds\":600}";
      s += ",\"status\":{\"observedGeneration\":" +
           std::to_string(o.generation) +
           ",\"replicas\":" + std::to_string(o.replicas) +
           ",\"updatedReplicas\":" + std::to_string(o.replicas) +
           ",\"readyReplicas\":" + std::to_string(o.replicas) +
           ",\"availableReplicas\":" + std::to_string(o.replicas) +
           ",\"conditions\":[{\"type\":\"Available\",\"status\":\"True\","
           "\"lastUpdateTime\":" +
           q(created) + ",\"lastTransitionTime\":" + q(created) +
           ",\"reason\":\"MinimumReplicasAvailable\",\"message\":\"Deployment "
           "has minimum availability.\"},"
           "{\"type\":\"Progressing\",\"status\":\"True\",\"lastUpdateTime\":" +
           q(created) + ",\"lastTransitionTime\":" + q(created) +
           ",\"reason\":\"NewReplicaSetAvailable\",\"message\":" +
           q("ReplicaSet \"" + o.name + "-" + o.template_hash +
             "\" has successfully progressed.") +
           "}]}";
      break;
    }
    case Kind::Pod: {
      std::string labels = "{\"app\":" + q(o.app) +
                           ",\"pod-template-hash\":" + q(o.template_hash) + "}";
      std::string owner;
      if (!o.owner_uid.empty()) {
        owner =
            "[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":" +
            q(o.owner_name) + ",\"uid\":" + q(o.owner_uid) +
            ",\"controller\":true,\"blockOwnerDeletion\":true}]";
      }
      s += metadata_json(o, labels, owner);
      s += ",\"spec\":{\"containers\":" + container_json(o) +
           ",\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
           "\"dnsPolicy\":\"ClusterFirst\""
           ",\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\","
           "\"nodeName\":" +
           q(o.node) +
           ",\"securityContext\":{},\"schedulerName\":\"default-scheduler\","
           "\"priority\":0"
           ",\"tolerations\":[{\"key\":\"node.kubernetes.io/"
           "not-ready\",\"operator\":\"Exists\","
           "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}]}";
      bool ready = !o.deleting;
      s += ",\"status\":{\"phase\":\"Running\",\"conditions\":["
           "{\"type\":\"Initialized\",\"status\":\"True\",\"lastProbeTime\":"
           "null,\"lastTransitionTime\":" +
           q(created) +
           "},"
           "{\"type\":\"Ready\",\"status\":" +
           q(ready ? "True" : "False") +
           ",\"lastProbeTime\":null,\"lastTransitionTime\":" + q(created) +
           "},"
           "{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":"
           "null,\"lastTransitionTime\":" +
           q(created) +
           "}]"
           ",\"hostIP\":\"10.0.0." +
           std::to_string(1 + std::hash<std::string>{}(o.node) % 200) +
           "\""
           ",\"podIP\":" +
           q(o.pod_ip) + ",\"podIPs\":[{\"ip\":" + q(o.pod_ip) + "}]" +
           ",\"startTime\":" + q(created) +
           ",\"containerStatuses\":[{\"name\":" + q(o.app) +
           ",\"state\":{\"running\":{\"startedAt\":" + q(created) +
           "}},\"ready\":" + (ready ? "true" : "false") +
           ",\"restartCount\":" + std::to_string(o.restarts) + ",\"image\":" +
           q(kImages[std::hash<std::string>{}(o.app) % kImages.size()] + ":1." +
             std::to_string(o.image_tag)) +
           ",\"imageID\":\"docker-pullable://example@sha256:" +
           std::string(64, 'a' + char(o.image_tag % 6)) +
           "\""
           ",\"started\":true}],\"qosClass\":\"Burstable\"}";
      break;
    }
    case Kind::ConfigMap: {
      std::string labels = "{\"app\":" + q(o.app) + "}";
      s += metadata_json(o, labels, "");
      s += ",\"data\":{\"app.properties\":" +
           q("app.name=" + o.app + "\nrevision=" + std::to_string(o.data_rev) +
             "\nlog.level=info\n") +
           ",\"feature-flags.yaml\":" +
           q("flags:\n  fastPath: true\n  rev: " + std::to_string(o.data_rev) +
             "\n");
      if (!o.big_data.empty()) s += ",\"blob.b64\":" + q(o.big_data);
      s += "}";
      break;
    }
  }
  s += "}";
  return s;
}

std::string event_json(const Obj& o, const KubeEvent& e, TimePoint now) {
  const TypeInfo& t = type_info(o.kind);
  std::string at = q(k8s_time(now));
  return "{\"kind\":\"Event\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":" +
         q(e.name) + ",\"namespace\":" + q(o.ns) + ",\"uid\":" + q(e.uid) +
         ",\"resourceVersion\":" + q(std::to_string(e.rv)) +
         ",\"creationTimestamp\":" + at +
         "},\"involvedObject\":{\"kind\":" + q(t.kind) +
         ",\"namespace\":" + q(o.ns) + ",\"name\":" + q(o.name) +
         ",\"uid\":" + q(o.uid) + ",\"apiVersion\":" + q(t.api_version) +
         ",\"resourceVersion\":" + q(std::to_string(o.rv)) +
         "},\"reason\":" + q(e.reason) + ",\"message\":" + q(e.message) +
         ",\"source\":{\"component\":\"kubelet\",\"host\":\"node-1\"},"
         "\"firstTimestamp\":" +
         at + ",\"lastTimestamp\":" + at +
         ",\"count\":1,\"type\":\"Normal\",\"eventTime\":null"
         ",\"reportingComponent\":\"kubelet\",\"reportingInstance\":\"node-"
         "1\"}";
}

}  // namespace demo
