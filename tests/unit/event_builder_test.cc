#include "cdc/event_builder.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cdc/postgres/lsn.h"
#include "cdc/postgres/transaction_assembler.h"
#include "cdc/postgres/wal2json_decoder.h"
#include "tests/unit/wal2json_capture.h"

namespace walwatch {
namespace {

using namespace testing_capture;  // NOLINT: capture constants
using json = nlohmann::json;
using State = ColumnValue::State;

constexpr uint64_t kStartRv = 0x1000;  // "the transaction before the capture"

// Decodes and assembles `lines`; every line must decode and assemble.
std::vector<Transaction> Assemble(const std::vector<std::string>& lines) {
  TableMapping mapping = DefaultTableMapping();
  Wal2JsonDecoder decoder(mapping);
  TransactionAssembler assembler(64 << 20, 0);
  std::vector<Transaction> out;
  for (const auto& line : lines) {
    LogicalRecord r;
    std::string err = decoder.Decode(line, &r);
    EXPECT_EQ(err, "") << line.substr(0, 200);
    Transaction txn;
    TransactionAssembler::Outcome outcome;
    err = assembler.Feed(r, &txn, &outcome);
    EXPECT_EQ(err, "") << line.substr(0, 200);
    if (outcome == TransactionAssembler::Outcome::kCommitted) {
      out.push_back(std::move(txn));
    }
  }
  return out;
}

// Lines first..last (1-based, inclusive) of the capture.
std::vector<std::string> CaptureLines(size_t first, size_t last) {
  auto all = ReadCaptureLines();
  return std::vector<std::string>(all.begin() + (first - 1),
                                  all.begin() + last);
}

// The value of column `name` in `tuple` of a capture line, decoded by an
// independent parser.
std::string ColumnOf(const std::string& line, const char* tuple,
                     const char* name) {
  const json doc = json::parse(line);
  for (const auto& c : doc.at(tuple)) {
    if (c.at("name") == name) return c.at("value").get<std::string>();
  }
  ADD_FAILURE() << "no column " << name;
  return "";
}

// Checks one event's wire bytes: one JSON line {"type":T,"object":O} where O
// is `original` with metadata.resourceVersion = the event's RV and, if the
// original had one, the member RV in the annotation. Everything else must be
// exactly as it was.
void ExpectWire(const Event& e, const std::string& original, const char* type,
                const std::optional<std::string>& member_rv,
                bool single_line = true) {
  SCOPED_TRACE(e.wire().substr(0, 300));
  ASSERT_GE(e.wire().size(), 2u);
  EXPECT_EQ(e.wire().back(), '\n');
  EXPECT_NE(e.wire()[e.wire().size() - 2], '\n');
  if (single_line) {
    EXPECT_EQ(std::count(e.wire().begin(), e.wire().end(), '\n'), 1);
    EXPECT_EQ(std::count(e.wire().begin(), e.wire().end(), '\r'), 0);
  }
  json wire = json::parse(e.wire(), nullptr, false);
  ASSERT_FALSE(wire.is_discarded()) << "wire is not JSON";
  ASSERT_TRUE(wire.is_object());
  EXPECT_EQ(wire.size(), 2u);
  EXPECT_EQ(wire["type"], type);
  EXPECT_EQ(std::string(EventTypeName(e.type)), type);
  json expected = json::parse(original);
  expected["metadata"]["resourceVersion"] = std::to_string(e.rv);
  if (member_rv) {
    expected["metadata"]["annotations"][kMemberResourceVersionAnnotation] =
        *member_rv;
  }
  EXPECT_EQ(wire["object"], expected);
  // The RV parses back as the event's.
  EXPECT_EQ(ParseResourceVersion(
                wire["object"]["metadata"]["resourceVersion"].get<std::string>()),
            std::optional<uint64_t>(e.rv));
}

class EventBuilderTest : public ::testing::Test {
 protected:
  EventBuilder::Result Build(const Transaction& txn) {
    EventBuilder::Result r;
    builder_.Build(txn, &r);
    return r;
  }

  EventBuilder builder_;
  std::vector<std::string> lines_ = ReadCaptureLines();
};

constexpr char kObjectN1500[] =
    R"({"kind": "Pod", "spec": {"n": 1500}, "metadata": {"uid": "u1", "name": "p1", "labels": {"app": "x \"q\""}, "namespace": "default", "annotations": {"shadow.clusterpedia.io/cluster-name": "c1"}, "resourceVersion": "100"}, "apiVersion": "v1"})";
constexpr char kObjectN2[] =
    R"({"kind": "Pod", "spec": {"n": 2}, "metadata": {"uid": "u1", "name": "p1", "labels": {"app": "x \"q\""}, "namespace": "default", "annotations": {"shadow.clusterpedia.io/cluster-name": "c1"}, "resourceVersion": "100"}, "apiVersion": "v1"})";

