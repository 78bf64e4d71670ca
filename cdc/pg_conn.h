// Small RAII wrappers around libpq, kept out of widely included headers.
// A PGconn is owned by one thread; nothing else touches it.
#ifndef WALWATCH_CDC_PG_CONN_H_
#define WALWATCH_CDC_PG_CONN_H_

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

namespace walwatch {

struct PGconnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PGresultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgConn = std::unique_ptr<PGconn, PGconnDeleter>;
using PgResult = std::unique_ptr<PGresult, PGresultDeleter>;

// Opens a connection from the user's conninfo (a key=value string or URI;
// empty means the PG* environment variables, as in psql), adding walwatch's
// session settings. `replication` adds replication=database.
PgConn ConnectPg(const std::string& conninfo, bool replication,
                 int connect_timeout_seconds);

// The first line of the connection's or result's error message.
std::string PgError(PGconn* conn);
std::string PgResultError(PGresult* res);

// Runs a parameterized query. Returns nullptr and sets *error on failure.
PgResult PgQuery(PGconn* conn, const std::string& sql,
                 const std::vector<std::string>& params, std::string* error);

}  // namespace walwatch

#endif  // WALWATCH_CDC_PG_CONN_H_
