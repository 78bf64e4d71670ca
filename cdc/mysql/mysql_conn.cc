#include "cdc/mysql/mysql_conn.h"

#include <errmsg.h>
#include <fcntl.h>
#include <mysql.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>  // std::call_once

#include "cdc/base/idle_socket.h"

namespace walwatch::mysql {

namespace {

// mysql_library_init is not thread-safe; everything after it is.
void InitLibraryOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

bool UsesSocket(const MysqlConnParams& p) {
  return p.host.empty() || p.host == "localhost";
}

// "" if `path` is a file this process can read, else why not. Connector/C
// reports an unreadable ssl-cert or ssl-ca as "No such file or directory"
// without the file's name, and an ssl-key with a garbage error code.
std::string Unreadable(const std::string& path) {
  // O_NONBLOCK: a FIFO named here must not hold the check up.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::strerror(errno);
  struct stat st;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  return regular ? "" : "not a regular file";
}

// The first line of a message.
std::string FirstLine(std::string_view text) {
  size_t nl = text.find('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(0, nl));
}

}  // namespace

std::string DescribeParams(const MysqlConnParams& p) {
  std::string out = p.user.empty() ? "(no user)" : p.user;
  if (UsesSocket(p)) {
    out += "@unix:" +
           (p.socket.empty() ? std::string("(default socket)") : p.socket);
  } else {
    out += "@" + p.host + ":" + std::to_string(p.port);
  }
  if (!p.database.empty()) out += "/" + p.database;
  return out;
}

std::string QuoteIdentifier(std::string_view name) {
  std::string q = "`";
  for (char c : name) {
    if (c == '`') q += '`';
    q += c;
  }
  return q + "`";
}

MysqlConnection::MysqlConnection() { InitLibraryOnce(); }

MysqlConnection::~MysqlConnection() { Close(); }

void MysqlConnection::Close() {
  MutexLock lock(&fd_mutex_);
  fd_ = -1;
  if (conn_ != nullptr) {
    mysql_close(conn_);
    conn_ = nullptr;
  }
}

std::string MysqlConnection::Error(std::string_view what) {
  last_errno_ = conn_ != nullptr ? mysql_errno(conn_) : 0;
  std::string message = conn_ != nullptr ? mysql_error(conn_) : "no connection";
  return std::string(what) + ": " + FirstLine(message) + " (" +
         std::to_string(last_errno_) + ")";
}

std::string MysqlConnection::Connect(const MysqlConnParams& p) {
  Close();
  last_errno_ = 0;
  target_ = DescribeParams(p);
  if (p.tls != MysqlConnParams::Tls::kDisabled) {
    const struct {
      const char* key;
      const std::string& path;
    } files[] = {
        {"ssl-ca", p.tls_ca}, {"ssl-cert", p.tls_cert}, {"ssl-key", p.tls_key}};
    for (const auto& f : files) {
      if (f.path.empty()) continue;
      if (std::string why = Unreadable(f.path); !why.empty()) {
        last_errno_ = CR_SSL_CONNECTION_ERROR;
        return "cannot connect to " + target_ + ": cannot read the " + f.key +
               " file " + f.path + ": " + why;
      }
    }
  }
  conn_ = mysql_init(nullptr);
  if (conn_ == nullptr)
    return "cannot connect to " + target_ + ": out of memory";

  unsigned int connect_timeout = p.connect_timeout_s;
  mysql_optionsv(conn_, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
  if (p.read_timeout_s > 0) {
    unsigned int read_timeout = p.read_timeout_s;
    mysql_optionsv(conn_, MYSQL_OPT_READ_TIMEOUT, &read_timeout);
  }
  if (p.write_timeout_s > 0) {
    unsigned int write_timeout = p.write_timeout_s;
    mysql_optionsv(conn_, MYSQL_OPT_WRITE_TIMEOUT, &write_timeout);
  }
  // A binlog event holds a whole row: allow the protocol's largest packet.
  unsigned long max_packet = 1024UL * 1024 * 1024;
  mysql_optionsv(conn_, MYSQL_OPT_MAX_ALLOWED_PACKET, &max_packet);
  mysql_optionsv(conn_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (p.tls != MysqlConnParams::Tls::kDisabled) {
    my_bool enforce = 1;
    mysql_optionsv(conn_, MYSQL_OPT_SSL_ENFORCE, &enforce);
    my_bool verify = p.tls == MysqlConnParams::Tls::kVerify ? 1 : 0;
    mysql_optionsv(conn_, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    if (!p.tls_ca.empty())
      mysql_optionsv(conn_, MYSQL_OPT_SSL_CA, p.tls_ca.c_str());
    if (!p.tls_cert.empty())
      mysql_optionsv(conn_, MYSQL_OPT_SSL_CERT, p.tls_cert.c_str());
    if (!p.tls_key.empty())
      mysql_optionsv(conn_, MYSQL_OPT_SSL_KEY, p.tls_key.c_str());
  }

  const bool socket = UsesSocket(p);
  if (mysql_real_connect(
          conn_, socket ? nullptr : p.host.c_str(), p.user.c_str(),
          p.password.c_str(), p.database.empty() ? nullptr : p.database.c_str(),
          socket ? 0 : p.port,
          socket && !p.socket.empty() ? p.socket.c_str() : nullptr,
          0) == nullptr) {
    std::string e = Error("cannot connect to " + target_);
    mysql_close(conn_);
    conn_ = nullptr;
    return e;
  }
  // Connector/C refuses a server without TLS only when it verifies the
  // server's certificate: under ssl-mode=REQUIRED it goes on in the clear.
  if (p.tls != MysqlConnParams::Tls::kDisabled &&
      mysql_get_ssl_cipher(conn_) == nullptr) {
    mysql_close(conn_);
    conn_ = nullptr;
    last_errno_ = CR_SSL_CONNECTION_ERROR;
    return "cannot connect to " + target_ +
           ": the server does not offer TLS, and ssl-mode requires it (" +
           std::to_string(last_errno_) + ")";
  }
  MutexLock lock(&fd_mutex_);
  fd_ = static_cast<int>(mysql_get_socket(conn_));
  return "";
}

bool MysqlConnection::IdleConnectionClosed() {
  if (conn_ == nullptr) return true;
  MutexLock lock(&fd_mutex_);
  return IdleSocketEnded(fd_);
}

std::string MysqlConnection::Query(std::string_view sql, MysqlRows* out) {
  if (conn_ == nullptr) return "not connected to " + target_;
  last_errno_ = 0;
  if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) {
    return Error("query failed on " + target_);
  }
  MYSQL_RES* res = mysql_store_result(conn_);
  if (res == nullptr) {
    if (mysql_field_count(conn_) != 0)
      return Error("reading a result from " + target_);
    if (out != nullptr) *out = MysqlRows();
    return "";
  }
  if (out != nullptr) {
    *out = MysqlRows();
    unsigned int n = mysql_num_fields(res);
    MYSQL_FIELD* fields = mysql_fetch_fields(res);
    for (unsigned int i = 0; i < n; ++i)
      out->columns.emplace_back(fields[i].name);
    while (MYSQL_ROW row = mysql_fetch_row(res)) {
      unsigned long* lengths = mysql_fetch_lengths(res);
      std::vector<std::optional<std::string>> values(n);
      for (unsigned int i = 0; i < n; ++i) {
        if (row[i] != nullptr) values[i].emplace(row[i], lengths[i]);
      }
      out->rows.push_back(std::move(values));
    }
  }
  mysql_free_result(res);
  return "";
}

std::string MysqlConnection::QueryEach(
    std::string_view sql, size_t batch,
    const std::function<bool(const MysqlRows&)>& on_rows) {
  if (conn_ == nullptr) return "not connected to " + target_;
  last_errno_ = 0;
  if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) {
    return Error("query failed on " + target_);
  }
  MYSQL_RES* res = mysql_use_result(conn_);
  if (res == nullptr) {
    if (mysql_field_count(conn_) != 0) {
      return Error("reading a result from " + target_);
    }
    return "";
  }
  MysqlRows rows;
  const unsigned int n = mysql_num_fields(res);
  MYSQL_FIELD* fields = mysql_fetch_fields(res);
  for (unsigned int i = 0; i < n; ++i)
    rows.columns.emplace_back(fields[i].name);
  bool stopped = false;
  for (;;) {
    MYSQL_ROW row = mysql_fetch_row(res);
    if (row != nullptr) {
      unsigned long* lengths = mysql_fetch_lengths(res);
      std::vector<std::optional<std::string>> values(n);
      for (unsigned int i = 0; i < n; ++i) {
        if (row[i] != nullptr) values[i].emplace(row[i], lengths[i]);
      }
      rows.rows.push_back(std::move(values));
      if (rows.rows.size() < batch) continue;
    }
    if (!rows.rows.empty() && !on_rows(rows)) {
      stopped = true;
      break;
    }
    rows.rows.clear();
    if (row == nullptr) break;
  }
  std::string err;
  if (!stopped && mysql_errno(conn_) != 0) {
    err = Error("reading a result from " + target_);
  }
  if (stopped) {
    // mysql_free_result reads the rest of the result first: cut the socket
    // so that it finds none, and close.
    Interrupt();
    mysql_free_result(res);
    Close();
    return "";
  }
  mysql_free_result(res);
  return err;
}

std::string MysqlConnection::QueryValue(std::string_view sql,
                                        std::optional<std::string>* value) {
  MysqlRows rows;
  std::string err = Query(sql, &rows);
  if (!err.empty()) return err;
  if (rows.rows.size() != 1 || rows.rows[0].size() != 1) {
    return "expected one value from " + std::string(sql) + ", got " +
           std::to_string(rows.rows.size()) + " rows";
  }
  *value = rows.rows[0][0];
  return "";
}

std::string MysqlConnection::Quote(std::string_view text) {
  std::string out(text.size() * 2 + 1, '\0');
  unsigned long n =
      conn_ != nullptr
          ? mysql_real_escape_string(conn_, out.data(), text.data(),
                                     text.size())
          : mysql_escape_string(out.data(), text.data(), text.size());
  out.resize(n);
  return "'" + out + "'";
}

void MysqlConnection::Interrupt() {
  MutexLock lock(&fd_mutex_);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace walwatch::mysql