TEST_F(EventBuilderTest, InsertIsAdded) {
  auto txns = Assemble(CaptureLines(1, 3));
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.unchanged_updates, 0u);
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = *r.events[0];
  EXPECT_EQ(e.type, EventType::kAdded);
  EXPECT_EQ(e.rv, kCommit746);
  EXPECT_EQ(e.commit_lsn, kCommit746);
  EXPECT_TRUE(e.last_in_txn);
  EXPECT_EQ(e.commit_time_us, 1796217696726676);
  EXPECT_EQ(e.group(), "");
  EXPECT_EQ(e.version(), "v1");
  EXPECT_EQ(e.resource(), "pods");
  EXPECT_EQ(e.kind(), "Pod");
  EXPECT_EQ(e.cluster(), "c1");
  EXPECT_EQ(e.ns(), "default");
  EXPECT_EQ(e.name(), "p1");
  // Labels unescaped: the value holds real quotes.
  ASSERT_EQ(e.labels().ToList().size(), 1u);
  EXPECT_EQ(e.labels().ToList()[0].first, "app");
  EXPECT_EQ(e.labels().ToList()[0].second, "x \"q\"");
  ExpectWire(e, kObjectN1500, "ADDED", "100");

  json obj = json::parse(e.wire())["object"];
  EXPECT_EQ(obj["metadata"]["resourceVersion"], "22381936");
  EXPECT_EQ(obj["metadata"]["annotations"]
               ["walwatch.clusterpedia.io/member-resource-version"],
            "100");
  EXPECT_EQ(obj["metadata"]["annotations"]["shadow.clusterpedia.io/cluster-name"],
            "c1");
  EXPECT_EQ(obj["metadata"]["labels"]["app"], "x \"q\"");
  // Spliced, not re-serialized: jsonb's spacing survives around the edits.
  EXPECT_EQ(e.wire().rfind(R"({"type":"ADDED","object":{"kind": "Pod", "spec": {"n": 1500}, "metadata": {"uid": "u1", "name": "p1", "labels": {"app": "x \"q\""}, "namespace": "default", )",
                         0),
            0u)
      << e.wire();
  EXPECT_NE(e.wire().find(R"("resourceVersion": "22381936"}, "apiVersion": "v1"}})" "\n"),
            std::string::npos)
      << e.wire();
  EXPECT_GE(e.MemoryBytes(), e.wire().size());
}

TEST_F(EventBuilderTest, UpdateIsModified) {
  auto txns = Assemble(CaptureLines(4, 6));
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = *r.events[0];
  EXPECT_EQ(e.type, EventType::kModified);
  EXPECT_EQ(e.rv, kCommit747);
  EXPECT_TRUE(e.last_in_txn);
  EXPECT_EQ(e.name(), "p1");
  ExpectWire(e, kObjectN2, "MODIFIED", "100");
  EXPECT_EQ(json::parse(e.wire())["object"]["spec"]["n"], 2);
}

TEST_F(EventBuilderTest, EventRecordingUpdateIsNoEvent) {
  auto txns = Assemble(CaptureLines(7, 9));
  ASSERT_EQ(txns.size(), 1u);
  ASSERT_EQ(txns[0].changes.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.events.empty());
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.unchanged_updates, 1u);
}

TEST_F(EventBuilderTest, EmptyTransactionIsNoEvent) {
  auto txns = Assemble(CaptureLines(10, 11));
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.events.empty());
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.unchanged_updates, 0u);
}

TEST_F(EventBuilderTest, UpdateToLargeObjectIsModified) {
  auto txns = Assemble(CaptureLines(12, 14));
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0]->type, EventType::kModified);
  EXPECT_EQ(r.events[0]->rv, kCommit750);
  ExpectWire(*r.events[0], ColumnOf(lines_[12], "columns", "object"),
             "MODIFIED", "100");
}

TEST_F(EventBuilderTest, ToastOmittedUnchangedObjectIsNoEvent) {
  auto txns = Assemble(CaptureLines(15, 17));
  ASSERT_EQ(txns.size(), 1u);
  ASSERT_EQ(txns[0].changes.size(), 1u);
  ASSERT_EQ(txns[0].changes[0].columns[MappedField::kObject].state,
            State::kAbsent);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.events.empty());
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.unchanged_updates, 1u);
}

TEST_F(EventBuilderTest, ToastOmittedObjectWithKeyChangeComesFromIdentity) {
  // Line 16 edited so that the row's name changes while the big object stays
  // out of line (omitted from `columns`).
  auto lines = CaptureLines(15, 17);
  ASSERT_TRUE(ReplaceFirst(&lines[1], R"({"name":"name","value":"p1"})",
                           R"({"name":"name","value":"p2"})", "\"columns\""));
  ASSERT_LT(lines[1].find(R"({"name":"name","value":"p2"})"),
            lines[1].find("\"identity\""));
  auto txns = Assemble(lines);
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.events.size(), 2u);
  const std::string big = ColumnOf(lines_[15], "identity", "object");
  ASSERT_EQ(big.size(), 19447u);

  const Event& del = *r.events[0];
  EXPECT_EQ(del.type, EventType::kDeleted);
  EXPECT_EQ(del.name(), "p1");
  EXPECT_EQ(del.rv, kCommit751 - 1);  // not last: just before the commit
  EXPECT_FALSE(del.last_in_txn);
  EXPECT_EQ(del.commit_lsn, kCommit751);
  ExpectWire(del, big, "DELETED", "100");

  const Event& add = *r.events[1];
  EXPECT_EQ(add.type, EventType::kAdded);
  EXPECT_EQ(add.name(), "p2");
  EXPECT_EQ(add.rv, kCommit751);
  EXPECT_TRUE(add.last_in_txn);
  EXPECT_EQ(add.commit_lsn, kCommit751);
  ExpectWire(add, big, "ADDED", "100");
}

