#include "cdc/event_builder.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <functional>
#include <optional>
#include <string_view>
#include <unordered_map>

#include <simdjson.h>

#include "cdc/base/text.h"

namespace walwatch {

namespace od = simdjson::ondemand;

namespace {

// A row as the event sees it: each mapped column, borrowed from a RowImage.
using RowView = std::array<const ColumnValue*, kMappedFieldCount>;

const ColumnValue& Col(const RowView& row, MappedField f) {
  return *row[static_cast<size_t>(f)];
}

RowView ViewOf(const RowImage& image) {
  RowView v;
  for (size_t i = 0; i < kMappedFieldCount; ++i) v[i] = &image.fields[i];
  return v;
}

// `columns` with each absent (unchanged TOAST) column taken from `identity`.
RowView MergedNewRow(const RowChange& change) {
  RowView v;
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    const ColumnValue& c = change.columns.fields[i];
    v[i] = (c.state == ColumnValue::State::kAbsent && change.identity.present)
               ? &change.identity.fields[i]
               : &c;
  }
  return v;
}

constexpr std::array<MappedField, 7> kIdentityKeys = {
    MappedField::kGroup,   MappedField::kVersion,   MappedField::kResource,
    MappedField::kCluster, MappedField::kNamespace, MappedField::kName,
    MappedField::kUid};

// Where the RV and the annotation go in an object's JSON text.
struct ObjectLayout {
  static constexpr size_t npos = std::string::npos;
  size_t top_open = npos;
  bool top_empty = false;
  size_t meta_open = npos;
  bool meta_empty = false;
  size_t rv_begin = npos, rv_end = npos;  // the member RV's string token
  size_t ann_open = npos;
  bool ann_empty = false;
  size_t ann_null = npos;  // "annotations":null, replaced by an object
  // The value token of an existing member-RV annotation.
  size_t ann_member_begin = npos, ann_member_end = npos;
  LabelList labels;
};

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool EmptyAfter(const std::string& text, size_t open) {
  size_t i = open + 1;
  while (i < text.size() && IsSpace(text[i])) ++i;
  return i < text.size() && text[i] == '}';
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

struct Pending {
  EventType type = EventType::kAdded;
  RowView row{};
  ObjectLayout layout;
  // A MODIFIED: the row before the transaction (has_old). If its labels
  // differ, the event also carries that state (labels_changed, old_layout)
  // for the watches the object leaves.
  bool has_old = false;
  RowView old_row{};
  bool labels_changed = false;
  ObjectLayout old_layout;
  // Folded into nothing (ADDED, then DELETED in the same transaction).
  bool folded_away = false;
};

// Labels as a set: the same pairs in any order.
bool SameLabels(LabelList a, LabelList b) {
  if (a.size() != b.size()) return false;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

}  // namespace

struct EventBuilder::Impl {
  Impl(WireArena* arena, PositionFormatter format_position)
      : arena(arena), format_position(format_position) {}

  WireArena* const arena;
  const PositionFormatter format_position;
  od::parser parser;
  std::string scratch;  // for objects whose buffer lacks padding
  // Events of one object, or of one workload's replicas, share their filter
  // fields.
  FilterFieldsInterner interner;

  std::string Analyze(const std::string& text, ObjectLayout* out);

  // An event line, {"type":"<type>","object":<object with edits>}\n, planned
  // so that its exact size is known before it is written into the event.
  static constexpr const char kWirePrefix[] = "{\"type\":\"";
  static constexpr const char kWireMiddle[] = "\",\"object\":";
  static constexpr const char kWireSuffix[] = "}\n";
  struct Edit {
    size_t at;
    size_t erase;
    std::string insert;
  };
  struct Wire {
    const std::string* object = nullptr;
    const char* type = nullptr;
    std::vector<Edit> edits;  // sorted by `at`
    size_t size = 0;
  };
  static Wire PlanWire(EventType type, const RowView& row,
                       const ObjectLayout& layout, uint64_t rv);
  static void WriteWire(const Wire& wire, char* out);
};

EventBuilder::EventBuilder(WireArena* arena,
                           PositionFormatter format_position)
    : impl_(std::make_unique<Impl>(arena, format_position)) {}
EventBuilder::~EventBuilder() = default;

std::string EventBuilder::Impl::Analyze(const std::string& text,
                                        ObjectLayout* out) {
  const char* base = text.data();
  size_t capacity = text.capacity();
  if (capacity < text.size() + simdjson::SIMDJSON_PADDING) {
    scratch.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    scratch.assign(text);
    base = scratch.data();
    capacity = scratch.capacity();
  }
  od::document doc;
  if (auto err = parser.iterate(base, text.size(), capacity).get(doc)) {
    return std::string("object is not JSON: ") + simdjson::error_message(err);
  }
  od::object root;
  if (doc.get_object().get(root)) {
    return "object is not a JSON object";
  }
  size_t first = 0;
  while (first < text.size() && IsSpace(text[first])) ++first;
  out->top_open = first;
  out->top_empty = EmptyAfter(text, first);
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return "object has a bad key";
    if (key != "metadata" || out->meta_open != ObjectLayout::npos) continue;
    od::value meta_value = field.value();
    std::string_view token = meta_value.raw_json_token();
    if (token.empty() || token[0] != '{') {
      return "metadata is not an object";
    }
    out->meta_open = token.data() - base;
    out->meta_empty = EmptyAfter(text, out->meta_open);
    od::object meta;
    if (meta_value.get_object().get(meta)) return "metadata is not an object";
    for (auto mf : meta) {
      std::string_view mkey;
      if (mf.unescaped_key().get(mkey)) return "metadata has a bad key";
      if (mkey == "resourceVersion") {
        od::value v = mf.value();
        std::string_view t = v.raw_json_token();
        if (t.empty() || t[0] != '"') {
          return "metadata.resourceVersion is not a string";
        }
        t = TrimRight(t);
        out->rv_begin = t.data() - base;
        out->rv_end = out->rv_begin + t.size();
      } else if (mkey == "annotations") {
        od::value v = mf.value();
        std::string_view t = TrimRight(v.raw_json_token());
        if (t == "null") {  // as Go reads it: no annotations
          out->ann_null = t.data() - base;
          continue;
        }
        if (t.empty() || t[0] != '{') {
          return "metadata.annotations is not an object";
        }
        out->ann_open = t.data() - base;
        out->ann_empty = EmptyAfter(text, out->ann_open);
        // An object that already carries the member-RV annotation (one
        // copied out of a walwatch stream into a member cluster): its value
        // is replaced, not given a second key that Go would read last.
        od::object annotations;
        if (v.get_object().get(annotations)) {
          return "metadata.annotations is not an object";
        }
        for (auto af : annotations) {
          od::raw_json_string key;
          if (af.key().get(key)) return "metadata.annotations has a bad key";
          if (!key.unsafe_is_equal(kMemberResourceVersionAnnotation)) continue;
          std::string_view value = TrimRight(af.value().raw_json_token());
          if (value.empty() || value[0] != '"') continue;  // not ours to fix
          out->ann_member_begin = value.data() - base;
          out->ann_member_end = out->ann_member_begin + value.size();
        }
      } else if (mkey == "labels") {
        od::value v = mf.value();
        if (TrimRight(v.raw_json_token()) == "null") continue;  // no labels
        od::object labels;
        if (v.get_object().get(labels)) {
          return "metadata.labels is not an object";
        }
        for (auto lf : labels) {
          std::string_view lk, lv;
          if (lf.unescaped_key().get(lk)) return "bad label key";
          std::string key_copy(lk);  // lk dies with the next string read
          if (lf.value().get_string().get(lv)) {
            return "label \"" + key_copy + "\" is not a string";
          }
          out->labels.emplace_back(std::move(key_copy), std::string(lv));
        }
      }
    }
    // The remaining fields are skipped (their structure was indexed already),
    // so the end of the document can be checked below.
  }
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return "object has bytes after its end";
  }
  // The parts after metadata are skipped, not validated: PostgreSQL checked
  // them when the json/jsonb value was stored.
  return "";
}

