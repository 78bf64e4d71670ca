// TableMapping says which columns of which table hold the fields of a
// Kubernetes watch event. It is data (schema/*.mapping.json), so another
// PostgreSQL-backed storage layer can be watched by writing a mapping:
//
//   {"schema": "public", "table": "resources",
//    "columns": {"group": "group", "version": "version", ..., "object": "object"}}
//
// Every field in kMappedFieldNames must be mapped. `object` must be a json or
// jsonb column holding the Kubernetes object; the others are text.
// Columns are matched by name, never by position.
#ifndef WALWATCH_SCHEMA_TABLE_MAPPING_H_
#define WALWATCH_SCHEMA_TABLE_MAPPING_H_

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace walwatch {

enum class MappedField : uint8_t {
  kGroup,
  kVersion,
  kResource,
  kKind,
  kCluster,
  kNamespace,
  kName,
  kUid,
  kObject,
};
inline constexpr size_t kMappedFieldCount = 9;
inline constexpr std::array<const char*, kMappedFieldCount> kMappedFieldNames =
    {"group", "version", "resource", "kind", "cluster",
     "namespace", "name", "uid", "object"};

struct TableMapping {
  std::string schema = "public";
  std::string table;
  std::array<std::string, kMappedFieldCount> columns;

  const std::string& column(MappedField f) const {
    return columns[static_cast<size_t>(f)];
  }
  // The field a column holds, or -1 if the column is not mapped.
  int FieldOfColumn(std::string_view column_name) const;
  // "public.resources", as wal2json's add-tables wants it.
  std::string QualifiedTable() const;
};

// Parses a mapping document. Returns "" on success, else a one-line error.
std::string ParseTableMapping(std::string_view json, TableMapping* out);

// The built-in mapping of Clusterpedia's `resources` table.
TableMapping DefaultTableMapping();

}  // namespace walwatch

#endif  // WALWATCH_SCHEMA_TABLE_MAPPING_H_
