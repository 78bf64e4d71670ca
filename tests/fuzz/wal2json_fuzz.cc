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
// Checked for every event built:
//  * its wire is one line: {"type":"<TYPE>","object": ... }\n with no other
//    '\n' (watchserver/PROTOCOL.md: one JSON object per line);
//  * its RV is the transaction's commit LSN for the last event and the
//    previous RV for the others, and commit LSNs increase;
//  * when every object in the transaction is valid JSON without repeated
//    keys (as jsonb stores it), the wire is valid JSON whose
//    object.metadata.resourceVersion is the event's RV.
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
#include "cdc/model/event.h"
#include "cdc/postgres/transaction_assembler.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "schema/table_mapping.h"
#include "tests/fuzz/fuzz_check.h"
#include "watchserver/event_log.h"

namespace {

using walwatch::ColumnValue;
using walwatch::EventBuilder;
using walwatch::EventLog;
using walwatch::EventPtr;
using walwatch::MappedField;
using walwatch::Transaction;
using walwatch::TransactionAssembler;
using walwatch::Wal2JsonDecoder;
using walwatch::Wal2JsonRecord;
using walwatch::fuzz::Escaped;

constexpr size_t kMaxTransactionBytes = 32 * 1024;
constexpr size_t kMaxLogBytes = 64 * 1024;

std::string Head(std::string_view text) { return Escaped(text.substr(0, 300)); }

// True when `element` (and everything in it) has no object with a repeated
// key: jsonb keeps one value per key, and only then is "the" resourceVersion
// well defined.
bool HasUniqueKeys(simdjson::dom::element element) {
  simdjson::dom::array array;
  if (element.get_array().get(array) == simdjson::SUCCESS) {
    for (simdjson::dom::element child : array) {
      if (!HasUniqueKeys(child)) return false;
    }
    return true;
  }
  simdjson::dom::object object;
  if (element.get_object().get(object) != simdjson::SUCCESS) return true;
  std::vector<std::string_view> keys;
  for (simdjson::dom::key_value_pair field : object) {
    for (std::string_view k : keys) {
      if (k == field.key) return false;
    }
    keys.push_back(field.key);
    if (!HasUniqueKeys(field.value)) return false;
  }
  return true;
}

// What a row's object is to the JSON oracle.
bool IsPlainJsonObject(simdjson::dom::parser& parser, const std::string& text) {
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return false;
  return doc.is_object() && HasUniqueKeys(doc);
}

// One replication stream's state for one input.
class Pipeline {
 public:
  Pipeline(Wal2JsonDecoder* decoder, EventBuilder* builder,
           simdjson::dom::parser* oracle)
      : decoder_(*decoder),
        builder_(*builder),
        oracle_(*oracle),
        assembler_(kMaxTransactionBytes, 0),
        log_(kMaxLogBytes, 0) {}

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
    if (outcome == TransactionAssembler::Outcome::kCommitted) Commit(txn);
  }

 private:
  // CommitPolicy::Apply (cdc/commit_policy.cc).
  void Commit(Transaction& txn) {
    FUZZ_CHECK(txn.commit_lsn > log_.current_rv(),
               "commit " + std::to_string(txn.commit_lsn) + " after " +
                   std::to_string(log_.current_rv()));
    txn.full_xid = txn.xid;
    if (txn.truncated || txn.overflowed) {
      FUZZ_CHECK(!txn.overflowed || txn.changes.empty());
      log_.AppendBarrier(txn.commit_lsn, txn.full_xid);
      return;
    }
    FUZZ_CHECK(txn.bytes <= kMaxTransactionBytes);
    if (txn.changes.empty()) {
      log_.AdvanceCurrentRv(txn.commit_lsn);
      return;
    }
    EventBuilder::Result built;
    // The events before the last carry the position just before the commit.
    uint64_t prev_rv = txn.commit_lsn > 0 ? txn.commit_lsn - 1 : 0;
    builder_.Build(txn, &built);
    for (const std::string& e : built.errors) {
      FUZZ_CHECK(e.find('\n') == std::string::npos, Escaped(e));
    }
    bool plain_objects = true;
    for (const walwatch::RowChange& c : txn.changes) {
      for (const walwatch::RowImage* image : {&c.columns, &c.identity}) {
        const ColumnValue& object = (*image)[MappedField::kObject];
        if (object.state == ColumnValue::State::kValue &&
            !IsPlainJsonObject(oracle_, object.text)) {
          plain_objects = false;
        }
      }
    }
    for (size_t i = 0; i < built.events.size(); ++i) {
      bool last = i + 1 == built.events.size();
      CheckEvent(*built.events[i], txn, last ? txn.commit_lsn : prev_rv, last,
                 plain_objects);
    }
    if (built.events.empty()) {
      log_.AdvanceCurrentRv(txn.commit_lsn);
      return;
    }
    uint64_t first_seq = log_.tail_seq();
    size_t count = built.events.size();
    if (log_.AppendTransaction(txn.commit_lsn, std::move(built.events)) ==
        EventLog::AppendResult::kAppended) {
      std::vector<EventPtr> read;
      FUZZ_CHECK(log_.Read(first_seq, count, &read) ==
                 EventLog::ReadStatus::kOk);
      FUZZ_CHECK(read.size() == count);
      FUZZ_CHECK(read.back()->last_in_txn);
    }
    FUZZ_CHECK(log_.current_rv() == txn.commit_lsn);
  }

  void CheckEvent(const walwatch::Event& e, const Transaction& txn,
                  uint64_t want_rv, bool last, bool plain_objects) {
    const std::string wire(e.wire());
    FUZZ_CHECK(e.rv == want_rv,
               std::to_string(e.rv) + " != " + std::to_string(want_rv));
    FUZZ_CHECK(e.commit_lsn == txn.commit_lsn);
    FUZZ_CHECK(e.last_in_txn == last);
    std::string prefix = std::string("{\"type\":\"") +
                         walwatch::EventTypeName(e.type) + "\",\"object\":";
    FUZZ_CHECK(wire.compare(0, prefix.size(), prefix) == 0, Head(wire));
    FUZZ_CHECK(wire.size() > prefix.size() + 2 && wire.back() == '\n' &&
                   wire[wire.size() - 2] == '}',
               Head(wire));
    size_t newline = wire.find('\n');
    FUZZ_CHECK(newline == wire.size() - 1,
               "wire has a '\\n' at byte " + std::to_string(newline) + " of " +
                   std::to_string(wire.size()) + ": " + Head(wire));
    if (!plain_objects) return;

    simdjson::dom::element doc;
    auto error = oracle_.parse(wire).get(doc);
    FUZZ_CHECK(!error, std::string("wire is not JSON (") +
                           simdjson::error_message(error) + "): " + Head(wire));
    std::string_view rv;
    error =
        doc.at_pointer("/object/metadata/resourceVersion").get_string().get(rv);
    FUZZ_CHECK(!error && rv == std::to_string(e.rv),
               "metadata.resourceVersion is not " + std::to_string(e.rv) +
                   ": " + Head(wire));
  }

  Wal2JsonDecoder& decoder_;
  EventBuilder& builder_;
  simdjson::dom::parser& oracle_;
  TransactionAssembler assembler_;
  EventLog log_;
  Wal2JsonRecord record_;
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