TEST_F(EventBuilderTest, ToastOmittedObjectWithKindChangeIsModified) {
  auto lines = CaptureLines(15, 17);
  ASSERT_TRUE(ReplaceFirst(&lines[1], R"({"name":"kind","value":"Pod"})",
                           R"({"name":"kind","value":"Pod2"})", "\"columns\""));
  auto txns = Assemble(lines);
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0]->type, EventType::kModified);
  EXPECT_EQ(r.events[0]->kind(), "Pod2");
  EXPECT_EQ(r.events[0]->rv, kCommit751);
  ExpectWire(*r.events[0], ColumnOf(lines_[15], "identity", "object"),
             "MODIFIED", "100");
}

TEST_F(EventBuilderTest, UidChangeIsDeletedThenAdded) {
  // Clusterpedia coalesces Deleted+Added into one UPDATE with a new uid.
  auto lines = CaptureLines(4, 6);
  ASSERT_TRUE(ReplaceFirst(&lines[1], R"({"name":"uid","value":"u1"})",
                           R"({"name":"uid","value":"u9"})", "\"columns\""));
  auto txns = Assemble(lines);
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0]->type, EventType::kDeleted);
  EXPECT_EQ(r.events[0]->rv, kCommit747 - 1);
  EXPECT_FALSE(r.events[0]->last_in_txn);
  ExpectWire(*r.events[0], kObjectN1500, "DELETED", "100");  // the old row
  EXPECT_EQ(r.events[1]->type, EventType::kAdded);
  EXPECT_EQ(r.events[1]->rv, kCommit747);
  EXPECT_TRUE(r.events[1]->last_in_txn);
  ExpectWire(*r.events[1], kObjectN2, "ADDED", "100");  // the new row
}

// The capture's transaction inserts d1 and deletes it again: no reader ever
// saw d1, so it folds into nothing (and the transaction only moves the RV).
TEST_F(EventBuilderTest, InsertThenDeleteInOneTransactionIsNothing) {
  auto txns = Assemble(CaptureLines(18, 21));
  ASSERT_EQ(txns.size(), 1u);
  ASSERT_EQ(txns[0].changes.size(), 2u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.events.empty());
}

TEST_F(EventBuilderTest, DeleteCarriesTheFullOldObject) {
  auto txns = Assemble(CaptureLines(22, 24));
  ASSERT_EQ(txns.size(), 1u);
  auto r = Build(txns[0]);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = *r.events[0];
  EXPECT_EQ(e.type, EventType::kDeleted);
  EXPECT_EQ(e.rv, kCommit753);
  EXPECT_TRUE(e.last_in_txn);
  EXPECT_EQ(e.name(), "p1");
  EXPECT_EQ(e.ns(), "default");
  ASSERT_EQ(e.labels().ToList().size(), 1u);
  EXPECT_EQ(e.labels().ToList()[0].second, "x \"q\"");
  ExpectWire(e, ColumnOf(lines_[22], "identity", "object"), "DELETED", "100");
}

TEST_F(EventBuilderTest, WholeCaptureInOrder) {
  auto txns = Assemble(ReadCaptureLines());
  ASSERT_EQ(txns.size(), 9u);
  EXPECT_TRUE(txns.back().truncated);  // the caller turns it into a barrier
  std::vector<EventPtr> all;
  size_t unchanged = 0;
  for (const auto& t : txns) {
    auto r = Build(t);
    EXPECT_TRUE(r.errors.empty());
    unchanged += r.unchanged_updates;
    for (auto& e : r.events) all.push_back(e);
  }
  EXPECT_EQ(unchanged, 2u);
  // The ADDED and DELETED of d1 in one transaction fold into nothing.
  const EventType want[] = {EventType::kAdded, EventType::kModified,
                            EventType::kModified, EventType::kDeleted};
  ASSERT_EQ(all.size(), std::size(want));
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i]->type, want[i]) << i;
    if (i > 0) {
      EXPECT_GE(all[i]->rv, all[i - 1]->rv) << i;
    }
    EXPECT_EQ(all[i]->last_in_txn, all[i]->rv == all[i]->commit_lsn) << i;
  }
}

