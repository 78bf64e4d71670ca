// The JSON walwatch writes itself rather than taking from the event log:
// metav1.Status bodies and the watch ERROR event, serialized the way the
// apiserver serializes them (Go's encoding/json field order, "details"
// omitted when absent); BOOKMARK events; and the ResourceVersion answer of
// the handoff endpoints. Every error walwatch answers over HTTP is a Status,
// so apimachinery's error helpers (IsResourceExpired, IsNotFound, and
// HasStatusCause with ResourceVersionTooLarge, which is what
// k8s.io/apiserver's storage.IsTooLargeResourceVersion checks...) classify
// them as they would the apiserver's.
//
// Thread safety: pure functions; callable from any thread.
#ifndef WALWATCH_WATCHSERVER_K8S_STATUS_H_
#define WALWATCH_WATCHSERVER_K8S_STATUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace walwatch {

// metav1.StatusCause: `reason` is the cause type (JSON key "reason").
// Empty strings are omitted, as Go's omitempty does.
struct StatusCause {
  std::string reason;
  std::string message;
  std::string field;  // the request field at fault, e.g. "resourceVersionMatch"
};

// metav1.StatusDetails, only the fields walwatch uses. Empty strings are
// omitted.
struct StatusDetails {
  std::string name;
  std::string group;
  std::string kind;
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;  // omitted when 0
};

// metav1.Status with status "Failure".
struct K8sStatus {
  int code = 500;      // HTTP status code, repeated in the body
  std::string reason;  // metav1.StatusReason, for example "NotFound"
  std::string message;
  // Absent: no "details" key. Present but empty: "details":{} (as the
  // apiserver's 404 does).
  std::optional<StatusDetails> details;
};

// The Status object as one line of JSON, without a trailing newline. Text
// that is not valid UTF-8 is replaced with U+FFFD, so the result is always
// valid JSON whatever a client sent.
std::string StatusJson(const K8sStatus& status);

// {"type":"ERROR","object":<StatusJson>}\n — one watch event line.
std::string WatchErrorEventLine(const K8sStatus& status);

// 410 Expired: "too old resource version: <rv> (<floor_rv>)".
K8sStatus ExpiredStatus(uint64_t rv, uint64_t floor_rv);

// 504 Timeout for a watch from an RV walwatch has not reached, exactly as
// the apiserver's storage.NewTooLargeResourceVersionError: message
// "Timeout: Too large resource version: <rv>, current: <current_rv>", cause
// ResourceVersionTooLarge, retryAfterSeconds 1.
K8sStatus TooLargeResourceVersionStatus(uint64_t rv, uint64_t current_rv);

// 410 Expired for a watcher whose unsent events passed the bound: "the
// watcher fell too far behind: <unsent> bytes of events unsent (limit
// <limit>); relist".
K8sStatus BacklogStatus(uint64_t unsent_bytes, uint64_t limit_bytes);

// One field error of an invalid request, as apimachinery's field.Error:
// `type` is its CauseType ("FieldValueForbidden", "FieldValueNotSupported"),
// `body` what ErrorBody() gives ("Forbidden: <detail>").
struct FieldError {
  std::string type;
  std::string field;
  std::string body;
};

// 422 Invalid for a request whose options break the apiserver's rules, as
// errors.NewInvalid(GroupKind{"meta.k8s.io", "ListOptions"}, "", errs)
// builds it: message `ListOptions.meta.k8s.io "" is invalid: <field>:
// <body>` (several errors: "[a, b]"), one cause per error. `errors` must
// not be empty.
K8sStatus InvalidListOptionsStatus(const std::vector<FieldError>& errors);

// 503 ServiceUnavailable with `message`.
K8sStatus ServiceUnavailableStatus(std::string message);

// 429 TooManyRequests with retryAfterSeconds 1 (sent with Retry-After: 1,
// the code and header kube-apiserver's in-flight limit answers, which
// client-go retries): "too many connections to walwatch (--max-connections
// <limit>); try again later".
K8sStatus TooManyConnectionsStatus(size_t limit);

// 429 TooManyRequests with retryAfterSeconds 1 (and the Retry-After header),
// for a request the connection buffer budget has no room for: "walwatch's
// connection buffers are full (--max-connection-buffer-bytes <limit>); try
// again later".
K8sStatus BufferBudgetExhaustedStatus(size_t limit);

// A failure of the state source (initial state, handoff, fresh RV) as the
// Status to answer: its code, reason and message; an empty reason is filled
// in from the code. A 504 carries what the apiserver's too-large-RV error
// carries (cause ResourceVersionTooLarge, retryAfterSeconds 1), so clients
// retry it as they retry a watch from an RV the server has not reached.
K8sStatus StateErrorStatus(int code, const std::string& reason,
                           const std::string& message);

// 504 Timeout with retryAfterSeconds 1 and no cause: walwatch gave up
// waiting for an answer of its own (a busy state reader).
K8sStatus RetryLaterStatus(std::string message);

// {"type":"BOOKMARK","object":{"kind":<kind>,"apiVersion":<api_version>,
// "metadata":{"resourceVersion":"<rv>"}}}\n. With `initial_events_end`, the
// metadata also carries annotations {"k8s.io/initial-events-end":"true"}
// (the end of a WatchList's initial events).
std::string BookmarkEventLine(const std::string& kind,
                              const std::string& api_version, uint64_t rv,
                              bool initial_events_end);

// "<group>/<version>", or just the version for the core group ("v1").
std::string ApiVersion(const std::string& group, const std::string& version);

// The answer of /walwatch/v1/handoff and /walwatch/v1/freshrv:
// {"kind":"ResourceVersion","apiVersion":"walwatch.clusterpedia.io/v1",
// "resourceVersion":"<rv>"}, with "latestResourceVersion":"<latest>" when
// latest > rv (a handoff's: StateSource::AnsweredRv).
std::string ResourceVersionJson(uint64_t rv, uint64_t latest = 0);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_K8S_STATUS_H_
