#include "cdc/mysql/binlog_reader.h"

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
// After mysql.h, whose types it uses without including it.
#include <mariadb_rpl.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "cdc/mysql/binlog_memfile.h"
#include "cdc/mysql/binlog_table_map.h"

namespace walwatch::mysql {

namespace {

constexpr size_t kEventHeaderSize = 19;

struct EventDeleter {
  void operator()(MARIADB_RPL_EVENT* e) const { mariadb_free_rpl_event(e); }
};
using EventPtr = std::unique_ptr<MARIADB_RPL_EVENT, EventDeleter>;

std::string_view View(const MARIADB_STRING& s) {
  return s.length > 0 ? std::string_view(s.str, s.length) : std::string_view();
}
std::string_view View(const MARIADB_CONST_DATA& d) {
  return d.length > 0
             ? std::string_view(reinterpret_cast<const char*>(d.data), d.length)
             : std::string_view();
}

bool StartsWithWord(std::string_view sql, std::string_view word) {
  size_t i = 0;
  while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i])))
    ++i;
  if (sql.size() - i < word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k) {
    if (std::toupper(static_cast<unsigned char>(sql[i + k])) != word[k])
      return false;
  }
  size_t end = i + word.size();
  return end == sql.size() ||
         !std::isalnum(static_cast<unsigned char>(sql[end]));
}

bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

// Whether `sql` names `table` as a whole identifier (any case, quoted or
// not). Conservative: a comment or string that names it counts too.
bool MentionsTable(std::string_view sql, std::string_view table) {
  if (table.empty() || sql.size() < table.size()) return false;
  for (size_t i = 0; i + table.size() <= sql.size(); ++i) {
    bool match = true;
    for (size_t k = 0; k < table.size() && match; ++k) {
      match = std::tolower(static_cast<unsigned char>(sql[i + k])) ==
              std::tolower(static_cast<unsigned char>(table[k]));
    }
    if (!match) continue;
    bool left = i == 0 || !IsIdentChar(sql[i - 1]);
    bool right =
        i + table.size() == sql.size() || !IsIdentChar(sql[i + table.size()]);
    if (left && right) return true;
  }
  return false;
}

// The first word of `sql`, upper case.
std::string FirstWord(std::string_view sql, size_t skip_words = 0) {
  size_t i = 0;
  for (size_t w = 0;; ++w) {
    while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i])))
      ++i;
    size_t start = i;
    while (i < sql.size() && std::isalpha(static_cast<unsigned char>(sql[i])))
      ++i;
    if (w == skip_words) {
      std::string word(sql.substr(start, i - start));
      for (char& c : word)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return word;
    }
    if (start == i) return "";
  }
}

// Whether a statement (not a row event) may have changed the rows or the
// definition of database.table: a data or definition statement that names
// the table (in its database), or drops its database. Conservative: a name
// in a comment or a string counts too; GRANT and the like never do.
bool StatementNamesTable(std::string_view sql, std::string_view default_db,
                         std::string_view database, std::string_view table) {
  static const char* const kKinds[] = {"TRUNCATE", "ALTER",  "DROP",   "RENAME",
                                       "CREATE",   "INSERT", "UPDATE", "DELETE",
                                       "REPLACE",  "LOAD"};
  const std::string kind = FirstWord(sql);
  bool data_or_definition = false;
  for (const char* k : kKinds)
    data_or_definition = data_or_definition || kind == k;
  if (!data_or_definition) return false;
  const bool in_database =
      default_db == database || MentionsTable(sql, database);
  if (MentionsTable(sql, table) && in_database) return true;
  const std::string object = FirstWord(sql, 1);
  return kind == "DROP" && (object == "DATABASE" || object == "SCHEMA") &&
         MentionsTable(sql, database);
}

bool AllBitsSet(const unsigned char* bitmap, uint32_t bits) {
  for (uint32_t i = 0; i < bits; ++i) {
    if (((bitmap[i / 8] >> (i % 8)) & 1) == 0) return false;
  }
  return true;
}

// `text` on one line: control bytes as \xNN. Error messages carry text
// from the stream (file names; Connector/C's messages quote them).
std::string OneLine(std::string text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// A binlog file name as a server writes it in ROTATE and HEARTBEAT events:
// printable ASCII.
bool IsFileName(std::string_view name) {
  if (name.empty() || name.size() > 512) return false;
  for (char c : name) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Whether the event of `len` bytes at `event` ends with the CRC32 of the
// rest.
bool CrcMatches(const unsigned char* event, size_t len) {
  if (len < kEventHeaderSize + 4) return false;
  const unsigned char* c = event + len - 4;
  const uint32_t stored =
      static_cast<uint32_t>(c[0]) | (static_cast<uint32_t>(c[1]) << 8) |
      (static_cast<uint32_t>(c[2]) << 16) | (static_cast<uint32_t>(c[3]) << 24);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, event, static_cast<uInt>(len - 4));
  return static_cast<uint32_t>(crc) == stored;
}

size_t ValueBytes(const std::vector<BinlogValue>& values) {
  size_t n = values.capacity() * sizeof(BinlogValue);
  for (const BinlogValue& v : values) n += v.text.capacity();
  return n;
}

// What to change on the server so that it stops writing events of `type`,
// which walwatch cannot read (" (fix: ...)"), or "" for another type.
std::string UnsupportedEventFix(int type) {
  switch (type) {
    case PARTIAL_UPDATE_ROWS_EVENT:
      return " (a partial JSON update; fix: SET GLOBAL "
             "binlog_row_value_options = '', and set it in the server's "
             "configuration: walwatch needs whole row images)";
    case 40:  // MySQL's TRANSACTION_PAYLOAD_EVENT
      return " (a compressed transaction; fix: SET GLOBAL "
             "binlog_transaction_compression = OFF, and set it in the "
             "server's configuration)";
    default:
      return "";
  }
}

}  // namespace

