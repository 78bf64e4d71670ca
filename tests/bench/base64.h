// Standard base64 (RFC 4648, with padding), as etcd's JSON gateway writes
// keys and values: bench_writer encodes what it puts, fanout_client decodes
// the start of each value it is sent.
#ifndef WALWATCH_TESTS_BENCH_BASE64_H_
#define WALWATCH_TESTS_BENCH_BASE64_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace walwatch::bench {

inline std::string EncodeBase64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                 (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Decodes into *out as far as `in` goes (up to '=', a quote or its end);
// a trailing partial group is dropped.
inline void DecodeBase64(std::string_view in, std::string* out) {
  out->clear();
  uint32_t bits = 0;
  int count = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z') {
      v = ch - 'A';
    } else if (ch >= 'a' && ch <= 'z') {
      v = ch - 'a' + 26;
    } else if (ch >= '0' && ch <= '9') {
      v = ch - '0' + 52;
    } else if (ch == '+') {
      v = 62;
    } else if (ch == '/') {
      v = 63;
    } else {
      break;
    }
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out->push_back(static_cast<char>(bits >> 16));
      out->push_back(static_cast<char>((bits >> 8) & 0xff));
      out->push_back(static_cast<char>(bits & 0xff));
      bits = 0;
      count = 0;
    }
  }
}

}  // namespace walwatch::bench

#endif  // WALWATCH_TESTS_BENCH_BASE64_H_
