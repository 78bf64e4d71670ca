// SlotSpec: how walwatch's replication slot is made, for the startup checks
// (pg_checks.h) and the source that creates it again (postgres_source.h).
// Plain value.
#ifndef WALWATCH_CDC_POSTGRES_SLOT_SPEC_H_
#define WALWATCH_CDC_POSTGRES_SLOT_SPEC_H_

#include <string>

namespace walwatch {

// The slot's output plugin, and whether the server syncs it to standbys (a
// failover slot, PostgreSQL 17 and later).
struct SlotSpec {
  std::string plugin = "wal2json";
  bool failover = false;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_SLOT_SPEC_H_
