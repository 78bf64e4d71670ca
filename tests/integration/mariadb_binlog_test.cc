// BinlogReader against a real MariaDB (Debian's mariadb-server 10.11),
// started by the tests (tests/integration/support/mariadb.h): row changes by
// column name, transactions in commit order with their commit positions,
// rotation, heartbeats, reconnecting from a saved position, and each error
// it must tell apart. Every wait has a deadline sized for a slow machine and
// waits on a condition.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "cdc/mysql/binlog_reader.h"
#include "tests/integration/support/mariadb.h"

namespace walwatch::itest {
namespace {

using mysql::BinlogErrorKind;
using mysql::BinlogItem;
using mysql::BinlogPosition;
using mysql::BinlogReader;
using mysql::BinlogReaderOptions;
using mysql::BinlogRowChange;
using mysql::BinlogStatus;
using mysql::BinlogTransaction;
using mysql::BinlogVersion;
using mysql::MysqlConnection;

constexpr std::chrono::seconds kDeadline{60};

// Column indexes of MappedColumns().
constexpr size_t kName = 6;
constexpr size_t kUid = 7;
constexpr size_t kObject = 8;

// The database of the running test: its own, so tests can share a server.
std::string TestDatabase() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("t_") + info->name();
  for (char& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name.substr(0, 64);
}

BinlogReaderOptions Options(const std::string& database, uint32_t server_id) {
  BinlogReaderOptions o;
  o.database = database;
  o.table = "resources";
  o.columns = MappedColumns();
  o.server_id = server_id;
  o.heartbeat_period = std::chrono::milliseconds(1000);
  o.silence_timeout = std::chrono::seconds(5);
  return o;
}

// A server id per test, so that concurrent tests' readers do not evict each
// other (the server drops the older of two dumps with one id).
uint32_t TestServerId() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return 0x40000000u |
         static_cast<uint32_t>(std::hash<std::string>()(info->name()) &
                               0x3fffffffu);
}

class BinlogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &TestMariaDb();
    db_ = TestDatabase();
    ASSERT_EQ(CreateClusterpediaDatabase(*server_, db_), "");
    ASSERT_EQ(root_.Connect(server_->Root(db_)), "");
    ASSERT_TRUE(ReadBinlogEnd(&root_, &start_).ok());
    reader_ = std::make_unique<BinlogReader>(
        server_->Tcp(server_->pw_user, server_->pw_password),
        Options(db_, TestServerId()));
    BinlogStatus s = reader_->Open(start_);
    ASSERT_TRUE(s.ok()) << s.message;
  }

  void Exec(const std::string& sql) { ASSERT_EQ(root_.Query(sql), "") << sql; }

  const MariaDbServer* server_ = nullptr;
  std::string db_;
  MysqlConnection root_;
  BinlogPosition start_;
  std::unique_ptr<BinlogReader> reader_;
};

