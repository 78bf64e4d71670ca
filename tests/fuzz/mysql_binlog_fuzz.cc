// Fuzz target: the MySQL/MariaDB source's path from binlog bytes to watch
// events in the event log, without a server.
//
// The input is a binlog file: the magic number, then events (the seeds,
// captured by tests/fuzz/capture-binlog-corpus.sh, are a FORMAT_DESCRIPTION
// and one write's GTID, TABLE_MAP, ROWS v1 or v2 and XID events, or
// statements; mysql8.binlog, written by tests/unit/mysql8_binlog_test.cc
// from MySQL 8's documented format, four transactions with MySQL GTIDs and
// binary JSON). It goes through BinlogReader::OpenBytes, so every event
// takes the reader's path: Connector/C's parsing of the event
// (mariadb_rpl_fetch) and of its rows (mariadb_rpl_extract_rows, on
// BinlogTableMap's normalized types), walwatch's table map, transaction
// grouping and value formatting (binlog_reader.cc, binlog_table_map.cc,
// MySQL's binary JSON), then what MariaDbSource does with each whole
// transaction: ToTransaction (row_change_conversion.h), and the event path
// (event_path_check.h: EventBuilder, the event log, and the checks on
// every event built). Checksums are not verified, so that mutated events
// get past them: what a server that sends wrong bytes with right checksums
// would do. Bounds are small (32 KiB per transaction, 64 KiB of log).
//
// Checked besides: the reader ends with an error (kEnd at the end of the
// file), and every error is one line.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "cdc/event_builder.h"
#include "cdc/mysql/binlog_position.h"
#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/row_change_conversion.h"
#include "schema/table_mapping.h"
#include "tests/fuzz/event_path_check.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using walwatch::EventBuilder;
using walwatch::Transaction;
using walwatch::fuzz::Escaped;
using walwatch::fuzz::EventPathChecker;
using walwatch::mysql::BinlogErrorKind;
using walwatch::mysql::BinlogItem;
using walwatch::mysql::BinlogReader;
using walwatch::mysql::BinlogReaderOptions;
using walwatch::mysql::BinlogStatus;

constexpr size_t kMaxTransactionBytes = 32 * 1024;
constexpr size_t kMaxLogBytes = 64 * 1024;

void CheckOneLine(const std::string& message) {
  FUZZ_CHECK(!message.empty());
  FUZZ_CHECK(message.find('\n') == std::string::npos, Escaped(message));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const walwatch::TableMapping* mapping =
      new walwatch::TableMapping(walwatch::DefaultTableMapping());
  static EventBuilder* builder = new EventBuilder();
  static simdjson::dom::parser* oracle = new simdjson::dom::parser();

  BinlogReaderOptions options;
  options.database = "clusterpedia";  // as the seeds were captured
  options.table = mapping->table;
  options.columns = walwatch::mysql::MappedColumnNames(*mapping);
  options.verify_checksums = false;
  options.max_transaction_bytes = kMaxTransactionBytes;
  BinlogReader reader(walwatch::mysql::MysqlConnParams(), options);
  EventPathChecker path(builder, oracle, kMaxLogBytes, 0);

  BinlogStatus status = reader.OpenBytes(
      std::string_view(reinterpret_cast<const char*>(data), size),
      "fuzz-bin.000001");
  while (status.ok()) {
    BinlogItem item;
    status = reader.Next(&item);
    if (!status.ok()) break;
    // MariaDbSource::Step.
    std::optional<uint64_t> version =
        walwatch::mysql::BinlogVersion(0, item.position);
    if (!version) break;  // a ROTATE to a name without a file number
    if (item.type != BinlogItem::Type::kTransaction) continue;
    if (*version <= path.current_rv()) continue;  // seen: a duplicate
    Transaction txn;
    std::string error =
        walwatch::mysql::ToTransaction(item.transaction, 0, &txn);
    if (!error.empty()) {
      CheckOneLine(error);
      break;
    }
    FUZZ_CHECK(txn.commit_lsn == *version);
    path.Commit(txn);
  }
  if (!status.ok()) {
    CheckOneLine(status.message);
    FUZZ_CHECK(status.kind != BinlogErrorKind::kStopped &&
                   status.kind != BinlogErrorKind::kConnection &&
                   status.kind != BinlogErrorKind::kSilent,
               std::string(walwatch::mysql::BinlogErrorKindName(status.kind)) +
                   ": " + status.message);
  }
  return 0;
}
