// What the integration tests of every database share: Clusterpedia-shaped
// rows (Resource: the columns and the object as Clusterpedia stores them,
// and the object a watcher must receive), and reading a watch's events.
// The writes themselves are each database's (harness.h: PostgreSQL;
// mariadb_walwatch.h: MySQL/MariaDB).
//
// Header-only. Thread safety: plain values and functions.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_WATCH_ROWS_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_WATCH_ROWS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/support/watch_client.h"

namespace walwatch::itest {

inline constexpr char kMemberRvAnnotation[] =
    "walwatch.clusterpedia.io/member-resource-version";
// How long a test waits for something walwatch should do promptly.
inline constexpr std::chrono::seconds kEventWait{20};

// One row of `resources`.
struct Resource {
  std::string group, version, resource, kind;
  std::string cluster, ns, name;
  std::string uid;
  std::string member_rv = "100";  // resource_version column = object's RV
  nlohmann::json spec = nlohmann::json::object();
  nlohmann::json labels = {{"app", "walwatch-it"}, {"quote", "x \"q\""}};

  std::string ApiVersion() const {
    return group.empty() ? version : group + "/" + version;
  }
  // The object as Clusterpedia stores it.
  nlohmann::json Object() const {
    nlohmann::json metadata = {
        {"name", name},
        {"uid", uid},
        {"resourceVersion", member_rv},
        {"labels", labels},
        {"annotations", {{"shadow.clusterpedia.io/cluster-name", cluster}}},
    };
    if (!ns.empty()) metadata["namespace"] = ns;
    return {{"apiVersion", ApiVersion()},
            {"kind", kind},
            {"metadata", metadata},
            {"spec", spec}};
  }
  // The object a watcher must receive in an event with resourceVersion rv.
  nlohmann::json Expected(uint64_t rv) const {
    auto o = Object();
    o["metadata"]["resourceVersion"] = std::to_string(rv);
    o["metadata"]["annotations"][kMemberRvAnnotation] = member_rv;
    return o;
  }
};

inline Resource Pod(std::string cluster, std::string ns, std::string name) {
  Resource r;
  r.version = "v1";
  r.resource = "pods";
  r.kind = "Pod";
  r.cluster = std::move(cluster);
  r.ns = std::move(ns);
  r.name = std::move(name);
  r.uid = "uid-" + r.cluster + "-" + r.ns + "-" + r.name;
  r.spec = {{"nodeName", "node-1"}, {"containers", {{{"name", "c"}}}}};
  return r;
}

inline Resource Deployment(std::string cluster, std::string ns,
                           std::string name) {
  Resource r;
  r.group = "apps";
  r.version = "v1";
  r.resource = "deployments";
  r.kind = "Deployment";
  r.cluster = std::move(cluster);
  r.ns = std::move(ns);
  r.name = std::move(name);
  r.uid = "uid-" + r.cluster + "-" + r.ns + "-deploy-" + r.name;
  r.spec = {{"replicas", 3}};
  return r;
}

// Reads exactly `n` events.
inline ::testing::AssertionResult ReadEvents(WatchClient& watch, size_t n,
                                             std::vector<WatchEvent>* out,
                                             Clock::time_point deadline) {
  for (size_t i = 0; i < n; ++i) {
    WatchEvent e;
    auto r = watch.NextEvent(&e, deadline);
    if (!r) return r << " (after " << i << " of " << n << " events)";
    out->push_back(std::move(e));
  }
  return ::testing::AssertionSuccess();
}

// Reads events until one named `name` (included), at most `limit` events.
inline ::testing::AssertionResult ReadUntilName(WatchClient& watch,
                                                const std::string& name,
                                                std::vector<WatchEvent>* out,
                                                Clock::time_point deadline,
                                                size_t limit = 100000) {
  for (size_t i = 0; i < limit; ++i) {
    WatchEvent e;
    auto r = watch.NextEvent(&e, deadline);
    if (!r)
      return r << " (waiting for " << name << " after " << i << " events)";
    bool found = e.name() == name;
    out->push_back(std::move(e));
    if (found) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no event for " << name;
}

inline std::string Describe(const std::vector<WatchEvent>& events) {
  std::string s;
  for (const auto& e : events) {
    s +=
        "  " + e.type + " " + e.name() + " rv=" + std::to_string(e.rv()) + "\n";
  }
  return s;
}

// The line starts exactly like the apiserver's: {"type":"T","object":{
inline ::testing::AssertionResult WireStartsWith(const WatchEvent& e,
                                                 const std::string& type) {
  std::string prefix = "{\"type\":\"" + type + "\",\"object\":{";
  if (e.raw.rfind(prefix, 0) == 0 && e.raw.back() == '}') {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "event line does not start with " << prefix
         << " (or end with '}'): " << e.raw.substr(0, 200);
}

// GET /walwatch/v1/freshrv on `socket_path`: an RV at least as new as the
// database now. 0 (and a test failure) if walwatch does not answer.
inline uint64_t FetchFreshRv(const std::string& socket_path) {
  HttpResponse r = HttpGet(socket_path, "/walwatch/v1/freshrv", In(kEventWait));
  auto doc = nlohmann::json::parse(r.body, nullptr, false);
  if (!r.ok || r.status != 200 || !doc.is_object() ||
      !doc.contains("resourceVersion")) {
    ADD_FAILURE() << "GET /walwatch/v1/freshrv: HTTP " << r.status << " "
                  << r.error << r.body;
    return 0;
  }
  return std::stoull(doc["resourceVersion"].get<std::string>());
}

// Opens a watch of `path` on `socket_path` from `rv` (without one, from
// now: a fresh RV, not from the initial state an unset resourceVersion
// asks for), and checks the streaming response header.
inline ::testing::AssertionResult OpenWatchOn(WatchClient& watch,
                                              const std::string& socket_path,
                                              const std::string& path,
                                              std::optional<uint64_t> rv) {
  if (!rv) rv = FetchFreshRv(socket_path);
  auto r = watch.Open(socket_path, WatchTarget(path, rv), In(kEventWait));
  if (!r) return r;
  if (watch.status() != 200) {
    return ::testing::AssertionFailure()
           << "GET " << watch.target() << ": HTTP " << watch.status() << " "
           << watch.body();
  }
  if (watch.content_type().rfind("application/json", 0) != 0) {
    return ::testing::AssertionFailure()
           << "GET " << watch.target() << ": Content-Type '"
           << watch.content_type() << "', expected application/json";
  }
  if (!watch.chunked()) {
    return ::testing::AssertionFailure()
           << "GET " << watch.target() << ": response is not chunked";
  }
  return ::testing::AssertionSuccess();
}

// A watch of `path` on `socket_path` from a fresh RV, with bookmarks (for a
// walwatch started with a short --bookmark-interval and no write during
// the wait): its first event must be a BOOKMARK, whose object goes to
// *bookmark.
inline ::testing::AssertionResult FirstBookmarkOn(
    const std::string& socket_path, const std::string& path,
    nlohmann::json* bookmark) {
  WatchClient watch;
  auto r = watch.Open(socket_path,
                      path +
                          "?watch=1&allowWatchBookmarks=true&"
                          "resourceVersion=" +
                          std::to_string(FetchFreshRv(socket_path)),
                      In(kEventWait));
  if (!r) return r;
  if (watch.status() != 200) {
    return ::testing::AssertionFailure()
           << "GET " << watch.target() << ": HTTP " << watch.status() << " "
           << watch.body();
  }
  WatchEvent e;
  auto next = watch.NextEvent(&e, In(kEventWait));
  if (!next) return next << " (waiting for a bookmark of " << path << ")";
  if (e.type != "BOOKMARK") {
    return ::testing::AssertionFailure()
           << "GET " << watch.target() << ": the first event is not a "
           << "BOOKMARK: " << e.raw;
  }
  *bookmark = e.object;
  return ::testing::AssertionSuccess();
}

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_WATCH_ROWS_H_
