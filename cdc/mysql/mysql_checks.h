// The startup checks walwatch runs against a MySQL or MariaDB server on an
// ordinary connection, before it reads the binlog. Each returns "" when the
// server is fit, or one line that says what is wrong and names the fix.
// The retention check only warns.
//
// Thread safety: called by the thread that owns the connection.
#ifndef WALWATCH_CDC_MYSQL_MYSQL_CHECKS_H_
#define WALWATCH_CDC_MYSQL_MYSQL_CHECKS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/mysql/mysql_conn.h"

namespace walwatch::mysql {

// The server's version: MariaDB, or MySQL 8.0.26 or later. walwatch reads
// the binlog through MariaDB Connector/C 3.3, which refuses ("Malformed
// packet") the FORMAT_DESCRIPTION event of MySQL before 8.0.26, the first
// event of every binlog (tests/unit/mysql8_binlog_test.cc).
std::string CheckServerVersion(MysqlConnection* conn);
// The same on `version` as the server gives it ("8.0.36",
// "10.11.19-MariaDB-0+deb12u1"); a version it cannot parse passes.
std::string CheckServerVersionString(std::string_view version);

// log_bin: the server writes a binary log at all.
std::string CheckBinaryLogging(MysqlConnection* conn);
// binlog_format=ROW: changes are logged as rows, not statements.
std::string CheckBinlogFormat(MysqlConnection* conn);
// binlog_row_image=FULL: every column of the old and the new row. MINIMAL
// logs only the primary key of the old row and the changed columns of the
// new one, so DELETE loses the object, and an UPDATE that leaves the object
// as it was cannot be told from one that changed nothing else (NOBLOB
// likewise drops unchanged JSON/TEXT columns).
std::string CheckBinlogRowImage(MysqlConnection* conn);
// binlog_row_metadata=FULL: TABLE_MAP events carry the column names that
// walwatch reads columns by.
std::string CheckBinlogRowMetadata(MysqlConnection* conn);
// MySQL 8 only (absent on MariaDB): binlog_transaction_compression=OFF and
// binlog_row_value_options without PARTIAL_JSON, whose events the reader
// does not read.
std::string CheckRowEventOptions(MysqlConnection* conn);

// The grants walwatch needs: REPLICATION SLAVE (read in SHOW GRANTS, given
// to the account or to a role it has active), REPLICATION CLIENT (tried:
// SHOW MASTER STATUS) and SELECT on the table (tried).
std::string CheckGrants(MysqlConnection* conn, const std::string& database,
                        const std::string& table);

// The table exists with every column of `columns`, and `json_column` is
// JSON (MySQL's json; on MariaDB, whose JSON is an alias of LONGTEXT, a
// text type).
std::string CheckTable(MysqlConnection* conn, const std::string& database,
                       const std::string& table,
                       const std::vector<std::string>& columns,
                       const std::string& json_column);

// `server_id`, walwatch's id as a replica, is not 0, differs from the
// server's own, and no other registered replica (SHOW SLAVE HOSTS, where
// the account may read it) uses it under another name than `replica_host`.
std::string CheckServerId(MysqlConnection* conn, uint32_t server_id,
                          const std::string& replica_host);

// A replica server_id for `name` (a pod name, as --slot-from takes one):
// FNV-1a of the name, in [2^31, 2^32): far from the small ids people give
// servers, and different for different names but for a 1 in 2^31 chance
// per pair (which CheckServerId catches when replicas register).
uint32_t DeriveServerId(std::string_view name);

// The server's binlog retention in seconds: binlog_expire_logs_seconds
// (MySQL 8, MariaDB 10.6+) when above 0, else expire_logs_days x 86400; 0
// when binlogs are never purged automatically. *setting names the variable
// it came from ("" for 0). Returns "" or the error reading them.
std::string ReadBinlogRetention(MysqlConnection* conn, uint64_t* seconds,
                                std::string* setting);

// Binlog retention (ReadBinlogRetention) against the replay window walwatch
// rebuilds after a restart. Returns "" or the error reading it; sets
// *warning (naming the setting and the value to give it) when the binlog
// may be purged sooner than the window, and clears it otherwise.
std::string CheckBinlogRetention(MysqlConnection* conn,
                                 std::chrono::seconds replay_window,
                                 std::string* warning);

struct MysqlCheckOptions {
  std::string database;
  std::string table;
  std::vector<std::string> columns;  // every mapped column
  std::string json_column;           // the object column
  uint32_t server_id = 0;
  std::string replica_host;
  std::chrono::seconds replay_window{0};
};

// All of the above in order (version, settings, grants, table, server id,
// retention): the first failure's line, or "". Warnings are appended.
std::string RunStartupChecks(MysqlConnection* conn,
                             const MysqlCheckOptions& options,
                             std::vector<std::string>* warnings);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_MYSQL_CHECKS_H_
