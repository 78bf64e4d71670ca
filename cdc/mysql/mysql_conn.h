// A MySQL/MariaDB connection through MariaDB Connector/C (libmariadb): the
// parameters walwatch takes, a small RAII owner and a text-only query helper.
// Connector/C's own header stays out of here, as libpq's stays out of
// cdc/pg_conn.h's users: only the opaque `st_mysql` is named.
//
// Thread safety: a MysqlConnection is used by one thread at a time. Any
// thread may call Interrupt() to make a blocked read on it fail at once.
#ifndef WALWATCH_CDC_MYSQL_MYSQL_CONN_H_
#define WALWATCH_CDC_MYSQL_MYSQL_CONN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/base/mutex.h"

struct st_mysql;  // MYSQL of <mysql.h>

namespace walwatch::mysql {

struct MysqlConnParams {
  // TCP when `host` is set (and not "localhost"); else the Unix `socket`.
  std::string host;
  unsigned port = 3306;
  std::string socket;
  std::string user;
  std::string password;  // never logged, never part of an error message
  std::string database;  // may be empty

  // TLS. kRequired encrypts (and fails without TLS); kVerify also checks
  // the server's certificate against `tls_ca` and its name against `host`
  // (Connector/C checks both together).
  enum class Tls : uint8_t { kDisabled, kRequired, kVerify };
  Tls tls = Tls::kDisabled;
  std::string tls_ca, tls_cert, tls_key;

  unsigned connect_timeout_s = 10;
  // Connector/C's per-read timeout; 0 leaves it unbounded. A binlog reader
  // sets it from its heartbeat so that a silent server is noticed.
  unsigned read_timeout_s = 0;
  unsigned write_timeout_s = 30;
};

// "user@host:port/db" or "user@unix:/path/db": for log lines; no password.
std::string DescribeParams(const MysqlConnParams& params);

// Rows of a result as text (as the text protocol gives them); nullopt is
// SQL NULL.
struct MysqlRows {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
};

class MysqlConnection {
 public:
  MysqlConnection();
  ~MysqlConnection();
  MysqlConnection(const MysqlConnection&) = delete;
  MysqlConnection& operator=(const MysqlConnection&) = delete;

  // Connects (closing any earlier connection). Returns "" or one line: the
  // server's or the client library's message with the target, never the
  // password. last_errno() keeps the error number. Under TLS, an ssl-ca,
  // ssl-cert or ssl-key file this process cannot read is refused before
  // connecting, with its key and path (CR_SSL_CONNECTION_ERROR).
  std::string Connect(const MysqlConnParams& params);
  void Close();
  bool connected() const { return conn_ != nullptr; }
  // Whether a connection kept idle since its last statement was closed by
  // the server meanwhile (a restart, wait_timeout, KILL): see
  // cdc/base/idle_socket.h. True when not connected.
  bool IdleConnectionClosed();

  // Runs one statement; with `out`, keeps its rows. Returns "" or one line.
  std::string Query(std::string_view sql, MysqlRows* out = nullptr);
  // Runs one statement and hands its rows to `on_rows` in batches of at
  // most `batch`, as the server sends them (mysql_use_result: the result is
  // never held whole). `on_rows` returns false to stop early; the
  // connection is then closed (the rest of the result would have to be
  // read). Returns "" or one line.
  std::string QueryEach(std::string_view sql, size_t batch,
                        const std::function<bool(const MysqlRows&)>& on_rows);
  // The single value of a one-row, one-column query ("" with *value unset
  // on NULL).
  std::string QueryValue(std::string_view sql,
                         std::optional<std::string>* value);

  // `text` as an SQL string literal for this connection's character set,
  // quotes included.
  std::string Quote(std::string_view text);

  // Error number of the last failed call (mysql_errno), 0 if none.
  unsigned last_errno() const { return last_errno_; }

  // Makes a read blocked on this connection fail at once (shutdown(2) of its
  // socket). Any thread; the owner must then Close() and reconnect.
  void Interrupt();

  // The Connector/C handle, for the binlog reader. Owned by this object.
  st_mysql* handle() { return conn_; }

 private:
  std::string Error(std::string_view what);

  st_mysql* conn_ = nullptr;
  // The socket, for Interrupt(); the mutex keeps it from being shut down
  // after Close() has closed it (and its number was reused).
  Mutex fd_mutex_;
  int fd_ = -1;
  std::string target_;
  unsigned last_errno_ = 0;
};

// Quotes an identifier with backticks (`a``b`).
std::string QuoteIdentifier(std::string_view name);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_MYSQL_CONN_H_
