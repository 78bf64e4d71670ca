#include "watchserver/conninfo_redaction.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "cdc/base/text.h"

namespace walwatch {
namespace {

constexpr char kRedacted[] = "********";

bool IsSecretKey(std::string_view key) {
  return key == "password" || key == "sslpassword";
}

using Span = std::pair<size_t, size_t>;  // [begin, end) of a secret.

// key=value form (ParseKeywordValues, as libpq tokenizes it). False if the
// string does not parse.
bool FindKeywordSecrets(std::string_view s, std::vector<Span>* secrets) {
  std::vector<KeywordValue> pairs;
  if (!ParseKeywordValues(s, &pairs)) return false;
  for (const KeywordValue& kv : pairs) {
    if (IsSecretKey(kv.key) && kv.value_end > kv.value_begin) {
      secrets->emplace_back(kv.value_begin, kv.value_end);
    }
  }
  return true;
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
