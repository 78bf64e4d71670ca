#include "watchserver/watch_request.h"

#include <limits>
#include <simdjson.h>
#include <vector>

#include "cdc/base/text.h"
#include "cdc/model/state_source.h"

namespace walwatch {

namespace {

// Quotes `value` for an error message, the way Go's %q would show it.
std::string Quoted(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

RequestError BadRequest(std::string message) {
  return RequestError{400, "BadRequest", std::move(message), std::nullopt};
}

RequestError NotFound() {
  return RequestError{404, "NotFound",
                      "the server could not find the requested resource",
                      std::nullopt};
}

// Decodes and checks one path segment. Returns an error message, or "" when
// the segment is acceptable.
std::string DecodePathSegment(std::string_view raw, std::string* out) {
  if (!PercentDecode(raw, /*plus_is_space=*/false, out)) {
    return "invalid escape in path segment " + Quoted(raw);
  }
  if (out->empty()) return "empty path segment";
  if (*out == "." || *out == "..") {
    return "path segment " + Quoted(*out) + " is not allowed";
  }
  if (out->size() > kMaxPathSegmentBytes) {
    return "path segment longer than " + std::to_string(kMaxPathSegmentBytes) +
           " bytes";
  }
  for (char c : *out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '/') return "path segment " + Quoted(*out) + " contains '/'";
    if (u < 0x20 || u == 0x7f) {
      return "path segment " + Quoted(*out) + " contains a control character";
    }
  }
  // A cluster or namespace segment goes to PostgreSQL as a text parameter,
  // which refuses bytes that are not UTF-8: that would be a 500 for ever,
  // not the client's 400.
  if (!simdjson::validate_utf8(out->data(), out->size())) {
    return "path segment " + Quoted(*out) + " is not valid UTF-8";
  }
  return "";
}

// Matches the decoded segments against the watch path shapes; false if the
// path is not one of them.
bool MatchWatchPath(const std::vector<std::string>& s, WatchRequest* w) {
  size_t i = 0;
  if (s.size() >= 2 && s[0] == "clusters") {
    w->cluster = s[1];
    i = 2;
  }
  if (i + 2 <= s.size() && s[i] == "api" && s[i + 1] == "v1") {
    w->group.clear();
    w->version = "v1";
    i += 2;
  } else if (i + 3 <= s.size() && s[i] == "apis") {
    w->group = s[i + 1];
    w->version = s[i + 2];
    i += 3;
  } else {
    return false;
  }
  size_t rest = s.size() - i;
  if (rest == 1) {
    w->resource = s[i];
    return true;
  }
  if (rest == 3 && s[i] == "namespaces") {
    w->ns = s[i + 1];
    w->resource = s[i + 2];
    return true;
  }
  return false;
}

// A boolean query parameter that is present, read as apimachinery reads
// it (Convert_Slice_string_To_bool): "0" and "false" (any case) are false,
// anything else, the empty value of "?watch" included, is true.
bool QueryBool(std::string_view text) {
  auto equals_folded = [](std::string_view a, std::string_view lower) {
    if (a.size() != lower.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != lower[i]) return false;
    }
    return true;
  };
  return !(text == "0" || equals_folded(text, "false"));
}

// Decimal digits only: no sign, no spaces, no overflow.
bool ParseDecimalU64(std::string_view text, uint64_t max, uint64_t* value) {
  if (text.empty()) return false;
  uint64_t result = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (result > (max - digit) / 10) return false;
    result = result * 10 + digit;
  }
  *value = result;
  return true;
}

struct QueryParam {
  std::string key, value;
};

// Splits and decodes the query string. Returns an error message or "".
std::string ParseQuery(std::string_view query, std::vector<QueryParam>* out) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view()
                                          : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string_view raw_key = pair.substr(0, eq);
    std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    QueryParam param;
    if (!PercentDecode(raw_key, true, &param.key) ||
        !PercentDecode(raw_value, true, &param.value)) {
      return "invalid escape in query parameter " + Quoted(pair);
    }
    out->push_back(std::move(param));
  }
  return "";
}