const char* BinlogErrorKindName(BinlogErrorKind kind) {
  switch (kind) {
    case BinlogErrorKind::kNone:
      return "none";
    case BinlogErrorKind::kConnection:
      return "connection";
    case BinlogErrorKind::kSilent:
      return "silent";
    case BinlogErrorKind::kPurged:
      return "purged";
    case BinlogErrorKind::kNoPosition:
      return "no_position";
    case BinlogErrorKind::kSettings:
      return "settings";
    case BinlogErrorKind::kCorrupt:
      return "corrupt";
    case BinlogErrorKind::kUnsupported:
      return "unsupported";
    case BinlogErrorKind::kStopped:
      return "stopped";
    case BinlogErrorKind::kEnd:
      return "end";
  }
  return "unknown";
}

struct BinlogReader::Impl {
  MysqlConnParams params;
  BinlogReaderOptions options;
  MysqlConnection conn;
  MARIADB_RPL* rpl = nullptr;
  EventPtr scratch;  // reused by fetch; moved into a TableEntry to keep it
  std::atomic<bool> interrupted{false};
  std::chrono::steady_clock::time_point last_bytes;
  std::atomic<uint64_t> bytes{0};
  // The time of the last FORMAT_DESCRIPTION the server wrote (not one it
  // made up for the start of a dump), 0 if none since Open.
  uint32_t format_description_time = 0;

  // Where the stream is: the file being read and the end of the last event.
  std::string file;
  uint64_t pos = 0;

  // OpenBytes(): the events Connector/C reads, and how many it has read.
  std::unique_ptr<BinlogMemFile> memfile;
  size_t events_read = 0;

  struct TableEntry {
    bool ours = false;
    EventPtr event;  // ours: the TABLE_MAP, for mariadb_rpl_extract_rows
    BinlogTableMap map;
    std::vector<size_t> wanted;  // options.columns[i] is column wanted[i]
  };
  std::unordered_map<uint64_t, TableEntry> tables;

  // Until the first event after the start position: a failure then is
  // the start position's.
  bool at_start = false;
  bool in_group = false;
  bool standalone = false;  // the group ends with its next statement
  BinlogTransaction txn;

  BinlogStatus Fail(BinlogErrorKind kind, std::string message) {
    return BinlogStatus{kind, OneLine(std::move(message))};
  }

  BinlogPosition Here() const { return BinlogPosition{file, pos}; }

  // For the events whose checksum Connector/C (3.3.20) never compares,
  // though the stream has checksums: the FORMAT_DESCRIPTION (it takes the
  // checksum from the body as a value) and the events it hands over
  // unread. True when not verifying, or the stream has none.
  bool UncheckedChecksumOk(const MARIADB_RPL_EVENT& ev) const {
    if (!options.verify_checksums || rpl == nullptr || !rpl->use_checksum)
      return true;
    const size_t avail = ev.raw_data_size - ev.raw_data_ofs;
    return ev.event_length <= avail &&
           CrcMatches(ev.raw_data + ev.raw_data_ofs, ev.event_length);
  }

