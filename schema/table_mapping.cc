#include "schema/table_mapping.h"

#include <nlohmann/json.hpp>

#include "schema/default_mapping.h"

namespace walwatch {

int TableMapping::FieldOfColumn(std::string_view column_name) const {
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    if (columns[i] == column_name) return static_cast<int>(i);
  }
  return -1;
}

std::string TableMapping::QualifiedTable() const {
  return schema + "." + table;
}

namespace {

bool IsPlainIdentifier(const std::string& s) {
  // wal2json's add-tables splits on ',' and '.', and treats '*' as a
  // wildcard; reject names it would misread.
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (c == ',' || c == '.' || c == '*' || c == '\\' || c == '"' ||
        static_cast<unsigned char>(c) < 0x20) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string ParseTableMapping(std::string_view json, TableMapping* out) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return "table mapping is not a JSON object";
  }
  TableMapping m;
  auto str = [&](const nlohmann::json& obj, const char* key,
                 std::string* dst) -> std::string {
    auto it = obj.find(key);
    if (it == obj.end()) return std::string("table mapping lacks \"") + key + "\"";
    if (!it->is_string()) return std::string("table mapping: \"") + key + "\" must be a string";
    *dst = it->get<std::string>();
    if (!IsPlainIdentifier(*dst)) {
      return std::string("table mapping: \"") + key +
             "\" must be a plain identifier (1-63 bytes, no , . * \\ \")";
    }
    return "";
  };
  if (doc.contains("schema")) {
    if (auto err = str(doc, "schema", &m.schema); !err.empty()) return err;
  }
  if (auto err = str(doc, "table", &m.table); !err.empty()) return err;
  auto cols = doc.find("columns");
  if (cols == doc.end() || !cols->is_object()) {
    return "table mapping lacks the \"columns\" object";
  }
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    if (auto err = str(*cols, kMappedFieldNames[i], &m.columns[i]);
        !err.empty()) {
      return err + " in \"columns\"";
    }
  }
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    for (size_t j = i + 1; j < kMappedFieldCount; ++j) {
      if (m.columns[i] == m.columns[j]) {
        return "table mapping: column \"" + m.columns[i] +
               "\" is mapped to both \"" + kMappedFieldNames[i] +
               "\" and \"" + kMappedFieldNames[j] + "\"";
      }
    }
  }
  for (auto it = cols->begin(); it != cols->end(); ++it) {
    bool known = false;
    for (const char* f : kMappedFieldNames) known |= it.key() == f;
    // The key as a JSON string: control characters in it stay escaped,
    // so the message stays one line.
    if (!known) {
      return "table mapping: unknown field " + nlohmann::json(it.key()).dump() +
             " in \"columns\"";
    }
  }
  *out = std::move(m);
  return "";
}

TableMapping DefaultTableMapping() {
  TableMapping m;
  std::string err = ParseTableMapping(kDefaultMappingJson, &m);
  if (!err.empty()) std::abort();  // the built-in mapping is tested
  return m;
}

}  // namespace walwatch