// Applies the query to `w`; returns an error, or nullopt. Also returns
// whether watch=1/true was given.
std::optional<RequestError> ApplyQuery(const std::vector<QueryParam>& params,
                                       WatchRequest* w, bool* watch) {
  *watch = false;
  auto first = [&params](std::string_view key) -> const std::string* {
    for (const QueryParam& p : params) {
      if (p.key == key) return &p.value;
    }
    return nullptr;
  };
  auto invalid = [](std::string_view name, const std::string& value,
                    std::string_view want) {
    return BadRequest("invalid value " + Quoted(value) + " for " +
                      std::string(name) + ": " + std::string(want));
  };

  if (const std::string* v = first("watch")) *watch = QueryBool(*v);
  if (const std::string* v = first("resourceVersion"); v && !v->empty()) {
    // Canonical form only (no leading zeros), so that one RV has one
    // spelling (watchserver/PROTOCOL.md).
    uint64_t rv = 0;
    bool leading_zero = v->size() > 1 && (*v)[0] == '0';
    if (leading_zero ||
        !ParseDecimalU64(*v, std::numeric_limits<uint64_t>::max(), &rv)) {
      return invalid("resourceVersion", *v,
                     "want an unsigned decimal integer without leading "
                     "zeros (a resourceVersion walwatch returned)");
    }
    w->resource_version = rv;
  }
  if (const std::string* v = first("timeoutSeconds"); v && !v->empty()) {
    uint64_t seconds = 0;
    if (!ParseDecimalU64(*v, std::numeric_limits<int64_t>::max(), &seconds)) {
      return invalid("timeoutSeconds", *v, "want a non-negative integer");
    }
    w->timeout_seconds = static_cast<int64_t>(seconds);
  }
  if (const std::string* v = first("allowWatchBookmarks")) {
    w->allow_watch_bookmarks = QueryBool(*v);
  }
  if (const std::string* v = first("sendInitialEvents")) {
    w->send_initial_events = QueryBool(*v);
  }
  if (const std::string* v = first("resourceVersionMatch")) {
    w->resource_version_match = *v;
  }
  if (const std::string* v = first("labelSelector")) w->label_selector = *v;
  if (const std::string* v = first("fieldSelector")) w->field_selector = *v;

  // The apiserver's rules for watch options (apimachinery's
  // validateWatchOptions, with the WatchList feature on), in its order and
  // with its messages, so that client-go sees the same 422 Invalid.
  const std::string& match = w->resource_version_match;
  std::vector<FieldError> errors;
  auto forbidden = [&errors](std::string detail) {
    errors.push_back({"FieldValueForbidden", "resourceVersionMatch",
                      "Forbidden: " + std::move(detail)});
  };
  if (w->send_initial_events && match != "NotOlderThan") {
    forbidden("sendInitialEvents requires setting resourceVersionMatch to "
              "NotOlderThan");
  }
  if (!match.empty()) {
    if (!w->send_initial_events) {
      forbidden("resourceVersionMatch is forbidden for watch unless "
                "sendInitialEvents is provided");
    }
    if (match != "NotOlderThan") {
      errors.push_back({"FieldValueNotSupported", "resourceVersionMatch",
                        "Unsupported value: " + Quoted(match) +
                            ": supported values: \"NotOlderThan\""});
    }
    if (const std::string* v = first("continue"); v && !v->empty()) {
      forbidden("resourceVersionMatch is forbidden when continue is provided");
    }
  }
  if (!errors.empty()) return InvalidListOptionsStatus(errors);
  return std::nullopt;
}