  // The error of a failed fetch or open, by kind.
  // `opening`: the first answer to the dump, where an unreadable position
  // is the position's fault (a position inside an event, or past the end).
  BinlogStatus FetchError(const char* what, bool opening = false) {
    unsigned int no = conn.handle() != nullptr ? mysql_errno(conn.handle()) : 0;
    std::string msg =
        conn.handle() != nullptr ? mysql_error(conn.handle()) : "";
    if (no == 0 && rpl != nullptr && mariadb_rpl_errno(rpl) != 0) {
      no = mariadb_rpl_errno(rpl);
      msg = mariadb_rpl_error(rpl);
    }
    std::string where = std::string(what) + " at " + Here().ToString() + ": ";
    if (interrupted.load())
      return Fail(BinlogErrorKind::kStopped, where + "stopped");
    if (no == CR_UNKNOWN_BINLOG_EVENT) {
      // Connector/C (3.3.20) refuses every event type it has no parser for
      // as an unknown event, MySQL's TRANSACTION_PAYLOAD (40) and
      // PARTIAL_UPDATE_ROWS (39) included, before walwatch sees it: the
      // fix is named from the refused event's type.
      return Fail(BinlogErrorKind::kUnsupported,
                  where + msg + " (" + std::to_string(no) + ")" +
                      UnsupportedEventFix(RefusedEventType()));
    }
    if (memfile != nullptr) {
      // No connection: every failure is the bytes'.
      if (events_read == memfile->events()) {
        return Fail(BinlogErrorKind::kEnd, where + "the end of the binlog");
      }
      return Fail(BinlogErrorKind::kCorrupt,
                  where + msg + " (" + std::to_string(no) + ") in event " +
                      std::to_string(events_read + 1) + " of " +
                      std::to_string(memfile->events()));
    }
    if (no == 0) {
      return Fail(BinlogErrorKind::kConnection,
                  where + "the server ended the binlog stream");
    }
    std::string line = where + msg + " (" + std::to_string(no) + ")";
    switch (no) {
      case ER_MASTER_FATAL_ERROR_READING_BINLOG:
        if (msg.find("first log file name") != std::string::npos ||
            msg.find("purged") != std::string::npos ||
            msg.find("not in the master's binlog") != std::string::npos) {
          return Fail(BinlogErrorKind::kPurged,
                      line +
                          " (the server no longer has the binlog walwatch "
                          "needs: purged? "
                          "every watcher must relist)");
        }
        if (msg.find("impossible position") != std::string::npos ||
            (opening &&
             (msg.find("bogus data") != std::string::npos ||
              msg.find("in the middle of event") != std::string::npos))) {
          return Fail(
              BinlogErrorKind::kNoPosition,
              line +
                  " (the server has no event at that position: another binlog "
                  "history, after a failover? every watcher must relist)");
        }
        if (msg.find("same server_id") != std::string::npos ||
            msg.find("equal server ids") != std::string::npos ||
            msg.find("same server_uuid") != std::string::npos) {
          return Fail(
              BinlogErrorKind::kSettings,
              line + " (fix: give each walwatch replica its own server id)");
        }
        return Fail(BinlogErrorKind::kCorrupt, line);
      case ER_SPECIFIC_ACCESS_DENIED_ERROR:
      case ER_ACCESS_DENIED_ERROR:
        return Fail(
            BinlogErrorKind::kSettings,
            line +
                " (fix: GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* "
                "TO the walwatch account; see schema/mysql/roles.sql)");
      case CR_ERR_CHECKSUM_VERIFICATION_ERROR:
      case CR_BINLOG_ERROR:
      case CR_ERR_BINLOG_UNCOMPRESS:
      case CR_ERR_UNSUPPORTED_BINLOG_FORMAT:
        return Fail(BinlogErrorKind::kCorrupt, line);
      case CR_UNKNOWN_BINLOG_EVENT:
        return Fail(BinlogErrorKind::kUnsupported, line);
      default:
        break;
    }
    auto silent_for = std::chrono::steady_clock::now() - last_bytes;
    if (silent_for + std::chrono::seconds(1) >= options.silence_timeout) {
      return Fail(
          BinlogErrorKind::kSilent,
          where + "no event or heartbeat for " +
              std::to_string(
                  std::chrono::duration_cast<std::chrono::seconds>(silent_for)
                      .count()) +
              " s (" + msg + ")");
    }
    return Fail(BinlogErrorKind::kConnection, line);
  }

  // The type of the event Connector/C just refused, or -1: from the bytes
  // OpenBytes was given, or from the packet still in the connection's
  // buffer (a 0 status byte, then the event's header).
  int RefusedEventType() {
    if (memfile != nullptr) return memfile->event_type(events_read);
    MYSQL* m = conn.handle();
    if (m == nullptr || m->net.read_pos == nullptr || m->net.read_pos[0] != 0)
      return -1;
    return m->net.read_pos[1 + 4];
  }

  void CloseStream() {
    if (rpl != nullptr) {
      mariadb_rpl_close(rpl);
      rpl = nullptr;
    }
    conn.Close();
    memfile.reset();
    scratch.reset();
    tables.clear();
    in_group = false;
    txn = BinlogTransaction();
  }

  // ROTATE: 8-byte position, then the file name, then a CRC32 when the
  // stream has checksums (told by checking it: the artificial rotation that
  // opens a stream comes before any FORMAT_DESCRIPTION says).
  BinlogStatus ParseRotate(const MARIADB_RPL_EVENT& ev, BinlogPosition* out) {
    const unsigned char* e = ev.raw_data + ev.raw_data_ofs;
    size_t avail = ev.raw_data_size - ev.raw_data_ofs;
    size_t len = ev.event_length;
    if (len > avail || len < kEventHeaderSize + 8 + 1) {
      return Fail(BinlogErrorKind::kCorrupt,
                  "ROTATE event of " + std::to_string(len) + " bytes at " +
                      Here().ToString());
    }
    size_t name_end = len;
    if (len >= kEventHeaderSize + 8 + 4 + 1 && CrcMatches(e, len))
      name_end = len - 4;
    const unsigned char* body = e + kEventHeaderSize;
    uint64_t position = 0;
    for (int i = 0; i < 8; ++i)
      position |= static_cast<uint64_t>(body[i]) << (8 * i);
    out->pos = position;
    out->file.assign(reinterpret_cast<const char*>(body + 8),
                     name_end - kEventHeaderSize - 8);
    if (!IsFileName(out->file)) {
      return Fail(BinlogErrorKind::kCorrupt,
                  "ROTATE to a file name of " +
                      std::to_string(out->file.size()) +
                      " bytes that is no file name, at " + Here().ToString());
    }
    return BinlogStatus();
  }

  void BeginGroup(uint64_t event_start) {
    in_group = true;
    txn = BinlogTransaction();
    txn.begin = BinlogPosition{file, event_start};
  }

  void EndGroup(const MARIADB_RPL_EVENT& ev, BinlogItem* out) {
    txn.commit = Here();
    txn.commit_time = ev.timestamp;
    out->type = BinlogItem::Type::kTransaction;
    out->transaction = std::move(txn);
    out->position = out->transaction.commit;
    txn = BinlogTransaction();
    in_group = false;
    standalone = false;
    tables.clear();
  }

