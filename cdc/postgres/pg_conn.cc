#include "cdc/postgres/pg_conn.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cdc/base/clock.h"
#include "cdc/base/idle_socket.h"

namespace walwatch {

namespace {

// The user's own `options` (from the conninfo, else PGOPTIONS), which
// walwatch's must extend rather than replace.
std::string UserOptions(const std::string& conninfo) {
  std::string found;
  if (!conninfo.empty()) {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
    if (err) PQfreemem(err);
    if (opts) {
      for (PQconninfoOption* o = opts; o->keyword; ++o) {
        if (std::string(o->keyword) == "options" && o->val) found = o->val;
      }
      PQconninfoFree(opts);
    }
  }
  if (found.empty()) {
    const char* env = std::getenv("PGOPTIONS");
    if (env) found = env;
  }
  return found;
}

}  // namespace

PgConn ConnectPg(const std::string& conninfo, bool replication,
                 int connect_timeout_seconds) {
  // expand_dbname=1: the first "dbname" is the user's conninfo, expanded;
  // the keywords after it override it. wal2json prints timestamps in the
  // session's DateStyle and TimeZone, so fix both.
  std::string timeout = std::to_string(connect_timeout_seconds);
  std::string options = UserOptions(conninfo);
  if (!options.empty()) options += " ";
  options += "-c DateStyle=ISO -c TimeZone=UTC -c extra_float_digits=3";
  // TCP keepalives and a user timeout first, so that the user's conninfo
  // (expanded from dbname, after them) can override them: a silently
  // partitioned connection then fails within about half a minute instead of
  // blocking a query (or shutdown) for the kernel's two hours.
  std::vector<const char*> keys = {"keepalives_idle", "keepalives_interval",
                                   "keepalives_count", "tcp_user_timeout",
                                   "dbname", "options",
                                   "fallback_application_name",
                                   "connect_timeout"};
  std::vector<const char*> values = {
      "10", "5", "3", "30000",
      conninfo.empty() ? nullptr : conninfo.c_str(),
      options.c_str(), "walwatch",
      timeout.c_str()};
  if (replication) {
    keys.push_back("replication");
    values.push_back("database");
  }
  if (conninfo.empty()) {
    // Nothing to expand: let libpq take dbname from PGDATABASE.
    keys.erase(keys.begin() + 4);
    values.erase(values.begin() + 4);
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  return PgConn(PQconnectdbParams(keys.data(), values.data(),
                                  conninfo.empty() ? 0 : 1));
}

PGPing PingPg(const std::string& conninfo, int connect_timeout_seconds) {
  std::string timeout = std::to_string(connect_timeout_seconds);
  const char* keys[] = {"dbname", "connect_timeout", nullptr};
  const char* values[] = {conninfo.empty() ? nullptr : conninfo.c_str(),
                          timeout.c_str(), nullptr};
  return PQpingParams(keys, values, conninfo.empty() ? 0 : 1);
}

namespace {

std::string FirstLine(const char* msg) {
  std::string s = msg ? msg : "";
  // libpq prefixes connection errors with "connection to server ... failed: ".
  size_t nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

std::string PgError(PGconn* conn) { return FirstLine(PQerrorMessage(conn)); }

std::string PgResultError(PGresult* res) {
  return FirstLine(PQresultErrorMessage(res));
}

namespace {

// Waits until libpq has a whole result to give (!PQisBusy), reading the
// socket as it becomes readable. False with *error if the connection broke
// or `stop` was raised.
bool WaitForResult(PGconn* conn, const StopSignal* stop,
                   std::chrono::milliseconds timeout, std::string* error) {
  const bool bounded = timeout.count() > 0;
  const Clock::time_point deadline = Clock::now() + timeout;
  while (PQisBusy(conn)) {
    pollfd fds[2] = {{PQsocket(conn), POLLIN, 0},
                     {stop ? stop->fd() : -1, POLLIN, 0}};
    int wait_ms = stop && stop->fd() < 0 ? 100 : -1;
    if (bounded) {
      // Rounded up, so that the wait never ends before the deadline.
      auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now())
              .count();
      if (left <= 0) {
        *error = "no answer from the server within " +
                 std::to_string(timeout.count()) + " ms";
        return false;
      }
      wait_ms = wait_ms < 0 ? static_cast<int>(left)
                            : std::min(wait_ms, static_cast<int>(left));
    }
    int r = poll(fds, 2, wait_ms);
    if (r < 0 && errno != EINTR) {
      *error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (stop && stop->raised()) {
      *error = "stopped";
      return false;
    }
    if (r > 0 && fds[0].revents && !PQconsumeInput(conn)) {
      *error = PgError(conn);
      return false;
    }
  }
  return true;
}

// Collects the results of the query just sent: the last one, or the first
// COPY one (a COPY hands the connection over to the caller).
PgResult CollectResults(PGconn* conn, const StopSignal* stop,
                        std::chrono::milliseconds timeout, std::string* error) {
  PgResult last;
  for (;;) {
    if (!WaitForResult(conn, stop, timeout, error)) return nullptr;
    PgResult r(PQgetResult(conn));
    if (!r) break;
    ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_COPY_BOTH || st == PGRES_COPY_OUT || st == PGRES_COPY_IN) {
      return r;
    }
    last = std::move(r);
  }
  if (!last) *error = PgError(conn);
  return last;
}

}  // namespace

PgResult PgQuery(PGconn* conn, const std::string& sql,
                 const std::vector<std::string>& params, std::string* error,
                 const StopSignal* stop, std::chrono::milliseconds timeout) {
  std::vector<const char*> p;
  for (const auto& s : params) p.push_back(s.c_str());
  if (!PQsendQueryParams(conn, sql.c_str(), static_cast<int>(p.size()),
                         nullptr, p.data(), nullptr, nullptr, 0)) {
    *error = PgError(conn);
    return nullptr;
  }
  PgResult res = CollectResults(conn, stop, timeout, error);
  if (!res) return nullptr;
  ExecStatusType st = PQresultStatus(res.get());
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    *error = PgResultError(res.get());
    if (error->empty()) *error = PgError(conn);
    return nullptr;
  }
  return res;
}

PgResult PgExecSimple(PGconn* conn, const std::string& sql,
                      std::string* error, const StopSignal* stop,
                      std::chrono::milliseconds timeout) {
  if (!PQsendQuery(conn, sql.c_str())) {
    *error = PgError(conn);
    return nullptr;
  }
  return CollectResults(conn, stop, timeout, error);
}

bool PgIdleConnAlive(PGconn* conn) {
  // Reading what waits with PQconsumeInput would not do: it can take the
  // server's FATAL message and leave the end of file for the next statement
  // to fail on. (walwatch neither LISTENs nor changes reported settings, so
  // nothing else comes unasked.)
  return conn != nullptr && PQstatus(conn) == CONNECTION_OK &&
         !IdleSocketEnded(PQsocket(conn));
}

}  // namespace walwatch
