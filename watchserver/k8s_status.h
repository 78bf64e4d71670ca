// Kubernetes metav1.Status bodies and the watch ERROR event, serialized the
// way the apiserver serializes them (Go's encoding/json field order, "details"
// omitted when absent). Every error walwatch answers over HTTP is one of
// these, so client-go's error helpers (IsResourceExpired,
// IsTooLargeResourceVersion, IsNotFound...) classify them as they would the
// apiserver's.
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
struct StatusCause {
  std::string reason;
  std::string message;
};

// metav1.StatusDetails, only the fields walwatch uses.
struct StatusDetails {
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

// 404 NotFound "the server could not find the requested resource", details {}.
K8sStatus NotFoundStatus();

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_K8S_STATUS_H_
