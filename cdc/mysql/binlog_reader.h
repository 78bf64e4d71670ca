// BinlogReader reads a MySQL or MariaDB server's binary log as a replica
// does, and turns it into whole transactions, in commit order, of row
// changes to ONE table, with each column found by NAME.
//
// What MariaDB Connector/C (libmariadb 3.3.20 here, Debian's) does, and this
// class uses:
//   - the replication protocol: COM_BINLOG_DUMP from a file and position
//     (mariadb_rpl_open), and event framing (mariadb_rpl_fetch);
//   - parsing the event header and most event bodies (GTID, XID, QUERY,
//     TABLE_MAP with its optional metadata, ROWS, HEARTBEAT, FORMAT
//     DESCRIPTION, GTID_LIST), zlib-compressed MariaDB row events included;
//   - CRC32 checksums: it strips them, and checks them when asked
//     (MARIADB_RPL_VERIFY_CHECKSUM), but for the FORMAT_DESCRIPTION's and
//     those of the events it hands over unread (see below);
//   - row values: mariadb_rpl_extract_rows turns a ROWS event into rows of
//     typed values, given the TABLE_MAP event (MARIADB_RPL_EXTRACT_VALUES is
//     set as well, though nothing uses it in the 3.3 sources read).
// What walwatch writes itself (here and in binlog_table_map.h):
//   - the session settings a replica makes before the dump:
//     @master_binlog_checksum (so the server sends checksums rather than
//     refusing a replica that cannot take them), @mariadb_slave_capability=4
//     (MariaDB sends its GTID events, not BEGIN queries in their place), and
//     @master_heartbeat_period in nanoseconds (the server sends a HEARTBEAT
//     after that long without events; MySQL 8 reads @source_* too, so both
//     are set); the read timeout that turns a silent connection into an
//     error (kSilent) when not even heartbeats arrive;
//   - ROTATE events: 3.3.20 reads a rotation's position and file name from
//     the wrong offset once a FORMAT_DESCRIPTION has been seen (seen here:
//     "bin.000002" at position 3270286648968110445 for mariadb-bin.000002
//     at 4; it keeps the bad name itself), so they are parsed here from the
//     raw event, with the checksum told apart by checking it;
//   - the checksums Connector/C does not check (the FORMAT_DESCRIPTION's,
//     and those of event types past its own list, which it hands over as
//     UNKNOWN_EVENT): checked here; such an event is skipped only when the
//     server marked it ignorable, so that a corrupt type byte drops nothing;
//   - naming the fix when Connector/C refuses an event type (MySQL's
//     compressed transactions and partial JSON updates), from the refused
//     event's own bytes;
//   - transaction boundaries: GTID (MariaDB; MySQL's GTID or anonymous GTID
//     plus BEGIN) opens, XID or COMMIT closes, a statement outside BEGIN
//     (DDL) is a transaction of its own; each transaction's commit position
//     is the end of the event that closes it;
//   - table maps by id, kept alive for the rows that follow; the column
//     names (binlog_row_metadata=FULL) and the rewriting of the column types
//     3.3 mis-reads (CHAR, ENUM, SET: binlog_table_map.h); refusing partial
//     row images (binlog_row_image other than FULL) and TABLE_MAPs without
//     names;
//   - values as text, MySQL's binary JSON decoded (mysql_json.h);
//   - statements (TRUNCATE, DDL, statement-logged DML) that name the table,
//     which the caller must treat like PostgreSQL's TRUNCATE (relist);
//   - errors as values, by kind: a purged binlog, a silent server, a bad
//     setting, a corrupt stream, a lost connection;
//   - events from memory instead of a server (OpenBytes, for the fuzz
//     target and tests), through Connector/C's file mode, whose 3.3 reader
//     misreads files (binlog_memfile.h).
// MySQL 8 paths: run on bytes built from MySQL 8.0.26+'s documented binlog
// format (tests/unit/mysql8_binlog_test.cc, through OpenBytes, so through
// Connector/C's own parsing as well), never against a MySQL server (Debian
// 12 has none): GTID and ANONYMOUS_GTID events (with 8.0's commit
// timestamps, transaction length and server versions), PREVIOUS_GTIDS
// (skipped), BEGIN, TABLE_MAP with binlog_row_metadata=FULL's metadata
// (COLUMN_VISIBILITY included), v2 WRITE/UPDATE/DELETE_ROWS with
// extra_row_info and UPDATE's second column bitmap (which 3.3 leaves in the
// row data; it is checked and skipped here), binary JSON, XID, ROTATE.
// Connector/C 3.3.20 itself refuses, as unknown events of any table,
// TRANSACTION_PAYLOAD (binlog_transaction_compression=ON) and
// PARTIAL_UPDATE_ROWS (binlog_row_value_options=PARTIAL_JSON): the reader
// names the setting (kUnsupported). It refuses the FORMAT_DESCRIPTION of
// MySQL before 8.0.26 too ("Malformed packet"; CheckServerVersion in
// mysql_checks.h turns such a server away first). XA is refused. Untested
// against a real MySQL: its dump (handshake, @source_* settings, the
// artificial ROTATE and FORMAT_DESCRIPTION, heartbeats), the refused
// event's type read from the connection's buffer, and whether 8.0's bytes
// are what its sources say.
//
// Column names come from the TABLE_MAP events' optional metadata
// (binlog_row_metadata=FULL, MariaDB 10.5+ and MySQL 8.0.1+), never from
// information_schema: those are the names the table had when the row was
// written, so a column added, dropped or moved by DDL at any time is read
// right. A TABLE_MAP of the table without names, or without a requested
// column, is an error (kSettings).
//
// Thread safety: one thread owns a reader and calls everything but
// Interrupt(), which any thread may call to end a blocked Open()/Next().
#ifndef WALWATCH_CDC_MYSQL_BINLOG_READER_H_
#define WALWATCH_CDC_MYSQL_BINLOG_READER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/mysql/binlog_position.h"
#include "cdc/mysql/mysql_conn.h"

