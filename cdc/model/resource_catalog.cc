#include "cdc/model/resource_catalog.h"

#include "cdc/model/builtin_kinds.h"

namespace walwatch {

const char* KindSourceName(KindSource source) {
  switch (source) {
    case KindSource::kSeen: return "seen";
    case KindSource::kDeclared: return "declared";
    case KindSource::kBuiltin: return "builtin";
    case KindSource::kOtherVersion: return "other-version";
    case KindSource::kGuessed: return "guessed";
  }
  return "unknown";
}

void ResourceCatalog::Add(const GroupVersionResource& gvr,
                          const std::string& kind) {
  MutexLock lock(&mu_);
  auto it = seen_.find(gvr);
  if (it == seen_.end()) {
    seen_.emplace(gvr, kind);
  } else if (it->second.empty() && !kind.empty()) {
    it->second = kind;
  }
  if (!kind.empty()) {
    seen_any_version_.emplace(GroupResource{gvr.group, gvr.resource}, kind);
  }
}

void ResourceCatalog::Declare(const GroupVersionResource& gvr,
                              const std::string& kind) {
  if (kind.empty()) return;
  MutexLock lock(&mu_);
  declared_[gvr] = kind;
  declared_any_version_[GroupResource{gvr.group, gvr.resource}] = kind;
}

ResolvedKind ResourceCatalog::Resolve(const GroupVersionResource& gvr) const {
  {
    MutexLock lock(&mu_);
    if (auto it = seen_.find(gvr); it != seen_.end() && !it->second.empty()) {
      return {it->second, KindSource::kSeen};
    }
    if (auto it = declared_.find(gvr); it != declared_.end()) {
      return {it->second, KindSource::kDeclared};
    }
    if (std::optional<std::string_view> builtin =
            BuiltinKind(gvr.group, gvr.resource)) {
      return {std::string(*builtin), KindSource::kBuiltin};
    }
    const GroupResource gr{gvr.group, gvr.resource};
    if (auto it = seen_any_version_.find(gr); it != seen_any_version_.end()) {
      return {it->second, KindSource::kOtherVersion};
    }
    if (auto it = declared_any_version_.find(gr);
        it != declared_any_version_.end()) {
      return {it->second, KindSource::kOtherVersion};
    }
  }
  return {GuessKind(gvr.resource), KindSource::kGuessed};
}

std::vector<std::pair<GroupVersionResource, std::string>>
ResourceCatalog::List() const {
  MutexLock lock(&mu_);
  return {seen_.begin(), seen_.end()};
}

}  // namespace walwatch
