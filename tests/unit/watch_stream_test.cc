// WatchStream (watch_stream.h): a watch from its header to its end. Live
// events in order and filtered by path and selectors, label changes as
// ADDED and DELETED, resuming after a resourceVersion, 410 for a cursor out
// of the log, timeoutSeconds, its count in the log, and its metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class WatchStreamTest : public HttpServerTest {};

TEST_F(WatchStreamTest, StreamsAppendedEventsInOrderWithWatchHeaders) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(client);
  EXPECT_EQ(client->header("Content-Type"), "application/json");
  EXPECT_EQ(client->header("Cache-Control"), "no-cache, private");
  EXPECT_TRUE(client->chunked());

  // The stream started "from now", when the header was written.
  EventPtr a = AppendPod(110, "a");
  EventPtr b = AppendPod(120, "b");
  EventPtr c = AppendPod(130, "c");
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_EQ(client->ReadLine(), Line(b));
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_EQ(server_->active_sessions(), 1u);
}

TEST_F(WatchStreamTest, FiltersByClusterNamespaceAndResource) {
  EventPtr want1 = AppendPod(110, "p1", "ns1", "c1");
  AppendPod(120, "p2", "ns2", "c1");
  AppendPod(130, "p3", "ns1", "c2");
  EventSpec deployment{"d1", "c1",          "ns1",       "apps",
                       "v1", "deployments", "Deployment"};
  EventPtr deploy = AppendTxn(140, {deployment}).front();
  EventSpec configmap{"cm", "c1", "ns1", "", "v1", "configmaps", "ConfigMap"};
  AppendTxn(150, {configmap});
  EventPtr want2 = AppendPod(160, "p4", "ns1", "c1");
  StartServer();

  auto scoped = OpenWatch(
      "/clusters/c1/api/v1/namespaces/ns1/"
      "pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(scoped);
  EXPECT_EQ(scoped->ReadLine(), Line(want1));
  EXPECT_EQ(scoped->ReadLine(), Line(want2));
  EXPECT_EQ(scoped->ReadLine(), std::nullopt);
  EXPECT_TRUE(scoped->body_done());

  auto all_pods =
      OpenWatch("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(all_pods);
  std::vector<std::string> names;
  while (std::optional<std::string> line = all_pods->ReadLine()) {
    names.push_back(nlohmann::json::parse(*line)["object"]["metadata"]["name"]);
  }
  EXPECT_TRUE(all_pods->body_done());
  EXPECT_EQ(names, (std::vector<std::string>{"p1", "p2", "p3", "p4"}));

  auto deployments = OpenWatch(
      "/clusters/c1/apis/apps/v1/"
      "deployments?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(deployments);
  EXPECT_EQ(deployments->ReadLine(), Line(deploy));
  EXPECT_EQ(deployments->ReadLine(), std::nullopt);
  EXPECT_TRUE(deployments->body_done());
}

TEST_F(WatchStreamTest, ResumesAfterTheGivenResourceVersion) {
  AppendPod(110, "a");
  AppendPod(120, "b");
  EventPtr c = AppendPod(130, "c");
  // A two-event transaction: resuming from its first event's rv (130) must
  // deliver it whole.
  std::vector<EventPtr> txn = AppendTxn(140, {{"d"}, {"e"}});
  StartServer();

  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=120");
  ASSERT_TRUE(client);
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_EQ(client->ReadLine(), Line(txn[0]));
  EXPECT_EQ(client->ReadLine(), Line(txn[1]));
  EventPtr f = AppendPod(150, "f");
  EXPECT_EQ(client->ReadLine(), Line(f));
}

TEST_F(WatchStreamTest, ManySmallWritesStayInOrder) {
  options_.max_write_bytes = 300;  // about two events per chunk
  std::vector<EventPtr> events;
  for (int i = 0; i < 600; ++i) {
    events.push_back(AppendPod(101 + i, "pod-" + std::to_string(i)));
  }
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  for (const EventPtr& event : events) {
    ASSERT_EQ(client->ReadLine(), Line(event));
  }
}

TEST_F(WatchStreamTest, TooOldResourceVersionGetsOneExpiredEvent) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=50");
  ASSERT_TRUE(client);
  EXPECT_EQ(
      client->ReadLine(),
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"
      "\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too "
      "old resource version: 50 (100)\",\"reason\":\"Expired\","
      "\"code\":410}}");
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(client->ReadEof());
}

TEST_F(WatchStreamTest, FallingOutOfTheLogEndsWithExpired) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(client);
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  log_.AppendBarrier(200);
  EXPECT_TRUE(
      ErrorThenEnd(client.get(), 410, "too old resource version: 110 (200)"));
  EXPECT_TRUE(client->ReadEof());
}

// Issue 18 §1: every well-formed resource path streams, whether or not the
// table ever held a row of it; its bookmarks carry the best kind known.
TEST_F(WatchStreamTest, UnseenResourcesStreamWithTheirKinds) {
  catalog_.Declare({"example.com", "v1", "gadgets"}, "GadgetThing");
  StartServer();
  struct Case {
    std::string path, kind, api_version;
  } cases[] = {
      // Built in, never seen.
      {"/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice",
       "discovery.k8s.io/v1"},
      {"/api/v1/namespaces/ns1/persistentvolumeclaims", "PersistentVolumeClaim",
       "v1"},
      // Declared (--kinds).
      {"/apis/example.com/v1/gadgets", "GadgetThing", "example.com/v1"},
      // Another version of a seen resource.
      {"/apis/apps/v1beta2/deployments", "Deployment", "apps/v1beta2"},
      // Nothing knows it: guessed from the plural.
      {"/clusters/c1/apis/example.com/v1/widgets", "Widget", "example.com/v1"},
      {"/apis/example.com/v1/policies", "Policy", "example.com/v1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    auto client = Connect();
    client->Get(c.path +
                "?watch=1&sendInitialEvents=true&resourceVersionMatch="
                "NotOlderThan");
    ASSERT_TRUE(client->ReadHeader());
    EXPECT_EQ(client->status(), 200u);
    EXPECT_EQ(client->ReadLine(),
              BookmarkLine(kFloorRv, c.kind, c.api_version, true));
  }
}

TEST_F(WatchStreamTest, TimeoutSecondsEndsTheStreamWithTheFinalChunk) {
  StartServer();
  auto client = Connect();
  auto start = std::chrono::steady_clock::now();
  client->Get("/api/v1/pods?watch=1&timeoutSeconds=1");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_FALSE(client->last_error()) << client->last_error().message();
  EXPECT_TRUE(client->body_done());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_TRUE(client->ReadEof());
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

// A watch counts in the log's watchers of its resource (what the wake hold
// grows with) from its header until it ends, whichever way it ends.
TEST_F(WatchStreamTest, AWatchCountsInTheLogWhileItStreams) {
  StartServer();
  auto watchers = [&] { return log_.GetStats().watchers; };
  EXPECT_EQ(watchers(), 0u);
  auto one = OpenWatch("/api/v1/pods?watch=1");
  auto two = OpenWatch("/api/v1/pods?watch=1&timeoutSeconds=1");
  auto other = OpenWatch("/api/v1/configmaps?watch=1");
  ASSERT_TRUE(one && two && other);
  ASSERT_TRUE(WaitFor([&] { return watchers() == 3; }));
  log_.BeginBatch();
  AppendPod(110, "a");
  EXPECT_EQ(log_.EndBatch(), 2u);  // the pods watches, not the configmaps one
  // Ends by timeout, by the client leaving, and by 410.
  EXPECT_TRUE(WaitFor([&] { return watchers() == 2; }));
  one->Close();
  EXPECT_TRUE(WaitFor([&] { return watchers() == 1; }));
  log_.AppendBarrier(200);
  EXPECT_TRUE(WaitFor([&] { return watchers() == 0; }));
  EXPECT_EQ(server_->active_sessions(), 0u);
}

TEST_F(WatchStreamTest, SelectorsFilterInitialAndLiveEvents) {
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get(
      "/api/v1/pods?watch=1&labelSelector=app%3Dweb%2Ctier%20in%20(fe)"
      "&fieldSelector=metadata.name!%3Dweb-2");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  auto pod = [](const std::string& name, const std::string& app) {
    EventSpec spec;
    spec.name = name;
    spec.labels = {{"app", app}, {"tier", "fe"}};
    return spec;
  };
  stream->Ready(kFloorRv);
  EventPtr web1 = StateEvent(pod("web-1", "web"), kFloorRv);
  ASSERT_TRUE(stream->Push({StateEvent(pod("db-1", "db"), kFloorRv), web1,
                            StateEvent(pod("web-2", "web"), kFloorRv)}));
  stream->Finish();
  AppendTxn(110, {pod("db-2", "db")});
  EventPtr web3 = AppendTxn(120, {pod("web-3", "web")}).front();
  AppendTxn(130, {pod("web-2", "web")});
  EventSpec no_tier;
  no_tier.name = "web-4";
  no_tier.labels = {{"app", "web"}};
  AppendTxn(140, {no_tier});
  EventPtr web5 = AppendTxn(150, {pod("web-5", "web")}).front();
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), Line(web1));
  EXPECT_EQ(client->ReadLine(), Line(web3));
  EXPECT_EQ(client->ReadLine(), Line(web5));
}

TEST_F(WatchStreamTest, LabelChangeEntersAndLeavesTheSelection) {
  StartServer();
  auto open = [&](const std::string& query) {
    auto client = Connect();
    client->Get("/api/v1/namespaces/default/pods?watch=1&resourceVersion=100" +
                query);
    EXPECT_TRUE(client->ReadHeader());
    return client;
  };
  auto web = open("&labelSelector=app%3Dweb");
  auto db = open("&labelSelector=app%3Ddb");
  auto both = open("&labelSelector=app%20in%20(web%2Cdb)");
  auto any = open("");
  auto other_name =
      open("&labelSelector=app%3Ddb&fieldSelector=metadata.name%3Dq");

  // p moves from app=db to app=web: the event carries its old labels and
  // its old object as a DELETED line at the event's RV.
  EventSpec old_spec{"p"};
  old_spec.labels = {{"app", "db"}};
  old_spec.type = EventType::kDeleted;
  EventPtr old = MakeEvent(old_spec, 110, 110, true);
  std::string prev_wire(old->wire());
  EventSpec new_spec{"p"};
  new_spec.labels = {{"app", "web"}};
  new_spec.type = EventType::kModified;
  EventPtr modified = MakeEvent(new_spec, 110, 110, true, old.get());
  ASSERT_EQ(log_.AppendTransaction(110, {modified}),
            EventLog::AppendResult::kAppended);
  last_commit_ = 110;
  EventPtr marker = AppendPod(120, "marker");

  std::string added = Line(modified);
  added.replace(0, std::string("{\"type\":\"MODIFIED\",").size(),
                "{\"type\":\"ADDED\",");
  EXPECT_EQ(web->ReadLine(), added) << "entering app=web";
  EXPECT_EQ(db->ReadLine(), prev_wire.substr(0, prev_wire.size() - 1))
      << "leaving app=db";
  EXPECT_EQ(both->ReadLine(), Line(modified)) << "staying in";
  EXPECT_EQ(any->ReadLine(), Line(modified)) << "no label selector";
  EXPECT_EQ(any->ReadLine(), Line(marker));
  // Never in it: its name is not q, before or after.
  auto marker_q = AppendTxn(130, {[] {
                              EventSpec q{"q"};
                              q.labels = {{"app", "db"}};
                              return q;
                            }()})
                      .front();
  EXPECT_EQ(other_name->ReadLine(), Line(marker_q));
}

// A watch resumed from an old RV catches up with events committed before
// it started, minutes ago maybe: that is not walwatch's latency, and an
// APIServer restart that resumes every watch would otherwise fire
// WalwatchCommitToWriteLatency.
TEST_F(WatchStreamTest,
       CommitToWriteObservesOnlyEventsCommittedDuringTheWatch) {
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  EventPtr a = AppendPod(110, "a");
  EventPtr b = AppendPod(120, "b");
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_EQ(client->ReadLine(), Line(b));
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(),
                  "walwatch_events_sent_total{type=\"ADDED\"}") == 2;
  }));
  EXPECT_EQ(Sample(metrics.Scrape(), "walwatch_commit_to_write_seconds_count"),
            0);
  EventPtr c = AppendPod(130, "c");
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(), "walwatch_commit_to_write_seconds_count") ==
           1;
  }));
}

