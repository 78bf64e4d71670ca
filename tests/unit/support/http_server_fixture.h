// HttpServerTest, the fixture of the HTTP server's unit tests: a real
// EventLog filled with hand-made events (server_events.h), a FakeStateSource
// driven by the test, the server on a temporary Unix socket with two
// threads, and clients (WatchHttpClient, tests/support/) that read the
// chunked stream line by line. No PostgreSQL. Each test file derives a
// fixture of its own name from it.
//
// Thread safety: the test's thread; the server runs on the fixture's two.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_HTTP_SERVER_FIXTURE_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_HTTP_SERVER_FIXTURE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cdc/model/event.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/model/wire_arena.h"
#include "tests/support/watch_http_client.h"
#include "tests/unit/support/fake_state_source.h"
#include "tests/unit/support/server_events.h"
#include "watchserver/event_log.h"
#include "watchserver/http_server.h"
#include "watchserver/metrics.h"

namespace walwatch::server_test {

using TestClient = test_support::WatchHttpClient;

// GETs `target` and reads the whole (non-streamed) answer, which must have
// status `code`.
::testing::AssertionResult Answers(TestClient* client,
                                   const std::string& target, unsigned code);

enum class Match { kExact, kContains };

// The last answer `client` read is a Kubernetes Status as the apiserver
// writes it: HTTP `code`, JSON, kind Status, status Failure, `reason`, `code`,
// and a message equal to `message` (containing it, with Match::kContains).
// A 504 carries the ResourceVersionTooLarge cause and retryAfterSeconds 1
// (what client-go retries on); any other code neither a cause nor a retry.
::testing::AssertionResult IsStatus(const TestClient& client, unsigned code,
                                    const std::string& reason,
                                    const std::string& message,
                                    Match match = Match::kExact);

// The stream `client` reads goes on with one ERROR event whose Status has
// `code` and `message`, and then its body ends.
::testing::AssertionResult ErrorThenEnd(TestClient* client, unsigned code,
                                        const std::string& message);

class HttpServerTest : public ::testing::Test {
 protected:
  HttpServerTest() = default;
  // With an event log bounded to `log_bytes` rather than 8 MiB.
  explicit HttpServerTest(size_t log_bytes) : log_(log_bytes, kFloorRv) {}

  void SetUp() override;
  void TearDown() override;

  void StartServer();

  // Appends one transaction; events before the last carry the previous
  // commit as their rv (DESIGN.md). With an `arena`, every event is built
  // there (the test fails if one is not).
  std::vector<EventPtr> AppendTxn(uint64_t commit_lsn,
                                  const std::vector<EventSpec>& specs,
                                  WireArena* arena = nullptr);

  // How AppendBuilt makes one event: from `spec`, in `arena` (null: on the
  // heap); given `old_labels`, as a MODIFIED whose labels changed from them,
  // its previous state the object with those labels as a DELETED line at
  // the event's RV (what the EventBuilder makes of such an update).
  struct Built {
    Built(EventSpec spec, WireArena* arena = nullptr,
          std::optional<LabelList> old_labels = std::nullopt)
        : spec(std::move(spec)),
          arena(arena),
          old_labels(std::move(old_labels)) {}
    EventSpec spec;
    WireArena* arena;
    std::optional<LabelList> old_labels;
  };
  // Appends one transaction of events made as `built` says. Before the
  // append, each must be in its arena (GetFrame, the line framed as one
  // chunk) or on the heap, as asked.
  std::vector<EventPtr> AppendBuilt(uint64_t commit_lsn,
                                    const std::vector<Built>& built);

  // The arena the WireArena tests build events in, made on first use.
  WireArena* Arena();

  // A pod built in Arena(), its line longer by `padding` bytes, appended
  // alone in a transaction.
  EventPtr AppendArenaPod(uint64_t commit_lsn, const std::string& name,
                          size_t padding = 0);

  // Waits until the bytes `client` has not read stop growing past 64 KiB:
  // its socket is full and the server's write waits. Returns them, or 0 if
  // that did not happen within 5 s.
  static size_t WaitUntilFull(TestClient* client);

  EventPtr AppendPod(uint64_t commit_lsn, const std::string& name,
                     const std::string& ns = "default",
                     const std::string& cluster = "c1");

  // Pods of kLargePodBytes each, one transaction each from RV 101: 400 of
  // them are far more than a Unix socket holds.
  static constexpr size_t kLargePodBytes = 4000;
  std::vector<EventPtr> AppendLargePods(int count);

  // Reads the next line, which must be a bookmark; returns its RV.
  std::optional<uint64_t> ReadBookmark(TestClient* client);

  std::unique_ptr<TestClient> Connect();

  // Sends `request` on a new connection: the answer is a Status with
  // `code` and `reason`, and the connection closes after it.
  void ExpectRefusedAndClosed(const std::string& request, unsigned code,
                              const std::string& reason);

  // Connects and GETs `target`, whose answer must begin as a 200 stream.
  // Null (and a test failure) otherwise.
  std::unique_ptr<TestClient> OpenWatch(const std::string& target);

  std::string dir_;
  HttpServerOptions options_;
  EventLog log_{8 << 20, kFloorRv};
  ResourceCatalog catalog_;
  uint64_t last_commit_ = kFloorRv;
  std::atomic<bool> ready_{true};
  boost::asio::io_context io_;
  std::optional<
      boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      work_{io_.get_executor()};
  std::vector<std::thread> threads_;
  // After io_: its threads post to the io_context until joined.
  FakeStateSource state_{&log_};
  // Outlives the server: sessions still closing report to it.
  Metrics metrics_;
  std::unique_ptr<HttpServer> server_;
  // Gone before the log (events may outlive their arena).
  std::unique_ptr<WireArena> arena_;
};

// HttpServerTest with an event log of kLogBytes.
template <size_t kLogBytes>
class HttpServerTestWithLog : public HttpServerTest {
 protected:
  HttpServerTestWithLog() : HttpServerTest(kLogBytes) {}
};

}  // namespace walwatch::server_test

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_HTTP_SERVER_FIXTURE_H_
