// A model of what a Kubernetes watcher knows, for the randomized model test
// and the fault suites: a watcher applies its events to a WatchModel (a map
// from (cluster, namespace, name) to the object), and the ModelChecker
// compares that map with the rows PostgreSQL holds for the same filter.
//
//  * ModelFilter: what one watch selects (resource, cluster and namespace
//    from the path, label and field selectors), with its watch path and
//    query, and the same selection evaluated in C++ over rows (labels through
//    walwatch's LabelSelector, which selector_test checks against
//    apimachinery; the few field terms the tests generate by hand).
//  * WatchModel: applies watch events; checks RVs never decrease, and (when
//    strict) that no event contradicts the state: an ADDED for an object
//    already present, a MODIFIED or DELETED for an absent one, a MODIFIED
//    that changes the uid, the same MODIFIED twice, a DELETED whose object
//    (the last state) is not the one held. Those catch doubled and
//    dropped events that the final state alone could hide.
//  * QueryModelState / CompareModelStates: the expected state from SQL, and
//    the first differing object (key, uid, member RV, labels and spec on
//    both sides, and what the watcher last received for it).
//  * ModelObjectSpec + InsertModelRow / UpdateModelRow: rows with chosen
//    labels, written with GORM's SQL exactly as harness.h writes them.
//
// Thread safety: none; a WatchModel belongs to one thread at a time (guard
// it with a mutex to snapshot it from another).
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/support/harness.h"

namespace walwatch::itest {

inline constexpr char kClusterAnnotation[] =
    "shadow.clusterpedia.io/cluster-name";
inline constexpr char kInitialEventsEndAnnotation[] =
    "k8s.io/initial-events-end";

// An object's identity within one resource.
struct ObjectKey {
  std::string cluster, ns, name;
  bool operator<(const ObjectKey& o) const {
    return std::tie(cluster, ns, name) < std::tie(o.cluster, o.ns, o.name);
  }
  bool operator==(const ObjectKey& o) const {
    return std::tie(cluster, ns, name) == std::tie(o.cluster, o.ns, o.name);
  }
  std::string ToString() const;  // cluster/ns/name ("-" for no namespace)
};

// An object as a watcher holds it.
struct ModelObject {
  std::string uid;
  std::string member_rv;  // the member cluster's own resourceVersion
  uint64_t rv = 0;        // the event's RV; 0 for listed objects
  // The object as PostgreSQL stores it: for an event's object, the member
  // RV put back into metadata.resourceVersion and walwatch's annotation
  // removed (NormalizeWatchedObject).
  nlohmann::json object;
};
using ModelState = std::map<ObjectKey, ModelObject>;

// An event's object back to the stored form (see ModelObject::object).
nlohmann::json NormalizeWatchedObject(const nlohmann::json& object);
// Key of a stored or watched object: its cluster annotation, namespace,
// name.
ObjectKey KeyOfObject(const nlohmann::json& object);
// A ModelObject from a stored object (a row's `object` column).
ModelObject ModelObjectFromStored(nlohmann::json object);

// One resource of the `resources` table.
struct ModelResource {
  std::string group, version, resource, kind;
  bool namespaced = true;
  std::string ApiPath() const;  // "/api/v1" or "/apis/G/V"
};

// What one watch selects.
struct ModelFilter {
  ModelResource resource;
  std::string cluster;  // "" = every cluster
  std::string ns;       // "" = every namespace
  std::string label_selector;
  // Comma-separated terms `F=V`, `F==V`, `F!=V` with F one of
  // metadata.name, metadata.namespace, cluster, and V without `,=\`.
  std::string field_selector;

  // "[/clusters/C]/api/v1/[namespaces/N/]pods"
  std::string Path() const;
  // "&labelSelector=..&fieldSelector=.." (percent-encoded; "" if none).
  std::string SelectorQuery() const;
  std::string ToString() const;

  // Whether the filter selects `object` (stored form) of key `key`; the
  // resource is the caller's business. Throws std::invalid_argument for a
  // selector that does not parse.
  bool Matches(const ObjectKey& key, const nlohmann::json& object) const;
};

// Percent-encodes a query value.
std::string QueryEscape(const std::string& value);

// Applies watch events to a state.
class WatchModel {
 public:
  struct Options {
    // Report events that contradict the state (see the file comment).
    bool strict = true;
    // Events with this RV are not checked against the state (0: none): a
    // watch resumed from RV r gets the transaction r was cut in again from
    // its start, and those repeats carry r.
    uint64_t lenient_rv = 0;
    // A WatchList (sendInitialEvents=true): only ADDED events until the
    // BOOKMARK annotated k8s.io/initial-events-end.
    bool initial_events_expected = false;
  };
  WatchModel() = default;
  WatchModel(ModelState initial, uint64_t start_rv, Options options);