namespace walwatch::mysql {

struct BinlogReaderOptions {
  // The table whose rows are read, and the columns wanted, by name; row
  // images hold exactly these, in this order.
  std::string database;
  std::string table;
  std::vector<std::string> columns;

  // This reader's server_id as a replica. Unique among everything that
  // replicates from the server: the server drops an older connection with
  // the same id (DeriveServerId in mysql_checks.h).
  uint32_t server_id = 0;
  // If set, the reader registers as a replica under this name, so that it
  // shows in SHOW SLAVE HOSTS (and the server_id check can see clashes).
  std::string replica_host;

  // The server sends a heartbeat after this long without events (at least
  // 1 ms).
  std::chrono::milliseconds heartbeat_period{5000};
  // No bytes at all for this long (heartbeats included) fail Next() with
  // kSilent: a partition or a hung server. Whole seconds, above the period.
  std::chrono::seconds silence_timeout{15};

  bool verify_checksums = true;
  // A transaction's kept changes beyond this many bytes are dropped and the
  // transaction marked overflowed (watchers of the table must relist).
  size_t max_transaction_bytes = size_t{256} << 20;
  // Indexes into `columns` whose values an overflowed transaction keeps for
  // each row it drops (BinlogTransaction::touched), so that only the
  // watchers of what it changed relist. Empty: none are kept.
  std::vector<size_t> key_columns;
};

enum class BinlogErrorKind : uint8_t {
  kNone,
  kConnection,   // cannot connect, or the connection broke: retry with backoff
  kSilent,       // nothing, not even a heartbeat, within silence_timeout
  kPurged,       // the server no longer has the requested binlog: 410 for all
  kNoPosition,   // the server has the file but not that position (another
                 // binlog history, e.g. after a failover): 410 for all
  kSettings,     // a server setting, grant or credential walwatch needs
  kCorrupt,      // a checksum mismatch or an event that cannot be read
  kUnsupported,  // an event walwatch does not read (XA, compressed MySQL
                 // transactions, partial JSON updates)
  kStopped,      // Interrupt() was called
  kEnd,          // the end of the binlog OpenBytes() was given
};
const char* BinlogErrorKindName(BinlogErrorKind kind);

struct BinlogStatus {
  BinlogErrorKind kind = BinlogErrorKind::kNone;
  std::string message;  // one line; names the fix where there is one

  bool ok() const { return kind == BinlogErrorKind::kNone; }
};

struct BinlogValue {
  bool is_null = true;
  std::string text;  // the text a SELECT shows (binlog_table_map.h)

