// Fuzz target: the replication thread's per-message path for pgoutput, from
// the XLogData payloads of a replication connection to watch events in the
// event log, without PostgreSQL.
//
// Input: a sequence of frames, each an Int32 length (big-endian) and that
// many bytes, one pgoutput message ("Logical Replication Message Formats"),
// of any protocol version, streams included; a length past the input's end
// takes what is left. The length 0xFFFFFFFF is no message but a lost
// connection: the decoder and the assembler are Reset, as PostgresSource
// does before it reconnects. If the input starts with '{' its first line is
// first tried as a table mapping (ParseTableMapping); one that parses
// replaces the default mapping for the rest of the input.
//
// Each message goes through PgoutputDecoder::Decode (at a WAL position that
// grows by its size), TransactionAssembler::Feed and, for each committed
// transaction, what PostgresSource and CommitPolicy do (event_path_check.h).
// A message that does not decode breaks the transaction it is in
// (MarkBroken); a record the assembler refuses makes the stream reconnect.
// Bounds are small (32 KiB for all transactions being built, 64 KiB of log)
// so that the overflow and eviction paths run. The whole input is also
// decoded as one message.
//
// Checked beyond event_path_check.h: errors are one line; a decoded change
// sits at its XLogData's position, carries the images its action has, and
// materialises no column of another table; an object column leaves
// simdjson's padding; the decoder holds no more relations than it was
// announced since its last Reset; the assembler holds no bytes past its
// bound and none once nothing is being built; a streamed transaction
// commits under its own xid.
//
// Seeds: tests/fuzz/corpus/pgoutput/, written by the message builder
// (tests/unit/support/pgoutput_builder.h) in this framing (the test
// PgoutputFuzzSeeds.AreWhatTheBuilderWrites checks them, and rewrites them
// with WALWATCH_WRITE_PGOUTPUT_SEEDS=1).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cdc/event_builder.h"
#include "cdc/postgres/pgoutput_decoder.h"
#include "cdc/postgres/transaction_assembler.h"
#include "schema/table_mapping.h"
#include "tests/fuzz/event_path_check.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using walwatch::ColumnValue;
using walwatch::EventBuilder;
using walwatch::LogicalRecord;
using walwatch::MappedField;
using walwatch::PgoutputDecoder;
using walwatch::RecordAction;
using walwatch::RowImage;
using walwatch::TableMapping;
using walwatch::Transaction;
using walwatch::TransactionAssembler;
using walwatch::fuzz::Escaped;
using walwatch::fuzz::EventPathChecker;

constexpr size_t kMaxTransactionBytes = 32 * 1024;
constexpr size_t kMaxLogBytes = 64 * 1024;
constexpr uint32_t kLostConnection = 0xFFFFFFFF;

bool HasNoColumns(const RowImage& image) {
  for (const ColumnValue& f : image.fields) {
    if (f.state != ColumnValue::State::kAbsent || !f.text.empty()) return false;
  }
  return true;
}

bool ObjectIsPadded(const RowImage& image) {
  const ColumnValue& object = image[MappedField::kObject];
  return object.state != ColumnValue::State::kValue ||
         object.text.capacity() >= object.text.size() + simdjson::SIMDJSON_PADDING;
}

// One replication connection's state (and its reconnects) for one input.
class Pipeline {
 public:
  Pipeline(const TableMapping& mapping, EventBuilder* builder,
           simdjson::dom::parser* oracle)
      : decoder_(mapping),
        assembler_(kMaxTransactionBytes, 0),
        path_(builder, oracle, kMaxLogBytes, kMaxTransactionBytes) {}

  void Message(std::string_view message) {
    const uint64_t wal_start = wal_;
    wal_ += message.size() + 24;  // an XLogData's header and its payload
    std::string error = decoder_.Decode(message, wal_start, &record_);
    if (!error.empty()) {
      FUZZ_CHECK(error.find('\n') == std::string::npos, Escaped(error));
      FUZZ_CHECK(decoder_.relation_count() <= relations_announced_);
      // Counted and logged; the transaction it was in ends as a barrier.
      assembler_.MarkBroken();
      return;
    }
    if (message[0] == 'R') ++relations_announced_;
    FUZZ_CHECK(decoder_.relation_count() <= relations_announced_);
    CheckRecord(message, wal_start);

    const RecordAction action = record_.action;
    const uint32_t xid = record_.xid;
    Transaction txn;
    TransactionAssembler::Outcome outcome;
    error = assembler_.Feed(record_, &txn, &outcome);
    if (!error.empty()) {
      FUZZ_CHECK(error.find('\n') == std::string::npos, Escaped(error));
      FUZZ_CHECK(outcome == TransactionAssembler::Outcome::kPending);
      FUZZ_CHECK(!assembler_.in_transaction() && assembler_.open_streams() == 0 &&
                 assembler_.held_bytes() == 0);
      Reconnect();  // the server re-sends from the last confirmed position
      return;
    }
    FUZZ_CHECK(assembler_.held_bytes() <= kMaxTransactionBytes);
    if (assembler_.open_streams() == 0 && !assembler_.in_transaction()) {
      FUZZ_CHECK(assembler_.held_bytes() == 0,
                 std::to_string(assembler_.held_bytes()));
    }
    if (outcome == TransactionAssembler::Outcome::kPending) {
      FUZZ_CHECK(action != RecordAction::kCommit &&
                 action != RecordAction::kStreamCommit);
      return;
    }
    FUZZ_CHECK(action == RecordAction::kCommit ||
               action == RecordAction::kStreamCommit);
    FUZZ_CHECK(!assembler_.in_transaction());
    if (outcome != TransactionAssembler::Outcome::kCommitted) return;
    if (action == RecordAction::kStreamCommit) FUZZ_CHECK(txn.xid == xid);
    for (const walwatch::RowChange& c : txn.changes) {
      // The decoder gives each action its images: no change without one.
      FUZZ_CHECK(c.action == walwatch::RowAction::kDelete ? c.identity.present
                                                          : c.columns.present);
    }
    txn.full_xid = txn.xid;  // as PostgresSource widens it
    path_.Commit(txn);
  }

