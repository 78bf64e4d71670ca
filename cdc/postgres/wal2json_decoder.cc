#include "cdc/postgres/wal2json_decoder.h"

#include <cstring>
#include <ctime>

#include <simdjson.h>

#include "cdc/base/text.h"
#include "cdc/postgres/lsn.h"

namespace walwatch {

namespace od = simdjson::ondemand;

struct Wal2JsonDecoder::Impl {
  explicit Impl(const TableMapping& m) : mapping(m) {}
  const TableMapping& mapping;
  od::parser parser;
  // The message copied with simdjson's padding behind it: libpq's copy
  // buffers carry no padding.
  std::unique_ptr<char[]> buf;
  size_t buf_capacity = 0;

  std::string DecodeTuple(od::array tuple, RowImage* image);
};

Wal2JsonDecoder::Wal2JsonDecoder(const TableMapping& mapping)
    : impl_(std::make_unique<Impl>(mapping)) {}
Wal2JsonDecoder::~Wal2JsonDecoder() = default;

namespace {

// raw_json_token() of a null value: "null", perhaps with trailing spaces.
bool IsNullToken(std::string_view token) {
  return token.substr(0, 4) == "null" &&
         token.find_first_not_of(" \t\r\n", 4) == std::string_view::npos;
}

std::string Describe(const char* what, simdjson::error_code err) {
  return std::string(what) + ": " + simdjson::error_message(err);
}

void ResetImage(RowImage* image) {
  image->present = false;
  for (auto& f : image->fields) {
    f.state = ColumnValue::State::kAbsent;
    f.text.clear();
  }
}

// Reads a column value: strings unescaped, everything else as its token.
// `pad`: leave simdjson's padding behind a string (the object column, which
// is parsed again in place).
simdjson::error_code ReadColumnValue(od::value value, bool pad,
                                     ColumnValue* out) {
  od::json_type type;
  if (auto err = value.type().get(type)) return err;
  switch (type) {
    case od::json_type::null:
      out->state = ColumnValue::State::kNull;
      out->text.clear();
      // Consume the token so the iterator moves on.
      return value.is_null().error();
    case od::json_type::string: {
      std::string_view s;
      if (auto err = value.get_string().get(s)) return err;
      out->state = ColumnValue::State::kValue;
      if (pad) out->text.reserve(s.size() + simdjson::SIMDJSON_PADDING);
      out->text.assign(s.data(), s.size());
      return simdjson::SUCCESS;
    }
    case od::json_type::number:
    case od::json_type::boolean: {
      std::string_view token = value.raw_json_token();
      while (!token.empty() && (token.back() == ' ' || token.back() == '\n' ||
                                token.back() == '\t' || token.back() == '\r')) {
        token.remove_suffix(1);
      }
      out->state = ColumnValue::State::kValue;
      out->text.assign(token.data(), token.size());
      // Left unconsumed: the object iterator skips it.
      return simdjson::SUCCESS;
    }
    default:
      return simdjson::INCORRECT_TYPE;
  }
}

}  // namespace

std::string Wal2JsonDecoder::Impl::DecodeTuple(od::array tuple,
                                                RowImage* image) {
  image->present = true;
  for (auto element : tuple) {
    od::object column;
    if (auto err = element.get_object().get(column)) {
      return Describe("column is not an object", err);
    }
    int field = -1;
    bool have_name = false;
    for (auto kv : column) {
      std::string_view key;
      if (auto err = kv.unescaped_key().get(key)) {
        return Describe("bad column key", err);
      }
      if (key == "name") {
        std::string_view name;
        if (auto err = kv.value().get_string().get(name)) {
          return Describe("column name is not a string", err);
        }
        field = mapping.FieldOfColumn(name);
        have_name = true;
      } else if (key == "value") {
        // wal2json writes "name" before "value"; a mapped column's value is
        // kept, any other is skipped without being materialized.
        if (!have_name) return "column value before its name";
        if (field < 0) continue;
        bool pad = field == static_cast<int>(MappedField::kObject);
        if (auto err =
                ReadColumnValue(kv.value(), pad, &image->fields[field])) {
          return Describe("bad column value", err);
        }
      }
      // "type", "typeoid", "optional": not needed.
    }
    if (!have_name) return "column without a name";
  }
  return "";
}

std::string Wal2JsonDecoder::Decode(std::string_view message,
                                    uint64_t /*wal_start*/,
                                    LogicalRecord* out) {
  std::string err = DecodeMessage(message, out);
  if (!err.empty()) err = OneLine(std::move(err));
  return err;
}

std::string Wal2JsonDecoder::DecodeMessage(std::string_view message,
                                           LogicalRecord* out) {
  Impl& m = *impl_;
  size_t need = message.size() + simdjson::SIMDJSON_PADDING;
  if (m.buf_capacity < need) {
    m.buf_capacity = need + need / 2;
    m.buf.reset(new char[m.buf_capacity]);
  }
  std::memcpy(m.buf.get(), message.data(), message.size());
  std::memset(m.buf.get() + message.size(), 0, simdjson::SIMDJSON_PADDING);

  out->action = RecordAction::kMessage;
  out->xid = out->subxid = 0;
  out->lsn = out->next_lsn = 0;
  out->timestamp_us = 0;
  out->mapped_table = false;
  ResetImage(&out->columns);
  ResetImage(&out->identity);

  od::document doc;
  if (auto err = m.parser.iterate(m.buf.get(), message.size(), m.buf_capacity)
                     .get(doc)) {
    return Describe("not JSON", err);
  }
  od::object root;
  if (auto err = doc.get_object().get(root)) {
    return Describe("not a JSON object", err);
  }
  bool have_action = false;
  std::string_view schema, table;
  bool have_schema = false, have_table = false;
  for (auto field : root) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) {
      return Describe("bad key", err);
    }
    if (key == "action") {
      std::string_view a;
      if (auto err = field.value().get_string().get(a)) {
        return Describe("\"action\" is not a string", err);
      }
      if (a.size() != 1 ||
          std::string_view("BCIUDTM").find(a[0]) == std::string_view::npos) {
        return "unknown action \"" + std::string(a) + "\"";
      }
      out->action = static_cast<RecordAction>(a[0]);
      have_action = true;
    } else if (key == "xid") {
      od::value v = field.value();
      // A non-transactional message ('M') has "xid":null and
      // "timestamp":null: left as 0.
      if (IsNullToken(v.raw_json_token())) continue;
      uint64_t xid;
      if (auto err = v.get_uint64().get(xid)) {
        return Describe("\"xid\" is not an unsigned integer", err);
      }
      if (xid > UINT32_MAX) return "\"xid\" is out of range";
      out->xid = static_cast<uint32_t>(xid);
    } else if (key == "lsn" || key == "nextlsn") {
      std::string_view s;
      if (auto err = field.value().get_string().get(s)) {
        return Describe("LSN is not a string", err);
      }
      auto lsn = ParseLsn(s);
      if (!lsn) return "bad LSN \"" + std::string(s) + "\"";
      (key == "lsn" ? out->lsn : out->next_lsn) = *lsn;
    } else if (key == "timestamp") {
      od::value v = field.value();
      if (IsNullToken(v.raw_json_token())) continue;
      std::string_view s;
      if (auto err = v.get_string().get(s)) {
        return Describe("\"timestamp\" is not a string", err);
      }
      if (!ParsePgTimestamp(s, &out->timestamp_us)) {
        return "bad timestamp \"" + std::string(s) +
               "\" (the connection must use DateStyle=ISO, TimeZone=UTC)";
      }
    } else if (key == "schema" || key == "table") {
      std::string_view s;
      if (auto err = field.value().get_string().get(s)) {
        return Describe("schema/table is not a string", err);
      }
      if (key == "schema") {
        schema = s;  // points into the parser's string buffer, valid for
        have_schema = true;  // this document
      } else {
        table = s;
        have_table = true;
      }
      if (have_schema && have_table) {
        out->mapped_table =
            schema == m.mapping.schema && table == m.mapping.table;
      }
    } else if (key == "columns" || key == "identity") {
      if (!have_schema || !have_table) {
        return "\"" + std::string(key) + "\" before schema and table";
      }
      if (!out->mapped_table) continue;  // skipped unmaterialized
      od::array tuple;
      if (auto err = field.value().get_array().get(tuple)) {
        return Describe("tuple is not an array", err);
      }
      std::string err = m.DecodeTuple(
          tuple, key == "columns" ? &out->columns : &out->identity);
      if (!err.empty()) return err;
    }
    // Anything else ("prefix", "content", "pk", ...) is skipped.
  }
  // simdjson 3.0 has no document::at_end(): past the end, the location is
  // out of bounds.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return "bytes after the JSON object";
  }
  if (!have_action) return "no \"action\"";
  switch (out->action) {
    case RecordAction::kBegin:
    case RecordAction::kCommit:
      if (out->lsn == 0) return "begin/commit without \"lsn\"";
      break;
    case RecordAction::kInsert:
    case RecordAction::kUpdate:
    case RecordAction::kDelete:
    case RecordAction::kTruncate:
      if (!have_schema || !have_table) return "change without schema/table";
      break;
    default:  // kMessage; wal2json never streams
      break;
  }
  return "";
}

