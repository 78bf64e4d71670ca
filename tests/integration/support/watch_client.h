// A blocking Kubernetes watch client over walwatch's Unix socket, for the
// integration tests: WatchClient and HttpGet, and HttpGetTcp for its
// loopback TCP listeners (the ops listener of --metrics-address), an API of
// their own over the one client of tests/ (tests/support/watch_http_client.h),
// which reads and parses the HTTP (Boost.Beast) and splits a watch's body
// into lines, as client-go's stream decoder sees them. Here each line
// becomes a WatchEvent.
// Every call takes a deadline.
//
// Thread safety: one thread per object. Boost headers stay in the .cc.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_WATCH_CLIENT_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_WATCH_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace walwatch::test_support {
class WatchHttpClient;
}

namespace walwatch::itest {

using Clock = std::chrono::steady_clock;

inline Clock::time_point In(std::chrono::milliseconds d) {
  return Clock::now() + d;
}

// A complete (non-streaming) HTTP response.
struct HttpResponse {
  bool ok = false;          // false: could not connect / read; see error
  std::string error;
  int status = 0;
  std::string content_type;
  bool chunked = false;
  std::string body;
};

// GET `target` on the Unix socket; reads the whole response.
HttpResponse HttpGet(const std::string& socket_path, const std::string& target,
                     Clock::time_point deadline);
// The same on 127.0.0.1:`port`. Nothing listening there is !ok, status 0.
HttpResponse HttpGetTcp(int port, const std::string& target,
                        Clock::time_point deadline);
// GET /metrics on 127.0.0.1:`port` (walwatch's --metrics-address): the
// scrape, or "" without a 200 answer. test_support::MetricValue
// (tests/support/metric_value.h) reads its samples.
std::string ScrapeMetrics(int port, Clock::time_point deadline);

// A loopback port that was free a moment ago (0 if none was).
int FreeLoopbackPort();

// One watch event as received: the raw line (without '\n') and its parts.
struct WatchEvent {
  std::string raw;
  std::string type;
  nlohmann::json object;

  // object.metadata.resourceVersion as a number (0 if missing or bad).
  uint64_t rv() const;
  std::string name() const;
  std::string ns() const;
  // The member cluster's RV kept by walwatch in its annotation ("" if none).
  std::string member_rv() const;
};

class WatchClient {
 public:
  WatchClient();
  ~WatchClient();
  WatchClient(const WatchClient&) = delete;
  WatchClient& operator=(const WatchClient&) = delete;

  // Connects, sends GET `target`, and reads the response header. For a
  // non-200 response it also reads the whole body (see body()).
  ::testing::AssertionResult Open(const std::string& socket_path,
                                  const std::string& target,
                                  Clock::time_point deadline);
  // Open, for a request of an initial state (resourceVersion=0, or a
  // WatchList) by a test that does not test the answer below: while
  // walwatch answers 410 "cannot be handed off exactly yet" (a transaction
  // of the cluster open since before its log began, such as another
  // test's: xids are the cluster's), it opens again, as a client retries
  // (PROTOCOL.md, "exact or retry"), until `deadline`.
  ::testing::AssertionResult OpenState(const std::string& socket_path,
                                       const std::string& target,
                                       Clock::time_point deadline);

  int status() const { return status_; }
  const std::string& content_type() const { return content_type_; }
  bool chunked() const { return chunked_; }
  // Body of a non-200 response.
  const std::string& body() const { return body_; }

  enum class Result {
    kEvent,      // *event filled
    kEnd,        // the server ended the stream (final chunk or close)
    kTimeout,    // nothing complete before the deadline
    kError,      // transport, HTTP or JSON error: see error()
  };
  Result Next(WatchEvent* event, Clock::time_point deadline);
  const std::string& error() const { return error_; }
  // Bytes received after the last complete line (a partial event).
  const std::string& partial() const { return pending_; }

  // Test helper: the next event, as an assertion (failure text says what
  // came instead).
  ::testing::AssertionResult NextEvent(WatchEvent* event,
                                       Clock::time_point deadline);
  // Test helper: the stream must end before `deadline` with no more events.
  ::testing::AssertionResult ExpectEnd(Clock::time_point deadline);

  const std::string& target() const { return target_; }

 private:
  std::unique_ptr<test_support::WatchHttpClient> client_;
  std::string target_;
  int status_ = 0;
  std::string content_type_;
  bool chunked_ = false;
  std::string body_;
  std::string pending_;  // body bytes after the last whole line
  std::string error_;
};

// Watch target for a path such as "/api/v1/pods" with an optional RV.
std::string WatchTarget(const std::string& path,
                        std::optional<uint64_t> resource_version = {});

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_WATCH_CLIENT_H_
