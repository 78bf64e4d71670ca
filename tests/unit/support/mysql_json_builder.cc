#include "tests/unit/support/mysql_json_builder.h"

#include <cstring>

namespace walwatch::mysql::json_builder {

std::string Le(uint64_t v, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

std::string VarLen(uint64_t n) {
  std::string s;
  do {
    unsigned char c = n & 0x7f;
    n >>= 7;
    if (n != 0) c |= 0x80;
    s.push_back(static_cast<char>(c));
  } while (n != 0);
  return s;
}

V Literal(int which) {
  return {0x04, std::string(1, static_cast<char>(which))};
}
V Null() { return Literal(0); }
V True() { return Literal(1); }
V False() { return Literal(2); }
V Int16(int16_t v) { return {0x05, Le(static_cast<uint16_t>(v), 2)}; }
V Uint16(uint16_t v) { return {0x06, Le(v, 2)}; }
V Int32(int32_t v) { return {0x07, Le(static_cast<uint32_t>(v), 4)}; }
V Uint32(uint32_t v) { return {0x08, Le(v, 4)}; }
V Int64(int64_t v) { return {0x09, Le(static_cast<uint64_t>(v), 8)}; }
V Uint64(uint64_t v) { return {0x0A, Le(v, 8)}; }
V Double(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  return {0x0B, Le(bits, 8)};
}
V Str(const std::string& s) { return {0x0C, VarLen(s.size()) + s}; }
V Opaque(uint8_t field_type, const std::string& data) {
  return {0x0F, std::string(1, static_cast<char>(field_type)) +
                    VarLen(data.size()) + data};
}

bool Inlined(uint8_t type, bool large) {
  return type == 0x04 || type == 0x05 || type == 0x06 ||
         (large && (type == 0x07 || type == 0x08));
}

V Container(bool object, bool large,
            const std::vector<std::pair<std::string, V>>& members) {
  const size_t osz = large ? 4 : 2;
  const size_t n = members.size();
  const size_t header = 2 * osz + (object ? n * (osz + 2) : 0) + n * (1 + osz);
  std::string keys, values, key_entries, value_entries;
  size_t key_offset = header;
  for (const auto& m : members) {
    if (!object) break;
    key_entries += Le(key_offset, osz) + Le(m.first.size(), 2);
    keys += m.first;
    key_offset += m.first.size();
  }
  size_t value_offset = header + keys.size();
  for (const auto& m : members) {
    const V& v = m.second;
    value_entries.push_back(static_cast<char>(v.type));
    if (Inlined(v.type, large)) {
      std::string inline_bytes = v.bytes;
      inline_bytes.resize(osz, '\0');
      value_entries += inline_bytes;
    } else {
      value_entries += Le(value_offset, osz);
      values += v.bytes;
      value_offset += v.bytes.size();
    }
  }
  const size_t total = header + keys.size() + values.size();
  uint8_t type = object ? (large ? 0x01 : 0x00) : (large ? 0x03 : 0x02);
  return {type, Le(n, osz) + Le(total, osz) + key_entries + value_entries +
                    keys + values};
}

V Object(const std::vector<std::pair<std::string, V>>& m, bool large) {
  return Container(true, large, m);
}
V Array(const std::vector<V>& elements, bool large) {
  std::vector<std::pair<std::string, V>> m;
  for (const V& e : elements) m.push_back({"", e});
  return Container(false, large, m);
}

std::string Doc(const V& v) {
  return std::string(1, static_cast<char>(v.type)) + v.bytes;
}

}  // namespace walwatch::mysql::json_builder
