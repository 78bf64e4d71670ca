#include "watchserver/config_values.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "cdc/base/text.h"

namespace walwatch {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kKi = uint64_t{1} << 10;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct SizeUnit {
  std::string_view suffix;
  uint64_t bytes;
};
// Binary units first: FormatSize prefers them.
constexpr SizeUnit kSizeUnits[] = {
    {"Ti", kKi* kKi* kKi* kKi},
    {"Gi", kKi* kKi* kKi},
    {"Mi", kKi* kKi},
    {"Ki", kKi},
    {"T", 1000000000000},
    {"G", 1000000000},
    {"M", 1000000},
    {"k", 1000},
    {"K", 1000},
};

}  // namespace

bool ParseBool(std::string_view text, bool* value) {
  if (text == "true" || text == "1") {
    *value = true;
    return true;
  }
  if (text == "false" || text == "0") {
    *value = false;
    return true;
  }
  return false;
}

std::string FormatDuration(milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  const std::pair<const char*, int64_t> kUnits[] = {
      {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
  for (const auto& [suffix, unit] : kUnits) {
    if (ms >= unit) {
      out += std::to_string(ms / unit);
      out += suffix;
      ms %= unit;
    }
  }
  return out;
}

// "256Mi", "1Gi", "512Ki", "100M", "1G", or plain bytes.
bool ParseSize(std::string_view text, uint64_t* value) {
  uint64_t n;
  if (!ConsumeUnsigned(&text, &n)) return false;
  if (text.empty()) {
    *value = n;
    return true;
  }
  for (const SizeUnit& unit : kSizeUnits) {
    if (text == unit.suffix) {
      return !__builtin_mul_overflow(n, unit.bytes, value);
    }
  }
  return false;
}

std::string FormatSize(uint64_t bytes) {
  if (bytes != 0) {
    for (const SizeUnit& unit : kSizeUnits) {
      if (bytes % unit.bytes == 0) {
        return std::to_string(bytes / unit.bytes) + std::string(unit.suffix);
      }
    }
  }
  return std::to_string(bytes);
}

// "0660" or "660".
bool ParseFileMode(std::string_view text, mode_t* value) {
  if (text.empty() || text.size() > 5) return false;
  unsigned v = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return false;
    v = v * 8 + static_cast<unsigned>(c - '0');
  }
  if (v > 07777) return false;
  *value = static_cast<mode_t>(v);
  return true;
}

std::string FormatFileMode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode));
  return buf;
}

bool IsValidSlotName(std::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || IsDigit(c) || c == '_';
  });
}

std::string SlotNameFrom(std::string_view text) {
  std::string name;
  for (char c : text) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_';
    name += ok ? l : '_';
  }
  if (name.size() <= 63) return name;
  // FNV-1a over the whole text keeps long names that share a prefix apart.
  uint32_t h = 2166136261u;
  for (unsigned char c : text) {
    h ^= c;
    h *= 16777619u;
  }
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", h);
  return name.substr(0, 54) + "_" + hex;
}

std::string JoinIds(const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

}  // namespace walwatch
