// A watch's initial state (resourceVersion unset or 0): read by the
// StateSource, taken by HttpSession until its RV is known, sent by the
// WatchStream, then handed to the log with nothing lost or doubled; and its
// failures, before the header (a Status) and after (an ERROR event).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class InitialStateTest : public HttpServerTest {};

TEST_F(InitialStateTest, InitialStateThenLiveLosesAndDoublesNothing) {
  state_.set_manual(true);
  AppendPod(110, "a");
  AppendPod(120, "b");
  StartServer();
  auto client = Connect();
  client->Get("/clusters/c1/api/v1/namespaces/default/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  std::vector<StateQuery> queries = state_.queries();
  ASSERT_EQ(queries.size(), 1u);
  EXPECT_EQ(queries[0].group, "");
  EXPECT_EQ(queries[0].version, "v1");
  EXPECT_EQ(queries[0].resource, "pods");
  EXPECT_EQ(queries[0].cluster, "c1");
  EXPECT_EQ(queries[0].ns, "default");

  // The state was read in a snapshot that saw a and b (handoff RV 120); c
  // commits after it, before the state is sent, and d while it is sent.
  EventPtr c = AppendPod(130, "c");
  stream->Ready(120);
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EventPtr a0 = StatePod("a", 120);
  EventPtr b0 = StatePod("b", 120);
  ASSERT_TRUE(stream->Push({a0}));
  EXPECT_EQ(client->ReadLine(), Line(a0));
  EventPtr d = AppendPod(140, "d");
  ASSERT_TRUE(stream->Push({b0}));
  stream->Finish();
  EXPECT_EQ(client->ReadLine(), Line(b0));
  EXPECT_EQ(client->ReadLine(), Line(c));
  EXPECT_EQ(client->ReadLine(), Line(d));
  EventPtr e = AppendPod(150, "e");
  EXPECT_EQ(client->ReadLine(), Line(e));
}

// The log drops the events after the state's RV while the state is still
// being sent: the stream ends with the 410 at once, and the reader is
// cancelled; the rest of the state is not sent for nothing.
TEST_F(InitialStateTest, StateOutlivedByTheLogEndsWith410BeforeItsRest) {
  state_.set_manual(true);
  AppendPod(110, "a");
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(110);
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  EventPtr a0 = StatePod("a", 110);
  ASSERT_TRUE(stream->Push({a0}));
  EXPECT_EQ(client->ReadLine(), Line(a0));
  log_.AppendBarrier(200);  // the events after 110 are gone
  ASSERT_TRUE(stream->Push({StatePod("b", 110)}));
  EXPECT_TRUE(
      ErrorThenEnd(client.get(), 410, "too old resource version: 110 (200)"));
  EXPECT_TRUE(stream->cancelled());
}

TEST_F(InitialStateTest, ResourceVersionZeroAlsoSendsTheState) {
  state_.set_manual(true);
  AppendPod(110, "a");
  // A transaction without events moved the stream past 110.
  log_.AdvanceCurrentRv(115);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&resourceVersion=0");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(115);
  EventPtr a0 = StatePod("a", 115);
  ASSERT_TRUE(stream->Push({a0}));
  stream->Finish();
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), Line(a0));
  EventPtr b = AppendPod(120, "b");
  EXPECT_EQ(client->ReadLine(), Line(b));
}

TEST_F(InitialStateTest, ManyStateEventsArriveInOrderThroughSmallWrites) {
  options_.max_write_bytes = 300;
  options_.max_initial_state_queue_bytes = 4096;  // Push blocks: flow control
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  std::vector<EventPtr> objects;
  for (int i = 0; i < 500; ++i) {
    objects.push_back(StatePod("pod-" + std::to_string(i), kFloorRv));
  }
  std::thread producer([&] {
    stream->Ready(kFloorRv);
    for (size_t i = 0; i < objects.size(); i += 7) {
      std::vector<EventPtr> batch(
          objects.begin() + i,
          objects.begin() + std::min(objects.size(), i + 7));
      if (!stream->Push(std::move(batch))) return;
    }
    stream->Finish();
  });
  ASSERT_TRUE(client->ReadHeader());
  for (const EventPtr& object : objects) {
    ASSERT_EQ(client->ReadLine(), Line(object));
  }
  producer.join();
  EventPtr live = AppendPod(110, "live");
  EXPECT_EQ(client->ReadLine(), Line(live));
}