// A binlog file name as MySQL and MariaDB write them: a base name, a dot
// and the file's number ("mariadb-bin.000003"), at most 512 bytes (FN_REFLEN).
bool IsBinlogFileName(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (name.size() > 512 || dot == std::string_view::npos || dot == 0 ||
      dot + 1 == name.size() || name.size() - dot - 1 > 9) {
    return false;
  }
  for (char c : name.substr(dot + 1)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The handoff's query, in one of two forms (HandoffPosition): snapshot
// (required) and insertLSN (optional) from PostgreSQL, or binlogFile and
// binlogPosition (both required) and serverId (optional) from MySQL/MariaDB.
std::optional<RequestError> ApplyHandoffQuery(
    const std::vector<QueryParam>& params, HandoffRequest* h) {
  const std::string* snapshot = nullptr;
  const std::string* insert_lsn = nullptr;
  const std::string* binlog_file = nullptr;
  const std::string* binlog_position = nullptr;
  const std::string* server_id = nullptr;
  for (const QueryParam& p : params) {
    if (p.key == "serverId" && !server_id) server_id = &p.value;
    if (p.key == "snapshot" && !snapshot) snapshot = &p.value;
    if (p.key == "insertLSN" && !insert_lsn) insert_lsn = &p.value;
    if (p.key == "binlogFile" && !binlog_file) binlog_file = &p.value;
    if (p.key == "binlogPosition" && !binlog_position) {
      binlog_position = &p.value;
    }
  }
  const bool pg =
      (snapshot && !snapshot->empty()) || (insert_lsn && !insert_lsn->empty());
  const bool binlog = (binlog_file && !binlog_file->empty()) ||
                      (binlog_position && !binlog_position->empty());
  if (pg && binlog) {
    return BadRequest(
        "give either snapshot and insertLSN (PostgreSQL) or binlogFile and "
        "binlogPosition (MySQL/MariaDB), not both");
  }
  if (binlog) {
    if (!binlog_file || !IsBinlogFileName(*binlog_file)) {
      return BadRequest(
          "invalid value " +
          Quoted(binlog_file ? binlog_file->substr(0, 128) : std::string()) +
          " for binlogFile: want binlog_snapshot_file (SHOW STATUS LIKE "
          "'binlog_snapshot_%' in the list's START TRANSACTION WITH "
          "CONSISTENT SNAPSHOT), such as mariadb-bin.000003");
    }
    uint64_t position = 0;
    if (!binlog_position || !ParseUnsigned(*binlog_position, &position) ||
        position >= 10'000'000'000ULL) {
      return BadRequest(
          "invalid value " +
          Quoted(binlog_position ? binlog_position->substr(0, 32)
                                 : std::string()) +
          " for binlogPosition: want binlog_snapshot_position, a byte offset "
          "such as 12345");
    }
    if (server_id != nullptr) {
      uint64_t id = 0;
      if (!ParseUnsigned(*server_id, &id) || id > UINT32_MAX) {
        return BadRequest("invalid value " + Quoted(server_id->substr(0, 32)) +
                          " for serverId: want the list's SELECT @@server_id, "
                          "such as 1");
      }
      h->binlog_server_id = id;
    }
    h->binlog_file = *binlog_file;
    h->binlog_position = position;
    return std::nullopt;
  }
  if (!snapshot || snapshot->empty()) {
    return BadRequest(
        "snapshot is required: pg_current_snapshot() read in the list's "
        "REPEATABLE READ transaction (PostgreSQL); or binlogFile and "
        "binlogPosition, binlog_snapshot_file and _position of the list's "
        "consistent snapshot (MySQL/MariaDB)");
  }
  HandoffSnapshot parsed;
  if (!ParseHandoffSnapshot(*snapshot, &parsed)) {
    return BadRequest("invalid value " + Quoted(snapshot->substr(0, 128)) +
                      " for snapshot: want pg_current_snapshot()'s text, "
                      "xmin:xmax:xip,...");
  }
  h->snapshot = *snapshot;
  if (insert_lsn && !insert_lsn->empty()) {
    if (!ParsePgLsn(*insert_lsn, &h->insert_lsn)) {
      return BadRequest("invalid value " + Quoted(*insert_lsn) +
                        " for insertLSN: want pg_current_wal_insert_lsn()'s "
                        "text, such as 0/16B3748");
    }
  }
  return std::nullopt;
}

ParsedRequest Fail(RequestError error) {
  ParsedRequest parsed;
  parsed.error = std::move(error);
  return parsed;
}

}  // namespace

bool ParsePgLsn(std::string_view text, uint64_t* lsn) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return false;
  auto hex32 = [](std::string_view s, uint64_t* v) {
    if (s.empty() || s.size() > 8) return false;
    uint64_t x = 0;
    for (char c : s) {
      int d = HexDigitValue(c);
      if (d < 0) return false;
      x = x * 16 + static_cast<uint64_t>(d);
    }
    *v = x;
    return true;
  };
  uint64_t hi = 0, lo = 0;
  if (!hex32(text.substr(0, slash), &hi) || !hex32(text.substr(slash + 1), &lo)) {
    return false;
  }
  *lsn = (hi << 32) | lo;
  return true;
}

