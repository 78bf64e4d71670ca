#include "watchserver/watch_session.h"

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>
#include <random>
#include <utility>

#include "watchserver/event_log.h"
#include "watchserver/logging.h"
#include "watchserver/resource_catalog.h"

namespace walwatch {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// A connection may sit this long between requests (or in one request).
constexpr auto kIdleTimeout = std::chrono::seconds(60);
// Watch requests have no body; anything beyond this is refused with 413.
constexpr size_t kMaxRequestBodyBytes = 8 * 1024;
// Events taken from the log per Read, before filtering.
constexpr size_t kEventsPerRead = 256;
// How often a watch waiting for a resourceVersion rechecks current_rv():
// the log wakes waiters on appends, but not when current_rv advances for a
// transaction without events.
constexpr auto kResourceVersionPoll = std::chrono::milliseconds(50);
// A write the client does not drain within this long ends the connection
// (a watcher that stopped reading); during Stop() the budget is shorter.
constexpr auto kWriteStallTimeout = std::chrono::seconds(30);
constexpr auto kShutdownWriteGrace = std::chrono::seconds(2);
// Longest timeoutSeconds honoured as given; steady_clock must not overflow.
constexpr int64_t kMaxTimeoutSeconds = int64_t{365} * 24 * 3600;

std::chrono::seconds StreamTimeout(const WatchRequest& watch) {
  if (watch.timeout_seconds && *watch.timeout_seconds > 0) {
    return std::chrono::seconds(
        std::min(*watch.timeout_seconds, kMaxTimeoutSeconds));
  }
  // As the apiserver: a random timeout between 30 and 60 minutes, so that
  // watches opened together do not all end together.
  thread_local std::mt19937 rng{std::random_device{}()};
  return std::chrono::seconds(
      std::uniform_int_distribution<int>(30 * 60, 60 * 60 - 1)(rng));
}

K8sStatus ShuttingDownStatus() {
  return K8sStatus{503, "ServiceUnavailable", "walwatch is shutting down",
                   std::nullopt};
}

bool IsHttpParseError(const boost::system::error_code& ec) {
  return ec.category() ==
         http::make_error_code(http::error::bad_target).category();
}

}  // namespace

// ---------------------------------------------------------------------------
// Lifetime and plumbing

WatchSession::WatchSession(Socket socket,
                           std::shared_ptr<ServerContext> context)
    : strand_(socket.get_executor()),
      socket_(std::move(socket)),
      context_(std::move(context)),
      buffer_(context_->options.max_header_bytes + kMaxRequestBodyBytes + 4096),
      deadline_(strand_),
      poll_timer_(strand_),
      write_timer_(strand_) {}

WatchSession::~WatchSession() { context_->sessions.Remove(this); }

template <class... Args>
auto WatchSession::Bind(void (WatchSession::*handler)(Args...)) {
  return [self = shared_from_this(), handler](Args... args) {
    self->Guarded("completion handler",
                  [&] { (self.get()->*handler)(args...); });
  };
}

template <class F>
void WatchSession::Guarded(const char* where, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    LogError("watch session failed", {{"where", where}, {"error", e.what()}});
    Close();
  } catch (...) {
    LogError("watch session failed", {{"where", where}, {"error", "unknown"}});
    Close();
  }
}

void WatchSession::Start() {
  if (!context_->sessions.Add(shared_from_this())) {
    net::dispatch(strand_, Bind(&WatchSession::Close));
    return;
  }
  net::dispatch(strand_, Bind(&WatchSession::DoReadRequest));
}

void WatchSession::Shutdown() {
  net::post(strand_, Bind(&WatchSession::OnShutdown));
}