EventBuilder::Impl::Wire EventBuilder::Impl::PlanWire(EventType type,
                                                       const RowView& row,
                                                       const ObjectLayout& l,
                                                       uint64_t rv) {
  Wire w;
  w.object = &Col(row, MappedField::kObject).text;
  w.type = EventTypeName(type);
  const std::string& obj = *w.object;
  std::string rv_token = "\"" + std::to_string(rv) + "\"";

  std::vector<Edit>& edits = w.edits;
  if (l.meta_open == ObjectLayout::npos) {
    edits.push_back({l.top_open + 1, 0,
                     "\"metadata\":{\"resourceVersion\":" + rv_token + "}" +
                         (l.top_empty ? "" : ",")});
  } else if (l.rv_begin == ObjectLayout::npos) {
    edits.push_back({l.meta_open + 1, 0,
                     "\"resourceVersion\":" + rv_token +
                         (l.meta_empty ? "" : ",")});
  } else {
    std::string member(obj, l.rv_begin, l.rv_end - l.rv_begin);
    std::string annotation = std::string("\"") +
                             kMemberResourceVersionAnnotation + "\":" + member;
    edits.push_back({l.rv_begin, l.rv_end - l.rv_begin, rv_token});
    if (l.ann_member_begin != ObjectLayout::npos) {
      edits.push_back({l.ann_member_begin,
                       l.ann_member_end - l.ann_member_begin, member});
    } else if (l.ann_open != ObjectLayout::npos) {
      edits.push_back(
          {l.ann_open + 1, 0, annotation + (l.ann_empty ? "" : ",")});
    } else if (l.ann_null != ObjectLayout::npos) {
      edits.push_back({l.ann_null, 4, "{" + annotation + "}"});
    } else {
      // metadata holds resourceVersion, so it is not empty.
      edits.push_back({l.meta_open + 1, 0,
                       "\"annotations\":{" + annotation + "},"});
    }
  }
  std::sort(edits.begin(), edits.end(),
            [](const Edit& a, const Edit& b) { return a.at < b.at; });

  w.size = std::strlen(kWirePrefix) + std::strlen(w.type) +
           std::strlen(kWireMiddle) + obj.size() + std::strlen(kWireSuffix);
  for (const auto& e : edits) w.size = w.size + e.insert.size() - e.erase;
  return w;
}

