#include "tests/integration/support/model.h"

#include <sstream>
#include <stdexcept>
#include <utility>

#include "watchserver/label_selector.h"

namespace walwatch::itest {

namespace {

constexpr size_t kHistoryPerKey = 8;

std::string Shorten(const std::string& s, size_t max = 600) {
  return s.size() <= max ? s : s.substr(0, max) + "...";
}

nlohmann::json At(const nlohmann::json& object, const char* pointer) {
  nlohmann::json::json_pointer p(pointer);
  return object.contains(p) ? object.at(p) : nlohmann::json();
}

std::string StringAt(const nlohmann::json& object, const char* pointer) {
  auto v = At(object, pointer);
  return v.is_string() ? v.get<std::string>() : std::string();
}

walwatch::LabelList LabelsOf(const nlohmann::json& object) {
  walwatch::LabelList labels;
  auto l = At(object, "/metadata/labels");
  if (l.is_object()) {
    for (auto it = l.begin(); it != l.end(); ++it) {
      if (it.value().is_string()) {
        labels.emplace_back(it.key(), it.value().get<std::string>());
      }
    }
  }
  return labels;
}

// One term of the field selectors the tests generate.
bool FieldTermMatches(const std::string& term, const ObjectKey& key) {
  size_t op = term.find_first_of("!=");
  if (op == std::string::npos) {
    throw std::invalid_argument("field selector term without operator: " +
                                term);
  }
  std::string field = term.substr(0, op);
  bool equal;
  std::string value;
  if (term.compare(op, 2, "!=") == 0) {
    equal = false;
    value = term.substr(op + 2);
  } else if (term.compare(op, 2, "==") == 0) {
    equal = true;
    value = term.substr(op + 2);
  } else {
    equal = true;
    value = term.substr(op + 1);
  }
  const std::string* actual;
  if (field == "metadata.name") {
    actual = &key.name;
  } else if (field == "metadata.namespace") {
    actual = &key.ns;
  } else if (field == "cluster") {
    actual = &key.cluster;
  } else {
    throw std::invalid_argument("field not modelled: " + field);
  }
  return (*actual == value) == equal;
}

std::string Summary(const ModelObject& o) {
  std::ostringstream s;
  s << "uid=" << o.uid << " memberRV=" << o.member_rv;
  if (o.rv) s << " eventRV=" << o.rv;
  s << " labels=" << At(o.object, "/metadata/labels").dump()
    << " spec=" << Shorten(At(o.object, "/spec").dump());
  return s.str();
}

}  // namespace

std::string ObjectKey::ToString() const {
  return cluster + "/" + (ns.empty() ? "-" : ns) + "/" + name;
}

nlohmann::json NormalizeWatchedObject(const nlohmann::json& object) {
  nlohmann::json o = object;
  if (!o.is_object() || !o.contains("metadata") ||
      !o["metadata"].is_object()) {
    return o;
  }
  auto& metadata = o["metadata"];
  bool had_member_rv = false;
  if (metadata.contains("annotations") && metadata["annotations"].is_object()) {
    auto& ann = metadata["annotations"];
    if (ann.contains(kMemberRvAnnotation)) {
      metadata["resourceVersion"] = ann[kMemberRvAnnotation];
      ann.erase(kMemberRvAnnotation);
      had_member_rv = true;
    }
    if (ann.empty()) metadata.erase("annotations");
  }
  if (!had_member_rv) metadata.erase("resourceVersion");
  return o;
}

ObjectKey KeyOfObject(const nlohmann::json& object) {
  ObjectKey key;
  auto annotations = At(object, "/metadata/annotations");
  if (annotations.is_object() && annotations.contains(kClusterAnnotation) &&
      annotations[kClusterAnnotation].is_string()) {
    key.cluster = annotations[kClusterAnnotation].get<std::string>();
  }
  key.ns = StringAt(object, "/metadata/namespace");
  key.name = StringAt(object, "/metadata/name");
  return key;
}

ModelObject ModelObjectFromStored(nlohmann::json object) {
  ModelObject o;
  o.uid = StringAt(object, "/metadata/uid");
  o.member_rv = StringAt(object, "/metadata/resourceVersion");
  o.object = std::move(object);
  return o;
}

// ---------------------------------------------------------------------------
// ModelResource, ModelFilter

std::string ModelResource::ApiPath() const {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string ModelFilter::Path() const {
  std::string p;
  if (!cluster.empty()) p += "/clusters/" + cluster;
  p += resource.ApiPath();
  if (!ns.empty()) p += "/namespaces/" + ns;
  return p + "/" + resource.resource;
}

std::string QueryEscape(const std::string& value) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ModelFilter::SelectorQuery() const {
  std::string q;
  if (!label_selector.empty()) {
    q += "&labelSelector=" + QueryEscape(label_selector);
  }
  if (!field_selector.empty()) {
    q += "&fieldSelector=" + QueryEscape(field_selector);
  }
  return q;
}

std::string ModelFilter::ToString() const {
  std::string s = Path();
  if (!label_selector.empty()) s += " labels[" + label_selector + "]";
  if (!field_selector.empty()) s += " fields[" + field_selector + "]";
  return s;
}

bool ModelFilter::Matches(const ObjectKey& key,
                          const nlohmann::json& object) const {
  if (!cluster.empty() && key.cluster != cluster) return false;
  if (!ns.empty() && key.ns != ns) return false;
  if (!label_selector.empty()) {
    walwatch::LabelSelector selector;
    std::string error = walwatch::LabelSelector::Parse(label_selector, &selector);
    if (!error.empty()) {
      throw std::invalid_argument("label selector " + label_selector + ": " +
                                  error);
    }
    if (!selector.Matches(LabelsOf(object))) return false;
  }
  size_t start = 0;
  while (start <= field_selector.size() && !field_selector.empty()) {
    size_t comma = field_selector.find(',', start);
    std::string term = field_selector.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!term.empty() && !FieldTermMatches(term, key)) return false;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

// ---------------------------------------------------------------------------
// WatchModel

WatchModel::WatchModel(ModelState initial, uint64_t start_rv, Options options)
    : state_(std::move(initial)),
      options_(options),
      last_rv_(start_rv),
      last_event_rv_(start_rv) {}

void WatchModel::Remember(const ObjectKey& key, const std::string& line) {
  auto& h = history_[key];
  h.push_back(line);
  if (h.size() > kHistoryPerKey) h.pop_front();
}

std::vector<std::string> WatchModel::HistoryOf(const ObjectKey& key) const {
  auto it = history_.find(key);
  if (it == history_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

::testing::AssertionResult WatchModel::Apply(const WatchEvent& event) {
  const uint64_t rv = event.rv();
  std::ostringstream problem;
  auto fail = [&]() {
    return ::testing::AssertionFailure()
           << "after " << events_ << " events (last RV " << last_rv_
           << "): " << problem.str() << "\n  event: " << Shorten(event.raw);
  };

  if (event.type == "ERROR") {
    problem << "ERROR event: " << event.object.dump();
    return fail();
  }
  if (rv == 0) {
    problem << event.type << " without a numeric metadata.resourceVersion";
    return fail();
  }
  if (rv < last_rv_) {
    // Reported, and the event applied anyway: what follows is checked too.
    problem << "resourceVersion went back from " << last_rv_ << " to " << rv
            << "; ";
  }
  last_rv_ = std::max(last_rv_, rv);
  if (event.type == "BOOKMARK") {
    ++bookmarks_;
    if (StringAt(event.object, "/metadata/annotations/k8s.io~1initial-events-end") ==
        "true") {
      if (initial_events_end_) problem << "a second initial-events-end BOOKMARK";
      initial_events_end_ = true;
      events_before_end_ = events_;
    }
    if (!problem.str().empty()) return fail();
    return ::testing::AssertionSuccess();
  }
  ++events_;
  last_event_rv_ = rv;

  ModelObject obj = ModelObjectFromStored(NormalizeWatchedObject(event.object));
  obj.rv = rv;
  ObjectKey key = KeyOfObject(event.object);
  if (key.cluster.empty() || key.name.empty()) {
    problem << event.type << " whose object has no name or cluster annotation";
    return fail();
  }
  Remember(key, event.type + " rv=" + std::to_string(rv) + " " + Summary(obj));
  const bool check = options_.strict && rv != options_.lenient_rv;
  auto present = state_.find(key);
  if (event.type == "ADDED") {
    if (check && present != state_.end()) {
      problem << "ADDED " << key.ToString()
              << " already present: " << Summary(present->second);
    }
    state_[key] = std::move(obj);
  } else if (event.type == "MODIFIED") {
    if (check && present == state_.end()) {
      problem << "MODIFIED " << key.ToString() << " not present";
    } else if (check && present->second.uid != obj.uid) {
      problem << "MODIFIED " << key.ToString() << " changed the uid from "
              << present->second.uid << " to " << obj.uid
              << " (a new uid is DELETED then ADDED)";
    } else if (check && present->second.rv == rv &&
               present->second.object == obj.object) {
      problem << "the same MODIFIED " << key.ToString() << " twice";
    }
    state_[key] = std::move(obj);
  } else if (event.type == "DELETED") {
    if (check && present == state_.end()) {
      problem << "DELETED " << key.ToString() << " not present";
    } else if (check && present->second.uid != obj.uid) {
      problem << "DELETED " << key.ToString() << " with uid " << obj.uid
              << ", present with uid " << present->second.uid;
    } else if (check && present->second.object != obj.object) {
      // DELETED carries the last state: a change in between was missed.
      problem << "DELETED " << key.ToString() << " carries " << Summary(obj)
              << ", the watcher holds " << Summary(present->second);
    }
    if (present != state_.end()) state_.erase(present);
  } else {
    problem << "unknown event type " << event.type;
  }
  if (options_.strict && options_.initial_events_expected &&
      !initial_events_end_ && event.type != "ADDED") {
    if (!problem.str().empty()) problem << "; ";
    problem << event.type << " before the initial-events-end BOOKMARK";
  }
  if (!problem.str().empty()) return fail();
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------
// SQL side and comparison

ModelState QueryModelState(PgConnection& conn, const ModelFilter& filter) {
  auto rows = conn.Query(
      "SELECT cluster, namespace, name, object::text FROM resources "
      "WHERE \"group\" = $1 AND version = $2 AND resource = $3 "
      "AND ($4 = '' OR cluster = $4) AND ($5 = '' OR namespace = $5)",
      {filter.resource.group, filter.resource.version,
       filter.resource.resource, filter.cluster, filter.ns});
  ModelState state;
  for (const auto& row : rows) {
    AddListedRow(&state, filter, {*row[0], *row[1], *row[2]}, *row[3]);
  }
  return state;
}

void AddListedRow(ModelState* state, const ModelFilter& filter, ObjectKey key,
                  const std::string& object_text) {
  auto object = nlohmann::json::parse(object_text);
  if (!(KeyOfObject(object) == key)) {
    throw std::runtime_error("row " + key.ToString() +
                             " holds an object of another key: " +
                             KeyOfObject(object).ToString());
  }
  if (!filter.Matches(key, object)) return;
  state->emplace(std::move(key), ModelObjectFromStored(std::move(object)));
}

ModelState FilterModelState(const ModelState& state, const ModelFilter& filter) {
  ModelState out;
  for (const auto& [key, obj] : state) {
    if (filter.Matches(key, obj.object)) out.emplace(key, obj);
  }
  return out;
}

::testing::AssertionResult CompareModelStates(const ModelState& expected,
                                              const ModelState& actual,
                                              const WatchModel* model) {
  size_t differences = 0;
  std::ostringstream first;
  auto describe = [&](const ObjectKey& key, const ModelObject* want,
                      const ModelObject* got) {
    if (differences++ > 0) return;
    first << "first differing object " << key.ToString() << ":\n  expected (SQL): "
          << (want ? Summary(*want) : "absent") << "\n  actual (watch): "
          << (got ? Summary(*got) : "absent");
    if (want && got && want->uid == got->uid &&
        want->member_rv == got->member_rv) {
      first << "\n  expected object: " << Shorten(want->object.dump(), 2000)
            << "\n  actual object:   " << Shorten(got->object.dump(), 2000);
    }
    if (model) {
      auto history = model->HistoryOf(key);
      first << "\n  the watcher's last events for it"
            << (history.empty() ? ": none" : " (oldest first):");
      for (const auto& h : history) first << "\n    " << h;
    }
  };
  auto e = expected.begin();
  auto a = actual.begin();
  while (e != expected.end() || a != actual.end()) {
    if (a == actual.end() || (e != expected.end() && e->first < a->first)) {
      describe(e->first, &e->second, nullptr);
      ++e;
    } else if (e == expected.end() || a->first < e->first) {
      describe(a->first, nullptr, &a->second);
      ++a;
    } else {
      if (e->second.uid != a->second.uid ||
          e->second.member_rv != a->second.member_rv ||
          e->second.object != a->second.object) {
        describe(e->first, &e->second, &a->second);
      }
      ++e;
      ++a;
    }
  }
  if (differences == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << differences << " object(s) differ (expected " << expected.size()
         << ", watcher holds " << actual.size() << "); " << first.str();
}

// ---------------------------------------------------------------------------
// RV endpoints

namespace {

// The RV in an endpoint's JSON body: {"resourceVersion":"N"} (also accepted:
// a number, or under "metadata").
bool ParseRvBody(const std::string& body, uint64_t* rv) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  nlohmann::json v;
  if (j.contains("resourceVersion")) {
    v = j["resourceVersion"];
  } else if (j.contains("metadata") && j["metadata"].is_object() &&
             j["metadata"].contains("resourceVersion")) {
    v = j["metadata"]["resourceVersion"];
  }
  if (v.is_number_unsigned()) {
    *rv = v.get<uint64_t>();
    return *rv != 0;
  }
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 20 ||
      s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *rv = std::stoull(s);
  return *rv != 0;
}

}  // namespace

::testing::AssertionResult GetRvEndpoint(const std::string& socket_path,
                                         const std::string& target,
                                         uint64_t* rv, int* status,
                                         std::string* body,
                                         Clock::time_point deadline) {
  HttpResponse r = HttpGet(socket_path, target, deadline);
  if (!r.ok) return ::testing::AssertionFailure() << r.error;
  if (status) *status = r.status;
  if (body) *body = r.body;
  if (r.status != 200) {
    return ::testing::AssertionFailure()
           << "GET " << target << ": HTTP " << r.status << " " << r.body;
  }
  if (!ParseRvBody(r.body, rv)) {
    return ::testing::AssertionFailure()
           << "GET " << target << ": no resourceVersion in " << r.body;
  }
  return ::testing::AssertionSuccess();
}

std::string HandoffTarget(const std::string& snapshot,
                          const std::string& insert_lsn) {
  return "/walwatch/v1/handoff?snapshot=" + QueryEscape(snapshot) +
         "&insertLSN=" + QueryEscape(insert_lsn);
}

::testing::AssertionResult GetFreshRv(const std::string& socket_path,
                                      uint64_t* rv,
                                      Clock::time_point deadline) {
  return GetRvEndpoint(socket_path, "/walwatch/v1/freshrv", rv, nullptr,
                       nullptr, deadline);
}

::testing::AssertionResult ListWithHandoff(PgConnection& conn,
                                           const std::string& socket_path,
                                           const ModelFilter& filter,
                                           ListedState* out,
                                           Clock::time_point deadline) {
  std::string last_answer;
  out->attempts = 0;
  while (Clock::now() < deadline) {
    ++out->attempts;
    conn.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    try {
      auto rows = conn.Query(
          "SELECT pg_current_snapshot()::text, "
          "pg_current_wal_insert_lsn()::text");
      out->snapshot = *rows.at(0)[0];
      out->insert_lsn = *rows.at(0)[1];
      out->state = QueryModelState(conn, filter);
      conn.Exec("COMMIT");
    } catch (...) {
      conn.Exec("ROLLBACK");
      throw;
    }
    int status = 0;
    std::string body;
    auto r = GetRvEndpoint(socket_path,
                           HandoffTarget(out->snapshot, out->insert_lsn),
                           &out->rv, &status, &body, deadline);
    if (r) return r;
    // 409: no exact RV for this snapshot; 410: it is older than the log;
    // 504: walwatch had not caught up yet. A new snapshot serves all three.
    if (status != 409 && status != 410 && status != 504) {
      return r << " (attempt " << out->attempts << ")";
    }
    last_answer = body;
  }
  return ::testing::AssertionFailure()
         << "handoff for " << filter.ToString() << " still refused after "
         << out->attempts << " snapshots: " << last_answer;
}

// ---------------------------------------------------------------------------
// Writes

nlohmann::json ModelObjectSpec::Object() const {
  nlohmann::json o = row.Object();
  o["metadata"]["labels"] = nlohmann::json::object();
  for (const auto& [k, v] : labels) o["metadata"]["labels"][k] = v;
  return o;
}

uint64_t InsertModelRow(PgConnection& conn, const ModelObjectSpec& spec) {
  return InsertRow(conn, spec.row, spec.Object().dump());
}

uint64_t UpdateModelRow(PgConnection& conn, const ModelObjectSpec& spec) {
  return UpdateRow(conn, spec.row, spec.Object().dump());
}

}  // namespace walwatch::itest
