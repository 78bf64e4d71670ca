// An Event is one Kubernetes watch event, built once by the replication thread
// and shared read-only by every watcher that sends it.
//
// Memory: the event log holds every retained event, so an event is compact:
// a 72-byte header with its own reference count, followed by its name, and
// its wire line. An event of the log lives in a WireArena (header and name
// in one region of a segment, the line framed as an HTTP chunk in another),
// so that sessions can sendfile(2) its line; any other event (and every event
// when there is no arena) is one heap allocation, header, name and line. What
// else a watch filters on is in FilterFields, shared by the events of an
// object and of its siblings (see MemoryBytes and BENCHMARKS.md).
//
// Thread safety: an Event is immutable once shared; it crosses threads only
// as EventPtr (boost::intrusive_ptr<const Event>), whose count is atomic.
#ifndef WALWATCH_CDC_MODEL_EVENT_H_
#define WALWATCH_CDC_MODEL_EVENT_H_

#include <atomic>
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cdc/model/filter_fields.h"

namespace walwatch {

class WireArena;

enum class EventType : uint8_t { kAdded, kModified, kDeleted };

const char* EventTypeName(EventType type);

class Event;
// A shared, read-only event: what the log, the sessions and their writes
// hold.
using EventPtr = boost::intrusive_ptr<const Event>;
// A new event, still being filled in by its maker.
using MutableEventPtr = boost::intrusive_ptr<Event>;

class Event {
  struct Private {};

 public:
  // The strings an event is made with; Allocate and Make copy them, into
  // FilterFields of its own (the builder shares them: see the overload).
  struct Strings {
    std::string_view group, version, resource, kind, cluster, ns, name;
    const LabelList* labels = nullptr;       // null: none
    // Only for a MODIFIED whose labels changed (see prev_wire()).
    const LabelList* prev_labels = nullptr;  // null: none
  };

  // An event holding `strings`, with room for wire_size bytes of wire line
  // and prev_wire_size bytes of previous state, which the caller writes
  // through mutable_wire() and mutable_prev_wire() before sharing it (the
  // builder serializes straight into the event: no copy). The previous
  // state exists only if prev_labels or prev_wire_size is given. Throws
  // std::length_error if the strings together exceed 4 GiB.
  static MutableEventPtr Allocate(const Strings& strings, size_t wire_size,
                                  size_t prev_wire_size = 0);
  // As above, with shared filter fields: `fields` (null: all empty) and, for
  // a MODIFIED whose labels changed, `prev_fields` (those of the previous
  // state, null otherwise). With an `arena`, the event goes there if it
  // fits (its previous state stays on the heap: it is never sent as is).
  static MutableEventPtr Allocate(FilterFieldsPtr fields,
                                  FilterFieldsPtr prev_fields,
                                  std::string_view name, size_t wire_size,
                                  size_t prev_wire_size = 0,
                                  WireArena* arena = nullptr);
  // Allocate, with `wire` and `prev_wire` copied in.
  static MutableEventPtr Make(const Strings& strings, std::string_view wire,
                              std::string_view prev_wire = {});

  explicit Event(Private) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // The resourceVersion this event carries (see watchserver/PROTOCOL.md): its
  // transaction's commit LSN c(T) for the transaction's last event, c(T)-1
  // for the others (an initial state's events: the state's RV).
  uint64_t rv = 0;
  // Commit LSN of the transaction this event belongs to. Resuming from an RV r
  // delivers every transaction whose commit_lsn is greater than r, whole.
  uint64_t commit_lsn = 0;
  // The source's id of the transaction (Transaction::full_xid: on
  // PostgreSQL the xid widened to 64 bits, as pg_current_snapshot() prints
  // it); 0 for initial-state events.
  uint64_t xid = 0;
  // Commit time, microseconds since the Unix epoch (from the source).
  int64_t commit_time_us = 0;
  // last_in_txn and type are declared at the end, beside the count.

  // The complete line sent to watchers: {"type":..,"object":..}\n
  std::string_view wire() const { return std::string_view(wire_, wire_size_); }
  char* mutable_wire() { return const_cast<char*>(wire_); }

  // For an event in a WireArena: its line framed as one HTTP chunk
  // ("<hex size>\r\n" line "\r\n"), in memory and in the arena's file.
  struct Frame {
    const char* data;
    size_t size;
    int fd;
    uint64_t offset;  // of data in fd
  };
  // False for an event on the heap.
  bool GetFrame(Frame* out) const;

  // What watchers filter on, extracted once when the event is built.
  std::string_view group() const { return fields_ ? fields_->group() : ""; }
  std::string_view version() const {
    return fields_ ? fields_->version() : "";
  }
  std::string_view resource() const {
    return fields_ ? fields_->resource() : "";
  }
  std::string_view kind() const { return fields_ ? fields_->kind() : ""; }
  std::string_view cluster() const {
    return fields_ ? fields_->cluster() : "";
  }
  std::string_view ns() const { return fields_ ? fields_->ns() : ""; }
  std::string_view name() const {
    return std::string_view(data(), name_size_);
  }
  LabelsView labels() const {
    return fields_ ? fields_->labels() : LabelsView();
  }
  // All of the above but the name (null: all empty).
  const FilterFields* fields() const { return fields_.get(); }

  // Only for a MODIFIED whose labels changed (empty otherwise): the object's
  // labels before the change, and its previous state as a DELETED line,
  // {"type":"DELETED","object":<old object>}\n, with this event's rv spliced
  // into the old object's metadata.resourceVersion. As the apiserver's
  // cacher does, a watch whose label selector the object leaves sends
  // prev_wire, one it enters sends this event as ADDED, one it stays in
  // sends it as is (fields other than labels cannot change in a MODIFIED:
  // a change of name, namespace or cluster is DELETED then ADDED).
  std::string_view prev_wire() const {
    return previous_ ? previous_->wire() : std::string_view();
  }
  char* mutable_prev_wire() { return previous_->mutable_wire(); }
  LabelsView prev_labels() const {
    return previous_ ? previous_->labels() : LabelsView();
  }
  const FilterFields* prev_fields() const {
    return previous_ ? previous_->fields() : nullptr;
  }

  // Bytes this event holds in memory (with its previous state, if any), with
  // the allocator's and the event log's per-event overhead, used to bound
  // the event log. Not its FilterFields, which the log charges once however
  // many events share them.
  size_t MemoryBytes() const;

 private:
  // The bytes of the header, the name and the line: with glibc's chunk
  // overhead on the heap, with the chunk framing in an arena.
  size_t AllocatedBytes() const;
  // The name follows the header (then the line, on the heap).
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

  FilterFieldsPtr fields_;
  // The previous state (prev_wire and prev_labels) in an event of its own,
  // so that the header of every other event stays 64 bytes. Only its wire
  // and fields are set.
  boost::intrusive_ptr<Event> previous_;
  const char* wire_ = nullptr;  // after the name, or in the arena
  uint32_t wire_size_ = 0;
  uint32_t name_size_ = 0;
  mutable std::atomic<uint32_t> refs_{0};
  bool in_arena_ = false;

 public:
  // Declared last so that they share the header's last 8 bytes with the
  // count: 72 bytes in all.
  bool last_in_txn = false;
  EventType type = EventType::kAdded;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_MODEL_EVENT_H_
