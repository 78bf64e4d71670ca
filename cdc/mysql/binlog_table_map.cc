#include "cdc/mysql/binlog_table_map.h"

#include <mysql.h>
#include <mariadb_rpl.h>

#include <charconv>
#include <cstdio>
#include <ctime>

#include "cdc/mysql/mysql_json.h"

namespace walwatch::mysql {

namespace {

// Bytes of metadata a column type has in a TABLE_MAP event (MySQL's
// Table_map_log_event; -1: a type walwatch does not read).
int MetadataBytes(uint8_t type) {
  switch (type) {
    case kTypeTiny:
    case kTypeShort:
    case kTypeInt24:
    case kTypeLong:
    case kTypeLongLong:
    case kTypeYear:
    case kTypeDate:
    case kTypeTimestamp:
    case kTypeDateTime:
      return 0;
    case kTypeFloat:
    case kTypeDouble:
    case kTypeTimestamp2:
    case kTypeDateTime2:
    case kTypeTime2:
    case kTypeJson:
    case kTypeTinyBlob:
    case kTypeMediumBlob:
    case kTypeLongBlob:
    case kTypeBlob:
    case kTypeGeometry:
      return 1;
    case kTypeVarchar:
    case kTypeBit:
    case kTypeNewDecimal:
    case kTypeVarString:
    case kTypeString:
      return 2;
    default:
      // DECIMAL (pre-5.0), TIME and NEWDATE (pre-5.6 formats, which
      // Connector/C versions read differently), NULL, and anything newer.
      return -1;
  }
}

// MySQL's is_numeric_type: the columns the SIGNEDNESS bitmap has a bit for.
bool IsNumeric(uint8_t type) {
  switch (type) {
    case kTypeTiny:
    case kTypeShort:
    case kTypeInt24:
    case kTypeLong:
    case kTypeLongLong:
    case kTypeNewDecimal:
    case kTypeFloat:
    case kTypeDouble:
      return true;
    default:
      return false;
  }
}

// A length-encoded integer; false if it runs past the end.
bool ReadLenenc(std::string_view* in, uint64_t* out) {
  if (in->empty()) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(in->data());
  size_t n;
  if (p[0] < 251) {
    *out = p[0];
    in->remove_prefix(1);
    return true;
  }
  if (p[0] == 252) {
    n = 2;
  } else if (p[0] == 253) {
    n = 3;
  } else if (p[0] == 254) {
    n = 8;
  } else {
    return false;
  }
  if (in->size() < 1 + n) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(p[1 + i]) << (8 * i);
  *out = v;
  in->remove_prefix(1 + n);
  return true;
}

void AppendTwoDigits(unsigned v, std::string* out) {
  out->push_back(static_cast<char>('0' + (v / 10) % 10));
  out->push_back(static_cast<char>('0' + v % 10));
}

// ".ffffff" cut to `fsp` digits (nothing for 0).
void AppendFraction(unsigned long micros, unsigned fsp, std::string* out) {
  if (fsp == 0) return;
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%06lu", micros % 1000000);
  out->push_back('.');
  out->append(buf, fsp > 6 ? 6 : fsp);
}

void AppendDate(unsigned year, unsigned month, unsigned day, std::string* out) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04u-%02u-%02u", year % 10000, month % 100,
                day % 100);
  out->append(buf);
}

void AppendTime(unsigned hour, unsigned minute, unsigned second,
                std::string* out) {
  if (hour < 100) {
    AppendTwoDigits(hour, out);
  } else {
    out->append(std::to_string(hour));
  }
  out->push_back(':');
  AppendTwoDigits(minute, out);
  out->push_back(':');
  AppendTwoDigits(second, out);
}

// MySQL's binary DECIMAL (strings/decimal.c, decimal2bin): groups of up to
// 9 digits, big-endian; a group of 9 takes 4 bytes, a shorter one the bytes
// below. Integer digits first (the partial group leading), then the
// fraction's (the partial group last). The sign bit (the first byte's high
// bit) is inverted, and a negative value has every byte inverted.
constexpr int kDecimalGroupBytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

