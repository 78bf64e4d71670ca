#include "watchserver/event.h"

namespace walwatch {

const char* EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "UNKNOWN";
}

size_t Event::MemoryBytes() const {
  // The wire bytes dominate; the rest is counted so that many tiny events
  // cannot escape the bound.
  size_t n = sizeof(Event) + wire.capacity() + group.capacity() +
             version.capacity() + resource.capacity() + kind.capacity() + cluster.capacity() +
             ns.capacity() + name.capacity();
  for (const auto& [k, v] : labels) {
    n += sizeof(std::pair<std::string, std::string>) + k.capacity() +
         v.capacity();
  }
  n += prev_wire.capacity();
  for (const auto& [k, v] : prev_labels) {
    n += sizeof(std::pair<std::string, std::string>) + k.capacity() +
         v.capacity();
  }
  // shared_ptr control block (make_shared) and the deque slot.
  return n + 32;
}

}  // namespace walwatch
