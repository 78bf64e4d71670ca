// RedactConninfo: a libpq connection string fit for a log line, with its
// secrets (password, sslpassword) masked. walwatch logs its effective
// configuration at startup (ConfigToJson), and --conninfo may carry a
// password.
//
// Both of libpq's forms are read:
//  * key=value pairs, tokenized as libpq's conninfo_parse does (quoted
//    values, backslash escapes); a string that does not parse is replaced as
//    a whole, since where a password in it ends cannot be told;
//  * postgresql:// and postgres:// URIs: the password of the userinfo and
//    password= and sslpassword= parameters (their keys percent-decoded).
//    This errs toward masking too much: a password typed with a raw '@',
//    '/' or '?' (libpq wants them percent-encoded) must not leak.
//
// Thread safety: a pure function of its argument; any thread.
#ifndef WALWATCH_WATCHSERVER_CONNINFO_REDACTION_H_
#define WALWATCH_WATCHSERVER_CONNINFO_REDACTION_H_

#include <string>

namespace walwatch {

// `conninfo` with the values of password and sslpassword replaced by
// "********", in both the key=value and the URI form. A key=value string that
// cannot be parsed is replaced as a whole.
std::string RedactConninfo(const std::string& conninfo);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_CONNINFO_REDACTION_H_