// An event that commits while a watch's initial state is sent waits for
// the state: its commit-to-write counts, as the client's latency. (It was
// once measured only from the end of the state, so under load a watch
// whose state was short lost the observation.)
TEST_F(WatchStreamTest, CommitToWriteCountsEventsThatWaitedForTheState) {
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(log_.current_rv());
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EventPtr a = AppendPod(110, "a");  // during the state
  stream->Finish();
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(), "walwatch_commit_to_write_seconds_count") ==
           1;
  })) << metrics.Scrape();
}

TEST_F(WatchStreamTest, MetricsCountWatchesEventsAndBookmarks) {
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  auto client = OpenWatch(
      "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1");
  ASSERT_TRUE(client);
  EXPECT_TRUE(WaitFor([&] {
    return Sample(metrics.Scrape(),
                  "walwatch_watchers{group=\"\",resource=\"pods\",version="
                  "\"v1\"}") == 1;
  }));
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  EventSpec modified{"a"};
  modified.type = EventType::kModified;
  EventPtr a2 = AppendTxn(120, {modified}).front();
  EXPECT_EQ(client->ReadLine(), Line(a2));
  EXPECT_EQ(ParseLine(*client->ReadLine()).type, "BOOKMARK");
  EXPECT_EQ(client->ReadLine(), std::nullopt);

  auto closing = OpenWatch("/api/v1/pods?watch=1&resourceVersion=120");
  ASSERT_TRUE(closing);
  auto expiring = OpenWatch("/api/v1/pods?watch=1&resourceVersion=120");
  ASSERT_TRUE(expiring);
  closing->Close();
  // Noticed before the barrier, or the barrier would end it first.
  EXPECT_TRUE(WaitFor(
      [&] { return Terminated(metrics.Scrape(), "client_closed") == 1; }));
  log_.AppendBarrier(200);
  EXPECT_EQ(ParseLine(*expiring->ReadLine()).type, "ERROR");
  auto too_old = OpenWatch("/api/v1/pods?watch=1&resourceVersion=150");
  ASSERT_TRUE(too_old);
  EXPECT_EQ(ParseLine(*too_old->ReadLine()).type, "ERROR");

  // Every watch has ended and been counted (WatchEnded moves the gauge
  // before the reason's counter, so wait for the counters).
  std::string scrape;
  EXPECT_TRUE(WaitFor([&] {
    scrape = metrics.Scrape();
    return Terminated(scrape, "expired") == 1 &&
           Terminated(scrape, "barrier") == 1;
  })) << scrape;
  // A resource with no open watch has no series: any resource path may be
  // watched, and series kept at 0 would grow with every path ever tried.
  EXPECT_EQ(Sample(scrape,
                   "walwatch_watchers{group=\"\",resource=\"pods\","
                   "version=\"v1\"}"),
            -1)
      << scrape;
  EXPECT_EQ(Terminated(scrape, "timeout"), 1) << scrape;
  EXPECT_EQ(Terminated(scrape, "client_closed"), 1) << scrape;
  EXPECT_EQ(Terminated(scrape, "barrier"), 1) << scrape;
  EXPECT_EQ(Terminated(scrape, "expired"), 1) << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"ADDED\"}"), 1);
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"MODIFIED\"}"), 1);
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"BOOKMARK\"}"), 1);
  EXPECT_EQ(Sample(scrape, "walwatch_commit_to_write_seconds_count"), 2);
}

}  // namespace
}  // namespace walwatch::server_test
