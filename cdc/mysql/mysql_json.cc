#include "cdc/mysql/mysql_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace walwatch::mysql {

namespace {

// Type bytes (json_binary.cc).
constexpr uint8_t kSmallObject = 0x0;
constexpr uint8_t kLargeObject = 0x1;
constexpr uint8_t kSmallArray = 0x2;
constexpr uint8_t kLargeArray = 0x3;
constexpr uint8_t kLiteral = 0x4;
constexpr uint8_t kInt16 = 0x5;
constexpr uint8_t kUint16 = 0x6;
constexpr uint8_t kInt32 = 0x7;
constexpr uint8_t kUint32 = 0x8;
constexpr uint8_t kInt64 = 0x9;
constexpr uint8_t kUint64 = 0xA;
constexpr uint8_t kDouble = 0xB;
constexpr uint8_t kString = 0xC;
constexpr uint8_t kOpaque = 0xF;

// enum_field_types of the opaque values printed specially.
constexpr uint8_t kFieldTimestamp = 7;
constexpr uint8_t kFieldDate = 10;
constexpr uint8_t kFieldTime = 11;
constexpr uint8_t kFieldDateTime = 12;
constexpr uint8_t kFieldNewDecimal = 246;
constexpr uint8_t kFieldVarString = 253;

// my_gcvt's field width for doubles (MY_GCVT_MAX_FIELD_WIDTH: DBL_DIG + 4 +
// max(5, MAX_DECPT_FOR_F_FORMAT)) and the 'f'-format exponent limit.
constexpr int kGcvtWidth = 34;
constexpr int kMaxDecptForF = 15;

bool InlinedType(uint8_t type, bool large) {
  switch (type) {
    case kLiteral:
    case kInt16:
    case kUint16:
      return true;
    case kInt32:
    case kUint32:
      return large;
    default:
      return false;
  }
}

uint64_t ReadLe(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Big-endian, sign-extended (MySQL's mi_sintNkorr).
int32_t ReadBeSigned(const unsigned char* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  if (n < 4 && (p[0] & 0x80)) v |= ~uint32_t{0} << (8 * n);
  return static_cast<int32_t>(v);
}

// Bytes of a valid UTF-8 sequence starting at s[i] (no overlongs, no
// surrogates, nothing above U+10FFFF), or 0.
size_t Utf8SequenceLength(const unsigned char* s, size_t n, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + k] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return len;
}

void AppendUnsigned(uint64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

void AppendSigned(int64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

void AppendPadded(uint64_t v, int width, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  for (int i = static_cast<int>(r.ptr - buf); i < width; ++i)
    out->push_back('0');
  out->append(buf, r.ptr);
}

// A double as my_gcvt(x, MY_GCVT_ARG_DOUBLE, 34) prints it, then ".0" when
// it shows neither '.' nor 'e' (wrapper_to_string). my_gcvt takes dtoa's
// mode-4 digits with 34 significant places: the shortest digits that read
// back as x (never more than 17, so its width never truncates them);
// std::to_chars gives the same digits.
void AppendDouble(double x, std::string* out) {
  std::string digits;
  int decpt;  // the decimal point follows `decpt` digits (dtoa's decpt)
  if (x == 0) {
    digits = "0";
    decpt = 1;
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), std::fabs(x),
                           std::chars_format::scientific);
    std::string_view s(buf, static_cast<size_t>(r.ptr - buf));  // "d.ddde+XX"
    size_t e = s.find('e');
    for (char c : s.substr(0, e)) {
      if (c != '.') digits.push_back(c);
    }
    int exp = 0;
    std::from_chars(s.data() + e + (s[e + 1] == '+' ? 2 : 1),
                    s.data() + s.size(), exp);
    decpt = exp + 1;
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  }
  const bool sign = std::signbit(x);
  int width = kGcvtWidth - (x < 0 ? 1 : 0);
  const int len = static_cast<int>(digits.size());
  const int exp_len =
      1 + (decpt >= 101 || decpt <= -99) + (decpt >= 11 || decpt <= -9);
  const bool have_space = (decpt <= 0    ? len - decpt + 2
                           : decpt < len ? len + 1
                                         : decpt) <= width;
  const bool force_e = decpt <= 0 && width <= 2 - decpt && width >= 3 + exp_len;
  const bool f_format =
      (have_space ||
       (decpt <= width &&
        (decpt >= -1 || (decpt == -2 && (len > 1 || !force_e))) && !force_e)) &&
      (!have_space || (decpt >= -kMaxDecptForF + 1 &&
                       (decpt <= kMaxDecptForF || len > decpt)));
  const size_t start = out->size();
  if (sign) out->push_back('-');
  if (f_format) {
    if (decpt <= 0) {
      out->append("0.");
      out->append(static_cast<size_t>(-decpt), '0');
      out->append(digits);
    } else if (decpt < len) {
      out->append(digits, 0, static_cast<size_t>(decpt));
      out->push_back('.');
      out->append(digits, static_cast<size_t>(decpt), std::string::npos);
    } else {
      out->append(digits);
      out->append(static_cast<size_t>(decpt - len), '0');
    }
  } else {
    int e = decpt - 1;
    out->push_back(digits[0]);
    if (len > 1) {
      out->push_back('.');
      out->append(digits, 1, std::string::npos);
    }
    out->push_back('e');
    if (e < 0) {
      out->push_back('-');
      e = -e;
    }
    AppendUnsigned(static_cast<uint64_t>(e), out);
  }
  if (out->find_first_of(".e", start) == std::string::npos) out->append(".0");
}

// MySQL's base64_encode: standard alphabet, '=' padding, and a newline
// before every group that would pass 76 characters on a line.
void AppendBase64(const unsigned char* s, size_t n, std::string* out) {
  static const char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t line = 0;
  for (size_t i = 0; i < n; i += 3, line += 4) {
    if (line == 76) {
      line = 0;
      out->push_back('\n');
    }
    uint32_t c = static_cast<uint32_t>(s[i]) << 16;
    if (i + 1 < n) c |= static_cast<uint32_t>(s[i + 1]) << 8;
    if (i + 2 < n) c |= s[i + 2];
    out->push_back(kTable[(c >> 18) & 0x3f]);
    out->push_back(kTable[(c >> 12) & 0x3f]);
    out->push_back(i + 1 < n ? kTable[(c >> 6) & 0x3f] : '=');
    out->push_back(i + 2 < n ? kTable[c & 0x3f] : '=');
  }
}

class Decoder {
 public:
  Decoder(std::string_view in, std::string* out)
      : in_(reinterpret_cast<const unsigned char*>(in.data())),
        size_(in.size()),
        out_(out),
        limit_(16 * in.size() + 64) {}

  std::string Run() {
    out_->clear();
    // An empty document is the null literal (json_binary::parse_binary).
    if (size_ == 0) {
      out_->append("null");
      return "";
    }
    Value(in_[0], 1, size_ - 1, 0);
    return error_;
  }

 private:
  bool Fail(const std::string& what, size_t at) {
    if (error_.empty()) {
      error_ = "binary JSON: " + what + " at byte " + std::to_string(at);
    }
    return false;
  }

  bool CheckLimit(size_t at) {
    if (out_->size() > limit_) {
      return Fail("the text grows past " + std::to_string(limit_) +
                      " bytes (values sharing bytes?)",
                  at);
    }
    return true;
  }

  // A value of `type` whose bytes start at `pos`, with `avail` bytes there.
  bool Value(uint8_t type, size_t pos, size_t avail, int depth) {
    switch (type) {
      case kSmallObject:
        return Container(pos, avail, false, true, depth);
      case kLargeObject:
        return Container(pos, avail, true, true, depth);
      case kSmallArray:
        return Container(pos, avail, false, false, depth);
      case kLargeArray:
        return Container(pos, avail, true, false, depth);
      default:
        return Scalar(type, pos, avail);
    }
  }

  bool Container(size_t pos, size_t avail, bool large, bool object, int depth) {
    const char* what = object ? "object" : "array";
    if (depth + 1 > kMysqlJsonMaxDepth) {
      return Fail("nesting deeper than " + std::to_string(kMysqlJsonMaxDepth) +
                      " levels",
                  pos);
    }
    const size_t osz = large ? 4 : 2;
    if (avail < 2 * osz)
      return Fail(std::string("truncated ") + what + " header", pos);
    const uint64_t count = ReadLe(in_ + pos, osz);
    const uint64_t bytes = ReadLe(in_ + pos + osz, osz);
    if (bytes > avail) {
      return Fail(std::string(what) + " of " + std::to_string(bytes) +
                      " bytes where " + std::to_string(avail) + " remain",
                  pos);
    }
    const uint64_t key_entry = osz + 2;
    const uint64_t value_entry = 1 + osz;
    const uint64_t keys_at = 2 * osz;
    const uint64_t values_at = keys_at + (object ? count * key_entry : 0);
    const uint64_t header = values_at + count * value_entry;
    if (header > bytes) {
      return Fail(std::string(what) + " header of " + std::to_string(count) +
                      " entries is larger than its " + std::to_string(bytes) +
                      " bytes",
                  pos);
    }
    out_->push_back(object ? '{' : '[');
    for (uint64_t i = 0; i < count; ++i) {
      if (i > 0) out_->append(", ");
      if (object) {
        const size_t entry = pos + keys_at + i * key_entry;
        const uint64_t key_offset = ReadLe(in_ + entry, osz);
        const uint64_t key_length = ReadLe(in_ + entry + osz, 2);
        if (key_offset < header || key_offset + key_length > bytes) {
          return Fail("key " + std::to_string(i) + " lies outside its object",
                      entry);
        }
        if (!QuotedString(pos + key_offset, key_length)) return false;
        out_->append(": ");
      }
      const size_t entry = pos + values_at + i * value_entry;
      const uint8_t type = in_[entry];
      if (InlinedType(type, large)) {
        if (!Scalar(type, entry + 1, osz)) return false;
      } else {
        const uint64_t value_offset = ReadLe(in_ + entry + 1, osz);
        if (value_offset < header || value_offset >= bytes) {
          return Fail(std::string(what) + " value " + std::to_string(i) +
                          " lies outside its " + what,
                      entry);
        }
        if (!Value(type, pos + value_offset, bytes - value_offset, depth + 1)) {
          return false;
        }
      }
      if (!CheckLimit(entry)) return false;
    }
    out_->push_back(object ? '}' : ']');
    return true;
  }

  bool Scalar(uint8_t type, size_t pos, size_t avail) {
    auto need = [&](size_t n, const char* name) {
      if (avail < n) return Fail(std::string("truncated ") + name, pos);
      return true;
    };
    switch (type) {
      case kLiteral:
        if (!need(1, "literal")) return false;
        switch (in_[pos]) {
          case 0:
            out_->append("null");
            return true;
          case 1:
            out_->append("true");
            return true;
          case 2:
            out_->append("false");
            return true;
          default:
            return Fail("unknown literal " + std::to_string(in_[pos]), pos);
        }
      case kInt16:
        return Integer(pos, avail, 2, true, "int16");
      case kUint16:
        return Integer(pos, avail, 2, false, "uint16");
      case kInt32:
        return Integer(pos, avail, 4, true, "int32");
      case kUint32:
        return Integer(pos, avail, 4, false, "uint32");
      case kInt64:
        return Integer(pos, avail, 8, true, "int64");
      case kUint64:
        return Integer(pos, avail, 8, false, "uint64");
      case kDouble: {
        if (!need(8, "double")) return false;
        uint64_t bits = ReadLe(in_ + pos, 8);
        double d;
        std::memcpy(&d, &bits, sizeof(d));
        if (!std::isfinite(d)) return Fail("a double that is not finite", pos);
        AppendDouble(d, out_);
        return true;
      }
      case kString: {
        uint64_t len;
        size_t n;
        if (!VariableLength(pos, avail, &len, &n)) return false;
        if (n + len > avail) return Fail("string longer than its value", pos);
        return QuotedString(pos + n, len);
      }
      case kOpaque: {
        if (!need(1, "opaque value")) return false;
        const uint8_t field_type = in_[pos];
        uint64_t len;
        size_t n;
        if (!VariableLength(pos + 1, avail - 1, &len, &n)) return false;
        if (1 + n + len > avail)
          return Fail("opaque value longer than its value", pos);
        return Opaque(field_type, pos + 1 + n, len);
      }
      default:
        return Fail("unknown value type " + std::to_string(type), pos);
    }
  }

  // A little-endian integer of `bytes` bytes.
  bool Integer(size_t pos, size_t avail, size_t bytes, bool is_signed,
               const char* name) {
    if (avail < bytes) return Fail(std::string("truncated ") + name, pos);
    const uint64_t u = ReadLe(in_ + pos, bytes);
    if (is_signed) {
      const unsigned shift = static_cast<unsigned>(64 - 8 * bytes);
      AppendSigned(static_cast<int64_t>(u << shift) >> shift, out_);
    } else {
      AppendUnsigned(u, out_);
    }
    return true;
  }

  // json_binary's variable length: 7 bits a byte, low bits first, at most
  // five bytes and 32 bits.
  bool VariableLength(size_t pos, size_t avail, uint64_t* len, size_t* n) {
    uint64_t v = 0;
    for (size_t i = 0; i < 5 && i < avail; ++i) {
      v |= static_cast<uint64_t>(in_[pos + i] & 0x7f) << (7 * i);
      if ((in_[pos + i] & 0x80) == 0) {
        if (v > UINT32_MAX) return Fail("length beyond 32 bits", pos);
        *len = v;
        *n = i + 1;
        return true;
      }
    }
    return Fail("unterminated length", pos);
  }

  // `len` bytes at `pos` as a JSON string (double_quote).
  bool QuotedString(size_t pos, uint64_t len) {
    static const char kHex[] = "0123456789abcdef";
    const unsigned char* s = in_ + pos;
    const size_t n = static_cast<size_t>(len);
    out_->reserve(out_->size() + n + 2);
    out_->push_back('"');
    size_t i = 0;
    while (i < n) {
      unsigned char c = s[i];
      if (c >= 0x80) {
        size_t k = Utf8SequenceLength(s, n, i);
        if (k == 0) return Fail("invalid UTF-8 in a string", pos + i);
        out_->append(reinterpret_cast<const char*>(s + i), k);
        i += k;
        continue;
      }
      // The escapes with a letter, then \u00xx for the other control bytes.
      static const char kEscaped[] = "\"\\\b\f\n\r\t";
      static const char kLetter[] = "\"\\bfnrt";
      const char* e = c != 0 ? std::strchr(kEscaped, c) : nullptr;
      if (e != nullptr) {
        out_->push_back('\\');
        out_->push_back(kLetter[e - kEscaped]);
      } else if (c <= 0x1f) {
        out_->append("\\u00");
        out_->push_back(kHex[c >> 4]);
        out_->push_back(kHex[c & 0xf]);
      } else {
        out_->push_back(static_cast<char>(c));
      }
      ++i;
    }
    out_->push_back('"');
    return CheckLimit(pos);
  }

  bool Opaque(uint8_t field_type, size_t pos, uint64_t len) {
    switch (field_type) {
      case kFieldNewDecimal:
        return Decimal(pos, len);
      case kFieldDate:
      case kFieldTime:
      case kFieldDateTime:
      case kFieldTimestamp:
        return Temporal(field_type, pos, len);
      case kFieldVarString:
        return QuotedString(pos, len);
      default: {
        // "base64:typeN:<base64>", quoted; its newlines become \n.
        std::string text = "base64:type" + std::to_string(field_type) + ":";
        AppendBase64(in_ + pos, static_cast<size_t>(len), &text);
        out_->push_back('"');
        for (char c : text) {
          if (c == '\n') {
            out_->append("\\n");
          } else {
            out_->push_back(c);
          }
        }
        out_->push_back('"');
        return CheckLimit(pos);
      }
    }
  }

  // precision, scale, then MySQL's binary DECIMAL (decimal2bin), printed as
  // decimal2string prints it: sign, integer digits (at least "0"), and
  // exactly `scale` fractional digits.
  bool Decimal(size_t pos, uint64_t len) {
    static const int kDig2Bytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
    static const uint32_t kPow10[10] = {1,         10,        100,     1000,
                                        10000,     100000,    1000000, 10000000,
                                        100000000, 1000000000};
    if (len < 2) return Fail("DECIMAL without precision and scale", pos);
    const int precision = in_[pos];
    const int scale = in_[pos + 1];
    if (precision < 1 || precision > 65 || scale > 30 || scale > precision) {
      return Fail("DECIMAL(" + std::to_string(precision) + "," +
                      std::to_string(scale) + ") out of range",
                  pos);
    }
    const int intg = precision - scale;
    const int intg0 = intg / 9, intg0x = intg % 9;
    const int frac0 = scale / 9, frac0x = scale % 9;
    const size_t bin_size = static_cast<size_t>(intg0 * 4 + kDig2Bytes[intg0x] +
                                                frac0 * 4 + kDig2Bytes[frac0x]);
    if (len - 2 != bin_size) {
      return Fail("DECIMAL(" + std::to_string(precision) + "," +
                      std::to_string(scale) + ") of " +
                      std::to_string(len - 2) + " bytes, not " +
                      std::to_string(bin_size),
                  pos);
    }
    unsigned char copy[40];
    std::memcpy(copy, in_ + pos + 2, bin_size);
    const bool negative = (copy[0] & 0x80) == 0;
    const uint32_t mask = negative ? ~uint32_t{0} : 0;
    copy[0] ^= 0x80;
    const unsigned char* p = copy;
    auto group = [&](int bytes, uint32_t* value) {
      *value =
          static_cast<uint32_t>(ReadBeSigned(p, static_cast<size_t>(bytes))) ^
          mask;
      p += bytes;
    };
    std::string int_digits, frac_digits;
    uint32_t v;
    if (intg0x > 0) {
      group(kDig2Bytes[intg0x], &v);
      if (v >= kPow10[intg0x]) return Fail("bad DECIMAL digits", pos);
      AppendPadded(v, intg0x, &int_digits);
    }
    for (int i = 0; i < intg0; ++i) {
      group(4, &v);
      if (v > 999999999) return Fail("bad DECIMAL digits", pos);
      AppendPadded(v, 9, &int_digits);
    }
    for (int i = 0; i < frac0; ++i) {
      group(4, &v);
      if (v > 999999999) return Fail("bad DECIMAL digits", pos);
      AppendPadded(v, 9, &frac_digits);
    }
    if (frac0x > 0) {
      group(kDig2Bytes[frac0x], &v);
      if (v >= kPow10[frac0x]) return Fail("bad DECIMAL digits", pos);
      AppendPadded(v, frac0x, &frac_digits);
    }
    size_t nz = int_digits.find_first_not_of('0');
    if (negative) out_->push_back('-');
    out_->append(nz == std::string::npos ? std::string("0")
                                         : int_digits.substr(nz));
    if (scale > 0) {
      out_->push_back('.');
      out_->append(frac_digits);
    }
    return true;
  }

  // "HH:MM:SS.ffffff" (hours may run to three digits in a TIME).
  void AppendClock(uint64_t hour, uint64_t minute, uint64_t second,
                   uint64_t micros) {
    AppendPadded(hour, 2, out_);
    out_->push_back(':');
    AppendPadded(minute, 2, out_);
    out_->push_back(':');
    AppendPadded(second, 2, out_);
    out_->push_back('.');
    AppendPadded(micros, 6, out_);
  }

  // A packed temporal value (8 bytes, TIME_to_longlong_packed), quoted as
  // my_TIME_to_str(t, 6) prints it.
  bool Temporal(uint8_t field_type, size_t pos, uint64_t len) {
    if (len != 8) {
      return Fail("temporal value of " + std::to_string(len) + " bytes, not 8",
                  pos);
    }
    int64_t packed = static_cast<int64_t>(ReadLe(in_ + pos, 8));
    const bool neg = packed < 0;
    uint64_t tmp =
        neg ? 0 - static_cast<uint64_t>(packed) : static_cast<uint64_t>(packed);
    const uint64_t frac = tmp % (uint64_t{1} << 24);
    const uint64_t int_part = tmp >> 24;
    if (frac > 999999) return Fail("fraction of a second beyond 999999", pos);
    out_->push_back('"');
    if (field_type == kFieldTime) {
      const uint64_t hour = (int_part >> 12) % (1 << 10);
      const uint64_t minute = (int_part >> 6) % (1 << 6);
      const uint64_t second = int_part % (1 << 6);
      if (minute > 59 || second > 59) return Fail("bad TIME", pos);
      if (neg) out_->push_back('-');
      AppendClock(hour, minute, second, frac);
    } else {
      const uint64_t ymd = int_part >> 17;
      const uint64_t ym = ymd >> 5;
      const uint64_t hms = int_part % (1 << 17);
      const uint64_t day = ymd % (1 << 5), month = ym % 13, year = ym / 13;
      const uint64_t second = hms % (1 << 6), minute = (hms >> 6) % (1 << 6),
                     hour = hms >> 12;
      if (neg || year > 9999 || hour > 23 || minute > 59 || second > 59) {
        return Fail("bad date or time", pos);
      }
      AppendPadded(year, 4, out_);
      out_->push_back('-');
      AppendPadded(month, 2, out_);
      out_->push_back('-');
      AppendPadded(day, 2, out_);
      if (field_type != kFieldDate) {
        out_->push_back(' ');
        AppendClock(hour, minute, second, frac);
      }
    }
    out_->push_back('"');
    return true;
  }

  const unsigned char* in_;
  size_t size_;
  std::string* out_;
  size_t limit_;
  std::string error_;
};

}  // namespace

std::string DecodeMysqlJson(std::string_view binary, std::string* text) {
  Decoder d(binary, text);
  return d.Run();
}

}  // namespace walwatch::mysql
