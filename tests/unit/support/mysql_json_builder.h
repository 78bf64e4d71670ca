// A small encoder of MySQL's binary JSON (the form a JSON column takes in
// the binlog's row events), from the format's grammar as documented in
// MySQL's sql-common/json_binary.h: for tests that build values byte by
// byte (mysql_json_test.cc, and the MySQL 8 row images of
// mysql8_binlog_builder.h).
//
// Thread safety: pure functions.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_MYSQL_JSON_BUILDER_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_MYSQL_JSON_BUILDER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace walwatch::mysql::json_builder {

// `v` as `n` little-endian bytes.
std::string Le(uint64_t v, size_t n);
// The format's variable-length size: 7 bits a byte, high bit = more.
std::string VarLen(uint64_t n);

// A value: its type byte and its bytes (for inlinable types, the value
// itself, little-endian).
struct V {
  uint8_t type;
  std::string bytes;
};

V Literal(int which);
V Null();
V True();
V False();
V Int16(int16_t v);
V Uint16(uint16_t v);
V Int32(int32_t v);
V Uint32(uint32_t v);
V Int64(int64_t v);
V Uint64(uint64_t v);
V Double(double d);
V Str(const std::string& s);
V Opaque(uint8_t field_type, const std::string& data);

// Whether a value of `type` is inlined in its container's value entry.
bool Inlined(uint8_t type, bool large);

// An object (keys given) or array, small or large, with keys, then values,
// after the header, in the order given. MySQL stores an object's keys
// sorted by length, then bytes: give them in that order to build what a
// server writes.
V Container(bool object, bool large,
            const std::vector<std::pair<std::string, V>>& members);
V Object(const std::vector<std::pair<std::string, V>>& m, bool large = false);
V Array(const std::vector<V>& elements, bool large = false);

// A whole document: the type byte, then the value.
std::string Doc(const V& v);

}  // namespace walwatch::mysql::json_builder

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_MYSQL_JSON_BUILDER_H_
