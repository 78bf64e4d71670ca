// Events and lines for the HTTP server's unit tests: Events made by hand
// with the wire bytes the EventBuilder would produce, the lines a watch
// sends for them, and readers of what came back. No sockets. (The selector
// tests' events, which carry filter fields only, are test_event.h's.)
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_SERVER_EVENTS_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_SERVER_EVENTS_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cdc/model/event.h"
#include "cdc/model/wire_arena.h"

namespace walwatch::server_test {

// The floor of the tests' event logs: where the stream starts.
inline constexpr uint64_t kFloorRv = 100;

// Polls `condition` every `poll` until it holds or `limit` passes.
template <class Condition>
bool WaitFor(Condition condition,
             std::chrono::milliseconds limit = std::chrono::seconds(5),
             std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

struct EventSpec {
  std::string name;
  std::string cluster = "c1";
  std::string ns = "default";
  std::string group = "";
  std::string version = "v1";
  std::string resource = "pods";
  std::string kind = "Pod";
  EventType type = EventType::kAdded;
  LabelList labels = {};
  // Bytes of an annotation that only makes the line longer.
  std::string padding = "";
};

// An Event with the wire bytes the EventBuilder would produce for a small
// object: {"type":T,"object":{...}}\n
// With `prev`, a MODIFIED whose labels changed: prev's labels and line are
// the event's previous state. With an `arena`, the event is built there if
// it fits, as the EventBuilder builds the log's events (the previous state
// stays on the heap).
EventPtr MakeEvent(const EventSpec& spec, uint64_t rv, uint64_t commit_lsn,
                   bool last_in_txn, const Event* prev = nullptr,
                   WireArena* arena = nullptr);

// The line a watch sends for `event`: its wire bytes without the '\n'.
std::string Line(const EventPtr& event);

// An initial-state event as the StateSource makes it: ADDED, carrying the
// state's RV, of no transaction.
EventPtr StateEvent(EventSpec spec, uint64_t state_rv);
EventPtr StatePod(const std::string& name, uint64_t state_rv);

// The line a bookmark is sent as.
std::string BookmarkLine(uint64_t rv, const std::string& kind = "Pod",
                         const std::string& api_version = "v1",
                         bool initial_events_end = false);

// The type, name and resourceVersion of a watch event line.
struct Parsed {
  std::string type;
  std::string name;
  uint64_t rv = 0;
  nlohmann::json object;
};
Parsed ParseLine(const std::string& line);

// The chunks of a chunked body (RFC 9112 7.1), strictly: each a size in hex
// without extensions, CRLF, the data, CRLF; then the last chunk, "0" CRLF,
// no trailer fields, the final CRLF and nothing after. nullopt if the body
// breaks any of that.
std::optional<std::vector<std::string>> DecodeChunks(std::string_view body);

// The value of one sample in a Prometheus text scrape, or -1 if absent.
double Sample(const std::string& scrape, const std::string& name_and_labels);
// walwatch_watchers_terminated_total{reason=...} in a scrape, or -1.
double Terminated(const std::string& scrape, const std::string& reason);

}  // namespace walwatch::server_test

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_SERVER_EVENTS_H_
