#include "cdc/postgres/replication_connection.h"

#include <cstdlib>
#include <string_view>
#include <utility>

#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_checks.h"
#include "cdc/postgres/pg_conn.h"

namespace walwatch {

namespace {

class LibpqReplicationConnection final : public ReplicationConnection {
 public:
  explicit LibpqReplicationConnection(PgConn conn) : conn_(std::move(conn)) {}
  ~LibpqReplicationConnection() override { FreeBuffer(); }

  ReadStatus Read(std::string_view* message, std::string* error) override {
    FreeBuffer();
    int n = PQgetCopyData(conn_.get(), &buffer_, /*async=*/1);
    if (n > 0) {
      *message = std::string_view(buffer_, static_cast<size_t>(n));
      return ReadStatus::kMessage;
    }
    if (n == 0) return ReadStatus::kWouldBlock;
    if (n == -1) {
      PgResult res(PQgetResult(conn_.get()));
      if (res && PQresultStatus(res.get()) == PGRES_COMMAND_OK) {
        // A walsender ends COPY cleanly only when PostgreSQL shuts down
        // (after walwatch has reported the last position it was sent).
        *error = "the server ended the replication stream cleanly "
                 "(PostgreSQL is shutting down)";
      } else {
        std::string why = res ? PgResultError(res.get()) : "";
        if (why.empty()) why = PgError(conn_.get());
        *error = "the server ended the replication stream: " +
                 ExplainPgError(why);
      }
      return ReadStatus::kEnd;
    }
    *error = ExplainPgError(PgError(conn_.get()));
    return ReadStatus::kEnd;
  }

  bool ConsumeInput(std::string* error) override {
    if (PQconsumeInput(conn_.get())) return true;
    *error = ExplainPgError(PgError(conn_.get()));
    return false;
  }

  bool Write(std::string_view message, std::string* error) override {
    if (PQputCopyData(conn_.get(), message.data(),
                      static_cast<int>(message.size())) <= 0 ||
        PQflush(conn_.get()) != 0) {
      *error = PgError(conn_.get());
      return false;
    }
    return true;
  }

  int socket() const override { return PQsocket(conn_.get()); }
  int backend_pid() const override { return PQbackendPID(conn_.get()); }

 private:
  void FreeBuffer() {
    if (buffer_ != nullptr) PQfreemem(buffer_);
    buffer_ = nullptr;
  }

  PgConn conn_;
  char* buffer_ = nullptr;  // the last message read, freed by the next Read
};

}  // namespace

int PgoutputProtocolFor(const StreamFormat& format, int server_version) {
  if (format.pgoutput_protocol > 0) return format.pgoutput_protocol;
  if (server_version >= 160000) return 4;
  if (server_version >= 150000) return 3;
  if (server_version >= 140000) return 2;
  return 1;
}

const char* PgoutputStreamingFor(int protocol) {
  if (protocol >= 4) return "parallel";
  if (protocol >= 2) return "on";
  return "";
}

LibpqReplicationConnector::LibpqReplicationConnector(
    std::string conninfo, int connect_timeout_seconds,
    std::chrono::milliseconds receive_timeout)
    : conninfo_(std::move(conninfo)),
      connect_timeout_seconds_(connect_timeout_seconds),
      receive_timeout_(receive_timeout) {}

uint64_t TimelineEnd(std::string_view content, uint32_t tli) {
  const std::string parent = std::to_string(tli);
  while (!content.empty()) {
    size_t eol = content.find('\n');
    std::string_view line = content.substr(0, eol);
    content = eol == std::string_view::npos ? std::string_view()
                                             : content.substr(eol + 1);
    size_t tab = line.find('\t');
    if (tab == std::string_view::npos || line.substr(0, tab) != parent) {
      continue;
    }
    std::string_view rest = line.substr(tab + 1);
    if (auto lsn = ParseLsn(rest.substr(0, rest.find('\t')))) return *lsn;
  }
  return 0;
}

namespace {

// IDENTIFY_SYSTEM's timeline, and where `previous` ended if the server is on
// another one. Best effort: a failure leaves zeros, and the source checks
// nothing.
void ReadTimeline(PGconn* repl, uint32_t previous, const StopSignal& stop,
                  std::chrono::milliseconds timeout,
                  ReplicationConnector::Started* started) {
  std::string err;
  PgResult r = PgExecSimple(repl, "IDENTIFY_SYSTEM", &err, &stop, timeout);
  if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK ||
      PQntuples(r.get()) != 1 || PQnfields(r.get()) < 2) {
    return;
  }
  started->timeline =
      static_cast<uint32_t>(std::strtoul(PQgetvalue(r.get(), 0, 1), nullptr, 10));
  if (previous == 0 || started->timeline == previous ||
      started->timeline <= 1) {
    return;
  }
  r = PgExecSimple(repl, "TIMELINE_HISTORY " + std::to_string(started->timeline),
                   &err, &stop, timeout);
  if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK ||
      PQntuples(r.get()) != 1 || PQnfields(r.get()) < 2) {
    return;
  }
  // The content is bytea; in text format, hex ("\\x...").
  size_t size = 0;
  unsigned char* content = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(r.get(), 0, 1)), &size);
  if (content == nullptr) return;
  started->previous_timeline_end = TimelineEnd(
      std::string_view(reinterpret_cast<const char*>(content), size), previous);
  PQfreemem(content);
}

}  // namespace