ParsedRequest ParseRequest(std::string_view method, std::string_view target) {
  size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  std::string_view query = question == std::string_view::npos
                               ? std::string_view()
                               : target.substr(question + 1);
  if (path.empty() || path[0] != '/') {
    return Fail(BadRequest("request target must be an absolute path"));
  }

  if (path == "/") return Fail(NotFound());

  std::vector<std::string> segments;
  std::string_view rest = path.substr(1);
  while (true) {
    size_t slash = rest.find('/');
    std::string segment;
    std::string problem = DecodePathSegment(rest.substr(0, slash), &segment);
    if (!problem.empty()) return Fail(BadRequest(problem));
    segments.push_back(std::move(segment));
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
  }

  ParsedRequest parsed;
  if (segments.size() == 1 && segments[0] == "healthz") {
    parsed.route = RouteKind::kHealthz;
  } else if (segments.size() == 1 && segments[0] == "readyz") {
    parsed.route = RouteKind::kReadyz;
  } else if (segments.size() == 1 && segments[0] == "livez") {
    parsed.route = RouteKind::kLivez;
  } else if (segments.size() == 3 && segments[0] == "walwatch" &&
             segments[1] == "v1" && segments[2] == "handoff") {
    parsed.route = RouteKind::kHandoff;
  } else if (segments.size() == 3 && segments[0] == "walwatch" &&
             segments[1] == "v1" && segments[2] == "freshrv") {
    parsed.route = RouteKind::kFreshRv;
  } else if (MatchWatchPath(segments, &parsed.watch)) {
    parsed.route = RouteKind::kWatch;
  } else {
    return Fail(NotFound());
  }

  if (method != "GET") {
    parsed.error = RequestError{405, "MethodNotAllowed",
                                "the server does not allow this method on "
                                "the requested resource", std::nullopt};
    return parsed;
  }
  if (parsed.route != RouteKind::kWatch && parsed.route != RouteKind::kHandoff) {
    return parsed;
  }

  std::vector<QueryParam> params;
  std::string problem = ParseQuery(query, &params);
  if (!problem.empty()) return Fail(BadRequest(problem));
  if (parsed.route == RouteKind::kHandoff) {
    if (std::optional<RequestError> error =
            ApplyHandoffQuery(params, &parsed.handoff)) {
      parsed.error = std::move(error);
    }
    return parsed;
  }
  bool watch = false;
  if (std::optional<RequestError> error =
          ApplyQuery(params, &parsed.watch, &watch)) {
    parsed.error = std::move(error);
    return parsed;
  }
  if (!watch) {
    parsed.error = BadRequest(
        "walwatch serves only watches (add watch=true); lists come from SQL");
  }
  return parsed;
}

}  // namespace walwatch
