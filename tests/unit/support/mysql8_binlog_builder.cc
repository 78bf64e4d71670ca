#include "tests/unit/support/mysql8_binlog_builder.h"

#include <zlib.h>

namespace walwatch::mysql::mysql8 {

namespace {

constexpr size_t kHeaderSize = 19;
constexpr size_t kChecksumSize = 4;

std::string Le(uint64_t v, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

std::string Be(uint64_t v, size_t n) {
  std::string s;
  for (size_t i = n; i-- > 0;)
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

// MySQL's packed integer (net_store_length).
std::string Packed(uint64_t v) {
  if (v < 251) return Le(v, 1);
  if (v < (1u << 16)) return "\xfc" + Le(v, 2);
  if (v < (1u << 24)) return "\xfd" + Le(v, 3);
  return "\xfe" + Le(v, 8);
}

// `bits` bits, the first in the lowest bit of the first byte (row and
// column bitmaps).
std::string LsbBitmap(const std::vector<bool>& bits) {
  std::string s((bits.size() + 7) / 8, '\0');
  for (size_t i = 0; i < bits.size(); ++i) {
    if (bits[i]) s[i / 8] = static_cast<char>(s[i / 8] | (1 << (i % 8)));
  }
  return s;
}

// The first in the highest bit (SIGNEDNESS, COLUMN_VISIBILITY).
std::string MsbBitmap(const std::vector<bool>& bits) {
  std::string s((bits.size() + 7) / 8, '\0');
  for (size_t i = 0; i < bits.size(); ++i) {
    if (bits[i]) s[i / 8] = static_cast<char>(s[i / 8] | (0x80 >> (i % 8)));
  }
  return s;
}

std::string Tlv(uint8_t type, const std::string& value) {
  return std::string(1, static_cast<char>(type)) + Packed(value.size()) + value;
}

bool IsNumeric(uint8_t type) {
  switch (type) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 8:
    case 9:
    case 246:
      return true;
    default:
      return false;
  }
}

void PutCrc(std::string* bytes, size_t start) {
  const size_t len = bytes->size() - start - kChecksumSize;
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes->data() + start),
              static_cast<uInt>(len));
  bytes->replace(start + len, kChecksumSize,
                 Le(static_cast<uint32_t>(crc), kChecksumSize));
}

// The row image: a NULL bitmap over the columns, then the non-NULL values.
std::string Image(const RowImage& row) {
  std::vector<bool> nulls;
  std::string values;
  for (const Cell& c : row) {
    nulls.push_back(c.is_null);
    if (!c.is_null) values += c.bytes;
  }
  return LsbBitmap(nulls) + values;
}

// One image per row (WRITE and DELETE rows events).
std::vector<const RowImage*> Pointers(const std::vector<RowImage>& rows) {
  std::vector<const RowImage*> images;
  for (const RowImage& r : rows) images.push_back(&r);
  return images;
}

}  // namespace

Cell NullCell() { return Cell{true, ""}; }

Cell LongLongCell(uint64_t v) { return Cell{false, Le(v, 8)}; }

Cell VarcharCell(const std::string& s, uint32_t max_bytes) {
  return Cell{false, Le(s.size(), max_bytes < 256 ? 1 : 2) + s};
}

Cell JsonCell(const std::string& binary) {
  return Cell{false, Le(binary.size(), 4) + binary};
}

Cell Datetime2Cell(int year, int month, int day, int hour, int minute,
                   int second, int micros, int fsp) {
  const int64_t ymd = ((static_cast<int64_t>(year) * 13 + month) << 5) | day;
  const int64_t hms = (hour << 12) | (minute << 6) | second;
  const int64_t int_part = (ymd << 17) | hms;
  // DATETIMEF_INT_OFS: the integer part is stored offset by 2^39.
  std::string s = Be(static_cast<uint64_t>(int_part + (int64_t{1} << 39)), 5);
  switch (fsp) {
    case 1:
    case 2:
      s += Be(static_cast<uint64_t>(micros / 10000), 1);
      break;
    case 3:
    case 4:
      s += Be(static_cast<uint64_t>(micros / 100), 2);
      break;
    case 5:
    case 6:
      s += Be(static_cast<uint64_t>(micros), 3);
      break;
    default:
      break;
  }
  return Cell{false, s};
}

Mysql8BinlogBuilder::Mysql8BinlogBuilder(uint32_t server_id, uint32_t timestamp)
    : server_id_(server_id),
      timestamp_(timestamp),
      bytes_(
          "\xfe"
          "bin",
          4) {}