void EventBuilder::Impl::WriteWire(const Wire& w, char* out) {
  char* const begin = out;
  auto put = [&out](std::string_view s) {
    std::memcpy(out, s.data(), s.size());
    out += s.size();
  };
  const std::string_view obj = *w.object;
  put(kWirePrefix);
  put(w.type);
  put(kWireMiddle);
  size_t pos = 0;
  for (const auto& e : w.edits) {
    put(obj.substr(pos, e.at - pos));
    put(e.insert);
    pos = e.at + e.erase;
  }
  put(obj.substr(pos));
  put(kWireSuffix);
  assert(static_cast<size_t>(out - begin) == w.size);
  // A json (not jsonb) column keeps the writer's whitespace, which may hold
  // line breaks; outside strings (where JSON forbids raw control characters)
  // they are only whitespace, and a watch event must be one line.
  // One memchr per character: find_first_of("\r\n") runs a memchr over the
  // two-character set per byte of the event, which cost more than decoding.
  char* const end = out - 1;  // the final '\n' stays
  for (char c : {'\n', '\r'}) {
    for (char* at = begin;
         (at = static_cast<char*>(std::memchr(at, c, end - at))) != nullptr;
         ++at) {
      *at = ' ';
    }
  }
}

namespace {

// One object, as the fold sees it: its identity keys, uid included. Two
// rows with equal keys are two states of one object.
uint64_t IdentityHash(const RowView& row) {
  uint64_t h = 1469598103934665603ull;
  for (MappedField f : kIdentityKeys) {
    const ColumnValue& c = Col(row, f);
    h = (h ^ std::hash<std::string_view>()(c.text)) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(c.state)) * 1099511628211ull;
  }
  return h;
}

bool SameIdentity(const RowView& a, const RowView& b) {
  for (MappedField f : kIdentityKeys) {
    if (Col(a, f) != Col(b, f)) return false;
  }
  return true;
}

}  // namespace

void EventBuilder::Build(const Transaction& txn, Result* out) {
  BuildEvents(txn, std::nullopt, out);
}

void EventBuilder::BuildAt(const Transaction& rows, uint64_t rv,
                           Result* out) {
  BuildEvents(rows, rv, out);
}

