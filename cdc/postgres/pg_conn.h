// Small RAII wrappers around libpq, kept out of widely included headers.
// A PGconn is owned by one thread; nothing else touches it.
#ifndef WALWATCH_CDC_POSTGRES_PG_CONN_H_
#define WALWATCH_CDC_POSTGRES_PG_CONN_H_

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cdc/base/stop_signal.h"

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

// Whether the server of `conninfo` answers at all, without logging in
// (PQpingParams): PQPING_OK even when walwatch's own login would fail;
// PQPING_REJECT while it starts, shuts down or recovers; PQPING_NO_RESPONSE
// when nothing answers. Tells a server that is down, which may come back,
// from a login that is wrong, which will not.
PGPing PingPg(const std::string& conninfo, int connect_timeout_seconds);

// Whether a connection kept idle since its last request is still usable:
// libpq says CONNECTION_OK until a statement fails, but a server that ended
// the session (a restart, pg_terminate_backend) left its message and the
// end of the stream on the socket (cdc/base/idle_socket.h).
bool PgIdleConnAlive(PGconn* conn);

// The first line of the connection's or result's error message.
std::string PgError(PGconn* conn);
std::string PgResultError(PGresult* res);

// Runs a parameterized query (extended protocol). Returns nullptr and sets
// *error on failure. With `stop`, the wait for the answer ends as soon as
// `stop` is raised (then *error is "stopped" and the connection must be
// dropped: its answer is still on the way); without it, the wait is bounded
// only by the connection's TCP settings (see ConnectPg).
// With a non-zero `timeout`, a wait for the answer longer than that also
// fails ("no answer from the server within N ms"), and the connection must
// be dropped likewise.
PgResult PgQuery(PGconn* conn, const std::string& sql,
                 const std::vector<std::string>& params, std::string* error,
                 const StopSignal* stop = nullptr,
                 std::chrono::milliseconds timeout = {});

// Sends `sql` with the simple query protocol (the only one a replication
// connection speaks) and returns its last result, whatever its status, or
// the COPY result that starts a COPY; nullptr with *error if the connection
// failed or `stop` was raised.
PgResult PgExecSimple(PGconn* conn, const std::string& sql,
                      std::string* error, const StopSignal* stop = nullptr,
                      std::chrono::milliseconds timeout = {});

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_PG_CONN_H_
