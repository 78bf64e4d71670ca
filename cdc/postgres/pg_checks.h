// The startup checks walwatch runs on an ordinary (non-replication)
// connection before it streams. Each failure is one line that names the fix.
// Thread safety: called by the replication thread, on its own connection.
#ifndef WALWATCH_CDC_POSTGRES_PG_CHECKS_H_
#define WALWATCH_CDC_POSTGRES_PG_CHECKS_H_

#include <libpq-fe.h>

#include <cstdint>
#include <string>

#include "cdc/postgres/slot_spec.h"
#include "schema/table_mapping.h"

namespace walwatch {

class StopSignal;
class ResourceCatalog;

// Adds the fix to a PostgreSQL error message walwatch knows the cause of
// (wrong password, wal2json missing or not allowed, wal_level, invalidated
// slot, missing privileges). Unknown messages are returned unchanged.
std::string ExplainPgError(const std::string& pg_error);

// Whether a failed connection's message is about TLS certificates or keys:
// walwatch's own (sslcert, sslkey, sslrootcert) or the server's refusal of
// its client certificate. libpq reports these without having heard the
// server answer a ping, as if it were down; waiting will not fix them.
bool IsClientTlsError(const std::string& pg_error);

// wal_level, the table, its REPLICA IDENTITY and the mapped columns.
std::string CheckDatabase(PGconn* conn, const TableMapping& mapping,
                          const StopSignal* stop = nullptr);

struct SlotState {
  bool exists = false;
  std::string plugin;
  std::string database;
  uint64_t confirmed_flush = 0;
  std::string wal_status;  // reserved, extended, unreserved, lost
  bool failover = false;   // PostgreSQL 17 and later
  bool synced = false;     // a standby's copy of a primary's failover slot
};
// Reads `slot`; an error if it exists with another plugin than spec's or in
// another database. With `stop`, a wait for the server ends once it is
// raised (creating a slot waits for every transaction running at the time,
// which an idle session in a transaction can hold open indefinitely).
std::string ReadSlot(PGconn* conn, const std::string& slot,
                     const SlotSpec& spec, SlotState* out,
                     const StopSignal* stop = nullptr);
std::string CreateSlot(PGconn* conn, const std::string& slot,
                       const SlotSpec& spec, const StopSignal* stop = nullptr);
std::string DropSlot(PGconn* conn, const std::string& slot,
                     const StopSignal* stop = nullptr);

// pgoutput: checks that `publication` publishes the mapped table's inserts,
// updates, deletes and truncates, and creates it (FOR TABLE the mapped
// table) when it is missing and the server is a primary. On a standby, or
// without the privilege, a missing publication is an error naming
// schema/publication.sql.
std::string EnsurePublication(PGconn* conn, const std::string& publication,
                              const TableMapping& mapping,
                              const StopSignal* stop = nullptr);

// Adds every (group, version, resource) of the table to `catalog`.
std::string LoadCatalog(PGconn* conn, const TableMapping& mapping,
                        ResourceCatalog* catalog,
                        const StopSignal* stop = nullptr);

// Quotes an SQL identifier ("group" -> "\"group\""), or a string literal
// ("it's" -> "'it''s'").
std::string QuoteIdent(const std::string& name);
std::string QuoteLiteral(const std::string& text);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_PG_CHECKS_H_
