#include "watchserver/event.h"

#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>

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

MutableEventPtr Event::Allocate(const Strings& s, size_t wire_size,
                                size_t prev_wire_size) {
  FilterFields::Values values{s.group,   s.version, s.resource,
                              s.kind,    s.cluster, s.ns,
                              s.labels};
  const bool none = s.group.empty() && s.version.empty() &&
                    s.resource.empty() && s.kind.empty() &&
                    s.cluster.empty() && s.ns.empty() &&
                    (!s.labels || s.labels->empty());
  FilterFieldsPtr fields = none ? nullptr : FilterFields::Make(values);
  FilterFieldsPtr prev_fields;
  if (s.prev_labels) {
    values.labels = s.prev_labels;
    prev_fields = FilterFields::Make(values);
  }
  return Allocate(std::move(fields), std::move(prev_fields), s.name,
                  wire_size, prev_wire_size);
}

MutableEventPtr Event::Allocate(FilterFieldsPtr fields,
                                FilterFieldsPtr prev_fields,
                                std::string_view name, size_t wire_size,
                                size_t prev_wire_size) {
  const size_t sizes[kPartCount] = {wire_size, name.size()};
  uint32_t ends[kPartCount];
  size_t total = 0;
  for (size_t i = 0; i < kPartCount; ++i) {
    total += sizes[i];
    if (total > std::numeric_limits<uint32_t>::max()) {
      throw std::length_error("an event larger than 4 GiB");
    }
    ends[i] = static_cast<uint32_t>(total);
  }
  // The header and its strings in one block. The wire lines are not
  // initialized: the caller writes every byte.
  MutableEventPtr e(new (::operator new(sizeof(Event) + total))
                        Event(Private{}));
  std::memcpy(e->end_, ends, sizeof ends);
  e->fields_ = std::move(fields);
  if (prev_fields || prev_wire_size > 0) {
    e->previous_ = Allocate(std::move(prev_fields), nullptr, {}, prev_wire_size);
  }
  if (!name.empty()) {
    std::memcpy(e->data() + e->Begin(kName), name.data(), name.size());
  }
  return e;
}

void Event::Free(const Event* e) {
  e->~Event();
  ::operator delete(const_cast<Event*>(e));
}

MutableEventPtr Event::Make(const Strings& strings, std::string_view wire,
                            std::string_view prev_wire) {
  MutableEventPtr e = Allocate(strings, wire.size(), prev_wire.size());
  if (!wire.empty()) std::memcpy(e->mutable_wire(), wire.data(), wire.size());
  if (!prev_wire.empty()) {
    std::memcpy(e->mutable_prev_wire(), prev_wire.data(), prev_wire.size());
  }
  return e;
}

// Every retained event pays its header: at ~1 KB objects, 8 bytes more
// would break the event log's 1.1x budget (BENCHMARKS.md).
static_assert(sizeof(Event) <= 64, "the event header outgrew its budget");

size_t Event::AllocatedBytes() const {
  // glibc's chunk header and rounding: 16 bytes on average.
  return sizeof(Event) + end_[kPartCount - 1] + 16;
}

size_t Event::MemoryBytes() const {
  // And the log's slots for the event: its EventPtr (8) and byte offset (8).
  // Counting them keeps many tiny events from escaping the bound.
  constexpr size_t kLogSlots = 8 + 8;
  return AllocatedBytes() + kLogSlots +
         (previous_ ? previous_->AllocatedBytes() : 0);
}

}  // namespace walwatch
