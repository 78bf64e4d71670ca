#include "cdc/mysql/mysql_checks.h"

#include <mysqld_error.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <tuple>

namespace walwatch::mysql {

namespace {

std::string Upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A global variable's value; nullopt with *error "" when the server has no
// such variable.
std::optional<std::string> GlobalVariable(MysqlConnection* conn,
                                          const std::string& name,
                                          std::string* error) {
  MysqlRows rows;
  *error =
      conn->Query("SHOW GLOBAL VARIABLES LIKE " + conn->Quote(name), &rows);
  if (!error->empty()) {
    *error = "cannot read " + name + ": " + *error;
    return std::nullopt;
  }
  if (rows.rows.empty() || rows.rows[0].size() < 2 || !rows.rows[0][1])
    return std::nullopt;
  return *rows.rows[0][1];
}

// "SET GLOBAL name = value, and set it in the server's configuration".
std::string SetFix(const std::string& name, const std::string& value) {
  return "(fix: SET GLOBAL " + name + " = " + value + ", and set " + name +
         " = " + value +
         " in the server's configuration; sessions already open keep the old "
         "value "
         "until they reconnect)";
}

std::string CheckVariable(MysqlConnection* conn, const std::string& name,
                          const std::string& want, const std::string& why,
                          const std::string& missing) {
  std::string err;
  std::optional<std::string> value = GlobalVariable(conn, name, &err);
  if (!err.empty()) return err;
  if (!value) return missing;
  if (Upper(*value) != want) {
    return name + " is " + *value + ", walwatch needs " + want + " (" + why +
           ") " + SetFix(name, want);
  }
  return "";
}

// The privileges of one SHOW GRANTS line on *.*, upper case ("GRANT A, B ON
// *.* TO ..."); empty for other lines.
std::vector<std::string> GlobalPrivileges(const std::string& line) {
  std::string up = Upper(line);
  if (up.rfind("GRANT ", 0) != 0) return {};
  size_t on = up.find(" ON *.* TO ");
  if (on == std::string::npos) return {};
  std::vector<std::string> out;
  std::string list = up.substr(6, on - 6);
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string FormatSeconds(uint64_t s) {
  if (s % 86400 == 0) return std::to_string(s / 86400) + " d";
  if (s % 3600 == 0) return std::to_string(s / 3600) + " h";
  return std::to_string(s) + " s";
}

}  // namespace

std::string CheckServerVersionString(std::string_view version) {
  if (Upper(std::string(version)).find("MARIADB") != std::string::npos)
    return "";
  unsigned parts[3] = {0, 0, 0};
  size_t at = 0;
  for (unsigned& part : parts) {
    if (at >= version.size() ||
        !std::isdigit(static_cast<unsigned char>(version[at])))
      return "";
    while (at < version.size() &&
           std::isdigit(static_cast<unsigned char>(version[at])) &&
           part < 100000) {
      part = part * 10 + static_cast<unsigned>(version[at++] - '0');
    }
    if (at < version.size() && version[at] == '.') ++at;
  }
  if (std::make_tuple(parts[0], parts[1], parts[2]) >=
      std::make_tuple(8, 0, 26))
    return "";
  return "MySQL " + std::string(version) +
         ": walwatch reads the binlog through MariaDB Connector/C, which "
         "refuses the FORMAT_DESCRIPTION event that MySQL before 8.0.26 "
         "writes at the start of every binlog (fix: MySQL 8.0.26 or later)";
}

std::string CheckServerVersion(MysqlConnection* conn) {
  std::string err;
  std::optional<std::string> version = GlobalVariable(conn, "version", &err);
  if (!err.empty()) return err;
  return version ? CheckServerVersionString(*version) : "";
}

std::string CheckBinaryLogging(MysqlConnection* conn) {
  std::string err;
  std::optional<std::string> value = GlobalVariable(conn, "log_bin", &err);
  if (!err.empty()) return err;
  if (!value || Upper(*value) != "ON") {
    return "binary logging is off (log_bin), walwatch reads the binary log "
           "(fix: set "
           "log_bin (and server_id) in the server's configuration and restart "
           "it)";
  }
  return "";
}

std::string CheckBinlogFormat(MysqlConnection* conn) {
  return CheckVariable(conn, "binlog_format", "ROW",
                       "statements in the binlog do not say which rows changed",
                       "the server has no binlog_format variable");
}

std::string CheckBinlogRowImage(MysqlConnection* conn) {
  return CheckVariable(
      conn, "binlog_row_image", "FULL",
      "MINIMAL and NOBLOB leave columns out of the old and new rows, "
      "so a DELETE loses its object and an UPDATE the columns it kept",
      "the server has no binlog_row_image variable (MySQL 5.6+ or "
      "MariaDB 10.1+ needed)");
}

std::string CheckBinlogRowMetadata(MysqlConnection* conn) {
  return CheckVariable(
      conn, "binlog_row_metadata", "FULL",
      "walwatch reads columns by the names only FULL puts in the binlog",
      "the server has no binlog_row_metadata variable, so its binlog "
      "carries no column names (fix: MariaDB 10.5+ or MySQL 8.0.1+)");
}

std::string CheckRowEventOptions(MysqlConnection* conn) {
  std::string err;
  std::optional<std::string> compression =
      GlobalVariable(conn, "binlog_transaction_compression", &err);
  if (!err.empty()) return err;
  if (compression && Upper(*compression) != "OFF") {
    return "binlog_transaction_compression is " + *compression +
           ", whose compressed transactions walwatch does not read " +
           SetFix("binlog_transaction_compression", "OFF");
  }
  std::optional<std::string> options =
      GlobalVariable(conn, "binlog_row_value_options", &err);
  if (!err.empty()) return err;
  if (options && Upper(*options).find("PARTIAL_JSON") != std::string::npos) {
    return "binlog_row_value_options is " + *options +
           ", whose partial JSON updates walwatch does not read " +
           SetFix("binlog_row_value_options", "''");
  }
  return "";
}

std::string CheckGrants(MysqlConnection* conn, const std::string& database,
                        const std::string& table) {
  const char* kSee = "; see schema/mysql/roles.sql)";
  MysqlRows grants;
  std::string err = conn->Query("SHOW GRANTS", &grants);
  if (!err.empty()) return "cannot read the account's grants: " + err;
  bool slave = false;
  for (const auto& row : grants.rows) {
    if (row.empty() || !row[0]) continue;
    for (const std::string& p : GlobalPrivileges(*row[0])) {
      if (p == "ALL PRIVILEGES" || p == "ALL" || p == "REPLICATION SLAVE")
        slave = true;
    }
  }
  if (!slave) {
    return std::string(
               "the walwatch account lacks REPLICATION SLAVE, which reading "
               "the "
               "binlog needs (fix: GRANT REPLICATION SLAVE ON *.* TO the "
               "account") +
           kSee;
  }
  err = conn->Query("SHOW MASTER STATUS");
  if (!err.empty()) {
    if (conn->last_errno() == ER_SPECIFIC_ACCESS_DENIED_ERROR) {
      return std::string(
                 "the walwatch account lacks REPLICATION CLIENT (MariaDB: "
                 "BINLOG "
                 "MONITOR), which SHOW MASTER STATUS needs (fix: GRANT "
                 "REPLICATION "
                 "CLIENT ON *.* TO the account") +
             kSee;
    }
    return "cannot run SHOW MASTER STATUS: " + err;
  }
  const std::string qualified =
      QuoteIdentifier(database) + "." + QuoteIdentifier(table);
  err = conn->Query("SELECT 1 FROM " + qualified + " LIMIT 0");
  if (!err.empty()) {
    if (conn->last_errno() == ER_TABLEACCESS_DENIED_ERROR ||
        conn->last_errno() == ER_DBACCESS_DENIED_ERROR) {
      return "the walwatch account may not SELECT from " + database + "." +
             table + " (fix: GRANT SELECT ON " + qualified + " TO the account" +
             kSee;
    }
    if (conn->last_errno() == ER_NO_SUCH_TABLE ||
        conn->last_errno() == ER_BAD_DB_ERROR) {
      return "";  // CheckTable says so
    }
    return "cannot read " + database + "." + table + ": " + err;
  }
  return "";
}

std::string CheckTable(MysqlConnection* conn, const std::string& database,
                       const std::string& table,
                       const std::vector<std::string>& columns,
                       const std::string& json_column) {
  MysqlRows rows;
  std::string err = conn->Query(
      "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE "
      "TABLE_SCHEMA = " +
          conn->Quote(database) + " AND TABLE_NAME = " + conn->Quote(table),
      &rows);
  if (!err.empty())
    return "cannot read the columns of " + database + "." + table + ": " + err;
  if (rows.rows.empty()) {
    return "table " + database + "." + table +
           " does not exist, or the walwatch account may not see it (fix: "
           "create it with "
           "schema/mysql/clusterpedia.sql, grant SELECT on it, or point the "
           "mapping at the "
           "table to watch)";
  }
  auto type_of = [&](const std::string& name) -> std::optional<std::string> {
    for (const auto& r : rows.rows) {
      // information_schema compares column names case-insensitively, as
      // MySQL does.
      if (r.size() >= 2 && r[0] && r[1] && Upper(*r[0]) == Upper(name))
        return Upper(*r[1]);
    }
    return std::nullopt;
  };
  for (const std::string& c : columns) {
    if (!type_of(c)) {
      return "table " + database + "." + table + " has no column " + c +
             " (fix: correct the table mapping)";
    }
  }
  if (!json_column.empty()) {
    std::optional<std::string> t = type_of(json_column);
    if (!t) {
      return "table " + database + "." + table + " has no column " +
             json_column + " (fix: correct the table mapping)";
    }
    if (*t != "JSON" && *t != "LONGTEXT" && *t != "MEDIUMTEXT" &&
        *t != "TEXT") {
      return "column " + json_column + " of " + database + "." + table +
             " is " + *t +
             ", the object column must be JSON (fix: correct the table "
             "mapping)";
    }
  }
  return "";
}

uint32_t DeriveServerId(std::string_view name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) {
    h ^= c;
    h *= 16777619u;
  }
  return 0x80000000u | (h & 0x7fffffffu);
}

std::string CheckServerId(MysqlConnection* conn, uint32_t server_id,
                          const std::string& replica_host) {
  if (server_id == 0) {
    return "walwatch's replica server id is 0, which a server refuses (fix: "
           "give each "
           "walwatch replica its own id, or derive one from the pod name)";
  }
  std::optional<std::string> own;
  std::string err = conn->QueryValue("SELECT @@server_id", &own);
  if (!err.empty()) return "cannot read server_id: " + err;
  if (own && *own == std::to_string(server_id)) {
    return "walwatch's replica server id " + std::to_string(server_id) +
           " is the server's own server_id (fix: give walwatch another id)";
  }
  MysqlRows hosts;
  err = conn->Query("SHOW SLAVE HOSTS", &hosts);
  if (!err.empty())
    return "";  // needs REPLICATION MASTER ADMIN on MariaDB: not ours to ask
  int id_col = -1, host_col = -1;
  for (size_t i = 0; i < hosts.columns.size(); ++i) {
    std::string c = Upper(hosts.columns[i]);
    if (c == "SERVER_ID") id_col = static_cast<int>(i);
    if (c == "HOST") host_col = static_cast<int>(i);
  }
  if (id_col < 0 || host_col < 0) return "";
  for (const auto& r : hosts.rows) {
    const auto& id = r[static_cast<size_t>(id_col)];
    const auto& host = r[static_cast<size_t>(host_col)];
    if (id && *id == std::to_string(server_id) &&
        (!host || *host != replica_host)) {
      return "replica server id " + std::to_string(server_id) +
             " is taken by " + (host ? *host : std::string("another replica")) +
             ", and the server drops one of two replicas with one id (fix: "
             "give each "
             "walwatch replica its own id, e.g. derived from its pod name)";
    }
  }
  return "";
}

std::string ReadBinlogRetention(MysqlConnection* conn, uint64_t* retention,
                                std::string* setting) {
  *retention = 0;
  setting->clear();
  std::string err;
  std::optional<std::string> seconds =
      GlobalVariable(conn, "binlog_expire_logs_seconds", &err);
  if (!err.empty()) return err;
  std::optional<std::string> days =
      GlobalVariable(conn, "expire_logs_days", &err);
  if (!err.empty()) return err;
  if (seconds && std::strtoull(seconds->c_str(), nullptr, 10) > 0) {
    *retention = std::strtoull(seconds->c_str(), nullptr, 10);
    *setting = "binlog_expire_logs_seconds";
  } else if (days && std::strtod(days->c_str(), nullptr) > 0) {
    *retention = static_cast<uint64_t>(
        std::llround(std::strtod(days->c_str(), nullptr) * 86400));
    *setting = "expire_logs_days";
  }
  return "";
}

std::string CheckBinlogRetention(MysqlConnection* conn,
                                 std::chrono::seconds replay_window,
                                 std::string* warning) {
  warning->clear();
  uint64_t retention = 0;
  std::string setting;
  if (std::string err = ReadBinlogRetention(conn, &retention, &setting);
      !err.empty()) {
    return err;
  }
  const uint64_t window = static_cast<uint64_t>(replay_window.count());
  if (retention == 0 || retention >= window)
    return "";  // 0: never purged automatically
  const std::string want = std::to_string(window);
  *warning =
      "binlog retention " + setting + " (" + FormatSeconds(retention) +
      ") is shorter than the replay window (" + FormatSeconds(window) +
      "): after a restart walwatch may find the binlog it needs purged, and "
      "every "
      "watcher must relist (fix: SET GLOBAL binlog_expire_logs_seconds = " +
      want + ", and set it in the server's configuration)";
  return "";
}

std::string RunStartupChecks(MysqlConnection* conn, const MysqlCheckOptions& o,
                             std::vector<std::string>* warnings) {
  std::string err;
  if (!(err = CheckServerVersion(conn)).empty()) return err;
  if (!(err = CheckBinaryLogging(conn)).empty()) return err;
  if (!(err = CheckBinlogFormat(conn)).empty()) return err;
  if (!(err = CheckBinlogRowImage(conn)).empty()) return err;
  if (!(err = CheckBinlogRowMetadata(conn)).empty()) return err;
  if (!(err = CheckRowEventOptions(conn)).empty()) return err;
  if (!(err = CheckGrants(conn, o.database, o.table)).empty()) return err;
  if (!(err = CheckTable(conn, o.database, o.table, o.columns, o.json_column))
           .empty()) {
    return err;
  }
  if (!(err = CheckServerId(conn, o.server_id, o.replica_host)).empty())
    return err;
  std::string warning;
  if (!(err = CheckBinlogRetention(conn, o.replay_window, &warning)).empty())
    return err;
  if (!warning.empty()) warnings->push_back(warning);
  return "";
}

}  // namespace walwatch::mysql
