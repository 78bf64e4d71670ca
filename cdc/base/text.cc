#include "cdc/base/text.h"

#include <iterator>

namespace walwatch {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PercentDecode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;  // needs two hex digits
      int hi = HexDigitValue(in[i + 1]);
      int lo = HexDigitValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

size_t Utf8LeadLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // Stray continuation byte, C0, C1 or F5..FF.
}

size_t Utf8SequenceLength(std::string_view s, size_t i, size_t* consumed) {
  auto byte = [&](size_t at) { return static_cast<unsigned char>(s[at]); };
  const unsigned char lead = byte(i);
  const size_t need = Utf8LeadLength(lead);
  if (need == 1) return 1;
  if (need == 0) {
    *consumed = 1;
    return 0;
  }
  unsigned char lo = 0x80, hi = 0xBF;  // Allowed range of the 2nd byte.
  if (lead == 0xE0) lo = 0xA0;  // Overlong.
  if (lead == 0xED) hi = 0x9F;  // UTF-16 surrogates.
  if (lead == 0xF0) lo = 0x90;  // Overlong.
  if (lead == 0xF4) hi = 0x8F;  // Above U+10FFFF.
  size_t n = 1;
  while (n < need && i + n < s.size()) {
    const unsigned char c = byte(i + n);
    const bool ok = n == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++n;
  }
  if (n == need) return need;
  *consumed = n;
  return 0;
}

bool ConsumeUnsigned(std::string_view* text, uint64_t* value) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < text->size() && IsDigit((*text)[i])) {
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, static_cast<uint64_t>((*text)[i] - '0'),
                               &v)) {
      return false;
    }
    ++i;
  }
  if (i == 0) return false;
  text->remove_prefix(i);
  *value = v;
  return true;
}

bool ParseUnsigned(std::string_view text, uint64_t* value) {
  return ConsumeUnsigned(&text, value) && text.empty();
}

bool ParseDuration(std::string_view text, std::chrono::milliseconds* value) {
  struct Unit {
    std::string_view suffix;
    int64_t ms;
  };
  static constexpr Unit kUnits[] = {
      {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
  constexpr uint64_t kMaxMs = uint64_t{INT64_MAX};

  uint64_t n = 0;
  if (ParseUnsigned(text, &n)) {
    if (n > kMaxMs / 1000) return false;
    *value = std::chrono::milliseconds(static_cast<int64_t>(n * 1000));
    return true;
  }
  if (text.empty()) return false;
  uint64_t total = 0;
  size_t next_unit = 0;  // Units must come largest first, each at most once.
  while (!text.empty()) {
    if (!ConsumeUnsigned(&text, &n)) return false;
    size_t len = 0;
    while (len < text.size() && !IsDigit(text[len])) ++len;
    const std::string_view suffix = text.substr(0, len);
    text.remove_prefix(len);
    size_t u = next_unit;
    while (u < std::size(kUnits) && kUnits[u].suffix != suffix) ++u;
    if (u == std::size(kUnits)) return false;
    next_unit = u + 1;
    uint64_t part;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(kUnits[u].ms), &part) ||
        __builtin_add_overflow(total, part, &total) || total > kMaxMs) {
      return false;
    }
  }
  *value = std::chrono::milliseconds(static_cast<int64_t>(total));
  return true;
}

std::string OneLine(std::string text) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t i = 0;
  while (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x20 &&
         text[i] != 0x7f) {
    ++i;
  }
  if (i == text.size()) return text;
  std::string out = text.substr(0, i);
  for (; i < text.size(); ++i) {
    unsigned char c = text[i];
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool ParseKeywordValues(std::string_view s, std::vector<KeywordValue>* out) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
  };
  out->clear();
  size_t i = 0;
  while (true) {
    while (i < s.size() && space(s[i])) ++i;
    if (i == s.size()) return true;
    KeywordValue kv;
    const size_t key_begin = i;
    while (i < s.size() && s[i] != '=' && !space(s[i])) ++i;
    kv.key.assign(s.substr(key_begin, i - key_begin));
    while (i < s.size() && space(s[i])) ++i;
    if (i == s.size() || s[i] != '=') return false;
    ++i;
    while (i < s.size() && space(s[i])) ++i;
    kv.value_begin = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (true) {
        if (i == s.size()) return false;  // Unterminated quote.
        if (s[i] == '\\') {
          if (i + 1 < s.size()) kv.value.push_back(s[i + 1]);
          i += i + 1 < s.size() ? 2 : 1;
        } else if (s[i] == '\'') {
          ++i;
          break;
        } else {
          kv.value.push_back(s[i++]);
        }
      }
    } else {
      while (i < s.size() && !space(s[i])) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          kv.value.push_back(s[i + 1]);
          i += 2;
        } else {
          kv.value.push_back(s[i++]);
        }
      }
    }
    kv.value_end = i;
    out->push_back(std::move(kv));
  }
}

}  // namespace walwatch
