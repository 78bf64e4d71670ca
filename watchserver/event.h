// An Event is one Kubernetes watch event, built once by the replication thread
// and shared read-only by every watcher that sends it.
//
// Memory: the event log holds every retained event, so an event is compact.
// It is one allocation: this header, with its own reference count, followed
// by its strings (the wire line, the filter fields and labels), exactly their
// size and addressed by 32-bit ends (see MemoryBytes and BENCHMARKS.md).
//
// Thread safety: an Event is immutable once shared; it crosses threads only
// as EventPtr (boost::intrusive_ptr<const Event>), whose count is atomic.
#ifndef WALWATCH_WATCHSERVER_EVENT_H_
#define WALWATCH_WATCHSERVER_EVENT_H_

#include <atomic>
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walwatch {

enum class EventType : uint8_t { kAdded, kModified, kDeleted };

const char* EventTypeName(EventType type);

// An object's labels as a list of pairs. Should a key repeat, its last value
// counts (as when Go or jsonb decode a JSON object).
using LabelList = std::vector<std::pair<std::string, std::string>>;

// Labels packed in an Event: each key and value is a 32-bit length followed
// by its bytes. Iterating yields pairs of views into the event.
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

class Event;
// A shared, read-only event: what the log, the sessions and their writes
// hold.
using EventPtr = boost::intrusive_ptr<const Event>;
// A new event, still being filled in by its maker.
using MutableEventPtr = boost::intrusive_ptr<Event>;

class Event {
  struct Private {};

 public:
  // The strings an event is made with; Allocate and Make copy them.
  struct Strings {
    std::string_view group, version, resource, kind, cluster, ns, name;
    const LabelList* labels = nullptr;       // null: none
    // Only for a MODIFIED whose labels changed (see prev_wire()).
    const LabelList* prev_labels = nullptr;  // null: none
  };

  // An event holding `strings`, with room for wire_size bytes of wire line
  // and prev_wire_size bytes of previous state, which the caller writes
  // through mutable_wire() and mutable_prev_wire() before sharing it (the
  // builder serializes straight into the event: no copy). Throws
  // std::length_error if the strings together exceed 4 GiB.
  static MutableEventPtr Allocate(const Strings& strings, size_t wire_size,
                                  size_t prev_wire_size = 0);
  // Allocate, with `wire` and `prev_wire` copied in.
  static MutableEventPtr Make(const Strings& strings, std::string_view wire,
                              std::string_view prev_wire = {});

  explicit Event(Private) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // The resourceVersion this event carries (see schema/PROTOCOL.md): the
  // commit LSN of the previous transaction for all but the last event of a
  // transaction, and the transaction's own commit LSN for the last one.
  uint64_t rv = 0;
  // Commit LSN of the transaction this event belongs to. Resuming from an RV r
  // delivers every transaction whose commit_lsn is greater than r, whole.
  uint64_t commit_lsn = 0;
  // The transaction's id, widened to 64 bits (PostgreSQL's FullTransactionId,
  // as pg_current_snapshot() prints it); 0 for initial-state events.
  uint64_t xid = 0;
  // Commit time, microseconds since the Unix epoch (from wal2json).
  int64_t commit_time_us = 0;
  bool last_in_txn = false;
  EventType type = EventType::kAdded;

  // The complete line sent to watchers: {"type":..,"object":..}\n
  std::string_view wire() const { return Field(kWire); }
  char* mutable_wire() { return data() + Begin(kWire); }

  // What watchers filter on, extracted once when the event is built.
  std::string_view group() const { return Field(kGroup); }
  std::string_view version() const { return Field(kVersion); }
  std::string_view resource() const { return Field(kResource); }
  std::string_view kind() const { return Field(kKind); }
  std::string_view cluster() const { return Field(kCluster); }
  std::string_view ns() const { return Field(kNamespace); }
  std::string_view name() const { return Field(kName); }
  LabelsView labels() const { return Labels(kLabels); }

  // Only for a MODIFIED whose labels changed (empty otherwise): the object's
  // labels before the change, and its previous state as a DELETED line,
  // {"type":"DELETED","object":<old object>}\n, with this event's rv spliced
  // into the old object's metadata.resourceVersion. As the apiserver's
  // cacher does, a watch whose label selector the object leaves sends
  // prev_wire, one it enters sends this event as ADDED, one it stays in
  // sends it as is (fields other than labels cannot change in a MODIFIED:
  // a change of name, namespace or cluster is DELETED then ADDED).
  std::string_view prev_wire() const { return Field(kPrevWire); }
  char* mutable_prev_wire() { return data() + Begin(kPrevWire); }
  LabelsView prev_labels() const { return Labels(kPrevLabels); }

  // Bytes this event holds in memory, with the allocator's and the event
  // log's per-event overhead, used to bound the event log.
  size_t MemoryBytes() const;

 private:
  // The parts of data_, in order; end_[i] is where part i ends.
  enum Part : uint8_t {
    kWire,
    kPrevWire,
    kGroup,
    kVersion,
    kResource,
    kKind,
    kCluster,
    kNamespace,
    kName,
    kLabels,
    kPrevLabels,
    kPartCount
  };
  uint32_t Begin(Part p) const { return p == 0 ? 0 : end_[p - 1]; }
  std::string_view Field(Part p) const {
    return std::string_view(data() + Begin(p), end_[p] - Begin(p));
  }
  LabelsView Labels(Part p) const {
    return LabelsView(data() + Begin(p), data() + end_[p]);
  }
  // The strings follow the header in the same allocation.
  char* data() { return reinterpret_cast<char*>(this) + sizeof(Event); }
  const char* data() const {
    return reinterpret_cast<const char*>(this) + sizeof(Event);
  }

  friend void intrusive_ptr_add_ref(const Event* e) {
    e->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  friend void intrusive_ptr_release(const Event* e) {
    if (e->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) Free(e);
  }
  static void Free(const Event* e);

  uint32_t end_[kPartCount] = {};
  mutable std::atomic<uint32_t> refs_{0};
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_EVENT_H_
