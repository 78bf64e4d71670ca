// ResourceCatalog knows the kind of each resource walwatch serves, for the
// bookmarks of its watches (watchserver/PROTOCOL.md, "Kinds"). Every well-formed
// resource path is served, whether or not the table holds a row of it; the
// catalog only says which kind the stream's bookmarks carry.
//
// A kind comes from, in this order:
//   1. seen: the table's kind column for that (group, version, resource),
//      at startup or in the stream since (Add);
//   2. declared: the operator's --kinds file (Declare);
//   3. built in: Kubernetes' own resources (builtin_kinds.h);
//   4. another version of the same group and resource, seen or declared
//      (a kind is the same in every version of a group's resource);
//   5. guessed from the resource's name (GuessKind).
// A seen kind never changes once known (the first non-empty one wins).
//
// Ownership: main owns the one catalog. The --kinds file and startup
// (LoadCatalog) fill it, then the replication thread adds what it sees, and
// the watch sessions read it.
// Thread safety: all methods may be called from any thread.
#ifndef WALWATCH_CDC_MODEL_RESOURCE_CATALOG_H_
#define WALWATCH_CDC_MODEL_RESOURCE_CATALOG_H_

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cdc/base/mutex.h"

namespace walwatch {

struct GroupVersionResource {
  std::string group, version, resource;
  bool operator<(const GroupVersionResource& o) const {
    return std::tie(group, version, resource) <
           std::tie(o.group, o.version, o.resource);
  }
  bool operator==(const GroupVersionResource& o) const {
    return std::tie(group, version, resource) ==
           std::tie(o.group, o.version, o.resource);
  }
};

enum class KindSource {
  kSeen,
  kDeclared,
  kBuiltin,
  kOtherVersion,
  kGuessed,
};
// "seen", "declared", "builtin", "other-version", "guessed" (for logs).
const char* KindSourceName(KindSource source);

struct ResolvedKind {
  std::string kind;  // never empty for a non-empty resource
  KindSource source = KindSource::kGuessed;
};

class ResourceCatalog {
 public:
  // A resource seen in the table with the kind of its row ("" if the row's
  // kind is empty: then it counts as not seen for its kind).
  void Add(const GroupVersionResource& gvr, const std::string& kind);
  // A kind the operator declared. A later declaration of the same resource
  // replaces an earlier one (LoadKindsFile refuses duplicates before this).
  void Declare(const GroupVersionResource& gvr, const std::string& kind);

  // The kind bookmarks of a watch of `gvr` carry, and where it came from.
  ResolvedKind Resolve(const GroupVersionResource& gvr) const;

  // The resources seen in the table, with their kinds.
  std::vector<std::pair<GroupVersionResource, std::string>> List() const;

 private:
  using GroupResource = std::pair<std::string, std::string>;

  mutable Mutex mu_;
  std::map<GroupVersionResource, std::string> seen_ GUARDED_BY(mu_);
  std::map<GroupVersionResource, std::string> declared_ GUARDED_BY(mu_);
  // The first non-empty kind of any version, seen or declared.
  std::map<GroupResource, std::string> seen_any_version_ GUARDED_BY(mu_);
  std::map<GroupResource, std::string>
      declared_any_version_ GUARDED_BY(mu_);
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_MODEL_RESOURCE_CATALOG_H_
