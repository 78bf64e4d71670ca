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
    "WALWATCH_TEST_PGHOST and WALWATCH_TEST_PGPORT are not set (or "
    "WALWATCH_TEST_PGSANDBOX names no running sandbox): the integration "
    "tests need the throwaway PostgreSQL 15 + wal2json server that "
    "tests/tools/pg-sandbox.sh starts. Run them with `make test` (or start "
    "the sandbox and export both variables; a version-matrix entry, "
    "pg16_* say, needs its ctest fixture: run it through ctest).";

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

// WALWATCH_TEST_PGSANDBOX=<dir>: a tests/tools/pg-sandbox.sh directory (the
// version matrix's ctest fixtures, tests/CMakeLists.txt), whose socket is in
// <dir> and whose port, picked when the fixture started it, is in <dir>/port.
// It wins over WALWATCH_TEST_PGHOST/_PGPORT, which `make test` exports for
// its reference server to every test. A named sandbox that cannot be read
// gives nullopt too, so that the test fails with kMissingPgServerMessage.
std::optional<PgServer> PgServerFromEnvironment() {
  if (const char* dir = std::getenv("WALWATCH_TEST_PGSANDBOX"); dir && *dir) {
    std::string port;
    try {
      port = ReadFileOrThrow(std::string(dir) + "/port");
    } catch (const std::exception&) {
      return std::nullopt;
    }
    while (!port.empty() &&
           std::isspace(static_cast<unsigned char>(port.back()))) {
      port.pop_back();
    }
    if (port.empty()) return std::nullopt;
    return PgServer{dir, port};
  }
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
//
// Its slot decodes with wal2json where the server has it: a decoder of its
// own beside walwatch's (wal2json or pgoutput). A server without wal2json
// (the version matrix's PostgreSQL 16 to 18, tests/tools/install-pg-npm.sh)
// gets a pgoutput slot, read through the SQL interface in protocol 1, whose
// messages are turned into the wal2json format-version 2 records that Poll,
// the record handler and their users read (values as text, TOAST-unchanged
// columns left out as wal2json leaves them out; see PgoutputToWal2Json). Two
// publications make it see what `add-tables` lets wal2json see: every change
// of public.resources, and every other table's inserts, so that a commit of
// another table (the warm-up, a marker) is a commit the observer sees. Only
// inserts there: a table without a replica identity whose updates or
// deletes were published would refuse them. pgoutput skips a transaction
// with nothing published, where wal2json gives its B and C: the observer
// then sees fewer commits, never other LSNs for them.
// WALWATCH_TEST_OBSERVER_PLUGIN=pgoutput takes pgoutput on a server with
// wal2json too (to test this path on PostgreSQL 15).

namespace {

constexpr char kObserverPublications[] =
    "walwatch_observer_resources,walwatch_observer_inserts";

// Creates the two publications in `conn`'s database unless they exist
// (another observer of the same database made them; two at once: one wins).
void EnsureObserverPublications(PgConnection& conn) {
  const std::pair<const char*, const char*> publications[] = {
      {"walwatch_observer_resources", "FOR TABLE public.resources"},
      {"walwatch_observer_inserts",
       "FOR ALL TABLES WITH (publish = 'insert')"}};
  for (const auto& [name, what] : publications) {
    auto exists = [&] {
      return conn.QueryValue(
                 "SELECT count(*) FROM pg_publication WHERE pubname = $1",
                 {name}) != "0";
    };
    if (exists()) continue;
    try {
      conn.Exec(std::string("CREATE PUBLICATION ") + name + " " + what);
    } catch (const PgError&) {
      if (!exists()) throw;
    }
  }
}

// Reads pgoutput's protocol 1 messages (PostgreSQL's "Logical Replication
// Message Formats"): big-endian integers, NUL-terminated strings.
class PgoutputReader {
 public:
  explicit PgoutputReader(const std::string& bytes) : bytes_(bytes) {}
  uint8_t U8() { return static_cast<uint8_t>(Take(1)[0]); }
  uint64_t Int(size_t n) {
    std::string_view b = Take(n);
    uint64_t v = 0;
    for (char c : b) v = (v << 8) | static_cast<uint8_t>(c);
    return v;
  }
  std::string CString() {
    size_t end = bytes_.find('\0', pos_);
    if (end == std::string::npos) {
      throw PgError("pgoutput: unterminated string");
    }
    std::string s = bytes_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  std::string_view Take(size_t n) {
    if (bytes_.size() - pos_ < n) {
      throw PgError("pgoutput: message of " + std::to_string(bytes_.size()) +
                    " bytes ends early");
    }
    std::string_view v(bytes_.data() + pos_, n);
    pos_ += n;
    return v;
  }

 private:
  const std::string& bytes_;
  size_t pos_ = 0;
};

// bytea's text form (hex, "\x...") -> bytes.
std::string FromByteaHex(const std::string& text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2) {
    throw PgError("expected bytea in hex, got: " + text.substr(0, 40));
  }
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw PgError("bad hex digit in bytea");
  };
  std::string out;
  out.reserve(text.size() / 2 - 1);
  for (size_t i = 2; i < text.size(); i += 2) {
    out.push_back(
        static_cast<char>(nibble(text[i]) * 16 + nibble(text[i + 1])));
  }
  return out;
}

struct PgoutputRelation {
  std::string schema, table;
  std::vector<std::string> columns;
};

// A TupleData as wal2json's "columns"/"identity": {name, value} per column
// sent, values as text (NULL: null), TOAST-unchanged ones ('u') left out.
nlohmann::json PgoutputTuple(PgoutputReader& in, const PgoutputRelation& rel) {
  nlohmann::json out = nlohmann::json::array();
  size_t n = in.Int(2);
  for (size_t i = 0; i < n; ++i) {
    std::string name = i < rel.columns.size() ? rel.columns[i] : "?";
    char kind = static_cast<char>(in.U8());
    if (kind == 'u') continue;
    if (kind == 'n') {
      out.push_back({{"name", name}, {"value", nullptr}});
    } else if (kind == 't' || kind == 'b') {
      size_t len = in.Int(4);
      out.push_back({{"name", name}, {"value", std::string(in.Take(len))}});
    } else {
      throw PgError(std::string("pgoutput: unknown tuple column kind '") +
                    kind + "'");
    }
  }
  return out;
}

// One pgoutput message of transaction `xid` as a wal2json v2 record (""
// for those wal2json would not give: relations, types, origins, other
// tables' changes). `relations` holds the Relation messages of the read so
// far (each read sends them again before a relation's first change).
std::string PgoutputToWal2Json(
    const std::string& bytes, uint32_t xid,
    std::map<uint32_t, PgoutputRelation>* relations) {
  PgoutputReader in(bytes);
  const char type = static_cast<char>(in.U8());
  auto relation = [&](uint32_t relid) -> const PgoutputRelation& {
    auto it = relations->find(relid);
    if (it == relations->end()) {
      throw PgError("pgoutput: a change of relation " + std::to_string(relid) +
                    " before its Relation message");
    }
    return it->second;
  };
  switch (type) {
    case 'B':
      return nlohmann::json{{"action", "B"}, {"xid", xid}}.dump();
    case 'C': {
      in.U8();  // flags
      uint64_t commit_lsn = in.Int(8);
      return nlohmann::json{
          {"action", "C"}, {"xid", xid}, {"lsn", FormatLsn(commit_lsn)}}
          .dump();
    }
    case 'R': {
      auto relid = static_cast<uint32_t>(in.Int(4));
      PgoutputRelation rel;
      rel.schema = in.CString();
      rel.table = in.CString();
      in.U8();  // replica identity
      size_t n = in.Int(2);
      for (size_t i = 0; i < n; ++i) {
        in.U8();  // flags
        rel.columns.push_back(in.CString());
        in.Int(4);  // type oid
        in.Int(4);  // type modifier
      }
      (*relations)[relid] = std::move(rel);
      return "";
    }
    case 'I':
    case 'U':
    case 'D': {
      const PgoutputRelation& rel = relation(static_cast<uint32_t>(in.Int(4)));
      if (rel.schema != "public" || rel.table != "resources") return "";
      nlohmann::json record = {{"action", std::string(1, type)},
                               {"xid", xid},
                               {"schema", rel.schema},
                               {"table", rel.table}};
      char part = static_cast<char>(in.U8());
      if (part == 'K' || part == 'O') {
        record["identity"] = PgoutputTuple(in, rel);
        if (type == 'U') part = static_cast<char>(in.U8());
      }
      if (type != 'D') {
        if (part != 'N') throw PgError("pgoutput: no new tuple in a change");
        record["columns"] = PgoutputTuple(in, rel);
      }
      return record.dump();
    }
    case 'Y':  // type
    case 'O':  // origin
    case 'T':  // truncate: walwatch's business, not the observer's
    case 'M':  // logical decoding message (not asked for)
      return "";
    default:
      throw PgError(std::string("pgoutput: unknown message type '") + type +
                    "'");
  }
}

bool IsMissingWal2Json(const PgError& e) {
  return std::string_view(e.what()).find(
             "could not access file \"wal2json\"") != std::string_view::npos;
}

}  // namespace

