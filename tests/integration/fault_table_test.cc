// What happens to the watched table and the WAL decoded from it: TRUNCATE,
// DDL, a row that cannot become an event, a wal2json message that is not
// UTF-8 (a SQL_ASCII cluster), and logical decoding messages. A change that
// walwatch cannot turn into events is a barrier (a 410 for every watcher),
// never silence. The fixture and the shared script: support/fault_fixture.h.
#include <chrono>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/support/fault_fixture.h"
#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

using std::chrono::seconds;

TEST_F(FaultTest, TruncateGives410ToEveryWatcher) {
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario()));
  writer_->Pause();
  db().Exec("TRUNCATE resources");
  writer_->ForgetAllObjects();
  writer_->Resume();
  ExpectAllExpired(watchers());
  if (HasFailure()) return;  // no 410: relisting would only time out
  EXPECT_EQ(LogLines(*ww_, "the table was truncated; every watcher must relist")
                .size(),
            1u);
  // A watch resuming from before the TRUNCATE is told to relist at once.
  ASSERT_NO_FATAL_FAILURE(ExpectAWatchFromIsExpiredAtOnce(start_rv()));
  RelistAndCheckExact();
}

// A row that cannot become an event is never skipped in silence: its
// transaction is a barrier. Here the table loses REPLICA IDENTITY FULL
// while walwatch runs, so a DELETE carries only the key, not the object.
TEST_F(FaultTest, ARowThatCannotBecomeAnEventGives410NotSilence) {
  StartCluster();
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Scenario()));
  // A row of its own, before the watchers' start: the writer's objects and
  // the watchers' expected streams stay as they are.
  InsertRow(db(), Pod("victim", "victim", "victim-pod"));
  ASSERT_NO_FATAL_FAILURE(StartTraffic());
  writer_->Pause();
  db().Exec("ALTER TABLE resources REPLICA IDENTITY DEFAULT");
  db().Exec("DELETE FROM resources WHERE cluster = 'victim'");
  db().Exec("ALTER TABLE resources REPLICA IDENTITY FULL");
  writer_->Resume();
  ExpectAllExpired(watchers());
  if (HasFailure()) return;
  EXPECT_EQ(LogLines(*ww_,
                     "a transaction has a row that could not become a watch "
                     "event; every watcher must relist")
                .size(),
            1u);
  RelistAndCheckExact();
}

// A real server can send a wal2json message that is not JSON: in a
// SQL_ASCII database a text column takes any bytes, wal2json copies them into
// its JSON as they are, and a name written in Latin-1 is not UTF-8, which
// simdjson refuses. walwatch cannot tell whose row the message held, so its
// transaction is a barrier for every watcher; the error is counted
// (walwatch_decode_errors_total) and logged with the message's position.
TEST_F(FaultTest, AMessageThatIsNotUtf8Gives410NotSilence) {
  PgCluster::Options sql_ascii;
  sql_ascii.initdb_args = {"--encoding=SQL_ASCII", "--locale=C"};
  StartCluster(std::move(sql_ascii));
  ASSERT_EQ(db().QueryValue("SHOW server_encoding"), "SQL_ASCII");
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Scenario().WithMetrics()));
  ASSERT_NO_FATAL_FAILURE(StartTraffic());
  writer_->Pause();
  auto insert_lsn = [&] {
    return ParseLsn(
        db().QueryValue("SELECT pg_current_wal_insert_lsn()::text"));
  };
  const uint64_t before = insert_lsn();
  // "café" in Latin-1: 0xe9 begins a three-byte UTF-8 sequence, and "-"
  // cannot continue it.
  const std::string name = std::string("caf\xe9") + "-pod";
  db().Query(
      "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
      "namespace, name, uid, resource_version, object, created_at, "
      "synced_at) VALUES ('', 'v1', 'pods', 'Pod', 'latin1', 'latin1', "
      "$1::text, 'uid-latin1', '1', jsonb_build_object('apiVersion', 'v1', "
      "'kind', 'Pod', 'metadata', jsonb_build_object('name', $1::text, "
      "'namespace', 'latin1', 'uid', 'uid-latin1', 'resourceVersion', '1', "
      "'annotations', jsonb_build_object('shadow.clusterpedia.io/"
      "cluster-name', 'latin1'))), now(), now())",
      {name});
  const uint64_t inserted = insert_lsn();
  // The checkers (support/model.h) parse stored objects as JSON and cannot
  // read the row either: it goes again, in a second message that is not
  // UTF-8 (the old row, REPLICA IDENTITY FULL).
  db().Exec("DELETE FROM resources WHERE cluster = 'latin1'");
  const uint64_t past = Marker();
  writer_->Resume();
  ExpectAllExpired(watchers());
  if (HasFailure()) return;  // no 410: relisting would only time out
  ASSERT_TRUE(WaitForCurrentRv(past, seconds(60)));
  auto errors = LogLines(*ww_, "cannot decode a wal2json message");
  ASSERT_EQ(errors.size(), 2u);
  const uint64_t at = ParseLsn(errors[0].value("lsn", ""));
  EXPECT_GE(at, before) << errors[0].dump();
  EXPECT_LT(at, inserted) << errors[0].dump();
  EXPECT_NE(errors[0].value("error", "").find("UTF-8"), std::string::npos)
      << errors[0].dump();
  EXPECT_EQ(LogLines(*ww_,
                     "a transaction has a record that could not be decoded; "
                     "every watcher must relist")
                .size(),
            2u);
  EXPECT_EQ(Metric("walwatch_decode_errors_total"), 2.0)
      << "walwatch_decode_errors_total";
  // A watch resuming from before it is told to relist at once.
  ASSERT_NO_FATAL_FAILURE(ExpectAWatchFromIsExpiredAtOnce(start_rv()));
  RelistAndCheckExact();
}

