// The event path every fuzz target of a replication source ends in: what
// CommitPolicy::Apply (cdc/commit_policy.cc) does with one committed
// Transaction, EventBuilder::Build and EventLog::AppendTransaction (a
// barrier for a truncated or overflowed transaction), with checks on every
// event built:
//  * its wire is one line: {"type":"<TYPE>","object": ... }\n with no other
//    '\n' (watchserver/PROTOCOL.md: one JSON object per line);
//  * its RV is the transaction's commit LSN for the last event and the
//    previous RV for the others, and commit LSNs increase;
//  * when every object in the transaction is valid JSON without repeated
//    keys (as jsonb stores it), the wire is valid JSON whose
//    object.metadata.resourceVersion is the event's RV.
// Used by wal2json_fuzz.cc and mysql_binlog_fuzz.cc. Header-only.
#ifndef WALWATCH_TESTS_FUZZ_EVENT_PATH_CHECK_H_
#define WALWATCH_TESTS_FUZZ_EVENT_PATH_CHECK_H_

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/event_builder.h"
#include "cdc/model/event.h"
#include "cdc/transaction.h"
#include "tests/fuzz/fuzz_check.h"
#include "watchserver/event_log.h"

namespace walwatch::fuzz {

inline std::string Head(std::string_view text) {
  return Escaped(text.substr(0, 300));
}

// True when `element` (and everything in it) has no object with a repeated
// key: jsonb keeps one value per key, and only then is "the" resourceVersion
// well defined.
inline bool HasUniqueKeys(simdjson::dom::element element) {
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
inline bool IsPlainJsonObject(simdjson::dom::parser& parser,
                              const std::string& text) {
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return false;
  return doc.is_object() && HasUniqueKeys(doc);
}

// One stream's event log, fed one committed transaction at a time.
class EventPathChecker {
 public:
  // `max_transaction_bytes`: the bound the source held transactions to
  // (Transaction::bytes is checked against it), 0 for none checked.
  EventPathChecker(EventBuilder* builder, simdjson::dom::parser* oracle,
                   size_t max_log_bytes, size_t max_transaction_bytes)
      : builder_(*builder),
        oracle_(*oracle),
        log_(max_log_bytes, 0),
        max_transaction_bytes_(max_transaction_bytes) {}

  uint64_t current_rv() const { return log_.current_rv(); }

  // CommitPolicy::Apply (cdc/commit_policy.cc) for `txn`, whose
  // full_xid the source has set.
  void Commit(Transaction& txn) {
    FUZZ_CHECK(txn.commit_lsn > log_.current_rv(),
               "commit " + std::to_string(txn.commit_lsn) + " after " +
                   std::to_string(log_.current_rv()));
    if (txn.truncated || txn.overflowed) {
      FUZZ_CHECK(!txn.overflowed || txn.changes.empty());
      log_.AppendBarrier(txn.commit_lsn, txn.full_xid);
      return;
    }
    FUZZ_CHECK(max_transaction_bytes_ == 0 ||
               txn.bytes <= max_transaction_bytes_);
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

 private:
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

  EventBuilder& builder_;
  simdjson::dom::parser& oracle_;
  EventLog log_;
  const size_t max_transaction_bytes_;
};

}  // namespace walwatch::fuzz

#endif  // WALWATCH_TESTS_FUZZ_EVENT_PATH_CHECK_H_
