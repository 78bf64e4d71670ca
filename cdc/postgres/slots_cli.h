// `walwatch slots ...`: find and drop the replication slots that scaled-down
// or deleted pods left behind. Each walwatch replica streams from its own
// slot, and an abandoned slot keeps WAL on the server until the disk is full
// (unless max_slot_wal_keep_size is set).
//
//   walwatch slots list [--conninfo C] [--prefix P]
//   walwatch slots drop --inactive-for DURATION [--prefix P] [--dry-run]
//                       [--conninfo C]
//
// "Inactive for" comes from pg_replication_slots.inactive_since on
// PostgreSQL 17 and later. Before 17 PostgreSQL keeps no such time, so it is
// estimated, conservatively, from the modification time of the WAL segment
// that holds the slot's confirmed_flush_lsn (pg_ls_waldir(): the role needs
// pg_monitor). On an idle database that segment may be older than the
// slot's inactivity, so before 17 choose a threshold well above any pod
// restart (hours) and look with --dry-run first. Only inactive wal2json slots
// whose name starts with the prefix are ever dropped, and PostgreSQL refuses
// to drop a slot that became active meanwhile.
#ifndef WALWATCH_CDC_POSTGRES_SLOTS_CLI_H_
#define WALWATCH_CDC_POSTGRES_SLOTS_CLI_H_

#include <iosfwd>

namespace walwatch {

// argv[0] is "slots". Returns the process exit code.
int RunSlotsCli(int argc, const char* const* argv, std::ostream& out,
                std::ostream& err);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_SLOTS_CLI_H_