  BinlogStatus OnTableMap(EventPtr* holder) {
    const auto& tm = (*holder)->event.table_map;
    const uint64_t id = tm.table_id;
    // Built in place: the map's node (and the strings Connector/C is
    // pointed at below) never moves while it is in `tables`.
    TableEntry& entry = tables[id];
    entry = TableEntry();
    entry.ours = View(tm.database) == options.database &&
                 View(tm.table) == options.table;
    if (!entry.ours) return BinlogStatus();
    std::string signedness;
    if (tm.signed_indicator != nullptr) {
      // Connector/C keeps only a pointer into the event: one bit per
      // numeric column, so at most one byte per 8 columns.
      const size_t max = (tm.column_count + 7) / 8;
      const unsigned char* end = (*holder)->raw_data + (*holder)->raw_data_size;
      const size_t have = static_cast<size_t>(end - tm.signed_indicator);
      signedness.assign(reinterpret_cast<const char*>(tm.signed_indicator),
                        have < max ? have : max);
    }
    std::string err = BinlogTableMap::Parse(
        tm.table_id, View(tm.database), View(tm.table), View(tm.column_types),
        View(tm.metadata), View(tm.column_names), signedness, &entry.map);
    if (!err.empty()) {
      return Fail(BinlogErrorKind::kSettings,
                  err + " (at " + Here().ToString() + ")");
    }
    for (const std::string& name : options.columns) {
      int index = entry.map.ColumnIndex(name);
      if (index < 0) {
        return Fail(
            BinlogErrorKind::kSettings,
            "TABLE_MAP of " + options.database + "." + options.table + " at " +
                Here().ToString() + " has no column " + name +
                " (dropped or renamed by DDL? fix: correct the table mapping)");
      }
      entry.wanted.push_back(static_cast<size_t>(index));
    }
    // Keep the event for mariadb_rpl_extract_rows, and hand Connector/C the
    // column types it reads right (binlog_table_map.h).
    entry.event = std::move(*holder);
    auto& mtm = entry.event->event.table_map;
    mtm.column_types.str =
        const_cast<char*>(entry.map.normalized_types().data());
    mtm.column_types.length = entry.map.normalized_types().size();
    mtm.metadata.str =
        const_cast<char*>(entry.map.normalized_metadata().data());
    mtm.metadata.length = entry.map.normalized_metadata().size();
    return BinlogStatus();
  }

  BinlogStatus Row(const TableEntry& table, const MARIADB_RPL_ROW& row,
                   std::vector<BinlogValue>* out) {
    if (row.column_count != table.map.columns().size()) {
      return Fail(BinlogErrorKind::kCorrupt,
                  "row of " + std::to_string(row.column_count) +
                      " columns at " + Here().ToString());
    }
    out->resize(table.wanted.size());
    for (size_t i = 0; i < table.wanted.size(); ++i) {
      size_t c = table.wanted[i];
      BinlogValue& v = (*out)[i];
      v.is_null = row.columns[c].is_null != 0;
      v.text.clear();
      if (v.is_null) continue;
      std::string err =
          FormatValue(table.map.columns()[c], row.columns[c], &v.text);
      if (!err.empty()) {
        return Fail(BinlogErrorKind::kCorrupt,
                    err + " at " + Here().ToString());
      }
    }
    return BinlogStatus();
  }

  // Once overflowed: the key columns of a row image, kept or not yet read.
  void Touch(const std::vector<BinlogValue>& values) {
    if (values.empty()) return;  // no such image (an INSERT's old row)
    std::vector<std::string> key;
    for (size_t k : options.key_columns) {
      if (k >= values.size() || values[k].is_null) {
        txn.touched_unknown = true;
        return;
      }
      key.push_back(values[k].text);
    }
    if (key.empty()) {
      txn.touched_unknown = true;
      return;
    }
    txn.touched.insert(std::move(key));
  }
  BinlogStatus Touch(const TableEntry& table, const MARIADB_RPL_ROW& row) {
    if (row.column_count != table.map.columns().size()) {
      return Fail(BinlogErrorKind::kCorrupt,
                  "row of " + std::to_string(row.column_count) +
                      " columns at " + Here().ToString());
    }
    // Only the key columns are formatted: the objects are dropped.
    std::vector<BinlogValue> values(table.wanted.size());
    for (size_t k : options.key_columns) {
      if (k >= table.wanted.size()) continue;
      const size_t c = table.wanted[k];
      values[k].is_null = row.columns[c].is_null != 0;
      if (values[k].is_null) continue;
      std::string err =
          FormatValue(table.map.columns()[c], row.columns[c], &values[k].text);
      if (!err.empty()) {
        return Fail(BinlogErrorKind::kCorrupt,
                    err + " at " + Here().ToString());
      }
    }
    Touch(values);
    return BinlogStatus();
  }