size_t DecimalBytes(unsigned precision, unsigned scale) {
  const unsigned intg = precision - scale;
  return (intg / 9) * 4 + kDecimalGroupBytes[intg % 9] + (scale / 9) * 4 +
         kDecimalGroupBytes[scale % 9];
}

// The text a SELECT shows for the DECIMAL(precision, scale) in `bytes`:
// no leading zeros (but one before the point), `scale` fraction digits.
std::string FormatDecimal(std::string_view bytes, unsigned precision,
                          unsigned scale, std::string* out) {
  if (bytes.size() != DecimalBytes(precision, scale)) {
    return "a DECIMAL(" + std::to_string(precision) + "," +
           std::to_string(scale) + ") of " + std::to_string(bytes.size()) +
           " bytes";
  }
  const bool negative = (static_cast<unsigned char>(bytes[0]) & 0x80) == 0;
  const unsigned char flip = negative ? 0xff : 0x00;
  size_t at = 0;
  bool bad = false;
  // Appends the next group of `digits` digits (zero-padded).
  std::string digits_text;
  auto group = [&](unsigned digits) {
    const int n = kDecimalGroupBytes[digits];
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      unsigned char b = static_cast<unsigned char>(bytes[at + i]);
      if (at + i == 0) b ^= 0x80;
      v = (v << 8) | static_cast<unsigned char>(b ^ flip);
    }
    at += static_cast<size_t>(n);
    uint32_t limit = 1;
    for (unsigned i = 0; i < digits; ++i) limit *= 10;
    if (v >= limit) bad = true;
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%0*u", static_cast<int>(digits),
                  static_cast<unsigned>(v % limit));
    digits_text += buf;
  };
  const unsigned intg = precision - scale;
  if (intg % 9 != 0) group(intg % 9);
  for (unsigned i = 0; i < intg / 9; ++i) group(9);
  std::string integer = digits_text;
  digits_text.clear();
  for (unsigned i = 0; i < scale / 9; ++i) group(9);
  if (scale % 9 != 0) group(scale % 9);
  if (bad) return "a DECIMAL group out of range";
  size_t first = integer.find_first_not_of('0');
  integer = first == std::string::npos ? "0" : integer.substr(first);
  const bool zero =
      integer == "0" && digits_text.find_first_not_of('0') == std::string::npos;
  out->clear();
  if (negative && !zero) out->push_back('-');
  *out += integer;
  if (scale > 0) *out += "." + digits_text;
  return "";
}

template <typename T>
void AppendShortest(T v, std::string* out) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

}  // namespace

