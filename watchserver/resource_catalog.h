// ResourceCatalog is the set of resources walwatch can serve: every
// (group, version, resource) found in the table at startup or seen in the
// stream since, with its kind. A watch on a resource outside it is a 404.
// Thread safety: all methods may be called from any thread.
#ifndef WALWATCH_WATCHSERVER_RESOURCE_CATALOG_H_
#define WALWATCH_WATCHSERVER_RESOURCE_CATALOG_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace walwatch {

struct GroupVersionResource {
  std::string group, version, resource;
  bool operator<(const GroupVersionResource& o) const {
    return std::tie(group, version, resource) <
           std::tie(o.group, o.version, o.resource);
  }
};

class ResourceCatalog {
 public:
  void Add(const GroupVersionResource& gvr, const std::string& kind);
  // The kind of a known resource; nullopt if unknown.
  std::optional<std::string> Kind(const GroupVersionResource& gvr) const;
  std::vector<std::pair<GroupVersionResource, std::string>> List() const;

 private:
  mutable std::mutex mu_;
  std::map<GroupVersionResource, std::string> kinds_;  // GUARDED_BY(mu_)
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_RESOURCE_CATALOG_H_