void WatchSession::OnShutdown() {
  shutdown_requested_ = true;
  switch (phase_) {
    case Phase::kReadingRequest:
      Close();
      break;
    case Phase::kResponding:
      // OnWriteResponse closes after this response.
      write_timer_.expires_after(kShutdownWriteGrace);
      write_timer_.async_wait(Bind(&WatchSession::OnWriteStalled));
      break;
    case Phase::kWaitingForRv:
      poll_timer_.cancel();
      deadline_.cancel();
      SendStatus(ShuttingDownStatus(), /*keep_alive=*/false);
      break;
    case Phase::kStreaming:
      finish_requested_ = true;
      if (write_in_flight_) {
        write_timer_.expires_after(kShutdownWriteGrace);
        write_timer_.async_wait(Bind(&WatchSession::OnWriteStalled));
      } else if (!ending_) {
        WriteFinalChunk();
      }
      break;
    case Phase::kClosed:
      break;
  }
}

void WatchSession::BeginWrite() {
  write_in_flight_ = true;
  write_timer_.expires_after(kWriteStallTimeout);
  write_timer_.async_wait(Bind(&WatchSession::OnWriteStalled));
}

void WatchSession::EndWrite() {
  write_in_flight_ = false;
  write_timer_.cancel();
}

void WatchSession::OnWriteStalled(ErrorCode ec) {
  if (ec == net::error::operation_aborted || !write_in_flight_) return;
  if (write_timer_.expiry() > std::chrono::steady_clock::now()) return;
  LogWarn("closing a connection whose client stopped reading");
  Close();
}

void WatchSession::ArmDeadline(std::chrono::steady_clock::duration after) {
  deadline_.expires_after(after);
  deadline_.async_wait(Bind(&WatchSession::OnDeadline));
}

void WatchSession::OnDeadline(ErrorCode ec) {
  if (ec == net::error::operation_aborted) return;
  // A handler already queued when the timer was re-armed: not our deadline.
  if (deadline_.expiry() > std::chrono::steady_clock::now()) return;
  switch (phase_) {
    case Phase::kReadingRequest:
      Close();
      break;
    case Phase::kWaitingForRv: {
      uint64_t rv = *watch_.resource_version;
      uint64_t current = context_->log.current_rv();
      poll_timer_.cancel();
      if (rv <= current) {
        StartStreamAfter(rv);
      } else {
        SendStatus(TooLargeResourceVersionStatus(rv, current), keep_alive_);
      }
      break;
    }
    case Phase::kStreaming:
      finish_requested_ = true;
      if (!write_in_flight_ && !ending_) WriteFinalChunk();
      break;
    case Phase::kResponding:
    case Phase::kClosed:
      break;
  }
}

void WatchSession::Close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  try {
    deadline_.cancel();
    poll_timer_.cancel();
    write_timer_.cancel();
  } catch (const std::exception&) {
    // Cancelling can only fail if the timer is broken; closing matters more.
  }
  ErrorCode ignored;
  socket_.shutdown(Socket::shutdown_both, ignored);
  socket_.close(ignored);
}

// ---------------------------------------------------------------------------
// Requests and plain responses

void WatchSession::DoReadRequest() {
  if (shutdown_requested_) return Close();
  phase_ = Phase::kReadingRequest;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(
      std::min<size_t>(context_->options.max_header_bytes, UINT32_MAX)));
  parser_->body_limit(kMaxRequestBodyBytes);
  ArmDeadline(kIdleTimeout);
  http::async_read(socket_, buffer_, *parser_,
                   Bind(&WatchSession::OnReadRequest));
}

void WatchSession::OnReadRequest(ErrorCode ec, size_t /*bytes*/) {
  if (phase_ != Phase::kReadingRequest) return;  // closed meanwhile
  deadline_.cancel();
  if (ec) return OnRequestError(ec);
  request_ = parser_->release();
  parser_.reset();
  keep_alive_ = request_.keep_alive();
  HandleRequest();
}

void WatchSession::OnRequestError(ErrorCode ec) {
  if (ec == http::error::header_limit) {
    return SendStatus({431, "RequestEntityTooLarge",
                       "request header fields too large", std::nullopt},
                      /*keep_alive=*/false);
  }
  if (ec == http::error::body_limit) {
    return SendStatus(
        {413, "RequestEntityTooLarge", "request body too large", std::nullopt},
        /*keep_alive=*/false);
  }
  // end_of_stream: the client closed between requests. partial_message: it
  // closed in the middle of one; nobody is left to answer.
  if (IsHttpParseError(ec) && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    return SendStatus({400, "BadRequest",
                       "malformed HTTP request: " + ec.message(), std::nullopt},
                      /*keep_alive=*/false);
  }
  Close();
}

