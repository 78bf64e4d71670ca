// ParseRequest turns an HTTP method and request target into what walwatch
// should serve: a watch (with its resource, scope and query options), a
// health probe, or an error to answer with a Kubernetes Status.
//
// Watch paths (the apiserver's, with Clusterpedia's optional cluster prefix):
//   [/clusters/{cluster}]/api/v1/[namespaces/{ns}/]{resource}
//   [/clusters/{cluster}]/apis/{group}/{version}/[namespaces/{ns}/]{resource}
// Health paths: /healthz, /readyz, /livez.
// RV endpoints for an APIServer's own SQL lists (watchserver/PROTOCOL.md):
//   /walwatch/v1/handoff?snapshot=<pg_current_snapshot()>[&insertLSN=<pg_lsn>]
//   /walwatch/v1/handoff?binlogFile=<file>&binlogPosition=<offset>
//                       [&serverId=<id>]                           (MySQL)
//   /walwatch/v1/freshrv
//
// Path segments and query values are percent-decoded ('+' is a space in the
// query only). Unknown query parameters are ignored, as the apiserver does;
// a repeated parameter counts with its first value (Go's url.Values.Get).
//
// Thread safety: pure function; callable from any thread. No Asio here.
#ifndef WALWATCH_WATCHSERVER_WATCH_REQUEST_H_
#define WALWATCH_WATCHSERVER_WATCH_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cdc/model/state_source.h"
#include "watchserver/k8s_status.h"

namespace walwatch {

enum class RouteKind {
  kWatch,
  kHealthz,
  kReadyz,
  kLivez,
  kHandoff,  // the RV that continues a list read in a given snapshot
  kFreshRv,  // an RV at least as new as the database
};

// Longest path segment accepted (Kubernetes' DNS subdomain name limit).
constexpr size_t kMaxPathSegmentBytes = 253;

struct WatchRequest {
  // What to watch. group is "" for the core API (/api/v1).
  std::string group, version, resource;
  // Scope filters. Empty means "all": an empty segment is rejected, so an
  // empty value can only mean the path had no such part.
  std::string cluster;  // from /clusters/{cluster}
  std::string ns;       // from namespaces/{ns}

  // Query options, as sent. Selectors are kept as text: the session
  // compiles them (WatchFilter::Create) and answers 400 if they are invalid.
  // Unset when absent or empty. Decimal, no sign, no leading zeros.
  std::optional<uint64_t> resource_version;
  std::string resource_version_match;      // "" or "NotOlderThan"
  std::optional<int64_t> timeout_seconds;  // >= 0 when set
  bool allow_watch_bookmarks = false;
  std::optional<bool> send_initial_events;
  std::string label_selector;
  std::string field_selector;
};

// GET /walwatch/v1/handoff: where the list was read, in its database's form
// (HandoffPosition, cdc/model/state_source.h), checked to parse.
using HandoffRequest = HandoffPosition;

// An error to answer with: the Status, with its HTTP code.
using RequestError = K8sStatus;

struct ParsedRequest {
  RouteKind route = RouteKind::kWatch;
  WatchRequest watch;                 // meaningful when route == kWatch
  HandoffRequest handoff;             // meaningful when route == kHandoff
  std::optional<RequestError> error;  // set: answer it, serve nothing
};

// `method` is the HTTP method as sent ("GET"); `target` is the
// request-target in origin form ("/api/v1/pods?watch=1").
//
// Errors: 405 MethodNotAllowed for anything but GET; 404 NotFound for a path
// that is not a watch or health path; 400 BadRequest for a malformed path
// segment or escape, an invalid query value (the message names it), a
// GET on a watch path without watch=1/true (walwatch serves only watches;
// lists come from SQL), or a handoff without a valid snapshot or with an
// invalid insertLSN (or, in the binlog form, without a binlog file name and
// byte offset, or with both forms); 422 Invalid for a combination of
// sendInitialEvents, resourceVersionMatch and continue the apiserver's
// validateWatchOptions rejects, with its messages and causes.
ParsedRequest ParseRequest(std::string_view method, std::string_view target);

// Parses PostgreSQL's pg_lsn text form "X/Y" (two hexadecimal numbers of at
// most 8 digits each) into the 64-bit position (X << 32) | Y.
bool ParsePgLsn(std::string_view text, uint64_t* lsn);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_WATCH_REQUEST_H_