TEST_F(BinlogReaderTest, InsertUpdateDeleteCarryValuesByName) {
  Exec(InsertPodSql(db_, "p1", "u1",
                    R"({"kind": "Pod", "metadata": {"name": "p1"}})"));
  Exec(
      "UPDATE resources SET object = '{\"kind\":\"Pod\",\"x\":\"é\\\\n\"}' "
      "WHERE name = 'p1'");
  Exec("DELETE FROM resources WHERE name = 'p1'");

  BinlogTransaction t;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &t), "");
  ASSERT_EQ(t.changes.size(), 1u);
  const BinlogRowChange& insert = t.changes[0];
  EXPECT_EQ(insert.kind, BinlogRowChange::Kind::kInsert);
  EXPECT_TRUE(insert.before.empty());
  ASSERT_EQ(insert.after.size(), MappedColumns().size());
  EXPECT_EQ(insert.after[0].text, "");  // group '' of core resources
  EXPECT_FALSE(insert.after[0].is_null);
  EXPECT_EQ(insert.after[2].text, "pods");
  EXPECT_EQ(insert.after[kName].text, "p1");
  EXPECT_EQ(insert.after[kUid].text, "u1");
  // MariaDB keeps JSON as the text the client wrote.
  EXPECT_EQ(insert.after[kObject].text,
            R"({"kind": "Pod", "metadata": {"name": "p1"}})");
  EXPECT_EQ(t.gtid.flavor, mysql::Gtid::Flavor::kMariaDb);
  EXPECT_NE(t.xid, 0u);
  EXPECT_EQ(t.commit.file, start_.file);
  EXPECT_GT(t.commit.pos, t.begin.pos);
  EXPECT_GE(t.begin.pos, start_.pos);

  BinlogTransaction u;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &u), "");
  ASSERT_EQ(u.changes.size(), 1u);
  EXPECT_EQ(u.changes[0].kind, BinlogRowChange::Kind::kUpdate);
  EXPECT_EQ(u.changes[0].before[kObject].text,
            R"({"kind": "Pod", "metadata": {"name": "p1"}})");
  EXPECT_EQ(u.changes[0].after[kObject].text,
            "{\"kind\":\"Pod\",\"x\":\"é\\n\"}");
  EXPECT_EQ(u.changes[0].after[kName].text, "p1");
  EXPECT_GT(u.commit.pos, t.commit.pos);

  BinlogTransaction d;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &d), "");
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].kind, BinlogRowChange::Kind::kDelete);
  EXPECT_TRUE(d.changes[0].after.empty());
  EXPECT_EQ(d.changes[0].before[kName].text, "p1");
  EXPECT_EQ(d.changes[0].before[kObject].text,
            "{\"kind\":\"Pod\",\"x\":\"é\\n\"}");
  EXPECT_EQ(reader_->resume_position(), d.commit);
}

TEST_F(BinlogReaderTest, MultiRowTransactionIsOneTransactionInOrder) {
  Exec("BEGIN");
  Exec(InsertPodSql(db_, "a", "ua", "{}"));
  Exec(InsertPodSql(db_, "b", "ub", "{}") +
       ", ('', 'v1', 'pods', 'Pod', 'c1', 'default', "
       "'c', 'uc', '1', '{}', NOW(3), NOW(3))");
  Exec("UPDATE resources SET uid = 'ub2' WHERE name = 'b'");
  Exec("DELETE FROM resources WHERE name IN ('a', 'c')");
  Exec("COMMIT");

  BinlogTransaction t;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &t), "");
  ASSERT_EQ(t.changes.size(), 6u);
  std::vector<std::string> seen;
  for (const auto& c : t.changes) {
    const auto& row =
        c.kind == BinlogRowChange::Kind::kDelete ? c.before : c.after;
    seen.push_back(std::to_string(static_cast<int>(c.kind)) + ":" +
                   row[kName].text + ":" + row[kUid].text);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"0:a:ua", "0:b:ub", "0:c:uc",
                                            "1:b:ub2", "2:a:ua", "2:c:uc"}));
  EXPECT_EQ(t.changes[3].before[kUid].text, "ub");
  EXPECT_NE(t.xid, 0u);
  // Row events come before the commit.
  for (const auto& c : t.changes) EXPECT_LT(c.position.pos, t.commit.pos);
}

TEST_F(BinlogReaderTest, InterleavedTransactionsArriveInCommitOrder) {
  MysqlConnection other;
  ASSERT_EQ(other.Connect(server_->Root(db_)), "");
  Exec("BEGIN");
  Exec(InsertPodSql(db_, "first-begun", "u1", "{}"));
  ASSERT_EQ(other.Query("BEGIN"), "");
  ASSERT_EQ(other.Query(InsertPodSql(db_, "second-begun", "u2", "{}")), "");
  ASSERT_EQ(other.Query("COMMIT"), "");
  Exec("COMMIT");

  BinlogTransaction a, b;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &a), "");
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &b), "");
  ASSERT_EQ(a.changes.size(), 1u);
  ASSERT_EQ(b.changes.size(), 1u);
  EXPECT_EQ(a.changes[0].after[kName].text, "second-begun");
  EXPECT_EQ(b.changes[0].after[kName].text, "first-begun");
  EXPECT_LT(*BinlogVersion(0, a.commit), *BinlogVersion(0, b.commit));
  EXPECT_LT(a.gtid.sequence, b.gtid.sequence);
}

