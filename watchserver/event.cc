#include "watchserver/event.h"

#include <limits>
#include <stdexcept>

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

size_t LabelsView::size() const {
  size_t n = 0;
  for (auto it = begin(); it != end(); ++it) ++n;
  return n;
}

LabelList LabelsView::ToList() const {
  LabelList out;
  for (const auto& [k, v] : *this) out.emplace_back(k, v);
  return out;
}

size_t LabelsView::PackedSize(const LabelList& labels) {
  size_t n = 0;
  for (const auto& [k, v] : labels) n += 2 * sizeof(uint32_t) + k.size() + v.size();
  return n;
}

char* LabelsView::Pack(const LabelList& labels, char* out) {
  for (const auto& [k, v] : labels) {
    for (const std::string* s : {&k, &v}) {
      uint32_t n = static_cast<uint32_t>(s->size());
      std::memcpy(out, &n, sizeof n);
      out += sizeof n;
      std::memcpy(out, s->data(), n);
      out += n;
    }
  }
  return out;
}

Event::Event(Private, std::unique_ptr<char[]> data) : data_(std::move(data)) {}

std::shared_ptr<Event> Event::Allocate(const Strings& s, size_t wire_size,
                                       size_t prev_wire_size) {
  static const LabelList kNone;
  const LabelList& labels = s.labels ? *s.labels : kNone;
  const LabelList& prev_labels = s.prev_labels ? *s.prev_labels : kNone;
  const std::string_view text[] = {s.group,   s.version, s.resource, s.kind,
                                   s.cluster, s.ns,      s.name};
  size_t sizes[kPartCount] = {wire_size, prev_wire_size};
  for (size_t i = 0; i < std::size(text); ++i) sizes[kGroup + i] = text[i].size();
  sizes[kLabels] = LabelsView::PackedSize(labels);
  sizes[kPrevLabels] = LabelsView::PackedSize(prev_labels);
  uint32_t ends[kPartCount];
  size_t total = 0;
  for (size_t i = 0; i < kPartCount; ++i) {
    total += sizes[i];
    if (total > std::numeric_limits<uint32_t>::max()) {
      throw std::length_error("an event larger than 4 GiB");
    }
    ends[i] = static_cast<uint32_t>(total);
  }
  // Not value-initialized: every byte is written below or by the caller.
  std::unique_ptr<char[]> data(new char[total]);
  char* at = data.get() + wire_size + prev_wire_size;
  for (std::string_view t : text) {
    if (!t.empty()) std::memcpy(at, t.data(), t.size());
    at += t.size();
  }
  at = LabelsView::Pack(labels, at);
  LabelsView::Pack(prev_labels, at);
  auto e = std::make_shared<Event>(Private{}, std::move(data));
  std::memcpy(e->end_, ends, sizeof ends);
  return e;
}

std::shared_ptr<Event> Event::Make(const Strings& strings, std::string_view wire,
                                   std::string_view prev_wire) {
  std::shared_ptr<Event> e = Allocate(strings, wire.size(), prev_wire.size());
  if (!wire.empty()) std::memcpy(e->mutable_wire(), wire.data(), wire.size());
  if (!prev_wire.empty()) {
    std::memcpy(e->mutable_prev_wire(), prev_wire.data(), prev_wire.size());
  }
  return e;
}

size_t Event::MemoryBytes() const {
  // Beyond the header and the buffer: the shared_ptr control block that
  // make_shared puts before this header (16 bytes), glibc's header and
  // rounding of the two allocations (16 bytes each, on average), and the
  // log's slots for the event, its EventPtr (16) and byte offset (8).
  // Counting them keeps many tiny events from escaping the bound.
  constexpr size_t kOverhead = 16 + 2 * 16 + 16 + 8;
  return sizeof(Event) + end_[kPartCount - 1] + kOverhead;
}

}  // namespace walwatch
