// The objects demo_writer writes: Kubernetes-like Deployments, Pods (owned
// by the Deployment's ReplicaSet) and ConfigMaps, as Clusterpedia's collector
// stores them in `resources.object`, and the Events it records beside them.
// Everything here is the same whichever database is written to
// (demo_store.h holds the SQL dialects).
//
// Thread safety: plain values and pure functions; a Random belongs to one
// thread.
#ifndef WALWATCH_TESTS_TOOLS_DEMO_OBJECTS_H_
#define WALWATCH_TESTS_TOOLS_DEMO_OBJECTS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace demo {

using TimePoint = std::chrono::system_clock::time_point;

// `s` as a JSON string, quotes included.
std::string q(const std::string& s);
// RFC 3339 in UTC, whole seconds, as Kubernetes writes timestamps.
std::string k8s_time(TimePoint tp);

enum class Kind { Deployment, Pod, ConfigMap };

struct TypeInfo {
  const char* group;
  const char* version;
  const char* resource;
  const char* kind;
  const char* api_version;
};
const TypeInfo& type_info(Kind k);

struct Obj {
  Kind kind = Kind::Pod;
  std::string cluster, ns, name, uid;
  std::string owner_uid;      // column owner_uid: the controller's uid, or ""
  std::string owner_name;     // pods: the ReplicaSet's name
  std::string app;            // label app
  std::string template_hash;  // deployments: pod-template-hash; pods: theirs
  std::string rs_uid;         // deployments: uid of their current ReplicaSet
  TimePoint created;
  std::optional<TimePoint> deleting;
  uint64_t rv = 0;
  int generation = 1;
  int replicas = 1;
  int restarts = 0;
  int image_tag = 1;
  std::string node;
  std::string pod_ip;
  std::string big_data;  // configmaps: incompressible payload, may be empty
  int data_rev = 1;

  std::string key() const {
    const TypeInfo& t = type_info(kind);
    return cluster + "|" + t.group + "|" + t.resource + "|" + ns + "|" + name;
  }
};

struct Cluster {
  std::string name;
  uint64_t rv = 0;  // the member cluster's own resourceVersion counter
  bool present = true;
};

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  uint64_t u64() { return rng_(); }
  int range(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  bool chance(double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(range(0, int(v.size()) - 1))];
  }
  std::string alnum(int n,
                    const char* alphabet = "bcdfghjklmnpqrstvwxz2456789");
  std::string uuid();

 private:
  std::mt19937_64 rng_;
};

extern const std::vector<std::string> kNamespaces;
extern const std::vector<std::string> kApps;

// The object as the collector stores it (JSON text).
std::string object_json(const Obj& o);

// A core/v1 Event about `o`, as the collector records it in `events`.
struct KubeEvent {
  std::string name, uid, reason, message;
  uint64_t rv = 0;
};
std::string event_json(const Obj& o, const KubeEvent& e, TimePoint now);

}  // namespace demo

#endif  // WALWATCH_TESTS_TOOLS_DEMO_OBJECTS_H_