  // Applies one event. A failure means the stream broke the contract (an
  // ERROR event, a decreasing RV, a contradiction, a malformed object); the
  // event is applied anyway where it can be.
  ::testing::AssertionResult Apply(const WatchEvent& event);

  const ModelState& state() const { return state_; }
  // Highest RV received (events and bookmarks); the start RV before that.
  uint64_t last_rv() const { return last_rv_; }
  // RV of the last non-BOOKMARK event (or the start RV).
  uint64_t last_event_rv() const { return last_event_rv_; }
  size_t events() const { return events_; }
  size_t bookmarks() const { return bookmarks_; }
  // Whether a BOOKMARK with k8s.io/initial-events-end arrived, and the
  // number of events before it.
  bool initial_events_end() const { return initial_events_end_; }
  size_t events_before_initial_end() const { return events_before_end_; }
  // The last events received for `key` (newest last), one line each.
  std::vector<std::string> HistoryOf(const ObjectKey& key) const;

 private:
  void Remember(const ObjectKey& key, const std::string& line);

  ModelState state_;
  Options options_;
  uint64_t last_rv_ = 0;
  uint64_t last_event_rv_ = 0;
  size_t events_ = 0;
  size_t bookmarks_ = 0;
  bool initial_events_end_ = false;
  size_t events_before_end_ = 0;
  std::map<ObjectKey, std::deque<std::string>> history_;
};

// The rows of `filter` as PostgreSQL holds them now (or in the snapshot of
// the transaction open on `conn`): SQL selects resource, cluster and
// namespace; the selectors are applied in C++.
ModelState QueryModelState(PgConnection& conn, const ModelFilter& filter);
// Adds a listed row (its key columns and `object` text) to `state` if
// `filter` selects it; the SQL has selected resource, cluster and namespace.
// Throws std::runtime_error if the object's own key is another.
void AddListedRow(ModelState* state, const ModelFilter& filter, ObjectKey key,
                  const std::string& object_text);
// The objects of `state` that `filter` selects.
ModelState FilterModelState(const ModelState& state, const ModelFilter& filter);

// Success iff `actual` equals `expected` object for object (uid, member RV,
// the whole stored object). Otherwise names the number of differences and
// describes the first: its key, both sides' uid, member RV, labels and spec,
// and, with `model`, what that watcher last received for it.
::testing::AssertionResult CompareModelStates(const ModelState& expected,
                                              const ModelState& actual,
                                              const WatchModel* model = nullptr);

// walwatch's RV endpoints (watchserver/PROTOCOL.md). `*status` gets the HTTP
// status; success only for 200 with an RV in the body, which goes to *rv.
::testing::AssertionResult GetRvEndpoint(const std::string& socket_path,
                                         const std::string& target,
                                         uint64_t* rv, int* status,
                                         std::string* body,
                                         Clock::time_point deadline);
// The handoff request (GET /walwatch/v1/handoff) of a list read in
// `snapshot` (pg_current_snapshot()) at `insert_lsn`
// (pg_current_wal_insert_lsn()), both escaped.
std::string HandoffTarget(const std::string& snapshot,
                          const std::string& insert_lsn);
// GET /walwatch/v1/freshrv.
::testing::AssertionResult GetFreshRv(const std::string& socket_path,
                                      uint64_t* rv, Clock::time_point deadline);

// The APIServer's list + watch handoff: in a REPEATABLE READ transaction on
// `conn`, takes pg_current_snapshot() and pg_current_wal_insert_lsn(),
// reads the rows of `filter`, commits, then asks walwatch for the handoff
// RV; takes a new snapshot on 409, 410 and 504, until `deadline`. Watching `filter` from `rv` then gives
// exactly the changes after the listed state.
struct ListedState {
  ModelState state;
  uint64_t rv = 0;
  int attempts = 0;  // snapshots taken (1 + the refusals)
  // The last ones sent (on MariaDB: the binlog file and position).
  std::string snapshot, insert_lsn;
};
::testing::AssertionResult ListWithHandoff(PgConnection& conn,
                                           const std::string& socket_path,
                                           const ModelFilter& filter,
                                           ListedState* out,
                                           Clock::time_point deadline);

// A row with chosen labels, written with GORM's SQL (harness.h's InsertRow
// and UpdateRow, with this object instead of Resource::Object()).
struct ModelObjectSpec {
  Resource row;  // keys, uid, member RV, spec
  std::map<std::string, std::string> labels;
  nlohmann::json Object() const;
};
// Return the writing transaction's xid, as harness.h's helpers do.
uint64_t InsertModelRow(PgConnection& conn, const ModelObjectSpec& spec);
// Throws PgError if no row matched.
uint64_t UpdateModelRow(PgConnection& conn, const ModelObjectSpec& spec);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_H_