size_t Mysql8BinlogBuilder::Event(uint8_t type, const std::string& body,
                                  uint16_t flags) {
  const size_t start = bytes_.size();
  const size_t length = kHeaderSize + body.size() + kChecksumSize;
  bytes_ += Le(timestamp_, 4);
  bytes_.push_back(static_cast<char>(type));
  bytes_ += Le(server_id_, 4);
  bytes_ += Le(length, 4);
  bytes_ += Le(start + length, 4);  // log_pos: the end of this event
  bytes_ += Le(flags, 2);
  bytes_ += body;
  bytes_ += std::string(kChecksumSize, '\0');
  PutCrc(&bytes_, start);
  return start;
}

size_t Mysql8BinlogBuilder::FormatDescription(const std::string& server_version,
                                              size_t event_types) {
  // Post-header lengths of event types 1..41 as 8.0.26+ writes them.
  static const uint8_t kPostHeader[41] = {
      0,  13, 0,  8,  0,  0,  0,  0,  4,  0,   // 1-10
      4,  0,  0,  0,  98, 0,  4,  26, 8,  0,   // 11-20
      0,  0,  8,  8,  8,  2,  0,  0,  0,  10,  // 21-30
      10, 10, 42, 42, 0,  18, 52, 0,  10, 40,  // 31-40
      0};                                      // 41: HEARTBEAT_LOG_EVENT_V2
  std::string body = Le(4, 2);                 // binlog version
  std::string version = server_version;
  version.resize(50, '\0');
  body += version;
  body += Le(timestamp_, 4);  // created
  body.push_back(static_cast<char>(kHeaderSize));
  std::string lengths(reinterpret_cast<const char*>(kPostHeader),
                      sizeof(kPostHeader));
  lengths.resize(event_types, '\0');
  // FORMAT_DESCRIPTION_HEADER_LEN: START_V3_HEADER_LEN (56) + 1 + the types.
  lengths[kFormatDescription - 1] = static_cast<char>(57 + event_types);
  body += lengths;
  body.push_back('\x01');  // BINLOG_CHECKSUM_ALG_CRC32
  return Event(kFormatDescription, body);
}

size_t Mysql8BinlogBuilder::PreviousGtids(
    const std::vector<
        std::pair<Uuid, std::vector<std::pair<uint64_t, uint64_t>>>>& sets) {
  std::string body = Le(sets.size(), 8);
  for (const auto& [uuid, intervals] : sets) {
    body.append(reinterpret_cast<const char*>(uuid.data()), uuid.size());
    body += Le(intervals.size(), 8);
    for (const auto& [first, end] : intervals)
      body += Le(first, 8) + Le(end, 8);
  }
  return Event(kPreviousGtids, body);
}

size_t Mysql8BinlogBuilder::GtidEvent(uint8_t type, uint8_t flags,
                                      const Uuid& uuid, uint64_t gno,
                                      uint64_t last_committed,
                                      uint64_t sequence_number) {
  std::string body(1, static_cast<char>(flags));
  body.append(reinterpret_cast<const char*>(uuid.data()), uuid.size());
  body += Le(gno, 8);
  body.push_back('\x02');  // LOGICAL_TIMESTAMP_TYPECODE
  body += Le(last_committed, 8);
  body += Le(sequence_number, 8);
  // The immediate commit time in microseconds; bit 55 clear: the original
  // commit time (this server's own transaction) is the same.
  body += Le(uint64_t{timestamp_} * 1000000 + 123456, 7);
  // The transaction's length: a 3-byte packed integer, filled in by Xid().
  body += "\xfc" + Le(0, 2);
  body += Le(80036, 4);  // immediate_server_version, bit 31 clear: same
  const size_t start = Event(type, body);
  open_gtid_ = start;
  return start;
}

size_t Mysql8BinlogBuilder::Gtid(const Uuid& uuid, uint64_t gno,
                                 uint64_t last_committed,
                                 uint64_t sequence_number) {
  return GtidEvent(kGtid, 0, uuid, gno, last_committed, sequence_number);
}

size_t Mysql8BinlogBuilder::AnonymousGtid(uint64_t last_committed,
                                          uint64_t sequence_number) {
  return GtidEvent(kAnonymousGtid, 0, Uuid{}, 0, last_committed,
                   sequence_number);
}

