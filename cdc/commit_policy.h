// CommitPolicy decides what one committed transaction does to the EventSink,
// whatever database it came from:
//   * TRUNCATE of the table (or DDL, from a source that reports it so):
//     a barrier; every watcher relists.
//   * larger than the source could hold (overflowed): a loss of what it
//     touched (the resources and clusters of its rows), so that only their
//     watches relist; a barrier if some row lacked those columns.
//   * a record that could not be decoded (broken), or a row that cannot
//     become an event: a barrier; the other events alone would silently
//     diverge every watcher from the table. Such rows are logged and counted.
//   * no event (another table, or updates no watcher sees): the current RV
//     moves to its commit.
//   * otherwise its events (EventBuilder), appended whole, and their kinds
//     added to the resource catalog. Events the sink cannot hold become a
//     loss there (kTooLarge); one below the current RV, a bug upstream,
//     becomes a barrier rather than pass silently.
//
// Threads: the replication thread only. The sink, catalog and stats must
// outlive the policy; the events it builds may outlive all of them.
#ifndef WALWATCH_CDC_COMMIT_POLICY_H_
#define WALWATCH_CDC_COMMIT_POLICY_H_

#include <memory>

#include "cdc/event_builder.h"
#include "cdc/model/wire_arena.h"
#include "cdc/transaction.h"

namespace walwatch {

class EventSink;
class ResourceCatalog;
struct ReplicationStats;

class CommitPolicy {
 public:
  // With `events_in_arena`, events are built in a WireArena (a memfd: watch
  // sessions then sendfile them), if the system has one. `format_position`
  // writes positions in log lines and messages.
  CommitPolicy(ResourceCatalog* catalog, ReplicationStats* stats,
               bool events_in_arena, PositionFormatter format_position);
  ~CommitPolicy();
  CommitPolicy(const CommitPolicy&) = delete;
  CommitPolicy& operator=(const CommitPolicy&) = delete;

  // Applies `txn`, the next transaction in commit order (above the sink's
  // current RV), to `log`. May move from it.
  void Apply(Transaction* txn, EventSink* log);

 private:
  // Writes a barrier at txn's commit for the reason `why` (logged).
  void Barrier(const Transaction& txn, EventSink* log, const char* why);

  ResourceCatalog* const catalog_;
  ReplicationStats* const stats_;
  const PositionFormatter format_position_;
  // Declared before the builder, which allocates from it.
  const std::unique_ptr<WireArena> arena_;
  EventBuilder builder_;
  EventBuilder::Result built_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_COMMIT_POLICY_H_