// Hand-built rows for object layouts the capture does not cover.
RowChange MakeRow(RowAction action, const std::string& object,
                  State object_state = State::kValue,
                  const std::string& name = "n") {
  RowChange c{action, 0x42, {}, {}};
  RowImage img;
  img.present = true;
  img[MappedField::kGroup] = {State::kValue, "g"};
  img[MappedField::kVersion] = {State::kValue, "v1"};
  img[MappedField::kResource] = {State::kValue, "things"};
  img[MappedField::kKind] = {State::kValue, "Thing"};
  img[MappedField::kCluster] = {State::kValue, "c"};
  img[MappedField::kNamespace] = {State::kValue, "ns"};
  img[MappedField::kName] = {State::kValue, name};
  img[MappedField::kUid] = {State::kValue, "u"};
  img[MappedField::kObject] = {object_state, object};
  if (action == RowAction::kDelete) {
    c.identity = img;
  } else {
    c.columns = img;
  }
  return c;
}

Transaction TxnOf(std::vector<RowChange> changes, uint64_t commit = 0x9000) {
  Transaction t;
  t.xid = 77;
  t.commit_lsn = commit;
  t.end_lsn = commit + 0x30;
  t.commit_time_us = 5;
  t.changes = std::move(changes);
  return t;
}

struct LayoutCase {
  const char* object;
  std::optional<std::string> member_rv;
  bool single_line;
};

TEST_F(EventBuilderTest, ObjectLayoutsProduceValidJson) {
  const LayoutCase cases[] = {
      {"{}", std::nullopt, true},
      {"{ }", std::nullopt, true},
      {R"({"kind": "Thing"})", std::nullopt, true},
      {R"({"metadata": {}})", std::nullopt, true},
      {R"({"metadata": {"name": "n"}})", std::nullopt, true},
      {R"({"metadata": {"resourceVersion": "7"}})", "7", true},
      {R"({"metadata": {"resourceVersion": ""}})", "", true},
      {R"({"metadata": {"annotations": {}, "resourceVersion": "7"}})", "7", true},
      {R"({"metadata": {"resourceVersion": "7", "annotations": {}}})", "7", true},
      {R"({"metadata": {"resourceVersion": "7", "annotations": {"a": "b"}}})",
       "7", true},
      {R"({"metadata": {"annotations": {"a": "b"}}})", std::nullopt, true},
      {R"({"metadata": {"annotations": {"a": "b"}, "name": "n"}, "kind": "K"})",
       std::nullopt, true},
      // null annotations or labels are none, as Go reads them; the
      // annotation replaces the null (a second key would lose to it).
      {R"({"metadata": {"annotations": null, "resourceVersion": "7"}})", "7",
       true},
      {R"({"metadata": {"resourceVersion": "7", "annotations" : null }})", "7",
       true},
      {R"({"metadata": {"annotations": null}})", std::nullopt, true},
      {R"({"metadata": {"labels": null, "resourceVersion": "7"}})", "7", true},
      // json (not jsonb) keeps the writer's spacing.
      {R"({ "metadata" : { "resourceVersion" : "7" , "annotations" : { } } })",
       "7", true},
      {"{\n  \"metadata\": {\n    \"resourceVersion\": \"7\",\n    "
       "\"annotations\": {\n    }\n  }\n}",
       "7", true},  // line breaks between tokens become spaces
      {"{\r\n\"metadata\":\r\n{\"resourceVersion\":\"7\"}\r\n}", "7",
       true},  // so do CRLF ones
      {"\t{\"metadata\":{\"resourceVersion\":\"7\"}}", "7", true},
      // A "metadata" or "resourceVersion" deeper down is not the object's.
      {R"({"spec": {"metadata": {"resourceVersion": "1"}}, "metadata": {"resourceVersion": "2"}})",
       "2", true},
      {R"({"resourceVersion": "9", "metadata": {"labels": {"resourceVersion": "x"}}})",
       std::nullopt, true},
      {R"({"metadata": {"annotations": {"resourceVersion": "x"}, "resourceVersion": "3"}})",
       "3", true},
      // Escapes and non-ASCII text pass through.
      {R"({"metadata": {"resourceVersion": "a\"b\\c\u00e9", "name": "\u2603"}})",
       "a\"b\\c\xc3\xa9", true},
      {"{\"metadata\": {\"name\": \"\xe2\x98\x83\"}, \"x\": [1, 2.5, null, true]}",
       std::nullopt, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.object);
    auto r = Build(TxnOf({MakeRow(RowAction::kInsert, c.object)}));
    EXPECT_TRUE(r.errors.empty()) << r.errors.front();
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0]->rv, 0x9000u);
    ExpectWire(*r.events[0], c.object, "ADDED", c.member_rv, c.single_line);
  }
}

// An object that already carries the member-RV annotation (copied out of a
// walwatch stream into a member cluster) gets its value replaced: a second
// key would lose to the stale one in Go, which reads the last.
TEST_F(EventBuilderTest, AnExistingMemberRvAnnotationIsReplaced) {
  for (const char* object : {
           R"({"metadata": {"resourceVersion": "7", "annotations": {"a": "b", "walwatch.clusterpedia.io/member-resource-version": "3"}}})",
           R"({"metadata": {"annotations": {"walwatch.clusterpedia.io/member-resource-version" : "3" , "z": "y"}, "resourceVersion": "7"}})",
       }) {
    SCOPED_TRACE(object);
    auto r = Build(TxnOf({MakeRow(RowAction::kInsert, object)}));
    ASSERT_TRUE(r.errors.empty()) << r.errors.front();
    ASSERT_EQ(r.events.size(), 1u);
    ExpectWire(*r.events[0], object, "ADDED", "7");
    const std::string_view wire = r.events[0]->wire();
    const std::string key = kMemberResourceVersionAnnotation;
    size_t first = wire.find(key);
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(wire.find(key, first + 1), std::string::npos) << "a second key";
  }
}