  BinlogStatus OnRows(MARIADB_RPL_EVENT* ev, uint64_t event_start) {
    auto& rows = ev->event.rows;
    auto it = tables.find(rows.table_id);
    if (it == tables.end()) {
      return Fail(BinlogErrorKind::kCorrupt,
                  "rows for table id " + std::to_string(rows.table_id) +
                      " without its TABLE_MAP at " + Here().ToString());
    }
    const TableEntry& table = it->second;
    if (!table.ours) return BinlogStatus();
    if (!in_group) {
      return Fail(BinlogErrorKind::kCorrupt,
                  "rows outside a transaction at " + Here().ToString());
    }
    const uint32_t columns = static_cast<uint32_t>(table.map.columns().size());
    if (rows.column_count != columns) {
      return Fail(BinlogErrorKind::kCorrupt,
                  "rows of " + std::to_string(rows.column_count) +
                      " columns for a TABLE_MAP of " + std::to_string(columns) +
                      " at " + Here().ToString());
    }
    const char* kImage =
        " (fix: SET GLOBAL binlog_row_image = FULL, and set it in the server's "
        "configuration: walwatch needs every column of the old and new rows)";
    if (!AllBitsSet(rows.column_bitmap, columns)) {
      return Fail(BinlogErrorKind::kSettings, "a partial row image of " +
                                                  options.table + " at " +
                                                  Here().ToString() + kImage);
    }
    const bool update = rows.type == UPDATE_ROWS;
    if (update && rows.column_update_bitmap != nullptr &&
        !AllBitsSet(rows.column_update_bitmap, columns)) {
      return Fail(BinlogErrorKind::kSettings, "a partial row image of " +
                                                  options.table + " at " +
                                                  Here().ToString() + kImage);
    }
    if (update && ev->event_type == UPDATE_ROWS_EVENT) {
      // MySQL's v2 UPDATE_ROWS: Connector/C 3.3 leaves the after-image
      // bitmap at the start of the row data.
      size_t bitmap = (columns + 7) / 8;
      if (rows.row_data_size < bitmap) {
        return Fail(BinlogErrorKind::kCorrupt,
                    "short UPDATE_ROWS at " + Here().ToString());
      }
      if (!AllBitsSet(static_cast<const unsigned char*>(rows.row_data),
                      columns)) {
        return Fail(BinlogErrorKind::kSettings, "a partial row image of " +
                                                    options.table + " at " +
                                                    Here().ToString() + kImage);
      }
      rows.row_data = static_cast<unsigned char*>(rows.row_data) + bitmap;
      rows.row_data_size -= bitmap;
    }
    MARIADB_RPL_ROW* row = mariadb_rpl_extract_rows(rpl, table.event.get(), ev);
    if (row == nullptr) {
      return Fail(BinlogErrorKind::kCorrupt,
                  std::string("cannot read the rows of ") + options.table +
                      " at " + Here().ToString() + ": " +
                      mariadb_rpl_error(rpl));
    }
    const BinlogPosition where{file, event_start};
    for (; row != nullptr; row = row->next) {
      if (txn.overflowed) {
        if (BinlogStatus s = Touch(table, *row); !s.ok()) return s;
        continue;
      }
      BinlogRowChange change;
      change.position = where;
      BinlogStatus s;
      switch (rows.type) {
        case WRITE_ROWS:
          change.kind = BinlogRowChange::Kind::kInsert;
          s = Row(table, *row, &change.after);
          break;
        case DELETE_ROWS:
          change.kind = BinlogRowChange::Kind::kDelete;
          s = Row(table, *row, &change.before);
          break;
        case UPDATE_ROWS:
          change.kind = BinlogRowChange::Kind::kUpdate;
          s = Row(table, *row, &change.before);
          if (s.ok()) {
            row = row->next;
            if (row == nullptr) {
              return Fail(
                  BinlogErrorKind::kCorrupt,
                  "UPDATE_ROWS without an after image at " + Here().ToString());
            }
            s = Row(table, *row, &change.after);
          }
          break;
      }
      if (!s.ok()) return s;
      size_t bytes =
          sizeof(change) + ValueBytes(change.before) + ValueBytes(change.after);
      if (txn.bytes + bytes > options.max_transaction_bytes) {
        txn.overflowed = true;
        for (const BinlogRowChange& kept : txn.changes) {
          Touch(kept.before);
          Touch(kept.after);
        }
        Touch(change.before);
        Touch(change.after);
        txn.changes.clear();
        txn.changes.shrink_to_fit();
        txn.bytes = 0;
        continue;
      }
      txn.bytes += bytes;
      txn.changes.push_back(std::move(change));
    }
    return BinlogStatus();
  }

  // Fetches the next event and handles it; `*done` when `out` holds an
  // item. After a failure the stream is closed. `what` and `opening` name
  // a failure as FetchError does.
  BinlogStatus ReadEvent(BinlogItem* out, bool* done, const char* what,
                         bool opening) {
    // A kept TABLE_MAP took the scratch event: fetch into a new one.
    MARIADB_RPL_EVENT* ev = mariadb_rpl_fetch(rpl, scratch.release());
    if (ev == nullptr) {  // fetch freed the event it was given
      BinlogStatus s = FetchError(what, opening);
      CloseStream();
      return s;
    }
    scratch.reset(ev);
    last_bytes = std::chrono::steady_clock::now();
    bytes += ev->event_length;
    ++events_read;
    *done = false;
    BinlogStatus s = OnEvent(out, done);
    if (!s.ok()) CloseStream();
    return s;
  }

