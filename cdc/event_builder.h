// EventBuilder turns a committed Transaction into watch Events, serializing
// each event's wire bytes exactly once.
//
// Rows to events (DESIGN.md "Rows to events"):
//   INSERT -> ADDED(new). DELETE -> DELETED(old row, the last full object).
//   UPDATE: the new row is `columns` with every absent column (an unchanged
//   TOAST value) taken from `identity` (the old row, REPLICA IDENTITY FULL).
//     uid or any identity key (group, version, resource, cluster, namespace,
//     name) changed -> DELETED(old) then ADDED(new);
//     nothing mapped changed (object, kind and keys equal) -> no event;
//     otherwise -> MODIFIED(new).
// resourceVersions: the last event of a transaction carries the commit LSN;
// the others carry the previous transaction's commit LSN. Each object's
// metadata.resourceVersion is set to its event's RV by splicing the bytes,
// and the member cluster's value moves to the annotation
// kMemberResourceVersionAnnotation.
//
// Thread safety: one builder per thread; it owns a reused simdjson parser.
#ifndef WALWATCH_CDC_EVENT_BUILDER_H_
#define WALWATCH_CDC_EVENT_BUILDER_H_

#include <memory>
#include <string>
#include <vector>

#include "cdc/transaction_assembler.h"
#include "watchserver/event.h"
#include "watchserver/wire_arena.h"

namespace walwatch {

inline constexpr const char kMemberResourceVersionAnnotation[] =
    "walwatch.clusterpedia.io/member-resource-version";

class EventBuilder {
 public:
  // With an `arena` (null: the heap), events are built in it (WireArena:
  // the watch sessions then sendfile their lines). It must outlive the
  // builder; the events may outlive both.
  explicit EventBuilder(WireArena* arena = nullptr);
  ~EventBuilder();
  EventBuilder(const EventBuilder&) = delete;
  EventBuilder& operator=(const EventBuilder&) = delete;

  struct Result {
    std::vector<EventPtr> events;
    // One line per row that could not become an event (for example an object
    // that is not a JSON object). Such rows are logged and counted by the
    // caller, never silently dropped.
    std::vector<std::string> errors;
    size_t unchanged_updates = 0;  // updates that produced no event
  };

  // prev_rv: the commit LSN of the transaction before `txn` in the stream.
  void Build(const Transaction& txn, uint64_t prev_rv, Result* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_EVENT_BUILDER_H_
