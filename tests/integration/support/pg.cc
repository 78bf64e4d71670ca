#include "tests/integration/support/pg.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace walwatch::itest {

const char kMissingPgServerMessage[] =
    "WALWATCH_TEST_PGHOST and WALWATCH_TEST_PGPORT are not set: the "
    "integration tests need the throwaway PostgreSQL 15 + wal2json server "
    "that tests/tools/pg-sandbox.sh starts. Run them with `make test` (or "
    "start the sandbox and export both variables).";

uint64_t ParseLsn(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 ||
      slash + 1 >= text.size()) {
    throw PgError("malformed LSN: '" + std::string(text) + "'");
  }
  auto hex = [&](std::string_view part) {
    uint64_t v = 0;
    for (char c : part) {
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else throw PgError("malformed LSN: '" + std::string(text) + "'");
      v = v * 16 + static_cast<uint64_t>(d);
    }
    return v;
  };
  return (hex(text.substr(0, slash)) << 32) | hex(text.substr(slash + 1));
}

std::string FormatLsn(uint64_t lsn) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRIX64 "/%" PRIX64, lsn >> 32,
                lsn & 0xffffffffu);
  return buf;
}

std::string ReadFileOrThrow(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// ---------------------------------------------------------------------------
// PgConnection

void PgConnection::Deleter::operator()(pg_conn* conn) const { PQfinish(conn); }

PgConnection::PgConnection(const std::string& conninfo)
    : conn_(PQconnectdb(conninfo.c_str())), conninfo_(conninfo) {
  if (!conn_) throw PgError("PQconnectdb(" + conninfo + ") out of memory");
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn_.get());
    throw PgError("cannot connect with '" + conninfo + "': " + msg);
  }
}

PgConnection::~PgConnection() = default;
PgConnection::PgConnection(PgConnection&&) noexcept = default;
PgConnection& PgConnection::operator=(PgConnection&&) noexcept = default;

namespace {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

std::string Abbreviate(const std::string& sql) {
  return sql.size() <= 300 ? sql : sql.substr(0, 300) + "...";
}

}  // namespace

void PgConnection::Exec(const std::string& sql) {
  ResultPtr res(PQexec(conn_.get(), sql.c_str()));
  auto status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw PgError("SQL failed: " + Abbreviate(sql) + "\n  " +
                  PQerrorMessage(conn_.get()));
  }
}

std::vector<PgRow> PgConnection::Query(const std::string& sql,
                                       const std::vector<std::string>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  ResultPtr res(PQexecParams(conn_.get(), sql.c_str(),
                             static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0));
  auto status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw PgError("SQL failed: " + Abbreviate(sql) + "\n  " +
                  PQerrorMessage(conn_.get()));
  }
  std::vector<PgRow> rows;
  int n = PQntuples(res.get()), cols = PQnfields(res.get());
  rows.reserve(n);
  for (int r = 0; r < n; ++r) {
    PgRow row;
    for (int c = 0; c < cols; ++c) {
      if (PQgetisnull(res.get(), r, c)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(std::string(PQgetvalue(res.get(), r, c),
                                     PQgetlength(res.get(), r, c)));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string PgConnection::QueryValue(const std::string& sql,
                                     const std::vector<std::string>& params) {
  auto rows = Query(sql, params);
  if (rows.size() != 1 || rows[0].size() != 1 || !rows[0][0]) {
    throw PgError("expected one non-NULL value from: " + Abbreviate(sql) +
                  " (got " + std::to_string(rows.size()) + " rows)");
  }
  return *rows[0][0];
}

int PgConnection::BackendPid() const { return PQbackendPID(conn_.get()); }

// ---------------------------------------------------------------------------
// Server from the environment

std::string PgServer::Conninfo(const std::string& dbname) const {
  return "host=" + host + " port=" + port + " dbname=" + dbname +
         " user=postgres";
}

std::optional<PgServer> PgServerFromEnvironment() {
  const char* host = std::getenv("WALWATCH_TEST_PGHOST");
  const char* port = std::getenv("WALWATCH_TEST_PGPORT");
  if (!host || !*host || !port || !*port) return std::nullopt;
  return PgServer{host, port};
}

std::string SchemaPath() {
  // Development override only; `make test` uses the repository's file.
  if (const char* p = std::getenv("WALWATCH_TEST_SCHEMA"); p && *p) return p;
  return WALWATCH_SOURCE_DIR "/schema/clusterpedia.sql";
}

// ---------------------------------------------------------------------------
// CommitObserver

CommitObserver::CommitObserver(PgConnection* conn, std::string slot)
    : conn_(conn), slot_(std::move(slot)) {
  conn_->Query("SELECT pg_create_logical_replication_slot($1, 'wal2json')",
               {slot_});
}

size_t CommitObserver::Poll(size_t max_changes) {
  auto rows = conn_->Query(
      "SELECT data FROM pg_logical_slot_get_changes($1, NULL, NULLIF($2::int, 0), "
      "'format-version', '2', 'include-xids', '1', 'include-lsn', '1', "
      "'include-timestamp', '0', 'add-tables', 'public.resources')",
      {slot_, std::to_string(max_changes)});
  for (const auto& row : rows) {
    if (!row[0]) continue;
    if (handler_) handler_(*row[0]);
    auto change = nlohmann::json::parse(*row[0]);
    std::string action = change.value("action", "");
    uint32_t xid = change.value("xid", 0u);
    if (action == "C") {
      commits_.push_back({xid, ParseLsn(change.at("lsn").get<std::string>())});
    } else if (action == "I" || action == "U" || action == "D") {
      ++changes_[xid];
      if (action == "U") {
        bool has_object = false;
        for (const auto& col : change.at("columns")) {
          if (col.at("name") == "object") has_object = true;
        }
        update_has_object_[xid].push_back(has_object);
      }
    }
  }
  return rows.size();
}

size_t CommitObserver::IndexOf(uint64_t xid) {
  auto low = static_cast<uint32_t>(xid);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (size_t i = commits_.size(); i-- > 0;) {
      if (commits_[i].xid == low) return i;
    }
    Poll();
  }
  throw PgError("CommitObserver: transaction " + std::to_string(xid) +
                " was not decoded by slot " + slot_ +
                " (did it commit, in this database, after the slot?)");
}

uint64_t CommitObserver::CommitLsn(uint64_t xid) {
  return commits_[IndexOf(xid)].lsn;
}

uint64_t CommitObserver::PreviousCommitLsn(uint64_t xid) {
  size_t i = IndexOf(xid);
  if (i == 0) {
    throw PgError("CommitObserver: transaction " + std::to_string(xid) +
                  " is the first one the observer saw; no previous commit");
  }
  return commits_[i - 1].lsn;
}

size_t CommitObserver::ChangeCount(uint64_t xid) {
  IndexOf(xid);
  auto it = changes_.find(static_cast<uint32_t>(xid));
  return it == changes_.end() ? 0 : it->second;
}

std::vector<bool> CommitObserver::UpdateCarriesObject(uint64_t xid) {
  IndexOf(xid);
  return update_has_object_[static_cast<uint32_t>(xid)];
}

// ---------------------------------------------------------------------------
// PgDatabaseTest

namespace {

std::string Sanitize(const std::string& s, size_t max) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max) break;
    out += std::isalnum(static_cast<unsigned char>(c))
               ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
               : '_';
  }
  return out;
}