TEST_F(EventBuilderTest, LargestRvIsWrittenInFull) {
  auto r = Build(TxnOf({MakeRow(RowAction::kInsert, "{}"),
                        MakeRow(RowAction::kInsert,
                                R"({"metadata": {"resourceVersion": "1"}})")},
                       UINT64_MAX));
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(json::parse(r.events[0]->wire())["object"]["metadata"]
                ["resourceVersion"],
            "18446744073709551614");
  EXPECT_EQ(json::parse(r.events[1]->wire())["object"]["metadata"]
                ["resourceVersion"],
            "18446744073709551615");
}

TEST_F(EventBuilderTest, LabelsAreExtractedUnescaped) {
  auto r = Build(
      TxnOf({MakeRow(
          RowAction::kInsert,
          R"({"metadata": {"labels": {"a\"b": "c\\d", "e": "\u00e9", "f": "", "app.kubernetes.io/name": "x"}}})")}));
  ASSERT_EQ(r.events.size(), 1u);
  const auto& labels = r.events[0]->labels().ToList();
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels[0], (std::pair<std::string, std::string>{"a\"b", "c\\d"}));
  EXPECT_EQ(labels[1], (std::pair<std::string, std::string>{"e", "\xc3\xa9"}));
  EXPECT_EQ(labels[2], (std::pair<std::string, std::string>{"f", ""}));
  EXPECT_EQ(labels[3],
            (std::pair<std::string, std::string>{"app.kubernetes.io/name", "x"}));
  // No labels, or an empty map: none.
  for (const char* obj : {R"({"metadata": {"labels": {}}})", "{}"}) {
    auto e = Build(TxnOf({MakeRow(RowAction::kInsert, obj)}));
    ASSERT_EQ(e.events.size(), 1u) << obj;
    EXPECT_TRUE(e.events[0]->labels().ToList().empty()) << obj;
  }
}

// Builds `obj` alone and as the middle row of three; expects it to become an
// error, never an event, and the other rows' events to be unaffected.
void ExpectObjectError(EventBuilder* builder, const std::string& obj) {
  SCOPED_TRACE("object: " + obj);
  EventBuilder::Result r;
  builder->Build(TxnOf({MakeRow(RowAction::kInsert, obj)}), &r);
  EXPECT_TRUE(r.events.empty())
      << "event built: " << (r.events.empty() ? "" : r.events[0]->wire());
  EXPECT_EQ(r.errors.size(), 1u);
  if (r.errors.size() == 1) {
    EXPECT_EQ(r.errors[0].find('\n'), std::string::npos);
    EXPECT_NE(r.errors[0].find("transaction 77"), std::string::npos)
        << r.errors[0];
  }

  EventBuilder::Result three;
  builder->Build(
      TxnOf({MakeRow(RowAction::kInsert, "{}", State::kValue, "a"),
             MakeRow(RowAction::kUpdate, obj, State::kValue, "b"),
             MakeRow(RowAction::kInsert, "{}", State::kValue, "c")}),
      &three);
  EXPECT_EQ(three.errors.size(), 1u);
  EXPECT_EQ(three.events.size(), 2u);
  if (three.events.size() != 2) return;
  EXPECT_EQ(three.events[0]->name(), "a");
  EXPECT_EQ(three.events[0]->rv, 0x9000u - 1);
  EXPECT_FALSE(three.events[0]->last_in_txn);
  EXPECT_EQ(three.events[1]->name(), "c");
  EXPECT_EQ(three.events[1]->rv, 0x9000u);
  EXPECT_TRUE(three.events[1]->last_in_txn);
}

TEST_F(EventBuilderTest, ObjectsThatAreNotJsonObjectsAreErrors) {
  const char* bad[] = {
      "",
      " ",
      "not json",
      "[1, 2]",
      "[]",
      "\"str\"",
      "42",
      "null",
      "true",
      "{",
      "{\"a\":",
      "{\"metadata\": {\"resourceVersion\": \"1\"",
      "{\"metadata\": []}",
      "{\"metadata\": \"x\"}",
      "{\"metadata\": 5}",
      "{\"metadata\": {\"resourceVersion\": 5}}",
      "{\"metadata\": {\"resourceVersion\": null}}",
      "{\"metadata\": {\"annotations\": []}}",
      "{\"metadata\": {\"annotations\": \"a\"}}",
      "{\"metadata\": {\"resourceVersion\": \"1\", }}",
  };
  for (const char* obj : bad) ExpectObjectError(&builder_, obj);
}

