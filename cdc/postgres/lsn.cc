#include "cdc/postgres/lsn.h"

#include <cstdio>

namespace walwatch {
namespace {

// Parses 1..8 hex digits.
std::optional<uint32_t> ParseHex32(std::string_view s) {
  if (s.empty() || s.size() > 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    uint32_t d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | d;
  }
  return v;
}

}  // namespace

std::optional<uint64_t> ParseLsn(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto hi = ParseHex32(text.substr(0, slash));
  auto lo = ParseHex32(text.substr(slash + 1));
  if (!hi || !lo) return std::nullopt;
  return (uint64_t{*hi} << 32) | *lo;
}

std::string FormatLsn(uint64_t lsn) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%X/%X", static_cast<unsigned>(lsn >> 32),
                static_cast<unsigned>(lsn & 0xFFFFFFFFu));
  return buf;
}

std::optional<uint64_t> ParseResourceVersion(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = c - '0';
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

}  // namespace walwatch
