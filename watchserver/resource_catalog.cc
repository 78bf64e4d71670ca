#include "watchserver/resource_catalog.h"

namespace walwatch {

void ResourceCatalog::Add(const GroupVersionResource& gvr,
                          const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kinds_.find(gvr);
  if (it == kinds_.end()) {
    kinds_.emplace(gvr, kind);
  } else if (it->second.empty() && !kind.empty()) {
    it->second = kind;
  }
}

std::optional<std::string> ResourceCatalog::Kind(
    const GroupVersionResource& gvr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kinds_.find(gvr);
  if (it == kinds_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<GroupVersionResource, std::string>>
ResourceCatalog::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {kinds_.begin(), kinds_.end()};
}

}  // namespace walwatch