// Text that starts as a JSON object but is broken after the part the builder
// edits, or has bytes after the object. Splicing it would send watchers a
// line that is not JSON and break their stream decoder. (PostgreSQL validates
// json/jsonb, and pg_checks requires one of them, so this is defense in
// depth: the header promises an error for "an object that is not JSON".)
// Bytes after the object are caught. What follows metadata inside the
// object is skipped, not validated: PostgreSQL validated it when the json or
// jsonb value was stored, and pg_checks requires one of those types.
TEST_F(EventBuilderTest, BytesAfterTheObjectAreErrors) {
  const char* bad[] = {
      "{\"metadata\": {}} {}",
      "{\"kind\": \"K\"}}",
  };
  for (const char* obj : bad) ExpectObjectError(&builder_, obj);
}

TEST_F(EventBuilderTest, BadLastRowLeavesTheGoodOneLast) {
  auto r = Build(TxnOf({MakeRow(RowAction::kInsert, "{}", State::kValue, "a"),
                        MakeRow(RowAction::kInsert, "[]", State::kValue, "b")}));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0]->name(), "a");
  EXPECT_TRUE(r.events[0]->last_in_txn);
  EXPECT_EQ(r.events[0]->rv, 0x9000u);
  EXPECT_EQ(r.errors.size(), 1u);
}

TEST_F(EventBuilderTest, NullOrMissingObjectIsAnError) {
  auto null_obj =
      Build(TxnOf({MakeRow(RowAction::kInsert, "", State::kNull)}));
  EXPECT_TRUE(null_obj.events.empty());
  ASSERT_EQ(null_obj.errors.size(), 1u);
  EXPECT_NE(null_obj.errors[0].find("NULL"), std::string::npos);

  // A DELETE under REPLICA IDENTITY DEFAULT has only the key.
  auto missing = Build(
      TxnOf({MakeRow(RowAction::kDelete, "", State::kAbsent)}));
  EXPECT_TRUE(missing.events.empty());
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_NE(missing.errors[0].find("REPLICA IDENTITY FULL"), std::string::npos);

  // An INSERT always carries every column: the hint would mislead.
  auto inserted = Build(
      TxnOf({MakeRow(RowAction::kInsert, "", State::kAbsent)}));
  ASSERT_EQ(inserted.errors.size(), 1u);
  EXPECT_EQ(inserted.errors[0].find("REPLICA IDENTITY"), std::string::npos)
      << inserted.errors[0];
}

// Under REPLICA IDENTITY DEFAULT (set while walwatch runs) an UPDATE
// carries no old object: a new uid or a label change cannot be told apart
// from a plain MODIFIED, so it is an error (and the transaction a barrier).
TEST_F(EventBuilderTest, UpdateWithoutOldRowIsAnError) {
  auto r = Build(TxnOf({MakeRow(RowAction::kUpdate,
                                R"({"metadata": {"resourceVersion": "5"}})")}));
  EXPECT_TRUE(r.events.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("REPLICA IDENTITY FULL"), std::string::npos)
      << r.errors[0];
}

TEST_F(EventBuilderTest, UpdateOfEachKeyIsDeletedThenAdded) {
  const MappedField keys[] = {MappedField::kGroup,   MappedField::kVersion,
                              MappedField::kResource, MappedField::kCluster,
                              MappedField::kNamespace, MappedField::kName,
                              MappedField::kUid};
  for (MappedField f : keys) {
    SCOPED_TRACE(kMappedFieldNames[static_cast<size_t>(f)]);
    RowChange c = MakeRow(RowAction::kUpdate, R"({"metadata": {}})");
    c.identity = c.columns;
    c.columns[f].text += "-new";
    auto r = Build(TxnOf({std::move(c)}));
    ASSERT_EQ(r.events.size(), 2u);
    EXPECT_EQ(r.events[0]->type, EventType::kDeleted);
    EXPECT_EQ(r.events[1]->type, EventType::kAdded);
  }
  // Kind alone, or the object alone: MODIFIED.
  for (MappedField f : {MappedField::kKind, MappedField::kObject}) {
    RowChange c = MakeRow(RowAction::kUpdate, R"({"metadata": {}})");
    c.identity = c.columns;
    if (f == MappedField::kObject) {
      c.columns[f].text = R"({"metadata": {"name": "x"}})";
    } else {
      c.columns[f].text += "2";
    }
    auto r = Build(TxnOf({std::move(c)}));
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0]->type, EventType::kModified);
  }
}