  void Reconnect() {
    decoder_.Reset();
    assembler_.Reset();
    relations_announced_ = 0;
    FUZZ_CHECK(decoder_.relation_count() == 0);
    FUZZ_CHECK(!assembler_.in_transaction() && assembler_.held_bytes() == 0);
  }

 private:
  // What LogicalRecord and PgoutputDecoder say of a decoded message.
  void CheckRecord(std::string_view message, uint64_t wal_start) {
    const LogicalRecord& r = record_;
    const char type = message[0];
    switch (r.action) {
      case RecordAction::kInsert:
      case RecordAction::kUpdate:
      case RecordAction::kDelete:
      case RecordAction::kTruncate:
        FUZZ_CHECK(static_cast<char>(r.action) == type);
        FUZZ_CHECK(r.lsn == wal_start);
        break;
      case RecordAction::kBegin:
      case RecordAction::kCommit:
      case RecordAction::kStreamStart:
      case RecordAction::kStreamStop:
      case RecordAction::kStreamCommit:
      case RecordAction::kStreamAbort:
        FUZZ_CHECK(static_cast<char>(r.action) == type);
        break;
      case RecordAction::kMessage:
        // Relation, Type, Origin and logical messages.
        FUZZ_CHECK(type == 'R' || type == 'Y' || type == 'O' || type == 'M',
                   Escaped(message.substr(0, 1)));
        break;
      default:
        FUZZ_CHECK(false, "action " + std::to_string(static_cast<int>(r.action)));
    }
    switch (r.action) {
      case RecordAction::kInsert:
        FUZZ_CHECK(!r.identity.present);
        FUZZ_CHECK(!r.mapped_table || r.columns.present);
        break;
      case RecordAction::kUpdate:
        FUZZ_CHECK(!r.mapped_table || r.columns.present);
        break;
      case RecordAction::kDelete:
        FUZZ_CHECK(!r.columns.present);
        FUZZ_CHECK(!r.mapped_table || r.identity.present);
        break;
      default:
        FUZZ_CHECK(!r.mapped_table || r.action == RecordAction::kTruncate);
        FUZZ_CHECK(!r.columns.present && !r.identity.present);
        break;
    }
    if (!r.mapped_table) {
      FUZZ_CHECK(HasNoColumns(r.columns) && HasNoColumns(r.identity));
    }
    FUZZ_CHECK(ObjectIsPadded(r.columns) && ObjectIsPadded(r.identity));
  }

  PgoutputDecoder decoder_;
  TransactionAssembler assembler_;
  EventPathChecker path_;
  LogicalRecord record_;
  uint64_t wal_ = 0x1000000;
  size_t relations_announced_ = 0;  // decoded since the last Reset
};

uint32_t BigEndian32(std::string_view bytes) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

void Run(std::string_view input, const TableMapping& mapping,
         EventBuilder* builder, simdjson::dom::parser* oracle) {
  // Whole: what a message that is really many, or none, does.
  {
    PgoutputDecoder whole(mapping);
    LogicalRecord record;
    std::string error = whole.Decode(input, 0, &record);
    FUZZ_CHECK(error.find('\n') == std::string::npos, Escaped(error));
  }
  // Frame by frame.
  Pipeline pipeline(mapping, builder, oracle);
  while (input.size() >= 4) {
    const uint32_t length = BigEndian32(input);
    input.remove_prefix(4);
    if (length == kLostConnection) {
      pipeline.Reconnect();
      continue;
    }
    const size_t n = std::min<size_t>(length, input.size());
    pipeline.Message(input.substr(0, n));
    input.remove_prefix(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const TableMapping* default_mapping =
      new TableMapping(walwatch::DefaultTableMapping());
  static EventBuilder* builder = new EventBuilder();
  static simdjson::dom::parser* oracle = new simdjson::dom::parser();

  std::string_view input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && input[0] == '{') {
    std::string_view first_line = input.substr(0, input.find('\n'));
    TableMapping mapping;
    std::string error = walwatch::ParseTableMapping(first_line, &mapping);
    if (error.empty()) {
      for (const std::string& column : mapping.columns) {
        FUZZ_CHECK(!column.empty());
      }
      FUZZ_CHECK(!mapping.table.empty() && !mapping.schema.empty());
      size_t skip = std::min(input.size(), first_line.size() + 1);
      Run(input.substr(skip), mapping, builder, oracle);
      return 0;
    }
    FUZZ_CHECK(error.find('\n') == std::string::npos, Escaped(error));
  }
  Run(input, *default_mapping, builder, oracle);
  return 0;
}
