#include "cdc/commit_policy.h"

#include <string>
#include <utility>
#include <vector>

#include "cdc/base/logging.h"
#include "cdc/model/event_sink.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/replication_stats.h"

namespace walwatch {

namespace {

// The arena the log's events are built in, or null (heap) if asked so or
// the system has no memfd.
std::unique_ptr<WireArena> MakeWireArena(bool events_in_arena) {
  if (!events_in_arena) return nullptr;
  std::string error;
  std::unique_ptr<WireArena> arena = WireArena::Create(&error);
  if (!arena) {
    LogWarn("events stay on the heap and are copied to each watcher",
            {{"error", error}});
  }
  return arena;
}

}  // namespace

CommitPolicy::CommitPolicy(ResourceCatalog* catalog, ReplicationStats* stats,
                           bool events_in_arena,
                           PositionFormatter format_position)
    : catalog_(catalog),
      stats_(stats),
      format_position_(format_position),
      arena_(MakeWireArena(events_in_arena)),
      builder_(arena_.get(), format_position) {}

CommitPolicy::~CommitPolicy() = default;

void CommitPolicy::Barrier(const Transaction& txn, EventSink* log,
                           const char* why) {
  LogWarn(why, {{"xid", static_cast<uint64_t>(txn.xid)},
                {"commit_lsn", format_position_(txn.commit_lsn)}});
  log->AppendBarrier(txn.commit_lsn, txn.full_xid);
  ++stats_->barriers;
}

void CommitPolicy::Apply(Transaction* txn_in, EventSink* log) {
  Transaction& txn = *txn_in;
  ++stats_->transactions;
  stats_->last_commit_time_us = txn.commit_time_us;
  if (txn.truncated) {
    return Barrier(txn, log,
                   "the table was truncated; every watcher must relist");
  }
  if (txn.overflowed && !txn.touched_unknown) {
    // Only the watches of what it changed must relist (a cluster's removal
    // ends the watches of that cluster and of every cluster, not others').
    std::vector<EventSink::Selection> touched;
    touched.reserve(txn.touched.size());
    for (const auto& [group, version, resource, cluster] : txn.touched) {
      touched.push_back(
          {EventSink::ResourceKey(group, version, resource), cluster});
    }
    LogWarn("a transaction is larger than --max-log-bytes allows; the "
            "watches of the resources it changed must relist",
            {{"xid", static_cast<uint64_t>(txn.xid)},
             {"commit_lsn", format_position_(txn.commit_lsn)},
             {"resources_and_clusters",
              static_cast<uint64_t>(touched.size())}});
    log->AppendLoss(txn.commit_lsn, txn.full_xid, txn.commit_time_us, touched);
    ++stats_->barriers;
    return;
  }
  if (txn.overflowed) {
    return Barrier(
        txn, log,
        "a transaction is larger than --max-log-bytes allows, and some of "
        "its rows lack the resource columns; every watcher must relist");
  }
  if (txn.broken) {
    return Barrier(txn, log,
                   "a transaction has a record that could not be decoded; "
                   "every watcher must relist");
  }
  if (txn.changes.empty()) {
    log->AdvanceCurrentRv(txn.commit_lsn);
    return;
  }
  built_.events.clear();
  built_.errors.clear();
  built_.unchanged_updates = 0;
  builder_.Build(txn, &built_);
  stats_->unchanged_updates += built_.unchanged_updates;
  for (const std::string& err : built_.errors) {
    ++stats_->row_errors;
    LogError("a row could not become a watch event", {{"error", err}});
  }
  if (!built_.errors.empty()) {
    // Its event is missing: the other events alone would silently diverge
    // every watcher from the table.
    built_.events.clear();
    return Barrier(txn, log,
                   "a transaction has a row that could not become a watch "
                   "event; every watcher must relist");
  }
  if (built_.events.empty()) {
    log->AdvanceCurrentRv(txn.commit_lsn);
    return;
  }
  for (const EventPtr& e : built_.events) {
    switch (e->type) {
      case EventType::kAdded: ++stats_->events_added; break;
      case EventType::kModified: ++stats_->events_modified; break;
      case EventType::kDeleted: ++stats_->events_deleted; break;
    }
    catalog_->Add({std::string(e->group()), std::string(e->version()),
                   std::string(e->resource())},
                  std::string(e->kind()));
  }
  switch (log->AppendTransaction(txn.commit_lsn, std::move(built_.events))) {
    case EventSink::AppendResult::kAppended:
      break;
    case EventSink::AppendResult::kTooLarge:
      ++stats_->barriers;
      LogWarn("a transaction's events are larger than --max-log-bytes; "
              "the watches of the resources it changed must relist",
              {{"xid", static_cast<uint64_t>(txn.xid)},
               {"commit_lsn", format_position_(txn.commit_lsn)}});
      break;
    case EventSink::AppendResult::kOutOfOrder: {
      // A bug: re-sent transactions are dropped before they get here.
      // Watchers that passed its commit LSN never saw it: every RV up to
      // the current one becomes too old, and they relist.
      const uint64_t current = log->current_rv();
      ++stats_->barriers;
      LogError("a transaction arrived below the current resourceVersion; "
               "every watcher must relist",
               {{"xid", static_cast<uint64_t>(txn.xid)},
                {"commit_lsn", format_position_(txn.commit_lsn)},
                {"current_rv", format_position_(current)}});
      log->AppendBarrier(current, txn.full_xid);
      break;
    }
  }
}

}  // namespace walwatch