void WatchSession::HandleRequest() {
  beast::string_view method = request_.method_string();
  beast::string_view target = request_.target();
  ParsedRequest parsed =
      ParseRequest(std::string_view(method.data(), method.size()),
                   std::string_view(target.data(), target.size()));
  if (parsed.error) {
    SendStatus({parsed.error->code, parsed.error->reason, parsed.error->message,
                std::nullopt},
               keep_alive_, parsed.error->code == 405 ? "GET" : "");
    return;
  }
  switch (parsed.route) {
    case RouteKind::kHealthz:
    case RouteKind::kLivez:
      return SendText(200, "ok", keep_alive_);
    case RouteKind::kReadyz:
      if (!context_->ready || context_->ready()) {
        return SendText(200, "ok", keep_alive_);
      }
      return SendText(503, "replication is not streaming yet", keep_alive_);
    case RouteKind::kWatch:
      if (request_.version() < 11) {
        return SendStatus({400, "BadRequest",
                           "a watch needs HTTP/1.1 (chunked transfer encoding)",
                           std::nullopt},
                          /*keep_alive=*/false);
      }
      watch_ = std::move(parsed.watch);
      return StartWatch();
  }
}

void WatchSession::SendStatus(const K8sStatus& status, bool keep_alive,
                              const char* allow) {
  response_.emplace();
  response_->result(static_cast<unsigned>(status.code));
  if (*allow != '\0') response_->set(http::field::allow, allow);
  response_->set(http::field::content_type, "application/json");
  response_->body() = StatusJson(status);
  SendResponse(keep_alive);
}

void WatchSession::SendText(unsigned code, std::string body, bool keep_alive) {
  response_.emplace();
  response_->result(code);
  response_->set(http::field::content_type, "text/plain; charset=utf-8");
  response_->set("X-Content-Type-Options", "nosniff");
  response_->body() = std::move(body);
  SendResponse(keep_alive);
}

void WatchSession::SendResponse(bool keep_alive) {
  phase_ = Phase::kResponding;
  keep_alive_ = keep_alive && !shutdown_requested_;
  response_->version(11);
  response_->keep_alive(keep_alive_);
  response_->prepare_payload();
  BeginWrite();
  http::async_write(socket_, *response_, Bind(&WatchSession::OnWriteResponse));
}

void WatchSession::OnWriteResponse(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  if (phase_ != Phase::kResponding) return;
  response_.reset();
  if (ec || !keep_alive_ || shutdown_requested_) {
    ErrorCode ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
    return Close();
  }
  DoReadRequest();
}

// ---------------------------------------------------------------------------
// Where a watch starts

void WatchSession::StartWatch() {
  if (!context_->catalog.Kind(GroupVersionResource{watch_.group, watch_.version,
                                                   watch_.resource})) {
    return SendStatus(NotFoundStatus(), keep_alive_);
  }
  if (shutdown_requested_) return SendStatus(ShuttingDownStatus(), false);

  EventLog& log = context_->log;
  const std::optional<uint64_t>& rv = watch_.resource_version;
  if (!rv || *rv == 0) {
    // "From now" (for "0" too, until the initial state exists). The initial
    // state for unset/0 and sendInitialEvents will be sent from here, as
    // synthetic ADDED events ahead of the stream, once it can be read
    // consistently with the log (DESIGN.md, "exact or retry").
    uint64_t current = log.current_rv();
    return StartStream(log.tail_seq(), current, std::nullopt);
  }
  if (*rv > log.current_rv()) return WaitForResourceVersion();
  StartStreamAfter(*rv);
}

void WatchSession::WaitForResourceVersion() {
  phase_ = Phase::kWaitingForRv;
  ArmDeadline(context_->options.too_large_rv_wait);
  poll_timer_.expires_after(kResourceVersionPoll);
  poll_timer_.async_wait(Bind(&WatchSession::OnPollTimer));
  WaitForLog();
}

