// Mysql8BinlogBuilder: the bytes of a binlog file as MySQL 8.0 (8.0.26 and
// later) writes it with binlog_checksum=CRC32, binlog_format=ROW,
// binlog_row_image=FULL and binlog_row_metadata=FULL, event by event, for
// tests that run BinlogReader's MySQL 8 paths (BinlogReader::OpenBytes)
// where no MySQL server exists (Debian 12 ships none).
//
// Every layout is taken from MySQL's own sources and documentation (read,
// nothing copied; mysql/mysql-server, 8.0 and later):
//   - the common header, the CRC32 footer and the event types:
//     libbinlogevents/include/binlog_event.h (libs/mysql/binlog/event/ in
//     8.1+): 19 bytes, `when` 4, type 1, server_id 4, data_written 4
//     (checksum included), log_pos 4 (the end of the event), flags 2; the
//     CRC32 (zlib's) of everything before it;
//   - FORMAT_DESCRIPTION: control_events.h (the layout at offsets 19..76)
//     and control_events.cpp (the post-header lengths table of
//     Format_description_event's first constructor, one byte for each of
//     the 41 event types of 8.0.26+: TRANSACTION_PAYLOAD's entry is the
//     number 40, as that table writes it), then the checksum algorithm;
//   - PREVIOUS_GTIDS: the GTID set as sql/rpl_gtid_set.cc Gtid_set::encode
//     writes it (8-byte count of UUIDs; for each, the 16-byte UUID, an
//     8-byte count of intervals, each interval's start and exclusive end);
//   - GTID and ANONYMOUS_GTID: control_events.cpp Gtid_event's layout
//     comment (flags, SID, GNO, lt_type 2, last_committed, sequence_number,
//     7-byte immediate commit timestamp with bit 55 clear when the original
//     one is the same, the transaction length as a packed integer, the
//     4-byte immediate server version, its bit 31 clear likewise);
//   - QUERY: statement_events.h (post-header thread_id, exec_time, db_len,
//     error_code, status_vars_len; then status variables, db, NUL, query);
//   - TABLE_MAP, WRITE/UPDATE/DELETE_ROWS v2 and PARTIAL_UPDATE_ROWS:
//     rows_event.h (Table_map_event and Rows_event binary formats, column
//     metadata table, optional metadata TLVs including COLUMN_VISIBILITY of
//     8.0.23+, extra_row_info after the 2-byte var_header_len, a second
//     column bitmap for UPDATE);
//   - TRANSACTION_PAYLOAD: codecs/binary.h Transaction_payload (TLV fields
//     with packed integers, the end mark 0, then the compressed events);
//   - XID: an 8-byte transaction number; ROTATE: 8-byte position, then the
//     file name (control_events.h);
//   - row values: DATETIME2 as sql-common/my_time.cc
//     my_datetime_packed_to_binary writes it (5 bytes big-endian plus the
//     fraction), VARCHAR with a 1-byte length below 256 bytes of maximum,
//     else 2, JSON as a 4-byte length and MySQL's binary JSON
//     (mysql_json_builder.h).
//
// Thread safety: none; a value type.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_MYSQL8_BINLOG_BUILDER_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_MYSQL8_BINLOG_BUILDER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace walwatch::mysql::mysql8 {

using Uuid = std::array<uint8_t, 16>;

// MySQL's event type codes (binlog_event.h Log_event_type).
enum EventType : uint8_t {
  kQuery = 2,
  kStop = 3,
  kRotate = 4,
  kFormatDescription = 15,
  kXid = 16,
  kTableMap = 19,
  kWriteRowsV2 = 30,
  kUpdateRowsV2 = 31,
  kDeleteRowsV2 = 32,
  kGtid = 33,
  kAnonymousGtid = 34,
  kPreviousGtids = 35,
  kPartialUpdateRows = 39,
  kTransactionPayload = 40,
};

// A column as a TABLE_MAP describes it.
struct Column {
  std::string name;
  uint8_t type = 0;  // binlog type (MYSQL_TYPE_*)
  std::string meta;  // its bytes in the metadata block
  bool nullable = false;
  bool is_unsigned = false;  // numeric columns: SIGNEDNESS
  bool character = false;    // counted in DEFAULT_CHARSET
};

// One column's value in a row image: NULL, or the bytes the row holds.
struct Cell {
  bool is_null = false;
  std::string bytes;
};
using RowImage = std::vector<Cell>;