  bool operator==(const BinlogValue& o) const {
    return is_null == o.is_null && text == o.text;
  }
};

struct BinlogRowChange {
  enum class Kind : uint8_t { kInsert, kUpdate, kDelete };
  Kind kind = Kind::kInsert;
  BinlogPosition position;  // of the ROWS event that carried it
  // BinlogReaderOptions::columns, in order: the old row (UPDATE, DELETE)
  // and the new row (INSERT, UPDATE); empty where there is none.
  std::vector<BinlogValue> before;
  std::vector<BinlogValue> after;
};

struct BinlogStatement {
  std::string database;  // the session's default database
  std::string sql;
};

struct BinlogTransaction {
  Gtid gtid;                 // flavor kNone without GTIDs
  BinlogPosition begin;      // its first event
  BinlogPosition commit;     // END of its last event: the commit position
  uint32_t commit_time = 0;  // seconds since the epoch, of that event
  uint64_t xid = 0;          // the XID event's number; 0 without one
  std::vector<BinlogRowChange> changes;  // of the table, in binlog order
  // Statements in it that name the table (not as row events): TRUNCATE,
  // DDL, or DML logged as a statement. Their effect on rows is unknown.
  std::vector<BinlogStatement> table_statements;
  // Its changes passed max_transaction_bytes and were dropped.
  bool overflowed = false;
  // Once overflowed: the key_columns' values of each row image it changed;
  // touched_unknown if a row had a NULL among them, or none were asked for.
  std::set<std::vector<std::string>> touched;
  bool touched_unknown = false;
  size_t bytes = 0;  // bytes the kept changes hold
};

struct BinlogItem {
  enum class Type : uint8_t {
    kTransaction,  // `transaction` committed (of any table: changes may be
                   // empty)
    kHeartbeat,    // the server has sent everything before `position`
    kRotation,     // the server moved to a new file; `position` is its start
  };
  Type type = Type::kTransaction;
  BinlogTransaction transaction;
  BinlogPosition position;
};

class BinlogReader {
 public:
  BinlogReader(MysqlConnParams conn, BinlogReaderOptions options);
  ~BinlogReader();
  BinlogReader(const BinlogReader&) = delete;
  BinlogReader& operator=(const BinlogReader&) = delete;

  // Connects and starts the dump at `start`: a transaction's commit
  // position, a heartbeat's or rotation's position, or a file at 4. The
  // server's first answer is awaited, so a purged file fails here.
  BinlogStatus Open(const BinlogPosition& start);

  // Reads `binlog`, a binlog file's bytes (the magic number, then
  // events), instead of a server, as if a server had sent its events from
  // `name` at position 4 (a name with a file number, "x-bin.000001").
  // Every event takes the path a dump's does, Connector/C's parsing
  // included (its file mode, binlog_memfile.h), but for the framing: the
  // events' own lengths replace the packets. Next() ends with kEnd after
  // the last event. For the fuzz target and tests; checksums are verified
  // as the options say. `binlog` is copied.
  BinlogStatus OpenBytes(std::string_view binlog, const std::string& name);

  // Blocks until the next item. After an error the reader is closed; Open()
  // again (from resume_position()) to go on.
  BinlogStatus Next(BinlogItem* out);

  void Close();
  // Ends a blocked Open() or Next() with kStopped, and every later one: for
  // shutting down. Any thread.
  void Interrupt();

  // Where Open() goes on losing nothing: the end of the last whole
  // transaction, heartbeat or rotation read.
  const BinlogPosition& resume_position() const { return resume_; }

  // Right after Open() at the start of a file (position 4): reads the file's
  // FORMAT_DESCRIPTION event, which the server wrote when it began the file,
  // and sets *unix_time to its time (seconds since the epoch). The reader
  // stays open after it. For choosing where a replay window starts.
  BinlogStatus ReadFileStartTime(uint32_t* unix_time);

  // Bytes of binlog events received since the reader was made, all
  // connections together. Any thread: it tells a reader that is busy with a
  // long transaction of other tables from a silent one.
  uint64_t bytes_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  BinlogPosition resume_;
};

// The server's current end of the binlog (SHOW MASTER STATUS), on an
// ordinary connection. kSettings when binary logging is off.
BinlogStatus ReadBinlogEnd(MysqlConnection* conn, BinlogPosition* out);

// SELECT @@server_id: the id of the server that writes the binlog, whose
// file and offset numbers are its own (BinlogHistory). Returns "" or the
// error.
std::string ReadServerId(MysqlConnection* conn, uint64_t* server_id);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_BINLOG_READER_H_