ReplicationConnector::Started LibpqReplicationConnector::Start(
    const std::string& slot, const StreamFormat& format,
    uint32_t previous_timeline, const StopSignal& stop) {
  Started started;
  PgConn repl =
      ConnectPg(conninfo_, /*replication=*/true, connect_timeout_seconds_);
  if (PQstatus(repl.get()) != CONNECTION_OK) {
    started.error = "cannot open the replication connection: " +
                    ExplainPgError(PgError(repl.get()));
    return started;
  }
  // Where the slot stands. walwatch never confirms past current_rv + 1, so
  // a slot further on was moved by someone else; the source checks.
  {
    std::string err;
    PgResult r = PgExecSimple(
        repl.get(),
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = " + QuoteLiteral(slot),
        &err, &stop, receive_timeout_);
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      if (r) err = PgResultError(r.get());
      started.error = "cannot read replication slot " + slot + ": " +
                      ExplainPgError(err);
      return started;
    }
    if (PQntuples(r.get()) == 1 && !PQgetisnull(r.get(), 0, 0)) {
      started.slot_confirmed_flush =
          ParseLsn(PQgetvalue(r.get(), 0, 0)).value_or(0);
    }
  }
  ReadTimeline(repl.get(), previous_timeline, stop, receive_timeout_, &started);
  std::string cmd = "START_REPLICATION SLOT " + QuoteIdent(slot) + " LOGICAL 0/0 ";
  if (format.pgoutput) {
    started.protocol = PgoutputProtocolFor(format, PQserverVersion(repl.get()));
    cmd += "(proto_version '" + std::to_string(started.protocol) +
           "', publication_names " + QuoteLiteral(QuoteIdent(format.publication)) +
           ", binary 'false', messages 'false'";
    if (const char* streaming = PgoutputStreamingFor(started.protocol);
        *streaming != '\0') {
      cmd += std::string(", streaming '") + streaming + "'";
    }
    cmd += ")";
  } else {
    cmd += "(\"format-version\" '2', \"include-xids\" '1', "
           "\"include-lsn\" '1', \"include-timestamp\" '1', "
           "\"include-types\" '0', "
           // No logical decoding messages (pg_logical_emit_message):
           // walwatch has no use for them, and a binary one is not JSON
           // text.
           "\"add-msg-prefixes\" 'walwatch.clusterpedia.io/none', "
           "\"add-tables\" " + QuoteLiteral(format.table) + ")";
  }
  std::string err;
  // A server (or a proxy) that stops answering here would otherwise hold
  // walwatch neither streaming nor reconnecting.
  PgResult res = PgExecSimple(repl.get(), cmd, &err, &stop, receive_timeout_);
  if (PQresultStatus(res.get()) != PGRES_COPY_BOTH) {
    if (res) {
      err = PgResultError(res.get());
      const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE);
      if (state != nullptr) started.sqlstate = state;
    }
    if (err.empty()) err = PgError(repl.get());
    // Only an answer from the server says something about the slot.
    started.answered = res != nullptr;
    started.error =
        "cannot start replication from slot " + slot + ": " +
        ExplainPgError(err);
    return started;
  }
  started.connection =
      std::make_unique<LibpqReplicationConnection>(std::move(repl));
  return started;
}

}  // namespace walwatch