// A MODIFIED whose labels change carries the old labels and the old object
// as a DELETED line at the same RV, for the watches the object leaves.
TEST_F(EventBuilderTest, LabelChangeKeepsThePreviousState) {
  RowChange c = MakeRow(
      RowAction::kUpdate,
      R"({"metadata": {"labels": {"app": "new"}, "resourceVersion": "6"}})");
  RowChange old = MakeRow(
      RowAction::kDelete,
      R"({"metadata": {"labels": {"app": "old"}, "resourceVersion": "5"}})");
  c.identity = old.identity;
  auto r = Build(TxnOf({c}));
  ASSERT_TRUE(r.errors.empty());
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = *r.events[0];
  EXPECT_EQ(e.type, EventType::kModified);
  ASSERT_EQ(e.prev_labels().ToList().size(), 1u);
  EXPECT_EQ(e.prev_labels().ToList()[0].second, "old");
  ASSERT_FALSE(e.prev_wire().empty());
  EXPECT_EQ(e.prev_wire().back(), '\n');
  auto prev = json::parse(e.prev_wire());
  EXPECT_EQ(prev["type"], "DELETED");
  EXPECT_EQ(prev["object"]["metadata"]["labels"]["app"], "old");
  EXPECT_EQ(prev["object"]["metadata"]["resourceVersion"],
            std::to_string(e.rv));

  // Same labels in another order: nothing extra.
  RowChange same = MakeRow(
      RowAction::kUpdate,
      R"({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": 2})");
  RowChange same_old = MakeRow(
      RowAction::kDelete,
      R"({"metadata": {"labels": {"b": "2", "a": "1"}}, "spec": 1})");
  same.identity = same_old.identity;
  auto r2 = Build(TxnOf({same}));
  ASSERT_EQ(r2.events.size(), 1u);
  EXPECT_TRUE(r2.events[0]->prev_labels().ToList().empty());
  EXPECT_TRUE(r2.events[0]->prev_wire().empty());
}

// Every event of an object, and of objects alike in all but the name, share
// one FilterFields: the event log holds them once (BENCHMARKS.md).
TEST_F(EventBuilderTest, EventsShareFilterFieldsWhenAllButTheNameAgree) {
  auto row = [](const char* name, const char* labels) {
    RowChange c = MakeRow(RowAction::kInsert,
                          std::string(R"({"metadata": {"labels": )") + labels +
                              "}}");
    c.columns[MappedField::kName].text = name;
    return c;
  };
  auto r1 = Build(TxnOf({row("a", R"({"app": "web"})")}));
  auto r2 = Build(TxnOf({row("b", R"({"app": "web"})"),
                         row("c", R"({"app": "db"})")}));
  ASSERT_EQ(r1.events.size(), 1u);
  ASSERT_EQ(r2.events.size(), 2u);
  EXPECT_EQ(r1.events[0]->name(), "a");
  EXPECT_EQ(r2.events[0]->name(), "b");
  EXPECT_EQ(r1.events[0]->fields(), r2.events[0]->fields());
  EXPECT_NE(r2.events[0]->fields(), r2.events[1]->fields());
  EXPECT_EQ(r2.events[1]->labels().ToList(),
            (LabelList{{"app", "db"}}));
}

// Folding: one event per object per transaction, so no two versions of an
// object share an RV (PROTOCOL.md "resourceVersion").
RowChange Update(const std::string& name, const std::string& old_object,
                 const std::string& new_object,
                 const std::string& uid = "u") {
  RowChange c = MakeRow(RowAction::kUpdate, new_object, State::kValue,
                        name);
  c.identity = c.columns;
  c.identity[MappedField::kObject].text = old_object;
  c.columns[MappedField::kUid].text = uid;
  return c;
}

std::string SpecOf(const Event& e) {
  return json::parse(e.wire())["object"]["spec"].dump();
}

TEST_F(EventBuilderTest, RowsOfOneTransactionGetCommitMinusOneAndCommit) {
  auto r = Build(TxnOf({MakeRow(RowAction::kInsert, "{}", State::kValue, "a"),
                        MakeRow(RowAction::kInsert, "{}", State::kValue, "b"),
                        MakeRow(RowAction::kInsert, "{}", State::kValue, "c")}));
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[0]->rv, 0x9000u - 1);
  EXPECT_EQ(r.events[1]->rv, 0x9000u - 1);
  EXPECT_EQ(r.events[2]->rv, 0x9000u);
  EXPECT_TRUE(r.events[2]->last_in_txn);
  EXPECT_FALSE(r.events[1]->last_in_txn);
}

TEST_F(EventBuilderTest, AddedThenModifiedIsOneAddedOfTheLastState) {
  auto r = Build(TxnOf(
      {MakeRow(RowAction::kInsert, R"({"spec": 1})", State::kValue, "a"),
       MakeRow(RowAction::kInsert, "{}", State::kValue, "b"),
       Update("a", R"({"spec": 1})", R"({"spec": 2})"),
       Update("a", R"({"spec": 2})", R"({"spec": 3})")}));
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0]->name(), "a");  // at its first change's place
  EXPECT_EQ(r.events[0]->type, EventType::kAdded);
  EXPECT_EQ(SpecOf(*r.events[0]), "3");
  EXPECT_EQ(r.events[0]->rv, 0x9000u - 1);
  EXPECT_EQ(r.events[1]->name(), "b");
  EXPECT_EQ(r.events[1]->rv, 0x9000u);
}