TEST_F(BinlogReaderTest, RotationMovesToTheNextFileAndVersionsKeepIncreasing) {
  Exec(InsertPodSql(db_, "before", "u1", "{}"));
  Exec("FLUSH BINARY LOGS");
  Exec(InsertPodSql(db_, "after", "u2", "{}"));

  BinlogTransaction before;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &before), "");
  // Other tests may rotate too: read until the row after our rotation.
  BinlogPosition rotated;
  BinlogTransaction after;
  ASSERT_EQ(ReadUntil(reader_.get(), kDeadline,
                      [&](const BinlogItem& item) {
                        if (item.type == BinlogItem::Type::kRotation)
                          rotated = item.position;
                        if (item.type == BinlogItem::Type::kTransaction &&
                            !item.transaction.changes.empty()) {
                          after = item.transaction;
                          return true;
                        }
                        return false;
                      }),
            "");
  EXPECT_FALSE(rotated.file.empty());
  EXPECT_EQ(rotated.pos, 4u);
  EXPECT_EQ(after.changes[0].after[kName].text, "after");
  EXPECT_EQ(after.commit.file, rotated.file);
  EXPECT_NE(after.commit.file, before.commit.file);
  EXPECT_GT(*mysql::BinlogFileNumber(after.commit.file),
            *mysql::BinlogFileNumber(before.commit.file));
  EXPECT_GT(*BinlogVersion(0, after.commit), *BinlogVersion(0, before.commit));
}

// Where a replay window starts is chosen by the time each file began: its
// FORMAT_DESCRIPTION event's.
TEST_F(BinlogReaderTest, AFilesStartTimeIsItsFormatDescriptions) {
  const int64_t before = static_cast<int64_t>(time(nullptr));
  Exec("FLUSH BINARY LOGS");
  BinlogPosition end;
  ASSERT_TRUE(ReadBinlogEnd(&root_, &end).ok());
  BinlogReader probe(server_->Tcp(server_->pw_user, server_->pw_password),
                     Options(db_, TestServerId() ^ 1u));
  ASSERT_TRUE(probe.Open({end.file, 4}).ok());
  uint32_t started = 0;
  BinlogStatus s = probe.ReadFileStartTime(&started);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_GE(static_cast<int64_t>(started), before - 1);
  EXPECT_LE(static_cast<int64_t>(started), static_cast<int64_t>(time(nullptr)));
  EXPECT_GT(probe.bytes_read(), 0u);
  // Anywhere but a file's start there is none to read.
  BinlogReader inside(server_->Tcp(server_->pw_user, server_->pw_password),
                      Options(db_, TestServerId() ^ 2u));
  Exec(InsertPodSql(db_, "p", "u", "{}"));
  BinlogPosition later;
  ASSERT_TRUE(ReadBinlogEnd(&root_, &later).ok());
  ASSERT_TRUE(inside.Open(later).ok());
  Exec(InsertPodSql(db_, "q", "v", "{}"));
  EXPECT_EQ(inside.ReadFileStartTime(&started).kind, BinlogErrorKind::kCorrupt);
}

TEST_F(BinlogReaderTest, ReconnectFromASavedPositionLosesAndRepeatsNothing) {
  Exec(InsertPodSql(db_, "one", "u1", "{}"));
  BinlogTransaction one;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &one), "");
  const BinlogPosition saved = reader_->resume_position();
  EXPECT_EQ(saved, one.commit);
  reader_->Close();

  Exec(InsertPodSql(db_, "two", "u2", "{}"));
  Exec("FLUSH BINARY LOGS");
  Exec(InsertPodSql(db_, "three", "u3", "{}"));

  BinlogStatus s = reader_->Open(saved);
  ASSERT_TRUE(s.ok()) << s.message;
  BinlogTransaction two, three;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &two), "");
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &three), "");
  EXPECT_EQ(two.changes.at(0).after[kName].text, "two");
  EXPECT_EQ(three.changes.at(0).after[kName].text, "three");
  EXPECT_GT(*BinlogVersion(0, two.commit), *BinlogVersion(0, one.commit));
}