CommitObserver::CommitObserver(PgConnection* conn, std::string slot)
    : conn_(conn), slot_(std::move(slot)) {
  const char* forced = std::getenv("WALWATCH_TEST_OBSERVER_PLUGIN");
  const std::string plugin = forced && *forced ? forced : "";
  if (plugin != "" && plugin != "wal2json" && plugin != "pgoutput") {
    throw PgError("WALWATCH_TEST_OBSERVER_PLUGIN=" + plugin +
                  ": wal2json or pgoutput");
  }
  if (plugin != "pgoutput") {
    try {
      conn_->Query("SELECT pg_create_logical_replication_slot($1, 'wal2json')",
                   {slot_});
      return;
    } catch (const PgError& e) {
      if (plugin == "wal2json" || !IsMissingWal2Json(e)) throw;
    }
  }
  EnsureObserverPublications(*conn_);
  conn_->Query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
               {slot_});
}

size_t CommitObserver::Poll(size_t max_changes) {
  const std::string plugin = conn_->QueryValue(
      "SELECT plugin FROM pg_replication_slots WHERE slot_name = $1", {slot_});
  std::vector<PgRow> rows;
  if (plugin == "pgoutput") {
    // Rows of (data): the messages as wal2json records, or NULL.
    rows = conn_->Query(
        "SELECT data, xid::text FROM pg_logical_slot_get_binary_changes($1, "
        "NULL, NULLIF($2::int, 0), 'proto_version', '1', "
        "'publication_names', $3)",
        {slot_, std::to_string(max_changes), kObserverPublications});
    std::map<uint32_t, PgoutputRelation> relations;
    for (auto& row : rows) {
      if (!row[0] || !row[1]) continue;
      std::string record = PgoutputToWal2Json(
          FromByteaHex(*row[0]),
          static_cast<uint32_t>(std::stoul(*row[1])), &relations);
      if (record.empty()) {
        row[0].reset();
      } else {
        row[0] = std::move(record);
      }
    }
  } else {
    rows = conn_->Query(
        "SELECT data FROM pg_logical_slot_get_changes($1, NULL, "
        "NULLIF($2::int, 0), "
        "'format-version', '2', 'include-xids', '1', 'include-lsn', '1', "
        "'include-timestamp', '0', 'add-tables', 'public.resources')",
        {slot_, std::to_string(max_changes)});
  }
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