int BinlogTableMap::ColumnIndex(std::string_view name) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string BinlogTableMap::Parse(uint64_t table_id, std::string_view database,
                                  std::string_view table,
                                  std::string_view column_types,
                                  std::string_view metadata,
                                  std::string_view column_names,
                                  std::string_view signedness,
                                  BinlogTableMap* out) {
  const std::string where =
      "TABLE_MAP of " + std::string(database) + "." + std::string(table);
  BinlogTableMap m;
  m.table_id_ = table_id;
  m.database_ = std::string(database);
  m.table_ = std::string(table);
  const size_t n = column_types.size();
  if (n == 0) return where + " has no columns";
  if (column_names.empty()) {
    return where +
           " carries no column names; walwatch reads columns by name "
           "(fix: SET GLOBAL binlog_row_metadata = FULL, and set it in "
           "the server's configuration)";
  }
  m.columns_.resize(n);
  std::string_view names = column_names;
  for (size_t i = 0; i < n; ++i) {
    uint64_t len;
    if (!ReadLenenc(&names, &len) || len > names.size()) {
      return where + ": its column names end after " + std::to_string(i) +
             " of " + std::to_string(n) + " columns";
    }
    m.columns_[i].name = std::string(names.substr(0, len));
    names.remove_prefix(len);
  }

  const auto* meta = reinterpret_cast<const unsigned char*>(metadata.data());
  size_t at = 0;
  size_t numeric = 0;
  for (size_t i = 0; i < n; ++i) {
    BinlogColumn& c = m.columns_[i];
    c.type = static_cast<uint8_t>(column_types[i]);
    int bytes = MetadataBytes(c.type);
    if (bytes < 0) {
      return where + ": column " + c.name + " has binlog type " +
             std::to_string(c.type) + ", which walwatch does not read";
    }
    if (at + static_cast<size_t>(bytes) > metadata.size()) {
      return where + ": its metadata ends at column " + c.name;
    }
    if (bytes == 1) c.meta = meta[at];
    if (bytes == 2)
      c.meta = static_cast<uint16_t>(meta[at] | (meta[at + 1] << 8));
    const unsigned char* own = meta + at;
    at += static_cast<size_t>(bytes);

    if (IsNumeric(c.type)) {
      size_t byte = numeric / 8;
      if (byte < signedness.size()) {
        c.is_unsigned = (static_cast<unsigned char>(signedness[byte]) >>
                         (7 - numeric % 8)) &
                        1;
      }
      ++numeric;
    }

    // The type and metadata Connector/C is given for this column.
    uint8_t type = c.type;
    std::string own_meta(reinterpret_cast<const char*>(own),
                         static_cast<size_t>(bytes));
    switch (c.type) {
      case kTypeJson:
      case kTypeGeometry:
        // A length of meta bytes, then the bytes: BLOB's layout exactly.
        type = kTypeBlob;
        break;
      case kTypeString: {
        // byte0: the real type, with bits 4-5 of the length folded in
        // inverted when the length exceeds 255; byte1: the length's low
        // byte (MySQL's Field_string::do_save_field_metadata).
        unsigned b0 = own[0], b1 = own[1];
        if ((b0 & 0x30) != 0x30) {
          c.real_type = static_cast<uint8_t>(b0 | 0x30);
          c.max_length = b1 | (((b0 & 0x30) ^ 0x30) << 4);
        } else {
          c.real_type = static_cast<uint8_t>(b0);
          c.max_length = b1;
        }
        if (c.real_type == kTypeString) {
          type = kTypeVarchar;  // same row bytes: a 1- or 2-byte length, then
                                // the data
          own_meta = {static_cast<char>(c.max_length & 0xff),
                      static_cast<char>(c.max_length >> 8)};
        } else if (c.real_type == kTypeEnum || c.real_type == kTypeSet) {
          // Stored as a little-endian integer of max_length bytes.
          switch (c.max_length) {
            case 1:
              type = kTypeTiny;
              break;
            case 2:
              type = kTypeShort;
              break;
            case 3:
              type = kTypeInt24;
              break;
            case 4:
              type = kTypeLong;
              break;
            case 8:
              type = kTypeLongLong;
              break;
            default:
              return where + ": column " + c.name + " is an ENUM or SET of " +
                     std::to_string(c.max_length) + " bytes";
          }
          c.is_unsigned = true;
          own_meta.clear();
        } else {
          return where + ": column " + c.name + " has real type " +
                 std::to_string(c.real_type) + ", which walwatch does not read";
        }
        break;
      }
      case kTypeNewDecimal: {
        // Connector/C 3.3.20 fails a DECIMAL(20,6) ("Client run out of
        // memory") and prints a DECIMAL(1,1) as ".9": it gets a BIT of the
        // value's bytes, the same row bytes, and FormatValue decodes them
        // (FormatDecimal).
        const unsigned precision = own[0], scale = own[1];
        if (precision < 1 || precision > 65 || scale > 30 ||
            scale > precision) {
          return where + ": column " + c.name + " is a DECIMAL(" +
                 std::to_string(precision) + "," + std::to_string(scale) +
                 "), which MySQL does not write";
        }
        type = kTypeBit;  // bits: own_meta[0] + 8 * own_meta[1]
        own_meta = {'\0', static_cast<char>(DecimalBytes(precision, scale))};
        break;
      }
      default:
        break;
    }
    m.normalized_types_.push_back(static_cast<char>(type));
    m.normalized_metadata_ += own_meta;
  }
  *out = std::move(m);
  return "";
}