size_t Mysql8BinlogBuilder::Query(const std::string& db,
                                  const std::string& sql) {
  // Status variables as 8.0 writes them for a session's statement:
  // Q_FLAGS2_CODE, Q_SQL_MODE_CODE, Q_CATALOG_NZ_CODE ("std"),
  // Q_CHARSET_CODE (client, connection and server collation numbers).
  std::string status;
  status += '\x00' + Le(0, 4);
  status += '\x01' + Le(0x48000000ULL | 0x200000, 8);
  status += std::string("\x06\x03", 2) + "std";
  status += '\x04' + Le(255, 2) + Le(255, 2) + Le(255, 2);
  std::string body = Le(8, 4);  // thread_id
  body += Le(0, 4);             // exec_time
  body.push_back(static_cast<char>(db.size()));
  body += Le(0, 2);  // error_code
  body += Le(status.size(), 2);
  body += status + db + '\0' + sql;
  return Event(kQuery, body);
}

size_t Mysql8BinlogBuilder::TableMap(uint64_t table_id, const std::string& db,
                                     const std::string& table,
                                     const std::vector<Column>& columns) {
  std::string body = Le(table_id, 6) + Le(1, 2);  // TM_BIT_LEN_EXACT_F
  body.push_back(static_cast<char>(db.size()));
  body += db + '\0';
  body.push_back(static_cast<char>(table.size()));
  body += table + '\0';
  body += Packed(columns.size());
  std::string meta;
  std::vector<bool> nullable, is_unsigned, visible;
  std::string names;
  for (const Column& c : columns) {
    body.push_back(static_cast<char>(c.type));
    meta += c.meta;
    nullable.push_back(c.nullable);
    if (IsNumeric(c.type)) is_unsigned.push_back(c.is_unsigned);
    visible.push_back(true);
    names += Packed(c.name.size()) + c.name;
  }
  body += Packed(meta.size()) + meta;
  body += LsbBitmap(nullable);
  // Optional metadata, in the order Table_map_log_event writes it.
  if (!is_unsigned.empty()) body += Tlv(1, MsbBitmap(is_unsigned));
  body += Tlv(2, Packed(255));          // DEFAULT_CHARSET: utf8mb4_0900_ai_ci
  body += Tlv(4, names);                // COLUMN_NAME
  body += Tlv(8, Packed(0));            // SIMPLE_PRIMARY_KEY: column 0
  body += Tlv(12, MsbBitmap(visible));  // COLUMN_VISIBILITY (8.0.23+)
  return Event(kTableMap, body);
}

size_t Mysql8BinlogBuilder::Rows(uint8_t type, uint64_t table_id,
                                 size_t columns,
                                 const std::vector<const RowImage*>& images,
                                 const PartitionInfo* part) {
  std::string extra;
  if (part != nullptr) {
    extra.push_back('\x01');  // enum_extra_row_info_typecode::PART
    extra += Le(part->partition_id, 2);
    if (type == kUpdateRowsV2 || type == kPartialUpdateRows)
      extra += Le(part->source_partition_id, 2);
  }
  std::string body = Le(table_id, 6) + Le(1, 2);  // STMT_END_F
  body += Le(2 + extra.size(), 2) + extra;        // var_header_len, itself in
  body += Packed(columns);
  const std::string all = LsbBitmap(std::vector<bool>(columns, true));
  body += all;
  if (type == kUpdateRowsV2 || type == kPartialUpdateRows) body += all;
  for (const RowImage* image : images) body += Image(*image);
  return Event(type, body);
}

size_t Mysql8BinlogBuilder::WriteRows(uint64_t table_id, size_t columns,
                                      const std::vector<RowImage>& rows,
                                      const PartitionInfo* part) {
  return Rows(kWriteRowsV2, table_id, columns, Pointers(rows), part);
}

size_t Mysql8BinlogBuilder::UpdateRows(
    uint64_t table_id, size_t columns,
    const std::vector<std::pair<RowImage, RowImage>>& rows,
    const PartitionInfo* part) {
  std::vector<const RowImage*> images;
  for (const auto& [before, after] : rows) {
    images.push_back(&before);
    images.push_back(&after);
  }
  return Rows(kUpdateRowsV2, table_id, columns, images, part);
}

size_t Mysql8BinlogBuilder::DeleteRows(uint64_t table_id, size_t columns,
                                       const std::vector<RowImage>& rows,
                                       const PartitionInfo* part) {
  return Rows(kDeleteRowsV2, table_id, columns, Pointers(rows), part);
}