  // One event; `*done` when `out` holds an item.
  BinlogStatus OnEvent(BinlogItem* out, bool* done) {
    MARIADB_RPL_EVENT* ev = scratch.get();
    const bool artificial =
        (ev->flags & LOG_EVENT_ARTIFICIAL_F) != 0 || ev->timestamp == 0;
    // log_pos: the end of this event in its file (0 on events the server
    // makes up for the replica).
    const uint64_t end = ev->next_event_pos;
    const uint64_t start = end >= ev->event_length ? end - ev->event_length : 0;
    if (end != 0 && ev->event_type != ROTATE_EVENT) pos = end;
    if (end != 0 && ev->event_type != ROTATE_EVENT &&
        ev->event_type != FORMAT_DESCRIPTION_EVENT) {
      at_start = false;
    }

    switch (ev->event_type) {
      case ROTATE_EVENT: {
        BinlogPosition next;
        BinlogStatus s = ParseRotate(*ev, &next);
        if (!s.ok()) return s;
        if (in_group) {
          return Fail(BinlogErrorKind::kCorrupt,
                      "ROTATE inside a transaction at " + Here().ToString());
        }
        const bool moved = next.file != file;
        file = next.file;
        pos = next.pos;
        if (!artificial || moved) {
          out->type = BinlogItem::Type::kRotation;
          out->position = next;
          *done = true;
        }
        return BinlogStatus();
      }
      case HEARTBEAT_LOG_EVENT: {
        std::string_view name = View(ev->event.heartbeat.filename);
        if (!name.empty() && !IsFileName(name)) {
          return Fail(
              BinlogErrorKind::kCorrupt,
              "HEARTBEAT with a file name of " + std::to_string(name.size()) +
                  " bytes that is no file name, at " + Here().ToString());
        }
        if (!name.empty()) file = std::string(name);
        if (end != 0) pos = end;
        if (!in_group) {
          out->type = BinlogItem::Type::kHeartbeat;
          out->position = Here();
          *done = true;
        }
        return BinlogStatus();
      }
      case GTID_EVENT: {  // MariaDB
        if (in_group) {
          return Fail(BinlogErrorKind::kCorrupt,
                      "GTID inside a transaction at " + Here().ToString());
        }
        const auto& g = ev->event.gtid;
        if (g.flags & (FL_PREPARED_XA | FL_COMPLETED_XA)) {
          return Fail(BinlogErrorKind::kUnsupported,
                      "an XA transaction at " + Here().ToString() +
                          ": walwatch does not read XA");
        }
        BeginGroup(start);
        txn.gtid.flavor = Gtid::Flavor::kMariaDb;
        txn.gtid.domain_id = g.domain_id;
        txn.gtid.server_id = ev->server_id;
        txn.gtid.sequence = g.sequence_nr;
        standalone = (g.flags & FL_STANDALONE) != 0;
        return BinlogStatus();
      }
      case GTID_LOG_EVENT:  // MySQL
      case ANONYMOUS_GTID_LOG_EVENT: {
        if (in_group) {
          return Fail(BinlogErrorKind::kCorrupt,
                      "GTID inside a transaction at " + Here().ToString());
        }
        BeginGroup(start);
        if (ev->event_type == GTID_LOG_EVENT) {
          txn.gtid.flavor = Gtid::Flavor::kMySql;
          std::memcpy(txn.gtid.source_uuid.data(), ev->event.gtid_log.source_id,
                      16);
          txn.gtid.sequence = ev->event.gtid_log.sequence_nr;
        }
        standalone = true;  // until a BEGIN says otherwise
        return BinlogStatus();
      }
      case QUERY_EVENT:
      case QUERY_COMPRESSED_EVENT: {
        std::string_view sql = View(ev->event.query.statement);
        if (StartsWithWord(sql, "BEGIN")) {
          if (!in_group) BeginGroup(start);
          standalone = false;
          return BinlogStatus();
        }
        if (StartsWithWord(sql, "COMMIT") || StartsWithWord(sql, "ROLLBACK")) {
          if (in_group) {
            EndGroup(*ev, out);
            *done = true;
          }
          return BinlogStatus();
        }
        if (StartsWithWord(sql, "XA")) {
          return Fail(BinlogErrorKind::kUnsupported,
                      "an XA transaction at " + Here().ToString() +
                          ": walwatch does not read XA");
        }
        if (!in_group) {
          BeginGroup(start);
          standalone = true;
        }
        if (StatementNamesTable(sql, View(ev->event.query.database),
                                options.database, options.table)) {
          txn.table_statements.push_back(BinlogStatement{
              std::string(View(ev->event.query.database)), std::string(sql)});
        }
        if (standalone) {
          EndGroup(*ev, out);
          *done = true;
        }
        return BinlogStatus();
      }
      case XID_EVENT:
        if (!in_group) {
          return Fail(BinlogErrorKind::kCorrupt,
                      "XID outside a transaction at " + Here().ToString());
        }
        txn.xid = ev->event.xid.transaction_nr;
        EndGroup(*ev, out);
        *done = true;
        return BinlogStatus();
      case TABLE_MAP_EVENT:
        return OnTableMap(&scratch);
      case WRITE_ROWS_EVENT_V1:
      case UPDATE_ROWS_EVENT_V1:
      case DELETE_ROWS_EVENT_V1:
      case WRITE_ROWS_EVENT:
      case UPDATE_ROWS_EVENT:
      case DELETE_ROWS_EVENT:
      case WRITE_ROWS_COMPRESSED_EVENT_V1:
      case UPDATE_ROWS_COMPRESSED_EVENT_V1:
      case DELETE_ROWS_COMPRESSED_EVENT_V1:
        return OnRows(ev, start);
      case WRITE_ROWS_COMPRESSED_EVENT:
      case UPDATE_ROWS_COMPRESSED_EVENT:
      case DELETE_ROWS_COMPRESSED_EVENT:
      case PARTIAL_UPDATE_ROWS_EVENT: {
        // Connector/C 3.3.20 refuses PARTIAL_UPDATE_ROWS (and MySQL's
        // TRANSACTION_PAYLOAD, below) before this, whatever its table
        // (FetchError names the fix); this is for a library that passes it.
        auto it = tables.find(ev->event.rows.table_id);
        if (it != tables.end() && !it->second.ours) return BinlogStatus();
        return Fail(BinlogErrorKind::kUnsupported,
                    "row event type " + std::to_string(ev->event_type) +
                        " at " + Here().ToString() +
                        " (fix: binlog_row_value_options='' and no binlog row "
                        "compression)");
      }
      case FORMAT_DESCRIPTION_EVENT:
        if (!UncheckedChecksumOk(*ev)) {
          return Fail(BinlogErrorKind::kCorrupt,
                      "FORMAT_DESCRIPTION with a wrong checksum at " +
                          Here().ToString());
        }
        if (end != 0 && !artificial) format_description_time = ev->timestamp;
        return BinlogStatus();
      case UNKNOWN_EVENT:
      case SLAVE_EVENT: {
        // Connector/C hands these over unread and unchecked: SLAVE_EVENT,
        // and as UNKNOWN_EVENT every type past its own list (172 and up),
        // which no server in its list writes. Skipped only when the server
        // marked it ignorable and its checksum holds: a corrupt type byte
        // must not drop a row event unseen.
        const size_t avail = ev->raw_data_size - ev->raw_data_ofs;
        const int type = avail > 4 ? ev->raw_data[ev->raw_data_ofs + 4] : -1;
        if (!UncheckedChecksumOk(*ev)) {
          return Fail(BinlogErrorKind::kCorrupt,
                      "an event of type " + std::to_string(type) +
                          " with a wrong checksum at " + Here().ToString());
        }
        if ((ev->flags & LOG_EVENT_IGNORABLE_F) != 0) return BinlogStatus();
        return Fail(BinlogErrorKind::kUnsupported,
                    "an event of type " + std::to_string(type) +
                        ", which walwatch cannot read, at " +
                        Here().ToString());
      }
      case INCIDENT_EVENT:
        return Fail(BinlogErrorKind::kCorrupt, "INCIDENT event at " +
                                                   Here().ToString() +
                                                   ": the server lost changes");
      default:
        if (ev->event_type == 40) {  // MySQL's TRANSACTION_PAYLOAD_EVENT
          return Fail(
              BinlogErrorKind::kUnsupported,
              "a compressed transaction at " + Here().ToString() +
                  " (fix: SET GLOBAL binlog_transaction_compression = OFF)");
        }
        // FORMAT_DESCRIPTION, GTID_LIST, BINLOG_CHECKPOINT, ANNOTATE_ROWS,
        // INTVAR, RAND, USER_VAR, STOP, PREVIOUS_GTIDS, ROWS_QUERY, ...
        return BinlogStatus();
    }
  }
};