TEST_F(BinlogReaderTest, ColumnsAreReadByNameAcrossDdl) {
  Exec(
      "ALTER TABLE resources ADD COLUMN extra INT NOT NULL DEFAULT 7 FIRST, "
      "MODIFY COLUMN uid varchar(36) NOT NULL AFTER `group`");
  Exec(InsertPodSql(db_, "moved", "u-moved", R"({"a": 1})"));

  BinlogTransaction ddl;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &ddl), "");
  ASSERT_EQ(ddl.table_statements.size(), 1u);
  EXPECT_NE(ddl.table_statements[0].sql.find("ALTER TABLE"), std::string::npos);
  EXPECT_TRUE(ddl.changes.empty());

  BinlogTransaction t;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &t), "");
  ASSERT_EQ(t.changes.size(), 1u);
  EXPECT_EQ(t.changes[0].after[kName].text, "moved");
  EXPECT_EQ(t.changes[0].after[kUid].text, "u-moved");
  EXPECT_EQ(t.changes[0].after[kObject].text, R"({"a": 1})");

  // A mapped column dropped: the reader says which, and how to fix it.
  Exec("ALTER TABLE resources DROP COLUMN kind");
  Exec(
      "INSERT INTO resources (`group`, version, resource, cluster, namespace, "
      "name, uid, "
      "resource_version, object, created_at, synced_at) VALUES ('', 'v1', "
      "'pods', 'c1', "
      "'default', 'x', 'u', '1', '{}', NOW(3), NOW(3))");
  BinlogTransaction dropped;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &dropped),
            "");  // the ALTER
  BinlogTransaction ignored;
  std::string err = NextTableTransaction(reader_.get(), kDeadline, &ignored);
  EXPECT_NE(err.find("settings"), std::string::npos) << err;
  EXPECT_NE(err.find("no column kind"), std::string::npos) << err;
}

TEST_F(BinlogReaderTest, OtherColumnTypesReadAsSelectShowsThem) {
  // Columns of the types Connector/C reads wrong unless told otherwise
  // (CHAR, ENUM, SET), before the mapped ones, and some NULL.
  Exec(
      "ALTER TABLE resources ADD COLUMN c CHAR(5) NULL FIRST, "
      "ADD COLUMN c300 CHAR(100) NULL AFTER c, "
      "ADD COLUMN e ENUM('a','b','c') NULL AFTER c300, "
      "ADD COLUMN st SET('x','y','z') NULL AFTER e, "
      "ADD COLUMN i INT NULL, ADD COLUMN u BIGINT UNSIGNED NULL, "
      "ADD COLUMN dt DATETIME(6) NULL, ADD COLUMN dm DECIMAL(10,2) NULL, "
      "ADD COLUMN f DOUBLE NULL, ADD COLUMN ts TIMESTAMP(3) NULL, "
      "ADD COLUMN t TINYINT NULL");
  Exec("SET time_zone = '+00:00'");
  Exec(InsertPodSql(db_, "typed", "u1", "{}"));
  Exec(
      "UPDATE resources SET c = 'ab', c300 = REPEAT('é', 100), e = 'c', "
      "st = 'x,z', i = -5, u = 18446744073709551615, "
      "dt = '2026-12-06 19:41:46.000123', dm = -1234.5, f = 0.1, "
      "ts = '2026-12-06 19:41:46.5', t = -128 WHERE name = 'typed'");

  BinlogReaderOptions o = Options(db_, TestServerId() + 4);
  o.columns = {"c",  "c300", "e", "st", "i", "u",
               "dt", "dm",   "f", "ts", "t", "name"};
  BinlogReader r(server_->Root(), o);
  ASSERT_TRUE(r.Open(start_).ok());
  BinlogTransaction alter, insert, update;
  ASSERT_EQ(NextTableTransaction(&r, kDeadline, &alter), "");
  ASSERT_EQ(NextTableTransaction(&r, kDeadline, &insert), "");
  ASSERT_EQ(NextTableTransaction(&r, kDeadline, &update), "");
  ASSERT_EQ(insert.changes.size(), 1u);
  const auto& before = insert.changes[0].after;
  for (size_t i = 0; i + 1 < before.size(); ++i)
    EXPECT_TRUE(before[i].is_null) << i;
  EXPECT_EQ(before.back().text, "typed");
  ASSERT_EQ(update.changes.size(), 1u);
  std::vector<std::string> got;
  for (const auto& v : update.changes[0].after)
    got.push_back(v.is_null ? "NULL" : v.text);
  std::string e100;
  for (int i = 0; i < 100; ++i) e100 += "é";
  EXPECT_EQ(got, (std::vector<std::string>{
                     "ab", e100, "3", "5", "-5", "18446744073709551615",
                     "2026-12-06 19:41:46.000123", "-1234.50", "0.1",
                     "2026-12-06 19:41:46.500", "-128", "typed"}));
}

