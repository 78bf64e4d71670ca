#include "cdc/model/filter_fields.h"

#include <algorithm>
#include <limits>
#include <new>
#include <stdexcept>

namespace walwatch {

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

FilterFields::Packed FilterFields::Pack(const Values& v, std::string* buffer) {
  static const LabelList kNone;
  const LabelList& labels = v.labels ? *v.labels : kNone;
  const std::string_view text[] = {v.group,   v.version, v.resource,
                                   v.kind,    v.cluster, v.ns};
  static_assert(std::size(text) == kLabels);
  Packed p;
  size_t total = 0;
  for (size_t i = 0; i < kPartCount; ++i) {
    total += i == kLabels ? LabelsView::PackedSize(labels) : text[i].size();
    if (total > std::numeric_limits<uint32_t>::max()) {
      throw std::length_error("filter fields larger than 4 GiB");
    }
    p.ends[i] = static_cast<uint32_t>(total);
  }
  buffer->resize(total);
  char* at = buffer->data();
  for (std::string_view t : text) {
    if (!t.empty()) std::memcpy(at, t.data(), t.size());
    at += t.size();
  }
  LabelsView::Pack(labels, at);
  p.bytes = *buffer;
  return p;
}

FilterFieldsPtr FilterFields::FromPacked(const Packed& p) {
  // The header and its bytes in one block.
  auto* f = new (::operator new(sizeof(FilterFields) + p.bytes.size()))
      FilterFields(Private{});
  std::memcpy(f->end_, p.ends, sizeof p.ends);
  if (!p.bytes.empty()) {
    std::memcpy(const_cast<char*>(f->data()), p.bytes.data(), p.bytes.size());
  }
  return FilterFieldsPtr(f);
}

FilterFieldsPtr FilterFields::Make(const Values& values) {
  std::string buffer;
  return FromPacked(Pack(values, &buffer));
}

bool FilterFields::Equals(const Packed& p) const {
  return std::equal(std::begin(end_), std::end(end_), std::begin(p.ends)) &&
         bytes() == p.bytes;
}

void FilterFields::Free(const FilterFields* f) {
  f->~FilterFields();
  ::operator delete(const_cast<FilterFields*>(f));
}

size_t FilterFields::MemoryBytes() const {
  // glibc's chunk header and rounding (16 on average), and an interner's
  // hash-table node (40 bytes, in a 48-byte chunk) and bucket (8).
  constexpr size_t kOverhead = 16 + 48 + 8;
  return sizeof(FilterFields) + end_[kPartCount - 1] + kOverhead;
}

FilterFieldsPtr FilterFieldsInterner::Intern(const FilterFields::Values& values) {
  if (++calls_since_sweep_ >= std::max(kMinSweepAt, table_.size())) Sweep();
  FilterFields::Packed packed = FilterFields::Pack(values, &buffer_);
  auto [it, end] = table_.equal_range(packed.bytes);
  for (; it != end; ++it) {
    if (it->second->Equals(packed)) return it->second;
  }
  if (table_.size() >= sweep_at_) Sweep();
  FilterFieldsPtr f = FilterFields::FromPacked(packed);
  // The key views the instance's own bytes, which live as long as it.
  table_.emplace(f->bytes(), f);
  return f;
}

void FilterFieldsInterner::Sweep() {
  // An instance whose only reference is the table's is referred to by no
  // event; no other thread holds it, so nobody can take a new reference.
  for (auto it = table_.begin(); it != table_.end();) {
    if (it->second->refs_.load(std::memory_order_acquire) == 1) {
      it = table_.erase(it);
    } else {
      ++it;
    }
  }
  sweep_at_ = std::max(kMinSweepAt, table_.size() + table_.size() / 4);
  calls_since_sweep_ = 0;
}

}  // namespace walwatch