BinlogReader::BinlogReader(MysqlConnParams conn, BinlogReaderOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->params = std::move(conn);
  impl_->options = std::move(options);
}

BinlogReader::~BinlogReader() { Close(); }

void BinlogReader::Close() { impl_->CloseStream(); }

void BinlogReader::Interrupt() {
  impl_->interrupted.store(true);
  impl_->conn.Interrupt();
}

BinlogStatus BinlogReader::Open(const BinlogPosition& start) {
  Impl& m = *impl_;
  m.CloseStream();
  if (m.interrupted.load())
    return m.Fail(BinlogErrorKind::kStopped, "the reader was stopped");
  m.file = start.file;
  m.pos = start.pos;
  m.at_start = true;
  m.format_description_time = 0;
  resume_ = start;

  MysqlConnParams params = m.params;
  params.read_timeout_s =
      static_cast<unsigned>(m.options.silence_timeout.count());
  std::string err = m.conn.Connect(params);
  if (!err.empty()) {
    unsigned no = m.conn.last_errno();
    if (no == ER_ACCESS_DENIED_ERROR || no == ER_DBACCESS_DENIED_ERROR) {
      return m.Fail(BinlogErrorKind::kSettings,
                    err + " (fix: the walwatch account's name or password)");
    }
    return m.Fail(BinlogErrorKind::kConnection, err);
  }
  // An Interrupt() that came before the socket existed.
  if (m.interrupted.load()) {
    m.CloseStream();
    return m.Fail(BinlogErrorKind::kStopped, "the reader was stopped");
  }
  const uint64_t heartbeat_ns = static_cast<uint64_t>(std::max<int64_t>(
                                    m.options.heartbeat_period.count(), 1)) *
                                1000000ULL;
  const std::string hb = std::to_string(heartbeat_ns);
  err = m.conn.Query(
      "SET @master_binlog_checksum = @@global.binlog_checksum, "
      "@source_binlog_checksum = @@global.binlog_checksum, "
      "@master_heartbeat_period = " +
      hb + ", @source_heartbeat_period = " + hb +
      ", @mariadb_slave_capability = 4");
  if (!err.empty()) return m.Fail(BinlogErrorKind::kConnection, err);

  m.rpl = mariadb_rpl_init(m.conn.handle());
  if (m.rpl == nullptr) {
    return m.Fail(BinlogErrorKind::kConnection,
                  std::string("cannot start replication: ") +
                      mysql_error(m.conn.handle()));
  }
  mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_SERVER_ID,
                       static_cast<unsigned int>(m.options.server_id));
  mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_FILENAME, start.file.c_str(),
                       start.file.size());
  mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_START,
                       static_cast<unsigned long>(start.pos));
  mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_FLAGS, 0u);
  mariadb_rpl_optionsv(
      m.rpl, MARIADB_RPL_VERIFY_CHECKSUM,
      static_cast<uint32_t>(m.options.verify_checksums ? 1 : 0));
  mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_EXTRACT_VALUES,
                       static_cast<uint32_t>(1));
  if (!m.options.replica_host.empty()) {
    mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_HOST,
                         m.options.replica_host.c_str());
    mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_PORT, static_cast<uint32_t>(0));
  }
  m.last_bytes = std::chrono::steady_clock::now();
  if (mariadb_rpl_open(m.rpl) != 0) {
    BinlogStatus s = m.FetchError("cannot start the binlog dump");
    m.CloseStream();
    return s;
  }
  // The server answers with an artificial ROTATE naming the start, or with
  // the error (a purged file, a missing privilege).
  BinlogItem ignored;
  bool done = false;
  return m.ReadEvent(&ignored, &done, "cannot read the binlog",
                     /*opening=*/true);
}

