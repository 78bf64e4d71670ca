// MariaDbSource's startup (ChangeSource::Prepare): the server is waited
// for and checked, the catalog loaded, and the stream started where the
// replay window begins.
#include <errmsg.h>
#include <mysqld_error.h>

#include <algorithm>
#include <string>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/base/text.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/mysql/mariadb_source.h"
#include "cdc/mysql/mysql_checks.h"
#include "cdc/mysql/row_change_conversion.h"
#include "cdc/replication_stats.h"

namespace walwatch::mysql {

namespace {

// How long startup waits for a server that is down, as on PostgreSQL: a
// database restarted with the pod is waited for rather than answered with
// an exit and the kubelet's crash-loop backoff. Within the startupProbe of
// packaging/kubernetes (180 s).
constexpr std::chrono::seconds kServerDownStartupWait{150};

// The server does not answer, refuses connections while it starts or
// shuts down, or its name does not resolve yet (a Service being created).
bool ServerDown(unsigned error) {
  switch (error) {
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case ER_SERVER_SHUTDOWN:
    case ER_CON_COUNT_ERROR:
      return true;
    default:
      return false;
  }
}

// The client library's words in a Connect error, without the target before
// them (its user and database names could hold any word).
std::string Reason(const MysqlConnParams& p, const std::string& err) {
  const std::string prefix = "cannot connect to " + DescribeParams(p) + ": ";
  return err.compare(0, prefix.size(), prefix) == 0 ? err.substr(prefix.size())
                                                    : err;
}

// The fix for a refused login: the server says "Access denied" alike for a
// wrong password and for an account whose REQUIRE (SSL, X509, ISSUER,
// SUBJECT) the connection does not meet.
std::string AccessDeniedFix(const MysqlConnParams& p) {
  if (p.tls == MysqlConnParams::Tls::kDisabled) {
    return " (fix: the user and password in --mysql-conninfo; an account "
           "created REQUIRE SSL also needs ssl-mode, and one REQUIRE X509, "
           "ISSUER or SUBJECT a client certificate: ssl-cert and ssl-key)";
  }
  if (p.tls_cert.empty()) {
    return " (fix: the user and password in --mysql-conninfo; an account "
           "created REQUIRE X509, ISSUER or SUBJECT also needs a client "
           "certificate: ssl-cert and ssl-key)";
  }
  return " (fix: the user and password in --mysql-conninfo; for an account "
         "created REQUIRE ISSUER or SUBJECT, a client certificate in ssl-cert "
         "with that issuer and subject)";
}

// The fix for a TLS failure. Connector/C reports each as
// CR_SSL_CONNECTION_ERROR, with OpenSSL's words for what failed.
std::string TlsFix(const MysqlConnParams& p, const std::string& error) {
  const std::string err = Reason(p, error);
  const bool client_cert = !p.tls_cert.empty();
  if (Contains(err, "cannot read the ssl-")) {
    return " (fix: the file named, readable by walwatch's user, in "
           "--mysql-conninfo)";
  }
  if (Contains(err, "does not offer TLS") || Contains(err, "not support")) {
    return " (fix: TLS on the server (its ssl_cert and ssl_key), or "
           "ssl-mode=DISABLED in --mysql-conninfo)";
  }
  if (Contains(err, "key values mismatch")) {
    return " (fix: ssl-key in --mysql-conninfo must be the private key of "
           "the certificate in ssl-cert)";
  }
  // An alert is the server's answer; with a client certificate sent, it
  // is about that certificate.
  if (client_cert && Contains(err, "alert")) {
    return " (the server refused walwatch's client certificate; fix: ssl-cert "
           "in --mysql-conninfo a certificate signed by a CA the server "
           "trusts (its ssl_ca), valid now, and ssl-key its key)";
  }
  if (Contains(err, "Validation of SSL server certificate failed")) {
    return " (the server's certificate does not name " +
           (p.host.empty() || p.host == "localhost"
                ? std::string("localhost, the name checked on the Unix socket")
                : p.host) +
           "; fix: that name in the certificate's subjectAltName or CN, or "
           "host in --mysql-conninfo the name the certificate has)";
  }
  if (Contains(err, "certificate")) {
    return " (fix: ssl-ca in --mysql-conninfo the CA that signed the server's "
           "certificate)";
  }
  return " (fix: ssl-ca, ssl-cert and ssl-key in --mysql-conninfo PEM files, "
         "ssl-key the key of ssl-cert, and TLS on the server (its ssl_cert "
         "and ssl_key))";
}

// Under TLS 1.3 the client's handshake ends before the server has checked
// the client's certificate: a server that refuses it sends an alert and
// closes, and the login that follows often meets a reset connection before
// the alert is read. That is no server down, and waiting will not fix it.
bool LostAfterClientCertificate(const MysqlConnParams& p, unsigned error,
                                const std::string& err) {
  const std::string reason = Reason(p, err);
  return error == CR_SERVER_LOST && p.tls != MysqlConnParams::Tls::kDisabled &&
         !p.tls_cert.empty() &&
         (Contains(reason, "sending authentication information") ||
          Contains(reason, "reading authorization packet"));
}

}  // namespace

std::string MariaDbSource::ConnectAtStartup(MysqlConnection* conn) {
  const auto give_up = Clock::now() + kServerDownStartupWait;
  std::chrono::milliseconds delay{500};
  for (int attempt = 1;; ++attempt) {
    std::string err = Connect(conn);
    if (err.empty()) return "";
    const unsigned no = conn->last_errno();
    if (no == ER_ACCESS_DENIED_ERROR || no == ER_DBACCESS_DENIED_ERROR) {
      return err + AccessDeniedFix(opt_.conn);
    }
    if (no == ER_BAD_DB_ERROR) {
      return err + " (fix: the database in --mysql-conninfo)";
    }
    if (no == CR_SSL_CONNECTION_ERROR) return err + TlsFix(opt_.conn, err);
    if (LostAfterClientCertificate(opt_.conn, no, err)) {
      return err +
             " (the server closed the connection right after the TLS "
             "handshake, as it does when it refuses a client certificate; "
             "fix: ssl-cert in --mysql-conninfo a certificate signed by a CA "
             "the server trusts (its ssl_ca), valid now, and ssl-key its key)";
    }
    if (!ServerDown(no)) return err;
    if (Clock::now() + delay >= give_up) {
      return err + " (the server has not answered for " +
             std::to_string(kServerDownStartupWait.count()) + " s)";
    }
    LogWarn(
        "the MySQL/MariaDB server does not answer yet (down, starting "
        "or shutting down); retrying",
        {{"attempt", attempt},
         {"delay_ms", static_cast<int64_t>(delay.count())},
         {"error", err}});
    if (!stop_.WaitFor(delay)) return "stopped";
    delay = std::min<std::chrono::milliseconds>(delay * 2,
                                                std::chrono::seconds(10));
  }
}

std::string MariaDbSource::LoadCatalog(MysqlConnection* conn) {
  const TableMapping& m = opt_.mapping;
  const std::string table =
      QuoteIdentifier(opt_.conn.database) + "." + QuoteIdentifier(m.table);
  const std::string group = QuoteIdentifier(m.column(MappedField::kGroup));
  const std::string version = QuoteIdentifier(m.column(MappedField::kVersion));
  const std::string resource =
      QuoteIdentifier(m.column(MappedField::kResource));
  // The resources first, then one row's kind of each: Clusterpedia's
  // indexes lead with (group, version, resource), so the server reads each
  // from the index (a loose index scan, then one lookup per resource)
  // rather than every row of the table, which a DISTINCT over the kind
  // column too would read: seconds at startup for a table of millions of
  // objects. A resource has one kind.
  MysqlRows rows;
  std::string err = conn->Query(
      "SELECT d." + group + ", d." + version + ", d." + resource +
          ", (SELECT k." + QuoteIdentifier(m.column(MappedField::kKind)) +
          " FROM " + table + " AS k WHERE k." + group + " <=> d." + group +
          " AND k." + version + " = d." + version + " AND k." + resource +
          " = d." + resource + " LIMIT 1) FROM (SELECT DISTINCT " + group +
          ", " + version + ", " + resource + " FROM " + table + ") AS d",
      &rows);
  if (!err.empty()) {
    return "cannot list the resources in " + opt_.conn.database + "." +
           m.table + ": " + err;
  }
  for (const auto& r : rows.rows) {
    if (r.size() < 4 || !r[1] || !r[2] || !r[3]) continue;
    catalog_->Add({r[0].value_or(""), *r[1], *r[2]}, *r[3]);
  }
  return "";
}

std::string MariaDbSource::ChooseStart(MysqlConnection* conn,
                                       BinlogPosition* start, bool* purged) {
  *purged = false;
  if (opt_.replay_window.count() == 0) {
    BinlogStatus s = ReadBinlogEnd(conn, start);
    return s.ok() ? "" : s.message;
  }
  std::vector<BinlogFile> files;
  if (std::string err = ListBinlogFiles(conn, &files); !err.empty()) {
    return "cannot list the binlog files (SHOW BINARY LOGS): " + err;
  }
  if (files.empty()) {
    return "the server lists no binlog files (fix: log_bin in the server's "
           "configuration, then restart it)";
  }
  const int64_t since =
      NowUnixMicros() / 1000000 -
      std::chrono::duration_cast<std::chrono::seconds>(opt_.replay_window)
          .count();
  BinlogReaderOptions probe_options = ReaderOptions();
  probe_options.replica_host.clear();  // a probe is no replica to list
  int64_t oldest_began = 0;
  const std::string file = ChooseReplayStartFile(
      files, since, opt_.replay_window_bytes,
      [&](const std::string& name, int64_t* started) {
        BinlogReader probe(opt_.conn, probe_options);
        StopInterrupter::Scope interruptible(&interrupter_,
                                             [&probe] { probe.Interrupt(); });
        uint32_t time = 0;
        if (!probe.Open({name, 4}).ok() ||
            !probe.ReadFileStartTime(&time).ok()) {
          return false;
        }
        *started = time;
        if (name == files[0].name) oldest_began = time;
        return true;
      });
  *start = {file, 4};
  // Binlog files are numbered from 1: an oldest kept file numbered above
  // it had files before it, and if it began inside the window, they held
  // part of the window.
  const std::optional<uint64_t> oldest = BinlogFileNumber(files[0].name);
  *purged =
      file == files[0].name && oldest_began > since && oldest && *oldest > 1;
  return "";
}

std::string MariaDbSource::RecordHistory(MysqlConnection* conn,
                                         const BinlogPosition& at) {
  if (std::string err = ReadServerId(conn, &source_server_id_); !err.empty()) {
    return err;
  }
  if (mariadb_) {
    if (std::string err = ReadGtidState(conn, at, &gtid_state_); !err.empty()) {
      return err;
    }
    if (!gtid_state_) {
      return "BINLOG_GTID_POS knows no GTID state at " + at.ToString();
    }
    return "";
  }
  std::optional<std::string> uuid;
  if (std::string err = conn->QueryValue("SELECT @@server_uuid", &uuid);
      !err.empty()) {
    return "cannot read server_uuid: " + err;
  }
  server_uuid_ = uuid.value_or("");
  return "";
}

std::string MariaDbSource::Prepare(ReplicationStats* stats,
                                   StreamStart* stream_start) {
  MysqlConnection conn;
  if (std::string err = ConnectAtStartup(&conn); !err.empty()) return err;
  std::optional<std::string> version;
  if (std::string err = conn.QueryValue("SELECT VERSION()", &version);
      !err.empty()) {
    return "cannot read the server's version: " + err;
  }
  mariadb_ = version && version->find("MariaDB") != std::string::npos;

  MysqlCheckOptions checks;
  checks.database = opt_.conn.database;
  checks.table = opt_.mapping.table;
  checks.columns = MappedColumnNames(opt_.mapping);
  checks.json_column = opt_.mapping.column(MappedField::kObject);
  checks.server_id = opt_.server_id;
  checks.replica_host = opt_.replica_host;
  checks.replay_window =
      std::chrono::duration_cast<std::chrono::seconds>(opt_.replay_window);
  std::vector<std::string> warnings;
  if (std::string err = RunStartupChecks(&conn, checks, &warnings);
      !err.empty()) {
    return err;
  }
  for (const std::string& w : warnings) LogWarn(w);
  if (std::string err = LoadCatalog(&conn); !err.empty()) return err;

  // The window's start may be purged between the listing and the dump:
  // choose again.
  for (int attempt = 1;; ++attempt) {
    BinlogPosition start;
    bool purged = false;
    if (std::string err = ChooseStart(&conn, &start, &purged); !err.empty()) {
      return err;
    }
    if (std::string err = RecordHistory(&conn, start); !err.empty()) {
      if (attempt < 3) continue;
      return err;
    }
    std::string why;
    const std::optional<uint64_t> floor = BinlogVersion(history(), start, &why);
    if (!floor) return why;
    BinlogStatus s = StartStreaming(start);
    if (s.ok()) {
      stream_start->floor_rv = *floor;
      stream_start->ceiling_rv = BinlogHistoryCeiling(history());
      if (purged) {
        // A watch that resumes from before the floor gets 410: a gap, as
        // when the binlog is purged under a running walwatch.
        LogError(
            "the binlog of the replay window was purged (PURGE BINARY LOGS, "
            "or the server's retention: binlog_expire_logs_seconds shorter "
            "than --replay-window); watches that resume from before it must "
            "relist",
            {{"oldest_kept", start.file},
             {"floor", FormatBinlogVersion(*floor)}});
        ++stats->gaps;
      }
      LogInfo("streaming",
              {{"server", mariadb_ ? "MariaDB" : "MySQL"},
               {"version", version.value_or("")},
               {"server_id", static_cast<uint64_t>(opt_.server_id)},
               {"table", opt_.conn.database + "." + opt_.mapping.table},
               {"from", start.ToString()},
               {"source_server_id", source_server_id_},
               {"history", history()},
               {"gtid_state", gtid_state_ ? gtid_state_->ToString() : ""}});
      return "";
    }
    if (s.kind != BinlogErrorKind::kPurged || attempt >= 3) {
      return "cannot read the binlog from " + start.ToString() + ": " +
             s.message;
    }
  }
}

}  // namespace walwatch::mysql
