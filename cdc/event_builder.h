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
// One event per object per transaction: an object's changes fold into their
// net change (ADDED+MODIFIED -> ADDED; MODIFIED+MODIFIED -> MODIFIED;
// ADDED+DELETED -> none; MODIFIED+DELETED -> DELETED of the state before the
// transaction), so no two versions of it share the transaction's RVs.
// resourceVersions: the last event of a transaction carries its commit LSN
// c(T); the others carry c(T) - 1 (PROTOCOL.md "resourceVersion"). Each object's
// metadata.resourceVersion is set to its event's RV by splicing the bytes,
// and the member cluster's value moves to the annotation
// kMemberResourceVersionAnnotation.
//
// Thread safety: one builder per thread; it owns a reused simdjson parser.
#ifndef WALWATCH_CDC_EVENT_BUILDER_H_
#define WALWATCH_CDC_EVENT_BUILDER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cdc/model/event.h"
#include "cdc/model/wire_arena.h"
#include "cdc/transaction.h"

namespace walwatch {

inline constexpr const char kMemberResourceVersionAnnotation[] =
    "walwatch.clusterpedia.io/member-resource-version";

class EventBuilder {
 public:
  // With an `arena` (null: the heap), events are built in it (WireArena:
  // the watch sessions then sendfile their lines). It must outlive the
  // builder; the events may outlive both. `format_position` writes a
  // change's position in error messages (null: in decimal).
  explicit EventBuilder(WireArena* arena = nullptr,
                        PositionFormatter format_position = nullptr);
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

  // A committed transaction of the stream.
  void Build(const Transaction& txn, Result* out);
  // Rows read from a snapshot (INSERTs, distinct objects): every event
  // carries `rv`, and nothing is folded.
  void BuildAt(const Transaction& rows, uint64_t rv, Result* out);

 private:
  void BuildEvents(const Transaction& txn, std::optional<uint64_t> fixed_rv,
                   Result* out);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_EVENT_BUILDER_H_
