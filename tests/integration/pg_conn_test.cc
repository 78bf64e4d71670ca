// cdc/postgres/pg_conn's waits against a real PostgreSQL: a query that takes
// too long fails at its timeout, a stop ends the wait at once, and an answer
// in time is not disturbed by either.
#include "cdc/postgres/pg_conn.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/integration/support/pg.h"

namespace walwatch::itest {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class PgConnTest : public PgDatabaseTest {};

TEST_F(PgConnTest, AQueryPastItsTimeoutFailsAtTheTimeout) {
  PgConn conn = ConnectPg(Conninfo(), /*replication=*/false, 10);
  ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK) << walwatch::PgError(conn.get());
  std::string err;
  auto t0 = Clock::now();
  PgResult r = PgQuery(conn.get(), "SELECT pg_sleep(10)", {}, &err, nullptr,
                       milliseconds(300));
  auto took = Clock::now() - t0;
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(err, "no answer from the server within 300 ms");
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(5000));

  // The same on the simple protocol (replication connections).
  PgConn other = ConnectPg(Conninfo(), false, 10);
  ASSERT_EQ(PQstatus(other.get()), CONNECTION_OK);
  EXPECT_EQ(PgExecSimple(other.get(), "SELECT pg_sleep(10)", &err, nullptr,
                         milliseconds(300)),
            nullptr);
  EXPECT_EQ(err, "no answer from the server within 300 ms");
}

TEST_F(PgConnTest, AnAnswerInTimeAndAStopWork) {
  PgConn conn = ConnectPg(Conninfo(), false, 10);
  ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK);
  std::string err;
  PgResult r = PgQuery(conn.get(), "SELECT pg_sleep(0.2), 42", {}, &err,
                       nullptr, milliseconds(10000));
  ASSERT_NE(r, nullptr) << err;
  EXPECT_EQ(std::string(PQgetvalue(r.get(), 0, 1)), "42");

  StopSignal stop;
  std::thread raiser([&stop] {
    std::this_thread::sleep_for(milliseconds(200));
    stop.Raise();
  });
  auto t0 = Clock::now();
  EXPECT_EQ(PgQuery(conn.get(), "SELECT pg_sleep(10)", {}, &err, &stop,
                    milliseconds(20000)),
            nullptr);
  raiser.join();
  EXPECT_EQ(err, "stopped");
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

}  // namespace
}  // namespace walwatch::itest
