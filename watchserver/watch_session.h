// WatchSession is one client connection of HttpServer: it reads requests
// (Boost.Beast), answers health probes and errors with keep-alive, and serves
// a watch as a chunked stream pulled from the EventLog with its own cursor.
// A watch ends the connection: with the final chunk on timeoutSeconds or
// Stop(), after a 410 ERROR event when its cursor falls out of the log, or at
// once when the client goes away.
//
// Ownership: a session owns itself, in the manner of the Beast examples. It
// lives exactly as long as an asynchronous operation (socket read or write,
// timer) holds shared_from_this(); the log's wake-up callback holds only a
// weak_ptr, so a session whose client disconnected is freed at once.
// Thread safety: everything but Shutdown() runs on the session's strand (the
// socket's executor). Shutdown() may be called from any thread.
//
// This header pulls in Asio and Beast: include it only from the serving code
// (http_server.cc, watch_session.cc), never from widely included headers.
#ifndef WALWATCH_WATCHSERVER_WATCH_SESSION_H_
#define WALWATCH_WATCHSERVER_WATCH_SESSION_H_

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "watchserver/event.h"
#include "watchserver/http_server.h"
#include "watchserver/k8s_status.h"
#include "watchserver/watch_request.h"

namespace walwatch {

class WatchSession;

// The live sessions, so that Stop() can end them. Holds weak_ptrs only.
// Thread safety: all methods may be called from any thread.
class SessionRegistry {
 public:
  // Records `session`. Returns false once BeginStop() has run: the caller
  // must then end the session at once.
  bool Add(const std::shared_ptr<WatchSession>& session);
  // Called by a session's destructor.
  void Remove(const WatchSession* session);
  // From now on Add() refuses; returns the sessions still alive.
  std::vector<std::shared_ptr<WatchSession>> BeginStop();
  size_t size() const;

 private:
  mutable std::mutex mu_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::unordered_map<const WatchSession*, std::weak_ptr<WatchSession>>
      sessions_;  // GUARDED_BY(mu_)
};

// What the listeners and every session share. Held by shared_ptr so that a
// session finishing after HttpServer is gone never dangles; `log` and
// `catalog` are kept alive by HttpServer's caller (see http_server.h).
struct ServerContext {
  ServerContext(EventLog& log, ResourceCatalog& catalog,
                HttpServerOptions options, std::function<bool()> ready)
      : log(log),
        catalog(catalog),
        options(std::move(options)),
        ready(std::move(ready)) {}

  EventLog& log;
  ResourceCatalog& catalog;
  const HttpServerOptions options;
  const std::function<bool()> ready;
  SessionRegistry sessions;
};

class WatchSession : public std::enable_shared_from_this<WatchSession> {
 public:
  // A Unix or a TCP connection; its executor must be a strand.
  using Socket = boost::asio::generic::stream_protocol::socket;

  WatchSession(Socket socket, std::shared_ptr<ServerContext> context);
  ~WatchSession();

  WatchSession(const WatchSession&) = delete;
  WatchSession& operator=(const WatchSession&) = delete;

  // Registers with the context's registry and reads the first request.
  void Start();

  // Any thread: ends the session soon. A stream is ended with the final
  // chunk; a connection between requests is closed; a response being
  // written is the connection's last.
  void Shutdown();

 private:
  enum class Phase {
    kReadingRequest,
    kResponding,    // writing a Status or health response
    kWaitingForRv,  // resourceVersion ahead of the log: waiting for it
    kStreaming,     // watch header sent (or being sent); chunks follow
    kClosed,
  };
  using ErrorCode = boost::system::error_code;

  // Wraps a member function as a completion handler that keeps the session
  // alive and lets no exception escape into the io_context.
  template <class... Args>
  auto Bind(void (WatchSession::*handler)(Args...));
  template <class F>
  void Guarded(const char* where, F&& f);

  // Requests and plain responses.
  void DoReadRequest();
  void OnReadRequest(ErrorCode ec, size_t bytes);
  void OnRequestError(ErrorCode ec);
  void HandleRequest();
  // `allow`: the Allow header of a 405, or "".
  void SendStatus(const K8sStatus& status, bool keep_alive,
                  const char* allow = "");
  void SendText(unsigned code, std::string body, bool keep_alive);
  void SendResponse(bool keep_alive);
  void OnWriteResponse(ErrorCode ec, size_t bytes);

  // Choosing where the watch starts.
  void StartWatch();
  void WaitForResourceVersion();
  void CheckResourceVersion();
  void StartStreamAfter(uint64_t rv);
  void StartStream(uint64_t seq, uint64_t from_rv,
                   std::optional<K8sStatus> first_error);
  void OnWriteHeader(ErrorCode ec, size_t bytes);

  // Streaming.
  void Pump();
  bool Matches(const Event& event) const;
  void WaitForLog();
  void OnLogAppend();
  void WriteEvents(std::vector<EventPtr> events);
  void OnWriteEvents(ErrorCode ec, size_t bytes);
  void WriteErrorAndEnd(const K8sStatus& status);
  void OnWriteError(ErrorCode ec, size_t bytes);
  void WriteFinalChunk();
  void OnWriteFinalChunk(ErrorCode ec, size_t bytes);
  void DoReadForDisconnect();
  void OnReadForDisconnect(ErrorCode ec, size_t bytes);

  // Every socket write goes between BeginWrite and EndWrite: one write in
  // flight, and a write the client does not drain in time closes the
  // connection.
  void BeginWrite();
  void EndWrite();
  void OnWriteStalled(ErrorCode ec);

  void ArmDeadline(std::chrono::steady_clock::duration after);
  void OnDeadline(ErrorCode ec);
  void OnPollTimer(ErrorCode ec);
  void OnShutdown();
  void Close();

  const boost::asio::any_io_executor strand_;
  Socket socket_;
  const std::shared_ptr<ServerContext> context_;
  Phase phase_ = Phase::kReadingRequest;
  bool shutdown_requested_ = false;

  // Request side.
  boost::beast::flat_buffer buffer_;
  std::optional<
      boost::beast::http::request_parser<boost::beast::http::string_body>>
      parser_;
  boost::beast::http::request<boost::beast::http::string_body> request_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>>
      response_;
  bool keep_alive_ = false;

  // One timer per phase's deadline (idle request read, resourceVersion
  // wait, watch timeout), one to poll for the resourceVersion, and one
  // bounding the write in flight.
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer poll_timer_;
  boost::asio::steady_timer write_timer_;
  bool write_in_flight_ = false;

  // Watch state.
  WatchRequest watch_;
  uint64_t seq_ = 0;      // next event in the log to consider
  uint64_t last_rv_ = 0;  // rv of the last event sent, or where we started
  boost::beast::http::response<boost::beast::http::empty_body> stream_head_;
  std::optional<
      boost::beast::http::response_serializer<boost::beast::http::empty_body>>
      serializer_;
  std::optional<K8sStatus> first_error_;  // sent right after the header
  bool waiting_for_log_ = false;
  bool finish_requested_ = false;  // end with the final chunk when idle
  bool ending_ = false;            // ERROR event or final chunk under way
  std::vector<EventPtr> events_in_flight_;  // keep wire bytes alive
  std::string error_line_;                  // ERROR event being written
  std::vector<EventPtr> read_batch_;
  std::array<char, 256> discard_;  // bytes a client sends mid-stream
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_WATCH_SESSION_H_
