#include "watchserver/k8s_status.h"

#include <nlohmann/json.hpp>

namespace walwatch {

namespace {

// ordered_json keeps insertion order, which is Go's struct field order.
using OrderedJson = nlohmann::ordered_json;

OrderedJson StatusObject(const K8sStatus& status) {
  OrderedJson object;
  object["kind"] = "Status";
  object["apiVersion"] = "v1";
  object["metadata"] = OrderedJson::object();
  object["status"] = "Failure";
  if (!status.message.empty()) object["message"] = status.message;
  if (!status.reason.empty()) object["reason"] = status.reason;
  if (status.details) {
    OrderedJson details = OrderedJson::object();
    if (!status.details->name.empty()) details["name"] = status.details->name;
    if (!status.details->group.empty()) {
      details["group"] = status.details->group;
    }
    if (!status.details->kind.empty()) details["kind"] = status.details->kind;
    if (!status.details->causes.empty()) {
      OrderedJson causes = OrderedJson::array();
      for (const StatusCause& cause : status.details->causes) {
        OrderedJson entry = OrderedJson::object();
        if (!cause.reason.empty()) entry["reason"] = cause.reason;
        if (!cause.message.empty()) entry["message"] = cause.message;
        if (!cause.field.empty()) entry["field"] = cause.field;
        causes.push_back(std::move(entry));
      }
      details["causes"] = std::move(causes);
    }
    if (status.details->retry_after_seconds != 0) {
      details["retryAfterSeconds"] = status.details->retry_after_seconds;
    }
    object["details"] = std::move(details);
  }
  object["code"] = status.code;
  return object;
}

// The details of the apiserver's too-large-RV error: the cause clients
// retry on (ResourceVersionTooLarge), and a retry after 1 s.
StatusDetails TooLargeResourceVersionDetails() {
  StatusDetails details;
  details.causes.push_back(
      {"ResourceVersionTooLarge", "Too large resource version", ""});
  details.retry_after_seconds = 1;
  return details;
}

std::string Dump(const OrderedJson& json) {
  // `replace`: bytes from a client that are not UTF-8 must not make the
  // error answer itself fail.
  return json.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace

std::string StatusJson(const K8sStatus& status) {
  return Dump(StatusObject(status));
}

std::string WatchErrorEventLine(const K8sStatus& status) {
  OrderedJson event;
  event["type"] = "ERROR";
  event["object"] = StatusObject(status);
  std::string line = Dump(event);
  line.push_back('\n');
  return line;
}

K8sStatus ExpiredStatus(uint64_t rv, uint64_t floor_rv) {
  K8sStatus status;
  status.code = 410;
  status.reason = "Expired";
  status.message = "too old resource version: " + std::to_string(rv) + " (" +
                   std::to_string(floor_rv) + ")";
  return status;
}

K8sStatus TooLargeResourceVersionStatus(uint64_t rv, uint64_t current_rv) {
  K8sStatus status;
  status.code = 504;
  status.reason = "Timeout";
  // The apiserver wraps the message with errors.NewTimeoutError, which
  // prefixes "Timeout: ".
  status.message =
      "Timeout: Too large resource version: " + std::to_string(rv) +
      ", current: " + std::to_string(current_rv);
  status.details = TooLargeResourceVersionDetails();
  return status;
}

K8sStatus BacklogStatus(uint64_t unsent_bytes, uint64_t limit_bytes) {
  K8sStatus status;
  status.code = 410;
  status.reason = "Expired";
  status.message = "the watcher fell too far behind: " +
                   std::to_string(unsent_bytes) +
                   " bytes of events unsent (limit " +
                   std::to_string(limit_bytes) + "); relist";
  return status;
}

K8sStatus InvalidListOptionsStatus(const std::vector<FieldError>& errors) {
  K8sStatus status;
  status.code = 422;
  status.reason = "Invalid";
  StatusDetails details;
  details.group = "meta.k8s.io";
  details.kind = "ListOptions";
  // utilerrors.aggregate's Error(): duplicates once, several in brackets.
  std::vector<std::string> seen;
  for (const FieldError& error : errors) {
    details.causes.push_back({error.type, error.body, error.field});
    std::string text = error.field + ": " + error.body;
    bool dup = false;
    for (const std::string& s : seen) dup = dup || s == text;
    if (!dup) seen.push_back(std::move(text));
  }
  std::string aggregate;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (i > 0) aggregate += ", ";
    aggregate += seen[i];
  }
  if (seen.size() > 1) aggregate = "[" + aggregate + "]";
  status.message = "ListOptions.meta.k8s.io \"\" is invalid: " + aggregate;
  status.details = std::move(details);
  return status;
}

K8sStatus ServiceUnavailableStatus(std::string message) {
  return K8sStatus{503, "ServiceUnavailable", std::move(message),
                   std::nullopt};
}

K8sStatus StateErrorStatus(int code, const std::string& reason,
                           const std::string& message) {
  K8sStatus status;
  status.code = code >= 400 && code <= 599 ? code : 500;
  status.reason = reason;
  status.message = message;
  if (status.reason.empty()) {
    switch (status.code) {
      case 400: status.reason = "BadRequest"; break;
      case 409: status.reason = "Conflict"; break;
      case 410: status.reason = "Expired"; break;
      case 503: status.reason = "ServiceUnavailable"; break;
      case 504: status.reason = "Timeout"; break;
      default: status.reason = "InternalError"; break;
    }
  }
  if (status.code == 504) status.details = TooLargeResourceVersionDetails();
  return status;
}

K8sStatus TooManyConnectionsStatus(size_t limit) {
  K8sStatus status;
  status.code = 429;
  status.reason = "TooManyRequests";
  status.message = "too many connections to walwatch (--max-connections " +
                   std::to_string(limit) + "); try again later";
  StatusDetails details;
  details.retry_after_seconds = 1;
  status.details = std::move(details);
  return status;
}

K8sStatus BufferBudgetExhaustedStatus(size_t limit) {
  K8sStatus status = TooManyConnectionsStatus(limit);
  status.message =
      "walwatch's connection buffers are full "
      "(--max-connection-buffer-bytes " +
      std::to_string(limit) + "); try again later";
  return status;
}

K8sStatus RetryLaterStatus(std::string message) {
  K8sStatus status;
  status.code = 504;
  status.reason = "Timeout";
  status.message = std::move(message);
  StatusDetails details;
  details.retry_after_seconds = 1;
  status.details = std::move(details);
  return status;
}

std::string ApiVersion(const std::string& group, const std::string& version) {
  return group.empty() ? version : group + "/" + version;
}

std::string BookmarkEventLine(const std::string& kind,
                              const std::string& api_version, uint64_t rv,
                              bool initial_events_end) {
  OrderedJson metadata = OrderedJson::object();
  metadata["resourceVersion"] = std::to_string(rv);
  if (initial_events_end) {
    metadata["annotations"] = {{"k8s.io/initial-events-end", "true"}};
  }
  OrderedJson object = OrderedJson::object();
  object["kind"] = kind;
  object["apiVersion"] = api_version;
  object["metadata"] = std::move(metadata);
  OrderedJson event = OrderedJson::object();
  event["type"] = "BOOKMARK";
  event["object"] = std::move(object);
  std::string line = Dump(event);
  line.push_back('\n');
  return line;
}

std::string ResourceVersionJson(uint64_t rv, uint64_t latest) {
  OrderedJson object = OrderedJson::object();
  object["kind"] = "ResourceVersion";
  object["apiVersion"] = "walwatch.clusterpedia.io/v1";
  object["resourceVersion"] = std::to_string(rv);
  if (latest > rv) object["latestResourceVersion"] = std::to_string(latest);
  return Dump(object);
}

}  // namespace walwatch
