// What the database's own log says happened to each resource, so that a
// test can check a 410 Expired against the database itself, not against
// what its clients happened to receive (an event can be evicted before any
// client reads it). WalWitness reads PostgreSQL's WAL, BinlogWitness
// MariaDB's binlog.
//
// Every committed transaction that gives a watch event of a resource in a
// cluster notes its commit RV under that (resource, cluster). Which rows give
// events is walwatch's rule, restated from the table: an INSERT; a DELETE;
// an UPDATE that changed one of the mapped columns (group, version,
// resource, kind, cluster, namespace, name, uid, object). An event recording
// (only `events` changed) gives none.
//
// A 410 Expired "too old resource version: R (F)" for a watch of resource X
// (in cluster C, or in any cluster) is right when an event of that selection
// that the watch would still receive is gone: a transaction T that changed
// X (in C) with R < c(T) <= F (watchserver/PROTOCOL.md).
//
// Thread safety: Witnessed and transactions may be called from any thread;
// CatchUp from one thread at a time.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_EVENT_WITNESS_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_EVENT_WITNESS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace walwatch::itest {

class EventWitness {
 public:
  virtual ~EventWitness() = default;

  // Reads until the witness has seen everything committed before the call,
  // then stops reading. Throws std::runtime_error if reading failed (then
  // or earlier).
  virtual void CatchUp() = 0;

  // Whether a transaction that gave an event of `resource` (its plural
  // name) in `cluster` (or in any cluster, if empty) committed at c with
  // r < c <= f.
  virtual bool Witnessed(const std::string& resource,
                         const std::string& cluster, uint64_t r,
                         uint64_t f) const = 0;

  // Transactions read that gave at least one event.
  virtual size_t transactions() const = 0;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_EVENT_WITNESS_H_
