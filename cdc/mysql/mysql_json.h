// DecodeMysqlJson: MySQL 8's binary JSON (the form a JSON column takes in
// the binlog's row events) to the JSON text a SELECT of that column returns
// on MySQL 8.
//
// Written from MySQL's sources, read (not run): the format as documented in
// sql-common/json_binary.h and parsed in json_binary.cc (parse_value,
// parse_scalar, Value::element/key), and the text as Json_wrapper::to_string
// prints it (sql-common/json_dom.cc wrapper_to_string, double_quote, my_gcvt
// in strings/dtoa.cc, decimal2string in strings/decimal.cc, my_TIME_to_str
// in my_time.cc). NO MySQL 8 server exists on this machine (Debian 12 ships
// none): the unit tests build values byte by byte from that documentation,
// and nothing here has been compared with a real server's output.
//
// The text, as MySQL prints it:
//   - objects {"k": v, "k2": v2} and arrays [a, b] with ", " and ": "
//     separators, members in stored order (MySQL stores keys sorted by
//     length, then bytes: that is the order a SELECT shows);
//   - strings quoted; `"` `\` and \b \f \n \r \t escaped, other bytes below
//     0x20 as \u00xx (lower-case hex), everything else (UTF-8) as is;
//   - integers in decimal; doubles as my_gcvt prints them with 34 places (the
//     shortest digits that read back, "f" or "e" notation by its rules), with
//     ".0" appended when neither '.' nor 'e' appears (1.0, not 1);
//   - opaque values: DECIMAL unquoted with its scale ("3.50"), DATE, TIME,
//     DATETIME and TIMESTAMP quoted with six fractional digits
//     ("2015-01-15 23:24:25.000000"), VAR_STRING as a string, anything else
//     as "base64:typeN:..." (MySQL's base64, a newline every 76 characters,
//     escaped as \n);
//   - an empty value (a NOT NULL column given NULL in non-strict mode) is
//     null, as MySQL reads it.
//
// Malformed input is an error naming what and where, never a crash:
// truncated values, offsets outside their container, unknown type bytes,
// invalid UTF-8 in strings and keys, nesting deeper than MySQL's 100 levels,
// a bad DECIMAL or datetime. Recursion is bounded by that depth limit, and
// the output by 16 bytes per input byte (plus 64), which no well-formed
// document reaches: values that share bytes (a document crafted to expand
// exponentially) stop there with an error.
//
// Thread safety: a pure function.
#ifndef WALWATCH_CDC_MYSQL_MYSQL_JSON_H_
#define WALWATCH_CDC_MYSQL_MYSQL_JSON_H_

#include <string>
#include <string_view>

namespace walwatch::mysql {

// MySQL's JSON_DOCUMENT_MAX_DEPTH.
inline constexpr int kMysqlJsonMaxDepth = 100;

// Decodes `binary` into `*text` (overwritten). Returns "" on success, or one
// line describing the first malformation (and *text is unspecified).
std::string DecodeMysqlJson(std::string_view binary, std::string* text);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_MYSQL_JSON_H_