void WatchSession::OnPollTimer(ErrorCode ec) {
  if (ec == net::error::operation_aborted) return;
  if (phase_ != Phase::kWaitingForRv) return;
  CheckResourceVersion();
  if (phase_ == Phase::kWaitingForRv) {
    poll_timer_.expires_after(kResourceVersionPoll);
    poll_timer_.async_wait(Bind(&WatchSession::OnPollTimer));
  }
}

void WatchSession::CheckResourceVersion() {
  if (phase_ != Phase::kWaitingForRv) return;
  uint64_t rv = *watch_.resource_version;
  if (rv > context_->log.current_rv()) {
    WaitForLog();
    return;
  }
  poll_timer_.cancel();
  deadline_.cancel();
  StartStreamAfter(rv);
}

void WatchSession::StartStreamAfter(uint64_t rv) {
  EventLog& log = context_->log;
  EventLog::SeekResult seek = log.Seek(rv);
  if (seek.status == EventLog::SeekStatus::kExpired) {
    return StartStream(log.tail_seq(), rv, ExpiredStatus(rv, log.floor_rv()));
  }
  StartStream(seek.seq, rv, std::nullopt);
}

void WatchSession::StartStream(uint64_t seq, uint64_t from_rv,
                               std::optional<K8sStatus> first_error) {
  phase_ = Phase::kStreaming;
  seq_ = seq;
  last_rv_ = from_rv;
  first_error_ = std::move(first_error);

  stream_head_ = {};
  stream_head_.result(http::status::ok);
  stream_head_.version(11);
  stream_head_.set(http::field::content_type, "application/json");
  stream_head_.set(http::field::cache_control, "no-cache, private");
  // The connection ends with the stream.
  stream_head_.keep_alive(false);
  stream_head_.chunked(true);
  serializer_.emplace(stream_head_);

  ArmDeadline(StreamTimeout(watch_));
  BeginWrite();
  http::async_write_header(socket_, *serializer_,
                           Bind(&WatchSession::OnWriteHeader));
  // A read stays pending for the whole stream: it completes when the client
  // goes away, which is how an idle watch notices.
  DoReadForDisconnect();
  LogDebug("watch started", {{"group", watch_.group},
                             {"version", watch_.version},
                             {"resource", watch_.resource},
                             {"cluster", watch_.cluster},
                             {"namespace", watch_.ns},
                             {"from_rv", from_rv}});
}

void WatchSession::OnWriteHeader(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  if (phase_ != Phase::kStreaming) return;
  if (ec) return Close();
  if (first_error_) {
    K8sStatus status = std::move(*first_error_);
    first_error_.reset();
    return WriteErrorAndEnd(status);
  }
  Pump();
}

// ---------------------------------------------------------------------------
// Streaming

void WatchSession::Pump() {
  if (phase_ != Phase::kStreaming || write_in_flight_ || ending_) return;
  if (finish_requested_) return WriteFinalChunk();

  EventLog& log = context_->log;
  read_batch_.clear();
  if (log.Read(seq_, kEventsPerRead, &read_batch_) ==
      EventLog::ReadStatus::kExpired) {
    read_batch_.clear();
    return WriteErrorAndEnd(ExpiredStatus(last_rv_, log.floor_rv()));
  }
  if (read_batch_.empty()) return WaitForLog();

  // Take matching events up to max_write_bytes (at least one); the cursor
  // moves past every event looked at, matching or not.
  const size_t max_bytes = context_->options.max_write_bytes;
  std::vector<EventPtr> matching;
  size_t bytes = 0;
  size_t consumed = 0;
  for (EventPtr& event : read_batch_) {
    // An empty chunk would read as the final one; such an event is a bug
    // upstream, never something to send.
    if (!event->wire.empty() && Matches(*event)) {
      if (!matching.empty() && bytes + event->wire.size() > max_bytes) break;
      bytes += event->wire.size();
      matching.push_back(std::move(event));
    }
    ++consumed;
  }
  const bool full_batch = read_batch_.size() == kEventsPerRead;
  seq_ += consumed;
  read_batch_.clear();

  if (!matching.empty()) return WriteEvents(std::move(matching));
  if (full_batch) {
    // Nothing for this watch in a whole batch: yield the thread before the
    // next one so that one watch cannot hold it through a long backlog.
    net::post(strand_, Bind(&WatchSession::Pump));
    return;
  }
  WaitForLog();
}

