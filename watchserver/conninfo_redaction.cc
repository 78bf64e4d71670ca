#include "watchserver/conninfo_redaction.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "cdc/base/text.h"

namespace walwatch {
namespace {

constexpr char kRedacted[] = "********";

bool IsConninfoSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

bool IsSecretKey(std::string_view key) {
  return key == "password" || key == "sslpassword";
}

using Span = std::pair<size_t, size_t>;  // [begin, end) of a secret.

// key=value form, tokenized as libpq's conninfo_parse does: whitespace
// separates pairs, spaces may surround '=', a value is either unquoted (ends
// at whitespace) or in single quotes, and a backslash escapes the next
// character in both. False if the string does not parse.
bool FindKeywordSecrets(std::string_view s, std::vector<Span>* secrets) {
  size_t i = 0;
  while (true) {
    while (i < s.size() && IsConninfoSpace(s[i])) ++i;
    if (i == s.size()) return true;
    const size_t key_begin = i;
    while (i < s.size() && s[i] != '=' && !IsConninfoSpace(s[i])) ++i;
    const std::string_view key = s.substr(key_begin, i - key_begin);
    while (i < s.size() && IsConninfoSpace(s[i])) ++i;
    if (i == s.size() || s[i] != '=') return false;
    ++i;
    while (i < s.size() && IsConninfoSpace(s[i])) ++i;
    const size_t value_begin = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (true) {
        if (i == s.size()) return false;  // Unterminated quote.
        if (s[i] == '\\') {
          i += i + 1 < s.size() ? 2 : 1;
        } else if (s[i] == '\'') {
          ++i;
          break;
        } else {
          ++i;
        }
      }
    } else {
      while (i < s.size() && !IsConninfoSpace(s[i])) {
        i += s[i] == '\\' && i + 1 < s.size() ? 2 : 1;
      }
    }
    if (IsSecretKey(key) && i > value_begin) {
      secrets->emplace_back(value_begin, i);
    }
  }
}

// URI form: postgresql://[user[:password]@][hosts][/dbname][?key=value&...].
// Two independent passes, erring toward redacting too much: a password typed
// with a raw '@', '/' or '?' (libpq wants them percent-encoded) must not leak.
//  1. The userinfo ends at the last '@' in the string; after its first ':'
//     is the password.
//  2. password= and sslpassword= parameters after the first '?'.
void FindUriSecrets(std::string_view s, size_t prefix_len,
                    std::vector<Span>* secrets) {
  const size_t at = s.rfind('@');
  if (at != std::string_view::npos && at >= prefix_len) {
    const size_t colon = s.find(':', prefix_len);
    if (colon < at && colon + 1 < at) secrets->emplace_back(colon + 1, at);
  }
  size_t q = s.find('?', prefix_len);
  if (q == std::string_view::npos) return;
  size_t i = q + 1;
  while (i <= s.size()) {
    size_t end = s.find('&', i);
    if (end == std::string_view::npos) end = s.size();
    const std::string_view param = s.substr(i, end - i);
    const size_t eq = param.find('=');
    if (eq != std::string_view::npos && eq + 1 < param.size()) {
      // A key with a malformed escape is taken as written: it names no
      // secret (and libpq refuses the URI).
      const std::string_view raw_key = param.substr(0, eq);
      std::string key;
      if (!PercentDecode(raw_key, /*plus_is_space=*/false, &key)) {
        key.assign(raw_key);
      }
      if (IsSecretKey(key)) secrets->emplace_back(i + eq + 1, end);
    }
    i = end + 1;
  }
}

}  // namespace

std::string RedactConninfo(const std::string& conninfo) {
  std::vector<Span> secrets;
  size_t prefix_len = 0;
  for (std::string_view prefix : {"postgresql://", "postgres://"}) {
    if (conninfo.compare(0, prefix.size(), prefix) == 0) {
      prefix_len = prefix.size();
    }
  }
  if (prefix_len > 0) {
    FindUriSecrets(conninfo, prefix_len, &secrets);
  } else if (!FindKeywordSecrets(conninfo, &secrets)) {
    return kRedacted;  // Unparsable: cannot tell where a password ends.
  }
  std::sort(secrets.begin(), secrets.end());
  std::string out;
  size_t copied = 0;
  for (const auto& [begin, end] : secrets) {
    if (end <= copied) continue;  // Inside a span already replaced.
    if (begin >= copied) {
      out.append(conninfo, copied, begin - copied);
      out += kRedacted;
    }
    copied = end;
  }
  out.append(conninfo, copied, std::string::npos);
  return out;
}

}  // namespace walwatch
