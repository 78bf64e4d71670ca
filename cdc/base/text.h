// Small text syntaxes that more than one folder reads: hexadecimal digits,
// percent-encoding, UTF-8 sequences, unsigned decimals, control bytes in
// messages and the flags' durations. One definition each, so that a
// request's query, a conninfo URI and a log line decode alike.
//
// Thread safety: pure functions of their arguments; any thread.
#ifndef WALWATCH_CDC_BASE_TEXT_H_
#define WALWATCH_CDC_BASE_TEXT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace walwatch {

// 0..15 for a hexadecimal digit (either case), -1 for anything else.
int HexDigitValue(char c);

// Percent-decodes `in` into `out`. With `plus_is_space`, '+' decodes to ' '
// (query strings). Returns false on a malformed escape ('%' not followed by
// two hexadecimal digits).
bool PercentDecode(std::string_view in, bool plus_is_space, std::string* out);

// How many bytes the UTF-8 sequence led by `lead` has by its first byte
// alone: 1 for ASCII, 2 to 4 for a lead byte, 0 for a byte no well-formed
// sequence starts with (a continuation byte, C0, C1, F5..FF).
size_t Utf8LeadLength(unsigned char lead);

// Length of the well-formed UTF-8 sequence at s[i] (i < s.size(); 1 for an
// ASCII byte), or 0 if there is none. Then sets *consumed to how many bytes
// form the maximal ill-formed subpart, so that each becomes a single U+FFFD
// (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal Subparts").
size_t Utf8SequenceLength(std::string_view s, size_t i, size_t* consumed);

// A run of decimal digits at the front of *text, consumed. False (and *text
// unchanged) if there is none or it does not fit in uint64_t.
bool ConsumeUnsigned(std::string_view* text, uint64_t* value);
// `text` is all decimal digits and fits in uint64_t.
bool ParseUnsigned(std::string_view text, uint64_t* value);

// Whether `part` occurs in `text` (matching a library's error message).
inline bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// `text` with control characters written as \xNN, so that an error message
// that quotes its input stays one line.
std::string OneLine(std::string text);

// One key=value pair of a connection string in libpq's keyword form.
struct KeywordValue {
  std::string key;
  std::string value;  // unquoted, backslash escapes resolved
  // The value as written, [value_begin, value_end) of the string, quotes
  // included: what a log line masks.
  size_t value_begin = 0;
  size_t value_end = 0;
};
// Splits `text` as libpq's conninfo_parse does: whitespace separates pairs,
// spaces may surround '=', a value is either unquoted (it ends at
// whitespace) or in single quotes, and a backslash escapes the next
// character in both. False if it does not parse (a key without '=', an
// unterminated quote). PostgreSQL's --conninfo and MySQL's
// --mysql-conninfo are both written so.
bool ParseKeywordValues(std::string_view text, std::vector<KeywordValue>* out);

// Parses a duration as the flags take it: "500ms", "30s", "10m", "1h",
// "1h30m" (units h, m, s, ms, each at most once, largest first), or a bare
// integer meaning seconds. Returns false for anything else.
bool ParseDuration(std::string_view text, std::chrono::milliseconds* value);

}  // namespace walwatch

#endif  // WALWATCH_CDC_BASE_TEXT_H_