bool WatchSession::Matches(const Event& event) const {
  return event.resource == watch_.resource && event.group == watch_.group &&
         event.version == watch_.version &&
         (watch_.cluster.empty() || event.cluster == watch_.cluster) &&
         (watch_.ns.empty() || event.ns == watch_.ns);
}

void WatchSession::WaitForLog() {
  if (waiting_for_log_) return;
  waiting_for_log_ = true;
  uint64_t seq = phase_ == Phase::kStreaming ? seq_ : context_->log.tail_seq();
  std::weak_ptr<WatchSession> weak = weak_from_this();
  // Runs on the appending thread: only hand over to the strand. The log
  // holds nothing but the weak_ptr, so a session that ends is freed at once;
  // the strong reference taken here moves into the posted handler.
  context_->log.WaitForAppend(seq, [weak] {
    if (std::shared_ptr<WatchSession> self = weak.lock()) {
      net::any_io_executor strand = self->strand_;
      net::post(strand, [self = std::move(self)] {
        self->Guarded("log append", [&] { self->OnLogAppend(); });
      });
    }
  });
}

void WatchSession::OnLogAppend() {
  waiting_for_log_ = false;
  if (phase_ == Phase::kWaitingForRv) {
    CheckResourceVersion();
  } else if (phase_ == Phase::kStreaming) {
    Pump();
  }
}

void WatchSession::WriteEvents(std::vector<EventPtr> events) {
  events_in_flight_ = std::move(events);
  std::vector<net::const_buffer> buffers;
  buffers.reserve(events_in_flight_.size());
  for (const EventPtr& event : events_in_flight_) {
    buffers.push_back(net::buffer(event->wire));
  }
  last_rv_ = events_in_flight_.back()->rv;
  BeginWrite();
  // One chunk, gathered from the shared wire bytes; nothing is copied.
  net::async_write(socket_, http::make_chunk(buffers),
                   Bind(&WatchSession::OnWriteEvents));
}

void WatchSession::OnWriteEvents(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  events_in_flight_.clear();
  if (phase_ != Phase::kStreaming) return;
  if (ec) return Close();
  Pump();
}

void WatchSession::WriteErrorAndEnd(const K8sStatus& status) {
  ending_ = true;
  LogInfo("watch ended with an error event",
          {{"code", status.code}, {"message", status.message}});
  error_line_ = WatchErrorEventLine(status);
  BeginWrite();
  net::async_write(socket_, http::make_chunk(net::buffer(error_line_)),
                   Bind(&WatchSession::OnWriteError));
}

void WatchSession::OnWriteError(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  if (phase_ != Phase::kStreaming) return;
  if (ec) return Close();
  WriteFinalChunk();
}

void WatchSession::WriteFinalChunk() {
  ending_ = true;
  BeginWrite();
  net::async_write(socket_, http::make_chunk_last(),
                   Bind(&WatchSession::OnWriteFinalChunk));
}

void WatchSession::OnWriteFinalChunk(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  if (phase_ != Phase::kStreaming) return;
  ErrorCode ignored;
  socket_.shutdown(Socket::shutdown_send, ignored);
  Close();
}

void WatchSession::DoReadForDisconnect() {
  socket_.async_read_some(net::buffer(discard_),
                          Bind(&WatchSession::OnReadForDisconnect));
}

void WatchSession::OnReadForDisconnect(ErrorCode ec, size_t /*bytes*/) {
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    LogDebug("watch client went away", {{"error", ec.message()}});
    return Close();
  }
  DoReadForDisconnect();  // a client has nothing to say mid-stream; drop it
}

}  // namespace walwatch
