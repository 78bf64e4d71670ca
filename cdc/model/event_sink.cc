#include "cdc/model/event_sink.h"

#include <algorithm>
#include <utility>

#include "cdc/base/text.h"

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

bool EventSink::ParseSnapshot(std::string_view text, Snapshot* out) {
  // "xmin:xmax:xip,xip,..." with decimal 64-bit xids; xip may be empty.
  auto number = [](std::string_view s, uint64_t* v) {
    return s.size() <= 20 && ParseUnsigned(s, v);
  };
  size_t a = text.find(':');
  if (a == std::string_view::npos) return false;
  size_t b = text.find(':', a + 1);
  if (b == std::string_view::npos) return false;
  Snapshot s;
  if (!number(text.substr(0, a), &s.xmin) ||
      !number(text.substr(a + 1, b - a - 1), &s.xmax) || s.xmin > s.xmax) {
    return false;
  }
  std::string_view rest = text.substr(b + 1);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    uint64_t x;
    if (!number(rest.substr(0, comma), &x) || x < s.xmin || x >= s.xmax) {
      return false;
    }
    s.xip.push_back(x);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return false;
    if (s.xip.size() > 1000000) return false;
  }
  std::sort(s.xip.begin(), s.xip.end());
  *out = std::move(s);
  return true;
}

bool EventSink::Snapshot::Visible(uint64_t xid) const {
  if (xid < xmin) return true;
  if (xid >= xmax) return false;
  return !std::binary_search(xip.begin(), xip.end(), xid);
}

}  // namespace walwatch
