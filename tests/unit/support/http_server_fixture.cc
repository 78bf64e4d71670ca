#include "tests/unit/support/http_server_fixture.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>
#include <utility>

namespace walwatch::server_test {

using namespace std::chrono_literals;

// GETs `target` and reads the whole (non-streamed) answer, which must have
// status `code`.
::testing::AssertionResult Answers(TestClient* client,
                                   const std::string& target, unsigned code) {
  client->Get(target);
  if (!client->ReadResponse()) {
    return ::testing::AssertionFailure()
           << "GET " << target << ": no response ("
           << client->last_error().message() << ")";
  }
  if (client->status() != code) {
    return ::testing::AssertionFailure()
           << "GET " << target << ": HTTP " << client->status() << ", want "
           << code << ": " << client->body();
  }
  return ::testing::AssertionSuccess();
}

// The last answer `client` read is a Kubernetes Status as the apiserver
// writes it: HTTP `code`, JSON, kind Status, status Failure, `reason`, `code`,
// and a message equal to `message` (containing it, with Match::kContains).
// A 504 carries the ResourceVersionTooLarge cause and retryAfterSeconds 1
// (what client-go retries on); any other code neither a cause nor a retry.
::testing::AssertionResult ErrorThenEnd(TestClient* client, unsigned code,
                                        const std::string& message) {
  std::optional<std::string> line = client->ReadLine();
  if (!line) return ::testing::AssertionFailure() << "no ERROR event";
  nlohmann::json error = nlohmann::json::parse(*line, nullptr, false);
  if (!error.is_object() || error.value("type", "") != "ERROR" ||
      !error["object"].is_object() ||
      error["object"].value("code", 0u) != code ||
      error["object"].value("message", "") != message) {
    return ::testing::AssertionFailure()
           << "want an ERROR event of " << code << " \"" << message
           << "\", got " << *line;
  }
  if (std::optional<std::string> more = client->ReadLine()) {
    return ::testing::AssertionFailure() << "a line after the ERROR: " << *more;
  }
  if (!client->body_done()) {
    return ::testing::AssertionFailure() << "the body did not end";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult IsStatus(const TestClient& client, unsigned code,
                                    const std::string& reason,
                                    const std::string& message, Match match) {
  const std::string body(client.body());
  auto fail = [&]() {
    return ::testing::AssertionFailure()
           << "HTTP " << client.status() << " " << body << ": ";
  };
  if (client.status() != code) return fail() << "want HTTP " << code;
  if (client.header("Content-Type") != "application/json") {
    return fail() << "Content-Type " << client.header("Content-Type");
  }
  nlohmann::json status = client.BodyJson();
  if (!status.is_object() || status.value("kind", "") != "Status" ||
      status.value("status", "") != "Failure") {
    return fail() << "not a Failure Status";
  }
  if (status.value("reason", "") != reason) return fail() << "want " << reason;
  if (status.value("code", 0u) != code) return fail() << "want code " << code;
  const std::string got = status.value("message", "");
  if (match == Match::kExact ? got != message
                             : got.find(message) == std::string::npos) {
    return fail() << "want message "
                  << (match == Match::kExact ? "" : "containing ") << "\""
                  << message << "\"";
  }
  const nlohmann::json details =
      status.value("details", nlohmann::json::object());
  if (code == 504) {
    const nlohmann::json too_large = {
        {"causes",
         {{{"reason", "ResourceVersionTooLarge"},
           {"message", "Too large resource version"}}}},
        {"retryAfterSeconds", 1}};
    if (details != too_large) return fail() << "want details " << too_large;
  } else if (details.contains("causes") ||
             details.contains("retryAfterSeconds")) {
    return fail() << "want no causes and no retry";
  }
  return ::testing::AssertionSuccess();
}

void HttpServerTest::SetUp() {
  char dir_template[] = "/tmp/walwatch-http-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  dir_ = dir_template;
  options_.socket_path = dir_ + "/walwatch.sock";
  options_.too_large_rv_wait = 300ms;
  options_.state = &state_;
  catalog_.Add({"", "v1", "pods"}, "Pod");
  catalog_.Add({"", "v1", "configmaps"}, "ConfigMap");
  catalog_.Add({"apps", "v1", "deployments"}, "Deployment");
}

void HttpServerTest::TearDown() {
  if (server_) {
    server_->Stop();
    EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  }
  work_.reset();
  io_.stop();
  for (std::thread& t : threads_) t.join();
  server_.reset();
  state_.JoinAll();
  std::remove(options_.socket_path.c_str());
  rmdir(dir_.c_str());
}

void HttpServerTest::StartServer() {
  server_ = std::make_unique<HttpServer>(
      io_, log_, catalog_, options_,
      [this]() -> std::string { return ready_ ? "" : "not yet"; });
  ASSERT_EQ(server_->Start(), "");
  for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
}

std::vector<EventPtr> HttpServerTest::AppendTxn(
    uint64_t commit_lsn, const std::vector<EventSpec>& specs,
    WireArena* arena) {
  std::vector<Built> built;
  for (const EventSpec& spec : specs) built.push_back({spec, arena});
  return AppendBuilt(commit_lsn, built);
}

std::vector<EventPtr> HttpServerTest::AppendBuilt(
    uint64_t commit_lsn, const std::vector<Built>& built) {
  std::vector<EventPtr> events;
  for (size_t i = 0; i < built.size(); ++i) {
    const Built& b = built[i];
    const bool last = i + 1 == built.size();
    const uint64_t rv = last ? commit_lsn : last_commit_;
    EventSpec spec = b.spec;
    EventPtr old;
    if (b.old_labels) {
      EventSpec old_spec = spec;
      old_spec.labels = *b.old_labels;
      old_spec.type = EventType::kDeleted;
      old = MakeEvent(old_spec, rv, commit_lsn, last);
      spec.type = EventType::kModified;
    }
    EventPtr event = MakeEvent(spec, rv, commit_lsn, last, old.get(), b.arena);
    Event::Frame frame;
    const bool in_arena = event->GetFrame(&frame);
    EXPECT_EQ(in_arena, b.arena != nullptr) << spec.name;
    if (in_arena) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", event->wire().size());
      EXPECT_EQ(std::string_view(frame.data, frame.size),
                size + std::string(event->wire()) + "\r\n")
          << spec.name;
      EXPECT_GE(frame.fd, 0);
    }
    events.push_back(std::move(event));
  }
  last_commit_ = commit_lsn;
  EXPECT_EQ(log_.AppendTransaction(commit_lsn, events),
            EventLog::AppendResult::kAppended);
  return events;
}

WireArena* HttpServerTest::Arena() {
  if (!arena_) {
    std::string error;
    arena_ = WireArena::Create(&error);
    EXPECT_TRUE(arena_) << error;
  }
  return arena_.get();
}

EventPtr HttpServerTest::AppendArenaPod(uint64_t commit_lsn,
                                        const std::string& name,
                                        size_t padding) {
  EventSpec spec;
  spec.name = name;
  spec.padding = std::string(padding, 'x');
  return AppendTxn(commit_lsn, {spec}, Arena()).front();
}

size_t HttpServerTest::WaitUntilFull(TestClient* client) {
  size_t unread = 0;
  bool full = WaitFor([&] {
    size_t now = client->Unread();
    bool stable = now == unread && now > 64 * 1024;
    unread = now;
    return stable;
  });
  return full ? unread : 0;
}

EventPtr HttpServerTest::AppendPod(uint64_t commit_lsn, const std::string& name,
                                   const std::string& ns,
                                   const std::string& cluster) {
  EventSpec spec;
  spec.name = name;
  spec.ns = ns;
  spec.cluster = cluster;
  return AppendTxn(commit_lsn, {spec}).front();
}

std::vector<EventPtr> HttpServerTest::AppendLargePods(int count) {
  const std::string padding(kLargePodBytes, 'x');
  std::vector<EventPtr> events;
  for (int i = 0; i < count; ++i) {
    events.push_back(AppendPod(101 + i, "pod-" + std::to_string(i) + padding));
  }
  return events;
}

std::optional<uint64_t> HttpServerTest::ReadBookmark(TestClient* client) {
  std::optional<std::string> line = client->ReadLine();
  if (!line) return std::nullopt;
  Parsed p = ParseLine(*line);
  EXPECT_EQ(p.type, "BOOKMARK") << *line;
  if (p.type != "BOOKMARK") return std::nullopt;
  EXPECT_EQ(*line, BookmarkLine(p.rv));
  return p.rv;
}

std::unique_ptr<TestClient> HttpServerTest::Connect() {
  auto client = std::make_unique<TestClient>(options_.socket_path);
  EXPECT_TRUE(client->connected());
  return client;
}

void HttpServerTest::ExpectRefusedAndClosed(const std::string& request,
                                            unsigned code,
                                            const std::string& reason) {
  auto client = Connect();
  client->SendRaw(request);
  ASSERT_TRUE(client->ReadResponse());
  EXPECT_EQ(client->status(), code);
  EXPECT_EQ(client->BodyJson()["reason"], reason);
  EXPECT_TRUE(client->ReadEof());
}

std::unique_ptr<TestClient> HttpServerTest::OpenWatch(
    const std::string& target) {
  auto client = Connect();
  client->Get(target);
  if (!client->ReadHeader()) {
    ADD_FAILURE() << "GET " << target << ": no header ("
                  << client->last_error().message() << ")";
    return nullptr;
  }
  if (client->status() != 200) {
    ADD_FAILURE() << "GET " << target << ": HTTP " << client->status();
    return nullptr;
  }
  return client;
}

}  // namespace walwatch::server_test
