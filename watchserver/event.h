// An Event is one Kubernetes watch event, built once by the replication thread
// and shared read-only by every watcher that sends it.
//
// Thread safety: an Event is immutable after construction; it crosses threads
// only as EventPtr (shared_ptr<const Event>).
#ifndef WALWATCH_WATCHSERVER_EVENT_H_
#define WALWATCH_WATCHSERVER_EVENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace walwatch {

enum class EventType : uint8_t { kAdded, kModified, kDeleted };

const char* EventTypeName(EventType type);

struct Event {
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
  bool last_in_txn = false;
  EventType type = EventType::kAdded;
  // Commit time, microseconds since the Unix epoch (from wal2json).
  int64_t commit_time_us = 0;

  // What watchers filter on, extracted once when the event is built.
  std::string group, version, resource, kind, cluster, ns, name;
  std::vector<std::pair<std::string, std::string>> labels;

  // The complete line sent to watchers: {"type":..,"object":..}\n
  std::string wire;

  // Only for a MODIFIED whose labels changed (empty otherwise): the object's
  // labels before the change, and its previous state as a DELETED line,
  // {"type":"DELETED","object":<old object>}\n, with this event's rv spliced
  // into the old object's metadata.resourceVersion. As the apiserver's
  // cacher does, a watch whose label selector the object leaves sends
  // prev_wire, one it enters sends this event as ADDED, one it stays in
  // sends it as is (fields other than labels cannot change in a MODIFIED:
  // a change of name, namespace or cluster is DELETED then ADDED).
  std::vector<std::pair<std::string, std::string>> prev_labels;
  std::string prev_wire;

  // Bytes this event holds in memory, used to bound the event log.
  size_t MemoryBytes() const;
};

using EventPtr = std::shared_ptr<const Event>;

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_EVENT_H_