TEST_F(BinlogReaderTest, TruncateAndStatementLoggedChangesAreTableStatements) {
  Exec(InsertPodSql(db_, "p", "u", "{}"));
  Exec("TRUNCATE TABLE resources");
  Exec("SET SESSION binlog_format = 'STATEMENT'");
  Exec("UPDATE resources SET uid = 'x' WHERE name = 'nothing'");
  Exec("SET SESSION binlog_format = 'ROW'");
  Exec("GRANT SELECT ON " + db_ + ".resources TO '" + server_->pw_user +
       "'@'%'");
  Exec(InsertPodSql(db_, "q", "u", "{}"));

  BinlogTransaction insert, truncate, update, last;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &insert), "");
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &truncate), "");
  ASSERT_EQ(truncate.table_statements.size(), 1u);
  EXPECT_EQ(truncate.table_statements[0].sql, "TRUNCATE TABLE resources");
  EXPECT_EQ(truncate.table_statements[0].database, db_);
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &update), "");
  ASSERT_EQ(update.table_statements.size(), 1u);
  EXPECT_EQ(update.table_statements[0].sql.rfind("UPDATE", 0), 0u);
  // The GRANT names the table but changes no row: not a table statement.
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &last), "");
  ASSERT_EQ(last.changes.size(), 1u);
  EXPECT_EQ(last.changes[0].after[kName].text, "q");
}

TEST_F(BinlogReaderTest, ATransactionPastTheBoundKeepsNoChanges) {
  BinlogReaderOptions o = Options(db_, TestServerId() + 3);
  o.max_transaction_bytes = 4096;
  // What it changed is kept: group, version, resource, cluster.
  const std::vector<std::string> columns = MappedColumns();
  for (const char* key : {"group", "version", "resource", "cluster"}) {
    o.key_columns.push_back(static_cast<size_t>(
        std::find(columns.begin(), columns.end(), key) - columns.begin()));
  }
  BinlogReader small(server_->Tcp(server_->pw_user, server_->pw_password), o);
  ASSERT_TRUE(small.Open(start_).ok());
  Exec("BEGIN");
  for (int i = 0; i < 20; ++i) {
    Exec(InsertPodSql(db_, "p" + std::to_string(i), "u",
                      "{\"pad\": \"" + std::string(200, 'x') + "\"}"));
  }
  Exec("COMMIT");
  Exec(InsertPodSql(db_, "after", "u", "{}"));

  BinlogTransaction big, after;
  ASSERT_EQ(NextTableTransaction(&small, kDeadline, &big), "");
  EXPECT_TRUE(big.overflowed);
  EXPECT_TRUE(big.changes.empty());
  EXPECT_EQ(big.bytes, 0u);
  EXPECT_EQ(big.touched,
            (std::set<std::vector<std::string>>{{"", "v1", "pods", "c1"}}));
  EXPECT_FALSE(big.touched_unknown);
  ASSERT_EQ(NextTableTransaction(&small, kDeadline, &after), "");
  EXPECT_FALSE(after.overflowed);
  ASSERT_EQ(after.changes.size(), 1u);
  EXPECT_EQ(after.changes[0].after[kName].text, "after");
}

TEST_F(BinlogReaderTest, APartialRowImageIsRefusedWithTheSetting) {
  Exec("SET SESSION binlog_row_image = 'MINIMAL'");
  Exec(InsertPodSql(db_, "p", "u", "{}"));
  Exec("UPDATE resources SET uid = 'u2' WHERE name = 'p'");
  BinlogTransaction t;
  std::string err;
  // The INSERT of a MINIMAL image still has every column.
  err = NextTableTransaction(reader_.get(), kDeadline, &t);
  if (err.empty()) err = NextTableTransaction(reader_.get(), kDeadline, &t);
  EXPECT_NE(err.find("settings"), std::string::npos) << err;
  EXPECT_NE(err.find("binlog_row_image = FULL"), std::string::npos) << err;
}

