// WalWitness: what the WAL says happened to each resource, so that a test
// can check a 410 Expired against the database itself, not against what its
// clients happened to receive (an event can be evicted before any client
// reads it).
//
// It reads a wal2json slot of its own (CommitObserver, the SQL interface) on
// a thread of its own while the test runs. Every committed transaction that
// gives a watch event of a resource in a cluster notes its commit LSN under
// that (resource, cluster). Which rows give events is walwatch's rule
// (cdc/event_builder.h), restated here from the table, not from walwatch's
// code: an INSERT; a DELETE; an UPDATE that changed one of the mapped
// columns (group, version, resource, kind, cluster, namespace, name, uid,
// object), an omitted (TOASTed) column counting as unchanged. An event
// recording (only `events` changed) gives none. A transaction that inserts
// and deletes one object is counted although walwatch folds it into
// nothing; the writers that use this witness never do that.
//
// A 410 Expired "too old resource version: R (F)" for a watch of resource X
// (in cluster C, or in any cluster) is right when an event of that selection
// that the watch would still receive is gone: a transaction T that changed
// X (in C) with R < c(T) <= F, F being the commit of the selection's newest
// evicted event (PROTOCOL.md).
//
// The EventWitness of PostgreSQL (event_witness.h).
//
// Thread safety: Witnessed, transactions and error may be called from any
// thread; CatchUp from one thread at a time.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_WAL_WITNESS_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_WAL_WITNESS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/integration/support/event_witness.h"
#include "tests/integration/support/pg.h"

namespace walwatch::itest {

class WalWitness : public EventWitness {
 public:
  // Creates the logical slot `slot` (wal2json) in the database of
  // `conninfo` and starts reading it. Only transactions that commit after
  // this returns are certain to be seen. Throws PgError if the slot cannot
  // be made; the caller drops it (PgDatabaseTest drops the database's slots).
  WalWitness(const std::string& conninfo, const std::string& slot);
  ~WalWitness() override;
  WalWitness(const WalWitness&) = delete;
  WalWitness& operator=(const WalWitness&) = delete;

  // Stops the reading thread and reads, on the caller's thread, until the
  // slot has decoded everything committed before the call. Throws PgError
  // if reading failed (then or earlier on the thread).
  void CatchUp() override;

  // Whether a transaction that gave an event of `resource` (its plural
  // name) in `cluster` (or in any cluster, if empty) committed at c with
  // r < c <= f.
  bool Witnessed(const std::string& resource, const std::string& cluster,
                 uint64_t r, uint64_t f) const override;

  // Transactions read that gave at least one event.
  size_t transactions() const override;

 private:
  void Loop();
  // One wal2json record (CommitObserver's handler).
  void Record(const std::string& record);

  PgConnection conn_;
  CommitObserver observer_;
  mutable std::mutex mu_;
  // "resource|cluster" -> commit LSNs of the transactions that gave an
  // event of it.
  std::map<std::string, std::set<uint64_t>> commits_;  // GUARDED_BY(mu_)
  size_t transactions_ = 0;                            // GUARDED_BY(mu_)
  std::string error_;                                  // GUARDED_BY(mu_)
  // The open transaction's (resource|cluster)s; reading thread only.
  std::set<std::string> open_;
  bool open_gave_events_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_WAL_WITNESS_H_
