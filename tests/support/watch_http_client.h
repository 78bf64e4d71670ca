// WatchHttpClient: the one Beast client of walwatch's HTTP protocol in
// tests/. One connection (a Unix socket, or loopback TCP); requests written
// whole; answers parsed by ResponseParser (response_parser.h), and a watch's
// body read line by line, as client-go's stream decoder sees it. Every read
// has a deadline, kTimeout from the call unless one is given, so that a
// broken server fails the test instead of hanging it.
//
// Who uses it: the unit tests as it is (tests/unit/support/
// http_server_fixture.h); the integration tests through WatchClient and
// HttpGet (tests/integration/support/watch_client.h), which keep their own
// API on top of it; and tests/bench/fanout_client.cc shares its parsing
// (ResponseParser), since it serves thousands of connections from one epoll
// loop rather than blocking on one.
//
// Thread safety: one thread per object. Asio and Beast stay in the .cc.
#ifndef WALWATCH_TESTS_SUPPORT_WATCH_HTTP_CLIENT_H_
#define WALWATCH_TESTS_SUPPORT_WATCH_HTTP_CLIENT_H_

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace walwatch::test_support {

class WatchHttpClient {
 public:
  using Clock = std::chrono::steady_clock;
  using ErrorCode = boost::system::error_code;

  static constexpr std::chrono::seconds kTimeout{5};
  static Clock::time_point DefaultDeadline() { return Clock::now() + kTimeout; }

  // Connects to walwatch's Unix socket at `socket_path`.
  explicit WatchHttpClient(const std::string& socket_path);
  // Connects over TCP to `address` (an IP address) and `port`.
  WatchHttpClient(const std::string& address, uint16_t port);
  ~WatchHttpClient();
  WatchHttpClient(const WatchHttpClient&) = delete;
  WatchHttpClient& operator=(const WatchHttpClient&) = delete;

  bool connected() const;
  // Why it is not.
  ErrorCode connect_error() const;

  // Writes `bytes` as they are; false (last_error()) if that failed.
  bool SendRaw(const std::string& bytes);
  // Writes a GET of `target` (GetRequestBytes).
  bool Get(const std::string& target);

  // Reads the status line and header fields of the next response.
  bool ReadHeader(Clock::time_point deadline = DefaultDeadline());
  // Reads the rest of the response whose header was read: body() is its
  // body then.
  bool ReadBody(Clock::time_point deadline = DefaultDeadline());
  // ReadHeader, then ReadBody: a whole (non-streamed) response.
  bool ReadResponse(Clock::time_point deadline = DefaultDeadline());

  // The response being read (its header, once ReadHeader returned true).
  unsigned status() const;
  // A header field's value, "" if absent; `name` in any case.
  std::string header(std::string_view name) const;
  bool chunked() const;
  // The body received and not taken as lines: after ReadBody, the whole
  // body; while a stream is read, what follows its last whole line.
  std::string_view body() const;
  nlohmann::json BodyJson() const;

  enum class Next {
    kLine,     // *line is the next line, without its '\n'
    kEnd,      // the body ended (a watch's final chunk); body() is what was
               // left after its last '\n' (nothing, for a whole event)
    kTimeout,  // no whole line before the deadline
    kError,    // the connection or the HTTP failed: last_error(), eof if
               // the server closed the connection before the body ended
  };
  Next NextLine(std::string* line, Clock::time_point deadline);
  // The next line of the body; nullopt for anything but a line.
  std::optional<std::string> ReadLine(
      Clock::time_point deadline = DefaultDeadline());
  // True once the whole response has been read (a stream: its final chunk).
  bool body_done() const;
  // What the last call that failed met (timed_out at its deadline).
  ErrorCode last_error() const;

  // Bytes the server sent that this client has not read yet.
  size_t Unread();
  // True if the server closes the connection with nothing more to read.
  bool ReadEof(Clock::time_point deadline = DefaultDeadline());
  // Every byte until the server closes, unparsed; nullopt on a timeout or
  // an error.
  std::optional<std::string> ReadAllRaw(
      Clock::time_point deadline = DefaultDeadline());

  void Close();
  // Stops receiving (shutdown SHUT_RD) but stays connected: the server sees
  // no end of its reads, and its next write fails with EPIPE.
  void ShutdownReceive();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace walwatch::test_support

#endif  // WALWATCH_TESTS_SUPPORT_WATCH_HTTP_CLIENT_H_