TEST_F(BinlogReaderTest, HeartbeatsArriveWhileNothingIsWritten) {
  // Other tests may write; only a heartbeat ends the wait.
  BinlogPosition at;
  ASSERT_EQ(ReadUntil(reader_.get(), kDeadline,
                      [&](const BinlogItem& item) {
                        if (item.type != BinlogItem::Type::kHeartbeat)
                          return false;
                        at = item.position;
                        return true;
                      }),
            "");
  EXPECT_FALSE(at.file.empty());
  EXPECT_EQ(reader_->resume_position(), at);
}

TEST_F(BinlogReaderTest, InterruptEndsABlockedRead) {
  std::thread stopper([this] {
    // Let Next() block first; its outcome is the same either way.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    reader_->Interrupt();
  });
  const auto started = std::chrono::steady_clock::now();
  BinlogStatus s;
  while (s.ok() && std::chrono::steady_clock::now() - started < kDeadline) {
    BinlogItem item;
    s = reader_->Next(&item);
  }
  stopper.join();
  EXPECT_EQ(s.kind, BinlogErrorKind::kStopped) << s.message;
  EXPECT_LT(std::chrono::steady_clock::now() - started,
            std::chrono::seconds(10));
}

TEST_F(BinlogReaderTest, APositionInsideAnEventOrPastTheEndIsNoPosition) {
  Exec(InsertPodSql(db_, "p", "u", "{}"));
  BinlogTransaction t;
  ASSERT_EQ(NextTableTransaction(reader_.get(), kDeadline, &t), "");
  for (const BinlogPosition& bad :
       {BinlogPosition{t.commit.file, t.commit.pos - 3},
        BinlogPosition{t.commit.file, 1u << 30}}) {
    BinlogReader r(server_->Root(), Options(db_, TestServerId() + 2));
    BinlogStatus s = r.Open(bad);
    // The error may come after the events the server sends first.
    const auto end = std::chrono::steady_clock::now() + kDeadline;
    BinlogItem item;
    while (s.ok() && std::chrono::steady_clock::now() < end) s = r.Next(&item);
    EXPECT_EQ(s.kind, BinlogErrorKind::kNoPosition)
        << bad.ToString() << ": " << s.message;
  }
}

TEST_F(BinlogReaderTest, AWrongPasswordIsASettingAndNotLogged) {
  BinlogReader r(server_->Tcp(server_->pw_user, "not-the-password-42"),
                 Options(db_, TestServerId() + 1));
  BinlogStatus s = r.Open(start_);
  EXPECT_EQ(s.kind, BinlogErrorKind::kSettings) << s.message;
  EXPECT_NE(s.message.find(server_->pw_user), std::string::npos) << s.message;
  EXPECT_EQ(s.message.find("not-the-password-42"), std::string::npos)
      << s.message;
}

// Tests that stop, purge or corrupt a server of their own.
class PrivateServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<PrivateMariaDb>();
    ASSERT_EQ(CreateClusterpediaDatabase(server_->server(), "cp"), "");
    ASSERT_EQ(root_.Connect(server_->server().Root("cp")), "");
    ASSERT_TRUE(ReadBinlogEnd(&root_, &start_).ok());
  }

  std::unique_ptr<PrivateMariaDb> server_;
  MysqlConnection root_;
  BinlogPosition start_;
};

TEST_F(PrivateServerTest, ASilentServerIsNoticedWithinTheTimeout) {
  BinlogReader reader(server_->server().Root(), Options("cp", 42));
  ASSERT_TRUE(reader.Open(start_).ok());
  // Heartbeats flow first.
  ASSERT_EQ(ReadUntil(&reader, kDeadline,
                      [](const BinlogItem& i) {
                        return i.type == BinlogItem::Type::kHeartbeat;
                      }),
            "");
  const pid_t pid = server_->server().Pid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGSTOP),
            0);  // a partition: the socket stays open, silent
  const auto stopped = std::chrono::steady_clock::now();
  BinlogStatus s;
  while (s.ok() && std::chrono::steady_clock::now() - stopped < kDeadline) {
    BinlogItem item;
    s = reader.Next(&item);
  }
  const auto noticed = std::chrono::steady_clock::now() - stopped;
  kill(pid, SIGCONT);
  EXPECT_EQ(s.kind, BinlogErrorKind::kSilent) << s.message;
  EXPECT_LT(noticed, std::chrono::seconds(5 + 20));
}

