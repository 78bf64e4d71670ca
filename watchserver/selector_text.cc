#include "watchserver/selector_text.h"

#include <cstdint>
#include <limits>

namespace walwatch {
namespace {

void AppendHexByte(unsigned char u, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  *out += "\\x";
  out->push_back(kHex[u >> 4]);
  out->push_back(kHex[u & 0xf]);
}

}  // namespace

// User text echoed in a message: control characters are escaped so that
// the message stays on one line.
std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      AppendHexByte(u, &out);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// `value` as Go's %q shows it, for ASCII; other bytes are kept as they are.
std::string Quoted(std::string_view value) {
  // Pairs of (character, letter of its backslash escape).
  static const char kEscapes[] = "\"\"\\\\\aa\bb\ff\nn\rr\tt\vv";
  std::string out = "\"";
  for (char c : value) {
    unsigned char u = static_cast<unsigned char>(c);
    const char* e = nullptr;
    for (const char* p = kEscapes; *p != '\0'; p += 2) {
      if (*p == c) e = p;
    }
    if (e != nullptr) {
      out.push_back('\\');
      out.push_back(e[1]);
    } else if (u < 0x20 || u == 0x7f) {
      AppendHexByte(u, &out);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

// strconv.ParseInt(s, 10, 64): optional sign, decimal digits, in range.
bool ParseInt64(std::string_view s, int64_t* out) {
  size_t i = 0;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    i = 1;
  }
  if (i == s.size()) return false;
  const uint64_t limit =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) +
      (negative ? 1 : 0);
  uint64_t n = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    if (n > (limit - digit) / 10) return false;
    n = n * 10 + digit;
  }
  *out = negative ? static_cast<int64_t>(0 - n) : static_cast<int64_t>(n);
  return true;
}

}  // namespace walwatch
