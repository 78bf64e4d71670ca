#include "cdc/mysql/row_change_conversion.h"

namespace walwatch::mysql {

namespace {

// simdjson::SIMDJSON_PADDING: the object's text keeps that much spare
// capacity so the event builder can parse it in place (as the wal2json
// decoder leaves it). Not included here to keep simdjson out of this
// library; tests/unit/row_change_conversion_test.cc checks they agree.
constexpr size_t kJsonPadding = 64;

void ToImage(const std::vector<BinlogValue>& values, RowImage* image) {
  image->present = true;
  for (size_t i = 0; i < kMappedFieldCount && i < values.size(); ++i) {
    ColumnValue& c = image->fields[i];
    if (values[i].is_null) {
      c.state = ColumnValue::State::kNull;
      c.text.clear();
      continue;
    }
    c.state = ColumnValue::State::kValue;
    if (static_cast<MappedField>(i) == MappedField::kObject) {
      c.text.reserve(values[i].text.size() + kJsonPadding);
    }
    c.text.assign(values[i].text);
  }
}

}  // namespace

std::vector<size_t> OverflowKeyColumns() {
  return {static_cast<size_t>(MappedField::kGroup),
          static_cast<size_t>(MappedField::kVersion),
          static_cast<size_t>(MappedField::kResource),
          static_cast<size_t>(MappedField::kCluster)};
}

std::vector<std::string> MappedColumnNames(const TableMapping& mapping) {
  return std::vector<std::string>(mapping.columns.begin(),
                                  mapping.columns.end());
}

std::string ToTransaction(const BinlogTransaction& in, uint64_t history,
                          Transaction* out) {
  *out = Transaction();
  std::string why;
  std::optional<uint64_t> commit = BinlogVersion(history, in.commit, &why);
  if (!commit) return why;
  out->xid = static_cast<uint32_t>(in.xid);
  out->full_xid = in.xid;
  out->commit_lsn = *commit;
  out->end_lsn = *commit;
  out->commit_time_us = static_cast<int64_t>(in.commit_time) * 1000000;
  out->truncated = !in.table_statements.empty();
  out->overflowed = in.overflowed;
  out->touched_unknown =
      in.overflowed && (in.touched_unknown || in.touched.empty());
  for (const std::vector<std::string>& key : in.touched) {
    if (key.size() != 4) {
      out->touched_unknown = true;
      continue;
    }
    out->touched.insert({key[0], key[1], key[2], key[3]});
  }
  out->changes.reserve(in.changes.size());
  for (const BinlogRowChange& c : in.changes) {
    if (c.before.size() > kMappedFieldCount ||
        c.after.size() > kMappedFieldCount ||
        (c.kind != BinlogRowChange::Kind::kDelete &&
         c.after.size() != kMappedFieldCount) ||
        (c.kind != BinlogRowChange::Kind::kInsert &&
         c.before.size() != kMappedFieldCount)) {
      return "a change at " + c.position.ToString() +
             " was not read with the mapping's columns";
    }
    RowChange r;
    switch (c.kind) {
      case BinlogRowChange::Kind::kInsert:
        r.action = RowAction::kInsert;
        break;
      case BinlogRowChange::Kind::kUpdate:
        r.action = RowAction::kUpdate;
        break;
      case BinlogRowChange::Kind::kDelete:
        r.action = RowAction::kDelete;
        break;
    }
    r.lsn = BinlogVersion(history, c.position).value_or(0);
    if (c.kind != BinlogRowChange::Kind::kDelete) ToImage(c.after, &r.columns);
    if (c.kind != BinlogRowChange::Kind::kInsert)
      ToImage(c.before, &r.identity);
    out->bytes += ChangeMemoryBytes(r.columns, r.identity);
    out->changes.push_back(std::move(r));
  }
  return "";
}

}  // namespace walwatch::mysql
