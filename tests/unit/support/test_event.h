// TestEvent: an event's filter fields, editable, that converts to the Event
// they make; MakeEvent fills one in as a Deployment (apps/v1). For the tests
// of what selects events (LabelSelector, FieldSelector, WatchFilter) and
// the HTTP request fuzz target (tests/fuzz/http_request_fuzz.cc).
// Header-only; for tests.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_TEST_EVENT_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_TEST_EVENT_H_

#include <string>
#include <utility>

#include "cdc/model/event.h"

namespace walwatch {

// An event's fields, editable; it converts to the Event they make.
struct TestEvent {
  std::string group, version, resource, kind, cluster, ns, name;
  LabelList labels;

  operator const Event&() const {
    Event::Strings s;
    s.group = group;
    s.version = version;
    s.resource = resource;
    s.kind = kind;
    s.cluster = cluster;
    s.ns = ns;
    s.name = name;
    s.labels = &labels;
    built = Event::Make(s, "{}\n");
    return *built;
  }
  mutable EventPtr built;
};

inline TestEvent MakeEvent(const std::string& cluster, const std::string& ns,
                           const std::string& name, LabelList labels = {}) {
  TestEvent e;
  e.group = "apps";
  e.version = "v1";
  e.resource = "deployments";
  e.kind = "Deployment";
  e.cluster = cluster;
  e.ns = ns;
  e.name = name;
  e.labels = std::move(labels);
  return e;
}

}  // namespace walwatch

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_TEST_EVENT_H_
