// FilterFields and their interner, and how the event log charges fields that
// many events share.
#include "cdc/model/filter_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cdc/model/event.h"
#include "watchserver/event_log.h"

namespace walwatch {
namespace {

FilterFields::Values Deployments(const LabelList* labels,
                                 std::string_view ns = "default") {
  FilterFields::Values v;
  v.group = "apps";
  v.version = "v1";
  v.resource = "deployments";
  v.kind = "Deployment";
  v.cluster = "c1";
  v.ns = ns;
  v.labels = labels;
  return v;
}

TEST(FilterFields, HoldTheirValues) {
  LabelList labels = {{"app", "web"}, {"tier", ""}};
  FilterFieldsPtr f = FilterFields::Make(Deployments(&labels));
  EXPECT_EQ(f->group(), "apps");
  EXPECT_EQ(f->version(), "v1");
  EXPECT_EQ(f->resource(), "deployments");
  EXPECT_EQ(f->kind(), "Deployment");
  EXPECT_EQ(f->cluster(), "c1");
  EXPECT_EQ(f->ns(), "default");
  EXPECT_EQ(f->labels().ToList(), labels);
  EXPECT_GT(f->MemoryBytes(), sizeof(FilterFields));
}

TEST(FilterFieldsInterner, SharesEqualValuesOnly) {
  FilterFieldsInterner interner;
  LabelList web = {{"app", "web"}};
  LabelList db = {{"app", "db"}};
  FilterFieldsPtr a = interner.Intern(Deployments(&web));
  EXPECT_EQ(interner.Intern(Deployments(&web)), a);
  EXPECT_NE(interner.Intern(Deployments(&db)), a);
  EXPECT_NE(interner.Intern(Deployments(&web, "prod")), a);
  EXPECT_NE(interner.Intern(Deployments(nullptr)), a);
  // The same bytes split into other parts are other values.
  FilterFields::Values split = Deployments(&web);
  split.group = "appsv";
  split.version = "1";
  FilterFieldsPtr b = interner.Intern(split);
  EXPECT_NE(b, a);
  EXPECT_EQ(b->group(), "appsv");
  EXPECT_EQ(b->version(), "1");
  EXPECT_EQ(interner.Intern(split), b);
  EXPECT_EQ(interner.size(), 5u);
}

TEST(FilterFieldsInterner, DropsWhatNoEventHoldsAndKeepsTheRest) {
  FilterFieldsInterner interner;
  LabelList kept_labels = {{"app", "kept"}};
  FilterFieldsPtr kept = interner.Intern(Deployments(&kept_labels));
  // Many distinct values that nobody holds on to.
  for (int i = 0; i < 5000; ++i) {
    std::string ns = "ns-" + std::to_string(i);
    interner.Intern(Deployments(nullptr, ns));
  }
  // Sweeps ran as the table grew: it never held them all.
  EXPECT_LE(interner.size(), 1024u);
  EXPECT_EQ(interner.Intern(Deployments(&kept_labels)), kept);
}

TEST(FilterFieldsInterner, DropsTheDeadWhileLookupsOnlyFindLiveValues) {
  FilterFieldsInterner interner;
  LabelList labels = {{"app", "web"}};
  FilterFieldsPtr kept = interner.Intern(Deployments(&labels));
  // A burst of distinct values, all held (by events in the log) ...
  std::vector<FilterFieldsPtr> burst;
  for (int i = 0; i < 5000; ++i) {
    burst.push_back(interner.Intern(Deployments(nullptr, "ns-" + std::to_string(i))));
  }
  ASSERT_EQ(interner.size(), 5001u);
  // ... then evicted, while every lookup finds a value the table has, so
  // the table does not grow: the dead go within a table's worth of calls.
  burst.clear();
  for (int i = 0; i < 5001; ++i) {
    ASSERT_EQ(interner.Intern(Deployments(&labels)), kept);
  }
  EXPECT_EQ(interner.size(), 1u);
}

// n events in one transaction sharing their filter fields.
std::vector<EventPtr> Sharing(const FilterFieldsPtr& fields, uint64_t commit,
                              int n) {
  std::vector<EventPtr> out;
  for (int i = 0; i < n; ++i) {
    std::string name = "d" + std::to_string(i);
    MutableEventPtr e = Event::Allocate(fields, nullptr, name, 100);
    std::fill_n(e->mutable_wire(), 100, 'x');
    e->last_in_txn = i + 1 == n;
    e->rv = commit;
    e->commit_lsn = commit;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<EventPtr> TwoSharing(const FilterFieldsPtr& fields,
                                 uint64_t commit) {
  return Sharing(fields, commit, 2);
}

TEST(EventLog, ChargesSharedFilterFieldsOnceWhileAnEventHoldsThem) {
  FilterFieldsInterner interner;
  LabelList labels = {{"app", "web"}};
  FilterFieldsPtr fields = interner.Intern(Deployments(&labels));
  auto t1 = TwoSharing(fields, 20);
  auto t2 = TwoSharing(fields, 30);
  const size_t event = t1[0]->MemoryBytes();
  const size_t shared = fields->MemoryBytes();

  // Room for the fields and three events, not four.
  EventLog log(shared + 3 * event + event / 2, 10);
  log.AppendTransaction(20, t1);
  EXPECT_EQ(log.GetStats().bytes, shared + 2 * event);
  log.AppendTransaction(30, t2);  // evicts t1; the fields stay charged
  EXPECT_EQ(log.GetStats().events, 2u);
  EXPECT_EQ(log.GetStats().bytes, shared + 2 * event);

  // Fields no retained event holds are no longer charged.
  LabelList other = {{"app", "db"}};
  auto t3 = TwoSharing(interner.Intern(Deployments(&other)), 40);
  log.AppendTransaction(40, t3);  // evicts t2
  EXPECT_EQ(log.GetStats().bytes, t3[0]->fields()->MemoryBytes() + 2 * event);

  log.AppendBarrier(50);
  EXPECT_EQ(log.GetStats().bytes, 0u);
  // Charged again once appended again (to a log of its own).
  EventLog again(1 << 20, 10);
  again.AppendTransaction(20, t1);
  EXPECT_EQ(again.GetStats().bytes, shared + 2 * event);
}

TEST(EventLog, ATransactionThatFitsWithItsFieldsChargedOnceIsRetained) {
  FilterFieldsInterner interner;
  FilterFieldsPtr fields = interner.Intern(Deployments(nullptr));
  auto txn = Sharing(fields, 20, 100);
  size_t exact = fields->MemoryBytes();
  for (const EventPtr& e : txn) exact += e->MemoryBytes();
  EventLog log(exact, 10);
  EXPECT_EQ(log.AppendTransaction(20, txn), EventLog::AppendResult::kAppended);
  EXPECT_EQ(log.GetStats().bytes, exact);
  EXPECT_EQ(log.GetStats().events, 100u);
}

}  // namespace
}  // namespace walwatch
