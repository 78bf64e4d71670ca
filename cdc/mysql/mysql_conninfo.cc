#include "cdc/mysql/mysql_conninfo.h"

#include <cctype>
#include <vector>

#include "cdc/base/text.h"

namespace walwatch::mysql {

namespace {

std::string Upper(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return s;
}

}  // namespace

std::string ParseMysqlConninfo(std::string_view text, MysqlConnParams* out) {
  *out = MysqlConnParams();
  std::vector<KeywordValue> pairs;
  if (!ParseKeywordValues(text, &pairs)) {
    return "cannot parse the MySQL connection string: want key=value pairs "
           "separated by spaces, a value with spaces in single quotes";
  }
  for (const KeywordValue& kv : pairs) {
    const std::string& k = kv.key;
    const std::string& v = kv.value;
    if (k == "host") {
      out->host = v;
    } else if (k == "port") {
      uint64_t port = 0;
      if (!ParseUnsigned(v, &port) || port == 0 || port > 65535) {
        return "port: want a TCP port from 1 to 65535";
      }
      out->port = static_cast<unsigned>(port);
    } else if (k == "socket") {
      out->socket = v;
    } else if (k == "user") {
      out->user = v;
    } else if (k == "password") {
      out->password = v;
    } else if (k == "database" || k == "dbname") {
      out->database = v;
    } else if (k == "ssl-mode" || k == "ssl_mode") {
      const std::string mode = Upper(v);
      if (mode == "DISABLED") {
        out->tls = MysqlConnParams::Tls::kDisabled;
      } else if (mode == "REQUIRED") {
        out->tls = MysqlConnParams::Tls::kRequired;
      } else if (mode == "VERIFY_IDENTITY") {
        out->tls = MysqlConnParams::Tls::kVerify;
      } else if (mode == "VERIFY_CA") {
        return "ssl-mode: VERIFY_CA is not offered (the client library checks "
               "the certificate and the host name together): use "
               "VERIFY_IDENTITY";
      } else {
        return "ssl-mode: want DISABLED, REQUIRED or VERIFY_IDENTITY "
               "(PREFERRED, which falls back to a plain connection, is not "
               "offered)";
      }
    } else if (k == "ssl-ca" || k == "ssl_ca") {
      out->tls_ca = v;
    } else if (k == "ssl-cert" || k == "ssl_cert") {
      out->tls_cert = v;
    } else if (k == "ssl-key" || k == "ssl_key") {
      out->tls_key = v;
    } else {
      return "unknown key \"" + OneLine(k.substr(0, 64)) +
             "\" (known: host, port, socket, user, password, database, "
             "ssl-mode, ssl-ca, ssl-cert, ssl-key)";
    }
  }
  if (out->database.empty()) {
    return "database is required: the database that holds the table, e.g. "
           "database=clusterpedia";
  }
  if (out->tls == MysqlConnParams::Tls::kVerify && out->tls_ca.empty()) {
    return "ssl-mode=VERIFY_IDENTITY needs ssl-ca, the CA certificate to "
           "check the server's against";
  }
  if (out->tls_cert.empty() != out->tls_key.empty()) {
    return "ssl-cert and ssl-key go together";
  }
  // Connector/C reads none of them without TLS: a client certificate would
  // be dropped in silence, and the login refused as if the password were
  // wrong.
  if (out->tls == MysqlConnParams::Tls::kDisabled &&
      !(out->tls_ca.empty() && out->tls_cert.empty())) {
    return "ssl-ca, ssl-cert and ssl-key are read only with TLS: add "
           "ssl-mode=REQUIRED or VERIFY_IDENTITY (the default is DISABLED)";
  }
  return "";
}

}  // namespace walwatch::mysql
