// Fuzz target: the replication thread's per-message path, from wal2json
// bytes to watch events in the event log, without PostgreSQL.
//
// The input is wal2json format-version 2 output, one message per line (as
// tests/data/wal2json_v2_capture.jsonl). If its first line does not start
// with {"action" it is first tried as a table mapping (ParseTableMapping);
// one that parses replaces the default mapping for the rest of the input.
//
// The input is decoded twice: whole, as one message; and line by line, each
// line one message, through Wal2JsonDecoder::Decode, TransactionAssembler::
// Feed and, for each committed transaction, what ReplicationStream's
// OnCommit does: a barrier for a truncated or overflowed transaction,
// EventBuilder::Build and EventLog::AppendTransaction otherwise. Bounds are
// small (32 KiB per transaction, 64 KiB of log) so that the overflow and
// eviction paths run.
//
// Every event built is checked as event_path_check.h says.
// simdjson's development checks are on (-DSIMDJSON_DEVELOPMENT_CHECKS=1 in
// run-fuzz.sh): out-of-order On-Demand access aborts.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "cdc/event_builder.h"
#include "cdc/postgres/transaction_assembler.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "schema/table_mapping.h"
#include "tests/fuzz/event_path_check.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using walwatch::EventBuilder;
using walwatch::Transaction;
using walwatch::TransactionAssembler;
using walwatch::Wal2JsonDecoder;
using walwatch::LogicalRecord;
using walwatch::fuzz::Escaped;
using walwatch::fuzz::EventPathChecker;

constexpr size_t kMaxTransactionBytes = 32 * 1024;
constexpr size_t kMaxLogBytes = 64 * 1024;

// One replication stream's state for one input.
class Pipeline {
 public:
  Pipeline(Wal2JsonDecoder* decoder, EventBuilder* builder,
           simdjson::dom::parser* oracle)
      : decoder_(*decoder),
        assembler_(kMaxTransactionBytes, 0),
        path_(builder, oracle, kMaxLogBytes, kMaxTransactionBytes) {}

  void Message(std::string_view message) {
    std::string error = decoder_.Decode(message, &record_);
    if (!error.empty()) {
      FUZZ_CHECK(error.find('\n') == std::string::npos, Escaped(error));
      return;  // counted and logged; the stream goes on
    }
    Transaction txn;
    TransactionAssembler::Outcome outcome;
    error = assembler_.Feed(record_, &txn, &outcome);
    if (!error.empty()) {
      // The stream reconnects, and the server re-sends from the last
      // confirmed position.
      FUZZ_CHECK(outcome == TransactionAssembler::Outcome::kPending);
      assembler_.Reset();
      return;
    }
    if (outcome == TransactionAssembler::Outcome::kCommitted) {
      txn.full_xid = txn.xid;  // as ReplicationStream widens it
      path_.Commit(txn);
    }
  }

 private:
  Wal2JsonDecoder& decoder_;
  TransactionAssembler assembler_;
  EventPathChecker path_;
  LogicalRecord record_;
};

void Run(std::string_view input, Wal2JsonDecoder* decoder,
         EventBuilder* builder, simdjson::dom::parser* oracle) {
  // Whole: what one oversized or newline-joined message does.
  Pipeline(decoder, builder, oracle).Message(input);
  // Line by line.
  Pipeline lines(decoder, builder, oracle);
  while (!input.empty()) {
    size_t newline = input.find('\n');
    lines.Message(input.substr(0, newline));
    if (newline == std::string_view::npos) break;
    input.remove_prefix(newline + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const walwatch::TableMapping* default_mapping =
      new walwatch::TableMapping(walwatch::DefaultTableMapping());
  static Wal2JsonDecoder* default_decoder =
      new Wal2JsonDecoder(*default_mapping);
  static EventBuilder* builder = new EventBuilder();
  static simdjson::dom::parser* oracle = new simdjson::dom::parser();

  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view first_line = input.substr(0, input.find('\n'));
  if (first_line.substr(0, 9) != "{\"action\"") {
    walwatch::TableMapping mapping;
    std::string error = walwatch::ParseTableMapping(first_line, &mapping);
    if (error.empty()) {
      for (const std::string& column : mapping.columns) {
        FUZZ_CHECK(!column.empty());
      }
      FUZZ_CHECK(!mapping.table.empty() && !mapping.schema.empty());
      Wal2JsonDecoder decoder(mapping);
      size_t skip = std::min(input.size(), first_line.size() + 1);
      Run(input.substr(skip), &decoder, builder, oracle);
      return 0;
    }
    FUZZ_CHECK(error.find('\n') == std::string::npos, Escaped(error));
  }
  Run(input, default_decoder, builder, oracle);
  return 0;
}
