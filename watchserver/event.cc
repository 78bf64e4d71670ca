#include "watchserver/event.h"

#include <limits>
#include <new>
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

MutableEventPtr Event::Allocate(const Strings& s, size_t wire_size,
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
  // The header and its strings in one block. The strings are not
  // initialized: every byte is written below or by the caller.
  MutableEventPtr e(new (::operator new(sizeof(Event) + total))
                        Event(Private{}));
  std::memcpy(e->end_, ends, sizeof ends);
  char* at = e->data() + wire_size + prev_wire_size;
  for (std::string_view t : text) {
    if (!t.empty()) std::memcpy(at, t.data(), t.size());
    at += t.size();
  }
  at = LabelsView::Pack(labels, at);
  LabelsView::Pack(prev_labels, at);
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

size_t Event::MemoryBytes() const {
  // Beyond the header and its strings: glibc's chunk header and rounding
  // (16 bytes on average), and the log's slots for the event, its EventPtr
  // (8) and byte offset (8). Counting them keeps many tiny events from
  // escaping the bound.
  constexpr size_t kOverhead = 16 + 8 + 8;
  return sizeof(Event) + end_[kPartCount - 1] + kOverhead;
}

}  // namespace walwatch