bool ParsePgTimestamp(std::string_view s, int64_t* unix_micros) {
  // YYYY-MM-DD HH:MM:SS[.f{1,6}](+|-)HH[:MM[:SS]]
  auto digits = [&](size_t pos, size_t n, int* v) {
    if (pos + n > s.size()) return false;
    int x = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return true;
  };
  int year, mon, day, hour, min, sec;
  if (!digits(0, 4, &year) || s.size() < 19 || s[4] != '-' ||
      !digits(5, 2, &mon) || s[7] != '-' || !digits(8, 2, &day) ||
      s[10] != ' ' || !digits(11, 2, &hour) || s[13] != ':' ||
      !digits(14, 2, &min) || s[16] != ':' || !digits(17, 2, &sec)) {
    return false;
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 ||
      sec > 60) {
    return false;
  }
  size_t pos = 19;
  int64_t micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int n = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9' && n < 6) {
      micros = micros * 10 + (s[pos] - '0');
      ++pos;
      ++n;
    }
    if (n == 0) return false;
    for (; n < 6; ++n) micros *= 10;
  }
  if (pos >= s.size() || (s[pos] != '+' && s[pos] != '-')) return false;
  int sign = s[pos] == '+' ? 1 : -1;
  int oh = 0, om = 0, os = 0;
  if (!digits(pos + 1, 2, &oh)) return false;
  pos += 3;
  if (pos < s.size()) {
    if (s[pos] != ':' || !digits(pos + 1, 2, &om)) return false;
    pos += 3;
    if (pos < s.size()) {
      if (s[pos] != ':' || !digits(pos + 1, 2, &os)) return false;
      pos += 3;
    }
  }
  if (pos != s.size()) return false;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  int64_t secs = static_cast<int64_t>(timegm(&tm));
  secs -= sign * (oh * 3600 + om * 60 + os);
  *unix_micros = secs * 1000000 + micros;
  return true;
}

}  // namespace walwatch
