// The MySQL/MariaDB connection string walwatch takes (--mysql-conninfo):
// key=value pairs written as libpq's conninfo is (ParseKeywordValues:
// whitespace between pairs, single quotes around a value with spaces,
// backslash escapes), with the option names of MySQL's own clients:
//
//   host=db.example port=3306 user=walwatch password=... database=clusterpedia
//   ssl-mode=VERIFY_IDENTITY ssl-ca=/etc/walwatch/ca.crt
//
//   host      TCP host; empty or "localhost": the Unix socket
//   port      TCP port (3306)
//   socket    the Unix socket's path (the client library's default if empty)
//   user, password
//   database  the database that holds the table (required); also "dbname"
//   ssl-mode  DISABLED (the default), REQUIRED (encrypted, the server's
//             certificate not checked) or VERIFY_IDENTITY (encrypted, the
//             certificate checked against ssl-ca and its name against host)
//   ssl-ca, ssl-cert, ssl-key   files (a client certificate is optional)
//
// The password is never logged: the startup log shows the string with it
// masked, as it does --conninfo's (RedactConninfo).
//
// Thread safety: a pure function.
#ifndef WALWATCH_CDC_MYSQL_MYSQL_CONNINFO_H_
#define WALWATCH_CDC_MYSQL_MYSQL_CONNINFO_H_

#include <string>
#include <string_view>

#include "cdc/mysql/mysql_conn.h"

namespace walwatch::mysql {

// Parses `text` into *out (overwritten). Returns "" or one line naming the
// key at fault, never a value.
std::string ParseMysqlConninfo(std::string_view text, MysqlConnParams* out);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_MYSQL_CONNINFO_H_