TEST_F(InitialStateTest, AClientTooSlowForTheInitialStateGets410) {
  options_.max_initial_state_queue_bytes = 4096;
  options_.initial_state_timeout = std::chrono::milliseconds(300);
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  std::atomic<bool> gave_up{false};
  std::thread producer([&] {
    stream->Ready(kFloorRv);
    // Far more than the socket and the queue hold while nobody reads.
    for (int i = 0; i < 20000; ++i) {
      if (!stream->Push({StatePod("pod-" + std::to_string(i), kFloorRv)})) {
        gave_up = true;
        return;
      }
    }
    stream->Finish();
  });
  ASSERT_TRUE(client->ReadHeader());
  producer.join();  // the client has read nothing past the header yet
  EXPECT_TRUE(gave_up);
  std::optional<std::string> line, last;
  while ((line = client->ReadLine())) last = line;
  ASSERT_TRUE(last.has_value());
  Parsed end = ParseLine(*last);
  EXPECT_EQ(end.type, "ERROR") << *last;
  EXPECT_NE(last->find("\"code\":410"), std::string::npos) << *last;
  EXPECT_NE(last->find("--initial-state-timeout"), std::string::npos) << *last;
}

TEST_F(InitialStateTest, StateErrorBeforeReadyIsTheStatusAnswer) {
  state_.set_manual(true);
  StartServer();
  struct Case {
    StateError error;
    unsigned code;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {{409, "Conflict", "commit order and visibility disagree"},
            409,
            "Conflict"},
           {{410, "Expired", "snapshot older than the log"}, 410, "Expired"},
           {{504, "Timeout", "walwatch has not caught up"}, 504, "Timeout"},
           {{500, "InternalError", "cannot connect"}, 500, "InternalError"},
           {{500, "", "no reason given"}, 500, "InternalError"}}) {
    auto client = Connect();
    client->Get("/api/v1/pods?watch=1");
    std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
    ASSERT_TRUE(stream);
    stream->Fail(c.error);
    ASSERT_TRUE(client->ReadResponse()) << c.error.message;
    EXPECT_TRUE(IsStatus(*client, c.code, c.reason, c.error.message));
    EXPECT_EQ(client->BodyJson().contains("details"), c.code == 504);
    // The watch's connection ends with its answer.
    EXPECT_TRUE(client->ReadEof());
  }
}

TEST_F(InitialStateTest, StateErrorAfterReadyIsAnErrorEvent) {
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(kFloorRv);
  EventPtr a0 = StatePod("a", kFloorRv);
  ASSERT_TRUE(stream->Push({a0}));
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->ReadLine(), Line(a0));
  stream->Fail({500, "InternalError", "connection lost"});
  std::optional<std::string> line = client->ReadLine();
  ASSERT_TRUE(line);
  EXPECT_EQ(
      *line,
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"
      "\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
      "\"reading the initial state failed: connection lost\",\"reason\":"
      "\"InternalError\",\"code\":500}}");
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(client->ReadEof());
}

TEST_F(InitialStateTest, StateCancelledWhenTheClientLeaves) {
  state_.set_manual(true);
  StartServer();
  auto waiting = Connect();  // before Ready
  waiting->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> before = state_.WaitForStream();
  ASSERT_TRUE(before);
  auto streaming = Connect();  // while the state is sent
  streaming->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> during = state_.WaitForStream();
  ASSERT_TRUE(during);
  during->Ready(kFloorRv);
  EventPtr a0 = StatePod("a", kFloorRv);
  ASSERT_TRUE(during->Push({a0}));
  ASSERT_TRUE(streaming->ReadHeader());
  EXPECT_EQ(streaming->ReadLine(), Line(a0));

  waiting->Close();
  streaming->Close();
  EXPECT_TRUE(WaitFor([&] { return before->cancelled(); }));
  EXPECT_TRUE(WaitFor([&] { return during->cancelled(); }));
  // A producer blocked on a full queue would return false; one that is not
  // is told at its next Push.
  EXPECT_FALSE(during->Push({StatePod("b", kFloorRv)}));
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

TEST_F(InitialStateTest, StopWhileTheStateIsReadAnswers503) {
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  server_->Stop();
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_TRUE(IsStatus(*client, 503, "ServiceUnavailable",
                       "walwatch is shutting down"));
  EXPECT_TRUE(WaitFor([&] { return stream->cancelled(); }));
}

}  // namespace
}  // namespace walwatch::server_test