std::atomic<int> g_database_counter{0};

}  // namespace

void PgDatabaseTest::SetUp() {
  auto server = PgServerFromEnvironment();
  if (!server) FAIL() << kMissingPgServerMessage;
  server_ = *server;

  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // ww<pid>_<n>_<test>: at most 2+7+1+3+1+28 = 42 bytes, leaving room for
  // UniqueName suffixes within the 63-byte identifier limit.
  dbname_ = "ww" + std::to_string(getpid()) + "_" +
            std::to_string(g_database_counter++) + "_" +
            Sanitize(std::string(info->name()), 28);

  admin_ = std::make_unique<PgConnection>(server_.Conninfo("postgres"));
  admin_->Exec("CREATE DATABASE \"" + dbname_ + "\"");
  created_ = true;
  db_ = std::make_unique<PgConnection>(Conninfo());
  if (ApplySchema()) {
    std::string path = SchemaPath();
    std::string ddl;
    try {
      ddl = ReadFileOrThrow(path);
    } catch (const std::exception& e) {
      FAIL() << "cannot read the schema " << path
             << " (schema/clusterpedia.sql: the Clusterpedia DDL with REPLICA "
                "IDENTITY FULL): "
             << e.what();
    }
    db_->Exec(ddl);
  }
}

void PgDatabaseTest::AddCleanup(std::function<void()> cleanup) {
  cleanups_.push_back(std::move(cleanup));
}

std::string PgDatabaseTest::UniqueName(const std::string& suffix) const {
  return dbname_ + "_" + Sanitize(suffix, 63 - dbname_.size() - 1);
}

void PgDatabaseTest::TearDown() {
  while (!cleanups_.empty()) {
    auto cleanup = std::move(cleanups_.back());
    cleanups_.pop_back();
    cleanup();
  }
  db_.reset();
  if (!created_ || !admin_) return;
  // A walsender that is still exiting keeps its slot active; retry within a
  // bound until every slot of the database is gone.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string last_error;
  for (;;) {
    try {
      admin_->Query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
          "WHERE datname = $1 AND pid <> pg_backend_pid()",
          {dbname_});
      admin_->Query(
          "SELECT pg_drop_replication_slot(slot_name) FROM "
          "pg_replication_slots WHERE database = $1 AND NOT active",
          {dbname_});
      auto left = admin_->QueryValue(
          "SELECT count(*) FROM pg_replication_slots WHERE database = $1",
          {dbname_});
      if (left == "0") break;
      last_error = left + " slot(s) still active";
    } catch (const std::exception& e) {
      last_error = e.what();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "could not drop the replication slots of " << dbname_
                    << ": " << last_error;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  try {
    admin_->Exec("DROP DATABASE IF EXISTS \"" + dbname_ + "\" WITH (FORCE)");
  } catch (const std::exception& e) {
    ADD_FAILURE() << "could not drop database " << dbname_ << ": "
                  << e.what();
  }
}

}  // namespace walwatch::itest
