// FilterFields are what a watch selects an event by, apart from its name: the
// object's group, version, resource, kind, cluster, namespace and labels.
//
// Memory: every update of an object, and every replica of a workload, has the
// same FilterFields, so events share them instead of each holding a copy. A
// FilterFieldsInterner (one per building thread) hands out one shared
// instance per distinct value. At ~1 KB objects this is what keeps the event
// log within 1.1x its wire bytes (BENCHMARKS.md).
//
// Thread safety: FilterFields are immutable once made and cross threads only
// as FilterFieldsPtr, whose count is atomic. The interner is single-threaded.
#ifndef WALWATCH_CDC_MODEL_FILTER_FIELDS_H_
#define WALWATCH_CDC_MODEL_FILTER_FIELDS_H_

#include <atomic>
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace walwatch {

// An object's labels as a list of pairs. Should a key repeat, its last value
// counts (as when Go or jsonb decode a JSON object).
using LabelList = std::vector<std::pair<std::string, std::string>>;

// Labels packed: each key and value is a 32-bit length followed by its bytes.
// Iterating yields pairs of views into the packed bytes.
class LabelsView {
 public:
  using value_type = std::pair<std::string_view, std::string_view>;

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = LabelsView::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = value_type;

    explicit iterator(const char* at) : at_(at) {}
    value_type operator*() const {
      const char* p = at_;
      std::string_view k = Next(&p);
      return {k, Next(&p)};
    }
    iterator& operator++() {
      Next(&at_);
      Next(&at_);
      return *this;
    }
    bool operator==(const iterator& o) const { return at_ == o.at_; }
    bool operator!=(const iterator& o) const { return at_ != o.at_; }

   private:
    static std::string_view Next(const char** p) {
      uint32_t n;
      std::memcpy(&n, *p, sizeof n);
      std::string_view s(*p + sizeof n, n);
      *p += sizeof n + n;
      return s;
    }
    const char* at_;
  };

  LabelsView() = default;
  LabelsView(const char* begin, const char* end) : begin_(begin), end_(end) {}

  iterator begin() const { return iterator(begin_); }
  iterator end() const { return iterator(end_); }
  bool empty() const { return begin_ == end_; }
  size_t size() const;
  // The pairs, copied (for tests and diagnostics).
  LabelList ToList() const;

  // Bytes `labels` take packed.
  static size_t PackedSize(const LabelList& labels);
  // Writes `labels` packed at `out`; returns the end.
  static char* Pack(const LabelList& labels, char* out);

 private:
  const char* begin_ = nullptr;
  const char* end_ = nullptr;
};

class FilterFields;
using FilterFieldsPtr = boost::intrusive_ptr<const FilterFields>;
class EventLog;

class FilterFields {
  struct Private {};

 public:
  // The values FilterFields are made of; Make and Intern copy them.
  struct Values {
    std::string_view group, version, resource, kind, cluster, ns;
    const LabelList* labels = nullptr;  // null: none
  };

  // A new instance holding `values`, shared with nobody. Throws
  // std::length_error if they exceed 4 GiB together.
  static FilterFieldsPtr Make(const Values& values);

  explicit FilterFields(Private) {}
  FilterFields(const FilterFields&) = delete;
  FilterFields& operator=(const FilterFields&) = delete;

  std::string_view group() const { return Field(kGroup); }
  std::string_view version() const { return Field(kVersion); }
  std::string_view resource() const { return Field(kResource); }
  std::string_view kind() const { return Field(kKind); }
  std::string_view cluster() const { return Field(kCluster); }
  std::string_view ns() const { return Field(kNamespace); }
  LabelsView labels() const {
    return LabelsView(data() + Begin(kLabels), data() + end_[kLabels]);
  }

  // Bytes this instance holds, with glibc's chunk overhead and its slot in
  // an interner (which the event log charges once while any retained event
  // refers to it).
  size_t MemoryBytes() const;

 private:
  friend class FilterFieldsInterner;
  friend class EventLog;  // for log_refs_

  // The parts of data(), in order; end_[i] is where part i ends.
  enum Part : uint8_t {
    kGroup,
    kVersion,
    kResource,
    kKind,
    kCluster,
    kNamespace,
    kLabels,
    kPartCount
  };
  // The packed form Make and the interner compare and copy: the parts'
  // ends, then their bytes.
  struct Packed {
    uint32_t ends[kPartCount];
    std::string_view bytes;
  };
  // Packs `values` into `*buffer` (reused). Throws std::length_error as Make.
  static Packed Pack(const Values& values, std::string* buffer);
  static FilterFieldsPtr FromPacked(const Packed& packed);
  bool Equals(const Packed& p) const;
  std::string_view bytes() const {
    return std::string_view(data(), end_[kPartCount - 1]);
  }

  uint32_t Begin(Part p) const { return p == 0 ? 0 : end_[p - 1]; }
  std::string_view Field(Part p) const {
    return std::string_view(data() + Begin(p), end_[p] - Begin(p));
  }
  // The bytes follow the header in the same allocation.
  const char* data() const {
    return reinterpret_cast<const char*>(this) + sizeof(FilterFields);
  }

  friend void intrusive_ptr_add_ref(const FilterFields* f) {
    f->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  friend void intrusive_ptr_release(const FilterFields* f) {
    if (f->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) Free(f);
  }
  static void Free(const FilterFields* f);

  uint32_t end_[kPartCount] = {};
  mutable std::atomic<uint32_t> refs_{0};
  // How many events of the event log refer to this instance; guarded by
  // the log's mutex (an instance is in at most one log).
  mutable uint32_t log_refs_ = 0;
};

// Hands out one shared FilterFields per distinct value. Instances no event
// refers to any more (not charged to the event log) are dropped by a sweep,
// which runs when the table has grown by a quarter since the last one (it
// then holds at most 1.25 times the live ones, or kMinSweepAt), and after as
// many Intern calls as it has entries: when the live ones become fewer while
// lookups keep finding their values (a burst of distinct objects evicted,
// then updates of known ones), the dead are dropped within one table's worth
// of calls rather than held until the table grows again. A sweep costs a
// look at each entry: about five per insertion, and one per call.
//
// Thread safety: one interner per thread. The FilterFieldsPtr it returns may
// be used and dropped on any thread: a sweep frees only instances whose count
// shows the table's reference alone, which no other thread can then raise.
class FilterFieldsInterner {
 public:
  FilterFieldsInterner() = default;
  FilterFieldsInterner(const FilterFieldsInterner&) = delete;
  FilterFieldsInterner& operator=(const FilterFieldsInterner&) = delete;

  // The shared instance equal to `values`. Throws std::length_error as Make.
  FilterFieldsPtr Intern(const FilterFields::Values& values);

  size_t size() const { return table_.size(); }

 private:
  void Sweep();

  static constexpr size_t kMinSweepAt = 1024;
  // By the bytes of the parts (parts split differently may share them).
  std::unordered_multimap<std::string_view, FilterFieldsPtr> table_;
  size_t sweep_at_ = kMinSweepAt;
  size_t calls_since_sweep_ = 0;
  std::string buffer_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_MODEL_FILTER_FIELDS_H_