void EventBuilder::BuildEvents(const Transaction& txn,
                               std::optional<uint64_t> fixed_rv,
                               Result* out) {
  std::vector<Pending> pending;
  pending.reserve(txn.changes.size());
  auto where = [&](const RowChange& c) {
    // A row of an initial state has no transaction or WAL position: name
    // the row itself, as the table's key columns say.
    if (fixed_rv && c.lsn == 0) {
      std::string key;
      for (MappedField f : {MappedField::kGroup, MappedField::kVersion,
                            MappedField::kResource, MappedField::kCluster,
                            MappedField::kNamespace, MappedField::kName}) {
        const ColumnValue& v = c.columns.fields[static_cast<size_t>(f)];
        key += key.empty() ? "" : " ";
        key += kMappedFieldNames[static_cast<size_t>(f)];
        key += '=';
        key += v.state == ColumnValue::State::kValue
                   ? v.text.substr(0, 100)
                   : std::string("NULL");
      }
      return " (row " + key + ")";
    }
    return " (transaction " + std::to_string(txn.xid) + ", change at " +
           (impl_->format_position ? impl_->format_position(c.lsn)
                                   : std::to_string(c.lsn)) +
           ")";
  };
  // Checks that `row` holds an object and reads its layout; false (and an
  // error) if it cannot become an event.
  auto analyze = [&](const RowView& row, const RowChange& c,
                     ObjectLayout* layout) {
    const ColumnValue& object = Col(row, MappedField::kObject);
    if (object.state != ColumnValue::State::kValue) {
      const char* why =
          object.state == ColumnValue::State::kNull
              ? "the object column is NULL"
          : c.action == RowAction::kInsert
              ? "the object column is missing from the row (was it dropped "
                "or renamed?)"
              : "the object column is missing from the row: the table needs "
                "REPLICA IDENTITY FULL";
      out->errors.push_back(why + where(c));
      return false;
    }
    std::string err = impl_->Analyze(object.text, layout);
    if (!err.empty()) {
      out->errors.push_back(OneLine(err + where(c)));
      return false;
    }
    return true;
  };

  // One event per object per transaction (DESIGN.md "resourceVersion"): a
  // reader sees the transaction whole or not at all, so the states in
  // between were never visible, and each object's changes fold into their
  // net change, at the position of its first one. Keyed by identity, uid
  // included: a new uid is another object. Snapshot rows (fixed_rv) are
  // distinct objects already.
  const bool fold = !fixed_rv && txn.changes.size() > 1;
  std::unordered_multimap<uint64_t, size_t> index;  // IdentityHash -> pending
  auto find = [&](const RowView& row) -> Pending* {
    if (!fold) return nullptr;
    auto [it, end] = index.equal_range(IdentityHash(row));
    for (; it != end; ++it) {
      Pending& p = pending[it->second];
      if (!p.folded_away && SameIdentity(p.row, row)) return &p;
    }
    return nullptr;
  };
  auto push = [&](EventType type, const RowView& row, const RowView* old,
                  const RowChange& c) {
    Pending p;
    p.type = type;
    p.row = row;
    if (!analyze(row, c, &p.layout)) return;
    if (old != nullptr) {
      p.has_old = true;
      p.old_row = *old;
    }
    if (fold) index.emplace(IdentityHash(row), pending.size());
    pending.push_back(std::move(p));
  };
  // `old`: the row before this change, for a MODIFIED.
  auto offer = [&](EventType type, const RowView& row, const RowView* old,
                   const RowChange& c) {
    Pending* p = find(row);
    if (p == nullptr) return push(type, row, old, c);
    ObjectLayout layout;
    switch (p->type) {
      case EventType::kAdded:
        if (type == EventType::kDeleted) {  // ADDED, DELETED: nothing
          p->folded_away = true;
          return;
        }
        if (type != EventType::kModified) break;
        // ADDED, MODIFIED: ADDED of the last state.
        if (!analyze(row, c, &layout)) return;
        p->row = row;
        p->layout = std::move(layout);
        return;
      case EventType::kModified:
        if (type == EventType::kModified) {
          // MODIFIED twice: the last state, from the state before.
          if (!analyze(row, c, &layout)) return;
          p->row = row;
          p->layout = std::move(layout);
          return;
        }
        if (type != EventType::kDeleted) break;
        // MODIFIED, DELETED: DELETED of the state before the transaction,
        // the last one any watcher saw, so that each watch it selected, and
        // only those, drops it.
        if (!analyze(p->old_row, c, &layout)) return;
        p->type = EventType::kDeleted;
        p->row = p->old_row;
        p->layout = std::move(layout);
        p->has_old = false;
        return;
      case EventType::kDeleted:
        if (type != EventType::kAdded) break;
        // DELETED, ADDED of the same uid: MODIFIED from the state before.
        if (!analyze(row, c, &layout)) return;
        p->old_row = p->row;
        p->has_old = true;
        p->type = EventType::kModified;
        p->row = row;
        p->layout = std::move(layout);
        return;
      default:
        break;
    }
    // A sequence one unique key rules out (ADDED twice, say): nothing to
    // fold, the change stands as it came.
    push(type, row, old, c);
  };

  for (const RowChange& c : txn.changes) {
    switch (c.action) {
      case RowAction::kInsert:
        offer(EventType::kAdded, ViewOf(c.columns), nullptr, c);
        break;
      case RowAction::kDelete:
        offer(EventType::kDeleted, ViewOf(c.identity), nullptr, c);
        break;
      case RowAction::kUpdate: {
        RowView now = MergedNewRow(c);
        if (!c.identity.present ||
            c.identity[MappedField::kObject].state ==
                ColumnValue::State::kAbsent) {
          // Without the old row (the table lost REPLICA IDENTITY FULL while
          // walwatch ran) nothing can be compared: a new uid would pass for
          // a MODIFIED, and a label change could not take the object out of
          // a selector's watch. An error, so a barrier.
          out->errors.push_back(
              "the old row is missing from an UPDATE: the table needs "
              "REPLICA IDENTITY FULL" +
              where(c));
          break;
        }
        RowView old = ViewOf(c.identity);
        bool key_changed = false;
        for (MappedField f : kIdentityKeys) {
          key_changed |= Col(old, f) != Col(now, f);
        }
        if (key_changed) {
          offer(EventType::kDeleted, old, nullptr, c);
          offer(EventType::kAdded, now, nullptr, c);
        } else if (Col(old, MappedField::kObject) ==
                       Col(now, MappedField::kObject) &&
                   Col(old, MappedField::kKind) == Col(now, MappedField::kKind)) {
          ++out->unchanged_updates;
        } else {
          offer(EventType::kModified, now, &old, c);
        }
        break;
      }
      default:
        break;
    }
  }

  size_t last = pending.size();
  for (size_t i = 0; i < pending.size(); ++i) {
    if (!pending[i].folded_away) last = i;
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    if (p.folded_away) continue;
    // The last event carries the commit LSN, the others the position just
    // before it: commit records start 8-byte aligned, so c(T) - 1 lies
    // above every earlier transaction's RV and every position between
    // transactions that walwatch reports (PROTOCOL.md "resourceVersion").
    const uint64_t rv = fixed_rv ? *fixed_rv
                        : i == last || txn.commit_lsn == 0 ? txn.commit_lsn
                                                          : txn.commit_lsn - 1;
    // The label selection of a watch may change with the labels: keep the
    // state before the transaction for the watches the object leaves.
    if (p.type == EventType::kModified && p.has_old &&
        Col(p.old_row, MappedField::kObject).state ==
            ColumnValue::State::kValue &&
        impl_->Analyze(Col(p.old_row, MappedField::kObject).text,
                       &p.old_layout)
            .empty() &&
        !SameLabels(p.old_layout.labels, p.layout.labels)) {
      p.labels_changed = true;
    }
    FilterFields::Values values;
    values.group = Col(p.row, MappedField::kGroup).text;
    values.version = Col(p.row, MappedField::kVersion).text;
    values.resource = Col(p.row, MappedField::kResource).text;
    values.kind = Col(p.row, MappedField::kKind).text;
    values.cluster = Col(p.row, MappedField::kCluster).text;
    values.ns = Col(p.row, MappedField::kNamespace).text;
    values.labels = &p.layout.labels;
    FilterFieldsPtr fields = impl_->interner.Intern(values);
    Impl::Wire wire = Impl::PlanWire(p.type, p.row, p.layout, rv);
    Impl::Wire prev_wire;
    FilterFieldsPtr prev_fields;
    if (p.labels_changed) {
      prev_wire =
          Impl::PlanWire(EventType::kDeleted, p.old_row, p.old_layout, rv);
      values.labels = &p.old_layout.labels;
      prev_fields = impl_->interner.Intern(values);
    }
    MutableEventPtr e = Event::Allocate(
        std::move(fields), std::move(prev_fields),
        Col(p.row, MappedField::kName).text, wire.size, prev_wire.size,
        impl_->arena);
    Impl::WriteWire(wire, e->mutable_wire());
    if (p.labels_changed) Impl::WriteWire(prev_wire, e->mutable_prev_wire());
    e->last_in_txn = i == last;
    e->rv = rv;
    e->commit_lsn = txn.commit_lsn;
    e->xid = txn.full_xid;
    e->type = p.type;
    e->commit_time_us = txn.commit_time_us;
    out->events.push_back(std::move(e));
  }
}

}  // namespace walwatch