Cell NullCell();
Cell LongLongCell(uint64_t v);
// A VARCHAR of at most `max_bytes` bytes (its TABLE_MAP metadata).
Cell VarcharCell(const std::string& s, uint32_t max_bytes);
// A JSON value: `binary` is MySQL's binary JSON (json_builder::Doc).
Cell JsonCell(const std::string& binary);
// A DATETIME(fsp) value.
Cell Datetime2Cell(int year, int month, int day, int hour, int minute,
                   int second, int micros, int fsp);

// Partition info in a ROWS event's extra_row_info (a partitioned table).
struct PartitionInfo {
  uint16_t partition_id = 0;
  uint16_t source_partition_id = 0;  // UPDATE only
};

class Mysql8BinlogBuilder {
 public:
  // Events carry `server_id` and `timestamp` (seconds since the epoch).
  explicit Mysql8BinlogBuilder(uint32_t server_id = 1,
                               uint32_t timestamp = 1796380272);

  // Each appends one event and returns its start position. An event's end
  // position is size() right after.
  // `event_types`: how many event types the server knows, 41 from
  // 8.0.26 (HEARTBEAT_LOG_EVENT_V2), 40 in 8.0.20-8.0.25, 39 before; the
  // FORMAT_DESCRIPTION's own post-header length is 57 more.
  size_t FormatDescription(const std::string& server_version = "8.0.36",
                           size_t event_types = 41);
  size_t PreviousGtids(
      const std::vector<
          std::pair<Uuid, std::vector<std::pair<uint64_t, uint64_t>>>>& sets);
  // The transaction's length is written when its XID comes (Xid()).
  size_t Gtid(const Uuid& uuid, uint64_t gno, uint64_t last_committed,
              uint64_t sequence_number);
  size_t AnonymousGtid(uint64_t last_committed, uint64_t sequence_number);
  size_t Query(const std::string& db, const std::string& sql);
  size_t TableMap(uint64_t table_id, const std::string& db,
                  const std::string& table, const std::vector<Column>& columns);
  size_t WriteRows(uint64_t table_id, size_t columns,
                   const std::vector<RowImage>& rows,
                   const PartitionInfo* part = nullptr);
  size_t UpdateRows(uint64_t table_id, size_t columns,
                    const std::vector<std::pair<RowImage, RowImage>>& rows,
                    const PartitionInfo* part = nullptr);
  size_t DeleteRows(uint64_t table_id, size_t columns,
                    const std::vector<RowImage>& rows,
                    const PartitionInfo* part = nullptr);
  // binlog_row_value_options=PARTIAL_JSON: an UPDATE whose after image is
  // given whole here (value_options 0 for every JSON column).
  size_t PartialUpdateRows(uint64_t table_id, size_t columns,
                           const RowImage& before, const RowImage& after);
  // binlog_transaction_compression=ON: `compressed` as the payload.
  size_t TransactionPayload(const std::string& compressed,
                            uint64_t uncompressed_size);
  size_t Xid(uint64_t xid);
  size_t Rotate(const std::string& next_file, uint64_t position = 4);
  // Any event: `body` is its post-header and body, without checksum.
  size_t Event(uint8_t type, const std::string& body, uint16_t flags = 0);

  const std::string& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  size_t Rows(uint8_t type, uint64_t table_id, size_t columns,
              const std::vector<const RowImage*>& images,
              const PartitionInfo* part);
  size_t GtidEvent(uint8_t type, uint8_t flags, const Uuid& uuid, uint64_t gno,
                   uint64_t last_committed, uint64_t sequence_number);

  uint32_t server_id_;
  uint32_t timestamp_;
  std::string bytes_;
  // The GTID event whose transaction length Xid() fills in; 0 if none.
  size_t open_gtid_ = 0;
};

// Clusterpedia's `resources` table as MySQL 8 creates it
// (schema/mysql/clusterpedia.sql, utf8mb4: VARCHAR(n) holds 4n bytes).
std::vector<Column> ResourcesColumns();

struct ResourceRow {
  uint64_t id = 1;
  std::string group, version = "v1", resource = "pods", kind = "Pod";
  std::string cluster = "c1", namespace_ = "default", name = "web-1";
  std::string owner_uid, uid = "u-1", resource_version = "100";
  std::string object;  // binary JSON (json_builder::Doc)
  bool events_null = true;
  std::string events;  // binary JSON, unless events_null
  int created_ms = 345;
  int synced_ms = 678;
};

// The row image of `row`, in ResourcesColumns() order (event_resource_versions
// and deleted_at NULL).
RowImage ResourcesImage(const ResourceRow& row);

}  // namespace walwatch::mysql::mysql8

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_MYSQL8_BINLOG_BUILDER_H_