BinlogStatus BinlogReader::OpenBytes(std::string_view binlog,
                                     const std::string& name) {
  Impl& m = *impl_;
  m.CloseStream();
  m.file = name;
  m.pos = 4;
  m.at_start = true;
  m.format_description_time = 0;
  resume_ = BinlogPosition{name, 4};
  auto memfile = std::make_unique<BinlogMemFile>();
  if (std::string err = memfile->Create(binlog); !err.empty())
    return m.Fail(BinlogErrorKind::kCorrupt, err);
  m.rpl = mariadb_rpl_init(nullptr);
  if (m.rpl == nullptr) {
    return m.Fail(BinlogErrorKind::kConnection,
                  "cannot read a binlog: out of memory");
  }
  // Length 0: Connector/C copies the name with its NUL (with a length it
  // keeps none, and opens garbage).
  mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_FILENAME, memfile->path().c_str(),
                       size_t{0});
  mariadb_rpl_optionsv(
      m.rpl, MARIADB_RPL_VERIFY_CHECKSUM,
      static_cast<uint32_t>(m.options.verify_checksums ? 1 : 0));
  mariadb_rpl_optionsv(m.rpl, MARIADB_RPL_EXTRACT_VALUES,
                       static_cast<uint32_t>(1));
  if (mariadb_rpl_open(m.rpl) != 0) {
    BinlogStatus s = m.Fail(
        BinlogErrorKind::kCorrupt,
        std::string("cannot read a binlog: ") + mariadb_rpl_error(m.rpl));
    m.CloseStream();
    return s;
  }
  m.memfile = std::move(memfile);
  m.events_read = 0;
  m.last_bytes = std::chrono::steady_clock::now();
  return BinlogStatus();
}

BinlogStatus BinlogReader::Next(BinlogItem* out) {
  Impl& m = *impl_;
  if (m.rpl == nullptr) {
    return m.Fail(BinlogErrorKind::kConnection,
                  "the binlog reader is not open");
  }
  for (;;) {
    bool done = false;
    BinlogStatus s = m.ReadEvent(out, &done, "reading the binlog", m.at_start);
    if (!s.ok()) return s;
    if (done) {
      resume_ = out->position;
      return s;
    }
  }
}

BinlogStatus BinlogReader::ReadFileStartTime(uint32_t* unix_time) {
  Impl& m = *impl_;
  if (m.rpl == nullptr) {
    return m.Fail(BinlogErrorKind::kConnection,
                  "the binlog reader is not open");
  }
  while (m.format_description_time == 0) {
    BinlogItem item;
    bool done = false;
    BinlogStatus s =
        m.ReadEvent(&item, &done, "reading the binlog", m.at_start);
    if (!s.ok()) return s;
    if (done && m.format_description_time == 0) {
      // Past the file's first events without one: not opened at a start.
      m.CloseStream();
      return m.Fail(BinlogErrorKind::kCorrupt,
                    "no FORMAT_DESCRIPTION event at the start of " + m.file);
    }
    if (done) resume_ = item.position;
  }
  *unix_time = m.format_description_time;
  return BinlogStatus();
}

uint64_t BinlogReader::bytes_read() const { return impl_->bytes.load(); }

BinlogStatus ReadBinlogEnd(MysqlConnection* conn, BinlogPosition* out) {
  MysqlRows rows;
  std::string err = conn->Query("SHOW MASTER STATUS", &rows);
  if (!err.empty()) {
    BinlogErrorKind kind = conn->last_errno() == ER_SPECIFIC_ACCESS_DENIED_ERROR
                               ? BinlogErrorKind::kSettings
                               : BinlogErrorKind::kConnection;
    return BinlogStatus{kind, err};
  }
  if (rows.rows.empty() || !rows.rows[0][0] || !rows.rows[0][1]) {
    return BinlogStatus{
        BinlogErrorKind::kSettings,
        "SHOW MASTER STATUS is empty: binary logging is off (fix: log_bin "
        "in the server's configuration, then restart it)"};
  }
  out->file = *rows.rows[0][0];
  out->pos = std::stoull(*rows.rows[0][1]);
  return BinlogStatus();
}

std::string ReadServerId(MysqlConnection* conn, uint64_t* server_id) {
  std::optional<std::string> value;
  if (std::string err = conn->QueryValue("SELECT @@server_id", &value);
      !err.empty()) {
    return "cannot read the server's server_id: " + err;
  }
  const std::string text = value.value_or("");
  char* end = nullptr;
  const unsigned long long id = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') {
    return "the server's server_id is not a number: \"" + text + "\"";
  }
  *server_id = id;
  return "";
}

}  // namespace walwatch::mysql
