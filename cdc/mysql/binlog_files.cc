#include "cdc/mysql/binlog_files.h"

#include "cdc/base/text.h"

namespace walwatch::mysql {

std::string ListBinlogFiles(MysqlConnection* conn,
                            std::vector<BinlogFile>* out) {
  out->clear();
  MysqlRows rows;
  std::string err = conn->Query("SHOW BINARY LOGS", &rows);
  if (!err.empty()) return err;
  for (const auto& row : rows.rows) {
    if (row.size() < 2 || !row[0] || !row[1]) continue;
    uint64_t size = 0;
    if (!ParseUnsigned(*row[1], &size)) {
      return "SHOW BINARY LOGS gave a size that is not a number: " + *row[1];
    }
    out->push_back({*row[0], size});
  }
  return "";
}

uint64_t BinlogBytesBetween(const std::vector<BinlogFile>& files,
                            const BinlogPosition& from,
                            const BinlogPosition& to) {
  const std::optional<uint64_t> a = BinlogFileNumber(from.file);
  const std::optional<uint64_t> b = BinlogFileNumber(to.file);
  if (!a || !b || *b < *a) return 0;
  if (*a == *b) return to.pos > from.pos ? to.pos - from.pos : 0;
  // The rest of from's file, then every whole file up to to's.
  uint64_t bytes = 0;
  uint64_t number = *a;
  for (const BinlogFile& f : files) {
    const std::optional<uint64_t> n = BinlogFileNumber(f.name);
    if (!n || *n < *a || *n >= *b) continue;
    if (*n != number) return 0;  // a file between them is missing
    bytes += *n == *a ? (f.size > from.pos ? f.size - from.pos : 0) : f.size;
    ++number;
  }
  if (number != *b) return 0;
  return bytes + to.pos;
}

std::string ChooseReplayStartFile(
    const std::vector<BinlogFile>& files, int64_t since, uint64_t max_bytes,
    const std::function<bool(const std::string& file, int64_t* started)>&
        started) {
  size_t chosen = files.size() - 1;
  uint64_t bytes = files.back().size;
  for (size_t i = files.size(); i-- > 0;) {
    if (i + 1 < files.size()) {
      bytes += files[i].size;
      if (bytes > max_bytes) break;
    }
    int64_t began = 0;
    if (!started(files[i].name, &began)) break;
    chosen = i;
    if (began <= since) break;
  }
  return files[chosen].name;
}

bool GtidState::Parse(std::string_view text, GtidState* out) {
  GtidState state;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\n')) {
      item.remove_suffix(1);
    }
    Gtid g;
    g.flavor = Gtid::Flavor::kMariaDb;
    uint64_t domain = 0, server = 0;
    if (!ConsumeUnsigned(&item, &domain) || item.empty() ||
        item.front() != '-') {
      return false;
    }
    item.remove_prefix(1);
    if (!ConsumeUnsigned(&item, &server) || item.empty() ||
        item.front() != '-') {
      return false;
    }
    item.remove_prefix(1);
    if (!ParseUnsigned(item, &g.sequence) || domain > UINT32_MAX ||
        server > UINT32_MAX) {
      return false;
    }
    g.domain_id = static_cast<uint32_t>(domain);
    g.server_id = static_cast<uint32_t>(server);
    if (!state.last_.emplace(g.domain_id, g).second) return false;
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
    if (text.empty()) return false;
  }
  *out = std::move(state);
  return true;
}

void GtidState::Advance(const Gtid& gtid) {
  if (gtid.flavor != Gtid::Flavor::kMariaDb) return;
  last_[gtid.domain_id] = gtid;
}

std::string GtidState::ToString() const {
  std::string out;
  for (const auto& [domain, gtid] : last_) {
    if (!out.empty()) out += ',';
    out += gtid.ToString();
  }
  return out;
}

std::string ReadGtidState(MysqlConnection* conn, const BinlogPosition& at,
                          std::optional<GtidState>* out) {
  out->reset();
  std::optional<std::string> text;
  std::string err =
      conn->QueryValue("SELECT BINLOG_GTID_POS(" + conn->Quote(at.file) + ", " +
                           std::to_string(at.pos) + ")",
                       &text);
  if (!err.empty()) return "cannot read BINLOG_GTID_POS: " + err;
  if (!text) return "";
  GtidState state;
  if (!GtidState::Parse(*text, &state)) {
    return "cannot parse BINLOG_GTID_POS's answer \"" +
           OneLine(text->substr(0, 128)) + "\"";
  }
  *out = std::move(state);
  return "";
}

}  // namespace walwatch::mysql
