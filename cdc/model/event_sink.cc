#include "cdc/model/event_sink.h"

namespace walwatch {

std::string EventSink::ResourceKey(std::string_view group,
                                   std::string_view version,
                                   std::string_view resource) {
  std::string key;
  key.reserve(group.size() + version.size() + resource.size() + 2);
  key.append(group).append(1, '/').append(version).append(1, '/').append(
      resource);
  return key;
}

}  // namespace walwatch