size_t Mysql8BinlogBuilder::PartialUpdateRows(uint64_t table_id, size_t columns,
                                              const RowImage& before,
                                              const RowImage& after) {
  std::string body = Le(table_id, 6) + Le(1, 2) + Le(2, 2);
  body += Packed(columns);
  const std::string all = LsbBitmap(std::vector<bool>(columns, true));
  body += all + all;
  body += Image(before);
  // value_options: PARTIAL_JSON_UPDATES (1), then one bit per JSON column
  // of the after image saying whether it is a partial update: none here.
  body += Packed(1) + std::string(1, '\0');
  body += Image(after);
  return Event(kPartialUpdateRows, body);
}

size_t Mysql8BinlogBuilder::TransactionPayload(const std::string& compressed,
                                               uint64_t uncompressed_size) {
  auto field = [](uint64_t type, uint64_t value) {
    std::string v = Packed(value);
    return Packed(type) + Packed(v.size()) + v;
  };
  std::string body = field(2, 0);       // OTW_PAYLOAD_COMPRESSION_TYPE: ZSTD
  body += field(3, uncompressed_size);  // OTW_PAYLOAD_UNCOMPRESSED_SIZE
  body += field(1, compressed.size());  // OTW_PAYLOAD_SIZE
  body += Packed(0);                    // OTW_PAYLOAD_HEADER_END_MARK
  body += compressed;
  return Event(kTransactionPayload, body);
}

size_t Mysql8BinlogBuilder::Xid(uint64_t xid) {
  const size_t start = Event(kXid, Le(xid, 8));
  if (open_gtid_ != 0) {
    // transaction_length: from the GTID event's start to the XID's end.
    const size_t length = bytes_.size() - open_gtid_;
    const size_t at = open_gtid_ + kHeaderSize + 42 + 7 + 1;
    bytes_.replace(at, 2, Le(length, 2));
    const size_t gtid_end =
        open_gtid_ + static_cast<uint8_t>(bytes_[open_gtid_ + 9]);
    std::string gtid = bytes_.substr(open_gtid_, gtid_end - open_gtid_);
    PutCrc(&gtid, 0);
    bytes_.replace(open_gtid_, gtid.size(), gtid);
    open_gtid_ = 0;
  }
  return start;
}

size_t Mysql8BinlogBuilder::Rotate(const std::string& next_file,
                                   uint64_t position) {
  return Event(kRotate, Le(position, 8) + next_file);
}

std::vector<Column> ResourcesColumns() {
  auto varchar = [](const char* name, uint32_t chars) {
    const uint32_t bytes = chars * 4;  // utf8mb4
    return Column{name, 15, Le(bytes, 2), false, false, true};
  };
  auto json = [](const char* name, bool nullable) {
    return Column{name, 245, Le(4, 1), nullable, false, false};
  };
  auto datetime = [](const char* name, bool nullable) {
    return Column{name, 18, Le(3, 1), nullable, false, false};
  };
  return {
      Column{"id", 8, "", false, true, false},
      varchar("group", 63),
      varchar("version", 15),
      varchar("resource", 63),
      varchar("kind", 63),
      varchar("cluster", 253),
      varchar("namespace", 253),
      varchar("name", 253),
      varchar("owner_uid", 36),
      varchar("uid", 36),
      varchar("resource_version", 30),
      json("object", false),
      json("events", true),
      json("event_resource_versions", true),
      datetime("created_at", false),
      datetime("synced_at", false),
      datetime("deleted_at", true),
  };
}

RowImage ResourcesImage(const ResourceRow& r) {
  return {
      LongLongCell(r.id),
      VarcharCell(r.group, 63 * 4),
      VarcharCell(r.version, 15 * 4),
      VarcharCell(r.resource, 63 * 4),
      VarcharCell(r.kind, 63 * 4),
      VarcharCell(r.cluster, 253 * 4),
      VarcharCell(r.namespace_, 253 * 4),
      VarcharCell(r.name, 253 * 4),
      VarcharCell(r.owner_uid, 36 * 4),
      VarcharCell(r.uid, 36 * 4),
      VarcharCell(r.resource_version, 30 * 4),
      JsonCell(r.object),
      r.events_null ? NullCell() : JsonCell(r.events),
      NullCell(),
      Datetime2Cell(2026, 12, 4, 10, 11, 12, r.created_ms * 1000, 3),
      Datetime2Cell(2026, 12, 4, 10, 11, 13, r.synced_ms * 1000, 3),
      NullCell(),
  };
}

}  // namespace walwatch::mysql::mysql8