// Logical decoding messages (pg_logical_emit_message), which heartbeat
// tools send, are none of walwatch's business: not a decode error (a
// non-transactional one has a null xid, a binary one is not text), and not a
// barrier inside a transaction of the table.
TEST_F(FaultTest, LogicalDecodingMessagesChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(
      Begin(Scenario().FirstWrites(kWritesPerPhase / 2)));
  PgConnection conn(Conninfo());
  conn.Exec("SELECT pg_logical_emit_message(false, 'heartbeat', 'beat')");
  conn.Exec(
      "SELECT pg_logical_emit_message(false, 'heartbeat', '\\xff00'::bytea)");
  conn.Exec("BEGIN");
  conn.Exec(
      "SELECT pg_logical_emit_message(true, 'heartbeat', '\\xfe01'::bytea)");
  conn.Exec("UPDATE resources SET synced_at = now() WHERE cluster = 'seed'");
  conn.Exec("COMMIT");
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  StopWriterAndCheckExact(watchers());
  auto errors = LogLines(*ww_, "cannot decode a wal2json message");
  EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].dump());
  auto barriers = LogLines(*ww_,
                           "a transaction has a record that could not be "
                           "decoded; every watcher must relist");
  EXPECT_TRUE(barriers.empty());
}

TEST_F(FaultTest, DdlKeepsEventsFlowingWithCorrectContent) {
  ASSERT_NO_FATAL_FAILURE(
      Begin(Scenario().FirstWrites(kWritesPerPhase / 2)));
  const char* ddl[] = {
      "ALTER TABLE resources ADD COLUMN x int",
      "ALTER TABLE resources ADD COLUMN y text DEFAULT 'y'",
      "ALTER TABLE resources DROP COLUMN x",
      "ALTER TABLE resources DROP COLUMN owner_uid",
      "ALTER TABLE resources ALTER COLUMN events TYPE text USING events::text",
      "ALTER TABLE resources ALTER COLUMN name TYPE text",
      "TRUNCATE other_table",  // not the watched table: no 410
  };
  for (const char* statement : ddl) {
    SCOPED_TRACE(statement);
    PgConnection ddl_conn(Conninfo());
    ddl_conn.Exec(statement);
    ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  }
  StopWriterAndCheckExact(watchers());
  EXPECT_EQ(writer_->errors(), 0u);
  auto errors = LogLines(*ww_, "a row could not become a watch event");
  EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].dump());
  EXPECT_TRUE(LogLines(*ww_, "cannot decode a wal2json message").empty());
}

}  // namespace
}  // namespace walwatch::itest
