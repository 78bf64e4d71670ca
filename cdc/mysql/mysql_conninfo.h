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
//             certificate not checked; with ssl-ca, Connector/C checks that
//             it was signed by that CA, but not its name) or VERIFY_IDENTITY
//             (encrypted, the certificate checked against ssl-ca and its
//             name against host)
//   ssl-ca, ssl-cert, ssl-key   files, read only under REQUIRED or
//             VERIFY_IDENTITY (refused with DISABLED). ssl-cert and ssl-key
//             are a client certificate and its key, for an account created
//             REQUIRE X509, ISSUER or SUBJECT; optional otherwise. A file
//             that cannot be read stops the connection before it starts.
//
// TLS on the Unix socket works as on TCP: MariaDB (10.11) negotiates it
// there too, and an account created REQUIRE SSL logs in over the socket
// only with ssl-mode set. VERIFY_IDENTITY is no formality there:
// Connector/C (3.3) checks the server's certificate for the name
// "localhost", which the certificate must then carry (e.g. subjectAltName
// DNS:localhost). mariadb_connection_test shows both from the server's
// side. (PostgreSQL, by contrast, has no TLS on its Unix socket.)
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