TEST_F(EventBuilderTest, ModifiedTwiceIsOneModifiedFromTheStateBefore) {
  auto r = Build(TxnOf(
      {Update("a", R"({"metadata": {"labels": {"app": "x"}}, "spec": 1})",
              R"({"metadata": {"labels": {"app": "y"}}, "spec": 2})"),
       Update("a", R"({"metadata": {"labels": {"app": "y"}}, "spec": 2})",
              R"({"metadata": {"labels": {"app": "z"}}, "spec": 3})")}));
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = *r.events[0];
  EXPECT_EQ(e.type, EventType::kModified);
  EXPECT_EQ(SpecOf(e), "3");
  EXPECT_EQ(e.rv, 0x9000u);
  EXPECT_TRUE(e.last_in_txn);
  // The watches the object leaves get the state they saw, before T.
  ASSERT_EQ(e.prev_labels().ToList(), (LabelList{{"app", "x"}}));
  EXPECT_EQ(json::parse(e.prev_wire())["object"]["spec"], 1);
}

TEST_F(EventBuilderTest, ModifiedThenDeletedIsDeletedOfTheStateBefore) {
  RowChange del = MakeRow(RowAction::kDelete,
                          R"({"metadata": {"labels": {"app": "y"}}, "spec": 2})",
                          State::kValue, "a");
  auto r = Build(TxnOf(
      {Update("a", R"({"metadata": {"labels": {"app": "x"}}, "spec": 1})",
              R"({"metadata": {"labels": {"app": "y"}}, "spec": 2})"),
       MakeRow(RowAction::kInsert, "{}", State::kValue, "b"), del}));
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.events.size(), 2u);
  const Event& e = *r.events[0];
  EXPECT_EQ(e.type, EventType::kDeleted);
  EXPECT_EQ(e.name(), "a");
  EXPECT_EQ(SpecOf(e), "1");
  EXPECT_EQ(e.labels().ToList(), (LabelList{{"app", "x"}}));
  EXPECT_EQ(e.rv, 0x9000u - 1);
  EXPECT_EQ(r.events[1]->name(), "b");
}

TEST_F(EventBuilderTest, DeletedThenAddedOfOneUidIsModified) {
  auto r = Build(TxnOf(
      {MakeRow(RowAction::kDelete, R"({"spec": 1})", State::kValue, "a"),
       MakeRow(RowAction::kInsert, R"({"spec": 2})", State::kValue,
               "a")}));
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0]->type, EventType::kModified);
  EXPECT_EQ(SpecOf(*r.events[0]), "2");
}

// A uid changed twice in one transaction: u1 leaves, u3 arrives; u2 lived
// only inside the transaction.
TEST_F(EventBuilderTest, UidChangedTwiceIsDeletedOfTheFirstAndAddedOfTheLast) {
  RowChange first = Update("a", R"({"spec": 1})", R"({"spec": 2})", "u2");
  first.identity[MappedField::kUid].text = "u1";
  RowChange second = Update("a", R"({"spec": 2})", R"({"spec": 3})", "u3");
  second.identity[MappedField::kUid].text = "u2";
  auto r = Build(TxnOf({first, second}));
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0]->type, EventType::kDeleted);
  EXPECT_EQ(SpecOf(*r.events[0]), "1");
  EXPECT_EQ(r.events[1]->type, EventType::kAdded);
  EXPECT_EQ(SpecOf(*r.events[1]), "3");
  EXPECT_NE(r.events[0]->rv, r.events[1]->rv);
}

// The case that was measured: an object last in T1 and not last in T2 had
// one RV for two versions. Now each version has its own.
TEST_F(EventBuilderTest, AnObjectInConsecutiveTransactionsGetsDistinctRvs) {
  auto t1 = Build(TxnOf(
      {MakeRow(RowAction::kInsert, "{}", State::kValue, "b"),
       MakeRow(RowAction::kInsert, R"({"spec": 1})", State::kValue, "a")},
      0x9000));
  auto t2 = Build(TxnOf({Update("a", R"({"spec": 1})", R"({"spec": 2})"),
                         MakeRow(RowAction::kInsert, "{}", State::kValue,
                                 "c")},
                        0x9040));
  ASSERT_EQ(t1.events.size(), 2u);
  ASSERT_EQ(t2.events.size(), 2u);
  ASSERT_EQ(t1.events[1]->name(), "a");
  ASSERT_EQ(t2.events[0]->name(), "a");
  EXPECT_EQ(t1.events[1]->rv, 0x9000u);
  EXPECT_EQ(t2.events[0]->rv, 0x9040u - 1);
  EXPECT_LT(t1.events[1]->rv, t2.events[0]->rv);
}

// Snapshot rows: each carries the one RV of the snapshot, nothing folds.
TEST_F(EventBuilderTest, SnapshotRowsAllCarryTheSnapshotRv) {
  EventBuilder::Result r;
  builder_.BuildAt(
      TxnOf({MakeRow(RowAction::kInsert, "{}", State::kValue, "a"),
             MakeRow(RowAction::kInsert, "{}", State::kValue, "b")}),
      0x1234, &r);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0]->rv, 0x1234u);
  EXPECT_EQ(r.events[1]->rv, 0x1234u);
}

}  // namespace
}  // namespace walwatch