std::string FormatValue(const BinlogColumn& column,
                        const MARIADB_RPL_VALUE& value, std::string* out) {
  out->clear();
  const auto& v = value.val;
  // Connector/C stores an integer in both ll and ull of one union, the
  // unsigned reading last: sign-extend from the column's width here.
  auto integer = [&](unsigned bytes) {
    const unsigned bits = 8 * bytes;
    uint64_t u = bits == 64 ? v.ull : v.ull & ((uint64_t{1} << bits) - 1);
    if (column.is_unsigned) {
      *out = std::to_string(u);
      return;
    }
    *out =
        std::to_string(static_cast<int64_t>(u << (64 - bits)) >> (64 - bits));
  };
  auto bytes = [&] {
    if (v.str.length > 0) out->assign(v.str.str, v.str.length);
  };
  switch (column.type) {
    case kTypeTiny:
      integer(1);
      return "";
    case kTypeShort:
      integer(2);
      return "";
    case kTypeInt24:
      integer(3);
      return "";
    case kTypeLong:
      integer(4);
      return "";
    case kTypeLongLong:
      integer(8);
      return "";
    case kTypeYear:
      *out = std::to_string(v.ull);
      return "";
    case kTypeFloat:
      AppendShortest(v.f, out);
      return "";
    case kTypeDouble:
      AppendShortest(v.d, out);
      return "";
    case kTypeNewDecimal: {
      std::string_view binary;
      if (v.str.length > 0) binary = std::string_view(v.str.str, v.str.length);
      std::string err =
          FormatDecimal(binary, column.meta & 0xff, column.meta >> 8, out);
      if (!err.empty()) return "column " + column.name + ": " + err;
      return "";
    }
    case kTypeDate:
      AppendDate(v.tm.year, v.tm.month, v.tm.day, out);
      return "";
    case kTypeDateTime:
    case kTypeDateTime2:
      AppendDate(v.tm.year, v.tm.month, v.tm.day, out);
      out->push_back(' ');
      AppendTime(v.tm.hour, v.tm.minute, v.tm.second, out);
      AppendFraction(v.tm.second_part,
                     column.type == kTypeDateTime2 ? column.meta : 0, out);
      return "";
    case kTypeTime2:
      if (v.tm.neg) out->push_back('-');
      AppendTime(v.tm.hour, v.tm.minute, v.tm.second, out);
      AppendFraction(v.tm.second_part, column.meta, out);
      return "";
    case kTypeTimestamp:
    case kTypeTimestamp2: {
      std::time_t t = static_cast<std::time_t>(v.ts.second);
      std::tm tm{};
      if (gmtime_r(&t, &tm) == nullptr)
        return "column " + column.name + ": bad TIMESTAMP";
      AppendDate(static_cast<unsigned>(tm.tm_year + 1900),
                 static_cast<unsigned>(tm.tm_mon + 1),
                 static_cast<unsigned>(tm.tm_mday), out);
      out->push_back(' ');
      AppendTime(static_cast<unsigned>(tm.tm_hour),
                 static_cast<unsigned>(tm.tm_min),
                 static_cast<unsigned>(tm.tm_sec), out);
      AppendFraction(v.ts.second_part,
                     column.type == kTypeTimestamp2 ? column.meta : 0, out);
      return "";
    }
    case kTypeString:
      if (column.real_type == kTypeEnum || column.real_type == kTypeSet) {
        const unsigned bits = 8 * column.max_length;
        *out = std::to_string(bits == 64 ? v.ull
                                         : v.ull & ((uint64_t{1} << bits) - 1));
        return "";
      }
      bytes();
      return "";
    case kTypeJson: {
      std::string_view binary;
      if (v.str.length > 0) binary = std::string_view(v.str.str, v.str.length);
      std::string err = DecodeMysqlJson(binary, out);
      if (!err.empty()) return "column " + column.name + ": " + err;
      return "";
    }
    case kTypeVarchar:
    case kTypeVarString:
    case kTypeBit:
    case kTypeTinyBlob:
    case kTypeMediumBlob:
    case kTypeLongBlob:
    case kTypeBlob:
    case kTypeGeometry:
      bytes();
      return "";
    default:
      return "column " + column.name + " has binlog type " +
             std::to_string(column.type) + ", which walwatch does not read";
  }
}

}  // namespace walwatch::mysql
