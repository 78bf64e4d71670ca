// BinlogTableMap: one TABLE_MAP event of the binlog, as walwatch uses it to
// read the rows of the events that follow. It knows each column by NAME
// (from the event's optional metadata, binlog_row_metadata=FULL: the names
// the table had when the row was written, so DDL before or after does not
// matter), its binlog type and metadata, and whether it is unsigned.
//
// It also holds the column types and metadata that walwatch hands to
// Connector/C's mariadb_rpl_extract_rows instead of the event's own: that
// function (3.3) mis-reads some column types, and each is rewritten into one
// with the same bytes in the row that it reads right (see NormalizedTypes()).
//
// FormatValue turns an extracted value into the text a SELECT shows.
//
// Thread safety: immutable after Parse; any thread may read it.
#ifndef WALWATCH_CDC_MYSQL_BINLOG_TABLE_MAP_H_
#define WALWATCH_CDC_MYSQL_BINLOG_TABLE_MAP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct st_mariadb_rpl_value;  // MARIADB_RPL_VALUE of <mariadb_rpl.h>

namespace walwatch::mysql {

// Binlog column types (MYSQL_TYPE_* of mysql_com.h; they are the server's).
enum BinlogType : uint8_t {
  kTypeDecimal = 0,
  kTypeTiny = 1,
  kTypeShort = 2,
  kTypeLong = 3,
  kTypeFloat = 4,
  kTypeDouble = 5,
  kTypeNull = 6,
  kTypeTimestamp = 7,
  kTypeLongLong = 8,
  kTypeInt24 = 9,
  kTypeDate = 10,
  kTypeTime = 11,
  kTypeDateTime = 12,
  kTypeYear = 13,
  kTypeNewDate = 14,
  kTypeVarchar = 15,
  kTypeBit = 16,
  kTypeTimestamp2 = 17,
  kTypeDateTime2 = 18,
  kTypeTime2 = 19,
  kTypeJson = 245,  // MySQL 5.7+: binary JSON (cdc/mysql/mysql_json.h)
  kTypeNewDecimal = 246,
  kTypeEnum = 247,
  kTypeSet = 248,
  kTypeTinyBlob = 249,
  kTypeMediumBlob = 250,
  kTypeLongBlob = 251,
  kTypeBlob = 252,
  kTypeVarString = 253,
  kTypeString = 254,
  kTypeGeometry = 255,
};

struct BinlogColumn {
  std::string name;
  uint8_t type = 0;       // as in the event
  uint8_t real_type = 0;  // kTypeString's real type: STRING, ENUM or SET
  uint16_t meta = 0;  // its metadata: 1 byte, or 2 bytes as byte0 | byte1 << 8
  uint32_t max_length = 0;  // STRING: bytes; ENUM/SET: pack length
  bool is_unsigned = false;
};

class BinlogTableMap {
 public:
  // The parts of a TABLE_MAP event (Connector/C parses the event into
  // them). `column_names` and `signedness` are the optional metadata fields
  // COLUMN_NAME and SIGNEDNESS; empty when the server wrote none. Returns ""
  // or one line naming what is wrong (no column names: the fix is
  // binlog_row_metadata=FULL; a column type walwatch cannot read).
  static std::string Parse(uint64_t table_id, std::string_view database,
                           std::string_view table,
                           std::string_view column_types,
                           std::string_view metadata,
                           std::string_view column_names,
                           std::string_view signedness, BinlogTableMap* out);

  uint64_t table_id() const { return table_id_; }
  const std::string& database() const { return database_; }
  const std::string& table() const { return table_; }
  const std::vector<BinlogColumn>& columns() const { return columns_; }
  // Index of the column named `name` (exact, as MySQL compares column
  // names case-insensitively only in SQL text), or -1.
  int ColumnIndex(std::string_view name) const;

  // Column types and metadata for mariadb_rpl_extract_rows. Connector/C 3.3
  // reads CHAR, ENUM and SET with the wrong length (seen with 3.3.20: it
  // fails the row as malformed), and does not skip the metadata of a NULL
  // JSON or GEOMETRY value, so every later column of the row goes wrong
  // (read in its source; MariaDB has no binlog JSON type to see it with).
  // Each is given as a type with the same row bytes that it reads right:
  // CHAR(n) as VARCHAR(n), ENUM as a 1- or 2-byte integer, SET as a 1- to
  // 8-byte integer, JSON and GEOMETRY as BLOB. It fails some DECIMALs
  // (3.3.20: DECIMAL(20,6), "Client run out of memory", found by the
  // mysql_binlog fuzz target) and prints others unlike a SELECT (".9" for
  // 0.9), so DECIMAL goes as a BIT of its bytes, decoded by FormatValue.
  const std::string& normalized_types() const { return normalized_types_; }
  const std::string& normalized_metadata() const {
    return normalized_metadata_;
  }

 private:
  uint64_t table_id_ = 0;
  std::string database_;
  std::string table_;
  std::vector<BinlogColumn> columns_;
  std::string normalized_types_;
  std::string normalized_metadata_;
};

// The text a SELECT shows for `value` (extracted with the normalized types)
// of `column`: integers in decimal with the column's sign, FLOAT and DOUBLE
// in the shortest form that reads back the same, DECIMAL with its scale's
// digits (MySQL's binary DECIMAL decoded here),
// temporal types as "YYYY-MM-DD HH:MM:SS[.ffffff]" with the column's
// fractional digits (TIMESTAMP in UTC), strings and blobs as their bytes,
// MySQL's binary JSON as JSON text (DecodeMysqlJson), ENUM as its 1-based
// index and SET as its bit mask (their labels are not in the row). Returns
// "" or one line. The value must not be NULL.
std::string FormatValue(const BinlogColumn& column,
                        const st_mariadb_rpl_value& value, std::string* out);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_BINLOG_TABLE_MAP_H_