TEST_F(PrivateServerTest, APurgedBinlogIsReportedAsSuch) {
  ASSERT_EQ(root_.Query(InsertPodSql("cp", "p", "u", "{}")), "");
  ASSERT_EQ(root_.Query("FLUSH BINARY LOGS"), "");
  BinlogPosition now;
  ASSERT_TRUE(ReadBinlogEnd(&root_, &now).ok());
  // MariaDB keeps a file until its binlog checkpoint has passed (InnoDB has
  // flushed what it logged), so purge until the first file is gone.
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  std::string first = start_.file;
  while (first == start_.file && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(root_.Query("PURGE BINARY LOGS TO '" + now.file + "'"), "");
    mysql::MysqlRows logs;
    ASSERT_EQ(root_.Query("SHOW BINARY LOGS", &logs), "");
    ASSERT_FALSE(logs.rows.empty());
    first = *logs.rows[0][0];
    if (first == start_.file)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(first, start_.file)
      << "the first binlog was not purged within the deadline";

  BinlogReader reader(server_->server().Root(), Options("cp", 42));
  BinlogStatus s = reader.Open(start_);
  EXPECT_EQ(s.kind, BinlogErrorKind::kPurged) << s.message;
  EXPECT_NE(s.message.find(start_.file), std::string::npos) << s.message;
  // The current file is still there.
  EXPECT_TRUE(reader.Open(now).ok());
}

TEST_F(PrivateServerTest, AChecksumMismatchIsCaught) {
  const std::string marker = "checksum-marker-7f3a";
  ASSERT_EQ(root_.Query(InsertPodSql("cp", marker, "u", "{}")), "");
  ASSERT_EQ(root_.Query("FLUSH BINARY LOGS"), "");  // the file is closed
  // Flip one byte of the marker in the binlog file itself.
  const std::string path = server_->server().dir + "/binlog/" + start_.file;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  // The last copy: MariaDB logs the statement's text (ANNOTATE_ROWS, which
  // a replica is not sent unless it asks) before the row itself.
  size_t at = bytes.rfind(marker);
  ASSERT_NE(at, std::string::npos);
  f.seekp(static_cast<std::streamoff>(at));
  f.put('X');
  f.close();

  BinlogReader verified(server_->server().Root(), Options("cp", 42));
  ASSERT_TRUE(verified.Open(start_).ok());
  BinlogTransaction t;
  std::string err = NextTableTransaction(&verified, kDeadline, &t);
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;

  // Without verification the changed byte goes through: the check is what
  // caught it.
  BinlogReaderOptions o = Options("cp", 43);
  o.verify_checksums = false;
  BinlogReader unverified(server_->server().Root(), o);
  ASSERT_TRUE(unverified.Open(start_).ok());
  ASSERT_EQ(NextTableTransaction(&unverified, kDeadline, &t), "");
  EXPECT_EQ(t.changes.at(0).after[kName].text, "X" + marker.substr(1));
}

TEST_F(PrivateServerTest, TableMapsWithoutColumnNamesAreRefused) {
  ASSERT_EQ(root_.Query("SET GLOBAL binlog_row_metadata = 'MINIMAL'"), "");
  MysqlConnection writer;  // a new session takes the new global
  ASSERT_EQ(writer.Connect(server_->server().Root("cp")), "");
  ASSERT_EQ(writer.Query(InsertPodSql("cp", "p", "u", "{}")), "");
  BinlogReader reader(server_->server().Root(), Options("cp", 42));
  ASSERT_TRUE(reader.Open(start_).ok());
  BinlogTransaction t;
  std::string err = NextTableTransaction(&reader, kDeadline, &t);
  EXPECT_NE(err.find("binlog_row_metadata = FULL"), std::string::npos) << err;
}

}  // namespace
}  // namespace walwatch::itest
