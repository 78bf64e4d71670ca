// HttpSession: lifetime, requests, plain responses, the RV endpoints, and a
// watch up to the hand-over of its connection to a WatchStream.
#include "watchserver/http_session.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/model/resource_catalog.h"
#include "watchserver/event_log.h"
#include "watchserver/metrics.h"
#include "watchserver/watch_filter.h"

namespace walwatch {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// A connection may sit this long between requests (or in one request).
constexpr auto kIdleTimeout = std::chrono::seconds(60);
// How long a refused connection (HttpSession::Refuse) has to send its
// request before it is closed without an answer, and the most header bytes
// read from it.
constexpr auto kRefusedRequestTimeout = std::chrono::seconds(2);
constexpr size_t kRefusedMaxHeaderBytes = 64 * 1024;
// Watch requests have no body; anything beyond this is refused with 413.
constexpr size_t kMaxRequestBodyBytes = 8 * 1024;

bool IsHttpParseError(const boost::system::error_code& ec) {
  return ec.category() ==
         http::make_error_code(http::error::bad_target).category();
}

}  // namespace

// ---------------------------------------------------------------------------
// Lifetime and plumbing

HttpSession::HttpSession(SessionSocket socket,
                         std::shared_ptr<ServerContext> context,
                         std::string client)
    : StrandSession(socket.get_executor()),
      socket_(std::move(socket)),
      context_(std::move(context)),
      budget_account_(&context_->buffer_budget),
      // A bound, not a reservation: the buffer grows as a request needs,
      // each allocation paid for from the budget.
      buffer_(context_->options.max_header_bytes + kMaxRequestBodyBytes + 4096,
              BudgetAlloc(&budget_account_)),
      deadline_(strand_),
      write_(strand_),
      client_(std::move(client)) {}

HttpSession::~HttpSession() {
  // Close() cancelled the state stream; this is for a session that never
  // got there (an exception while being set up).
  if (state_stream_) state_stream_->Cancel();
  if (rv_wait_id_ != 0) context_->log.CancelWaitForRv(rv_wait_id_);
  context_->sessions.Remove(this);
}

void HttpSession::Start() {
  if (!context_->sessions.Add(shared_from_this())) {
    net::dispatch(strand_, Bind(&HttpSession::Close));
    return;
  }
  net::dispatch(strand_, Bind(&HttpSession::DoReadRequest));
}

void HttpSession::Shutdown() {
  net::post(strand_, Bind(&HttpSession::OnShutdown));
}

void HttpSession::OnShutdown() {
  shutdown_requested_ = true;
  switch (phase_) {
    case Phase::kReadingRequest:
      Close();
      break;
    case Phase::kResponding:
      // OnWriteResponse closes after this response.
      write_.Arm(kShutdownWriteGrace, Bind(&HttpSession::OnWriteStalled));
      break;
    case Phase::kWaitingForRv:
    case Phase::kWaitingForState:
      GiveUpWaitingForState(
          ServiceUnavailableStatus("walwatch is shutting down"));
      break;
    case Phase::kHandedOver:
    case Phase::kClosed:
      break;
  }
}

void HttpSession::OnWriteStalled(ErrorCode ec) {
  if (!write_.Overran(ec)) return;
  LogWarn("closing a connection whose client stopped reading");
  Close();
}

void HttpSession::AbandonStateRequest() {
  ++answer_token_;
  if (state_request_wanted_) {
    state_request_wanted_->store(false);
    state_request_wanted_.reset();
  }
}

void HttpSession::ArmDeadline(Clock::duration after) {
  deadline_.expires_at(Clock::now() + after);
  deadline_.async_wait(Bind(&HttpSession::OnDeadline));
}

void HttpSession::OnDeadline(ErrorCode ec) {
  if (ec == net::error::operation_aborted) return;
  // A handler already queued when the timer was re-armed: not our deadline.
  if (deadline_.expiry() > Clock::now()) return;
  switch (phase_) {
    case Phase::kReadingRequest:
      Close();
      break;
    case Phase::kWaitingForRv: {
      context_->log.CancelWaitForRv(rv_wait_id_);
      rv_wait_id_ = 0;
      uint64_t rv = *watch_->watch.resource_version;
      uint64_t current = context_->log.current_rv();
      if (rv <= current) {
        ResourceVersionReached();
      } else {
        SendStatus(TooLargeResourceVersionStatus(rv, current), keep_alive_);
      }
      break;
    }
    case Phase::kWaitingForState:
      GiveUpWaitingForState(RetryLaterStatus(
          awaiting_ == Awaiting::kInitialState
              ? "the initial state was not ready in time; retry"
              : "walwatch's state readers did not answer in time; retry"));
      break;
    case Phase::kResponding:
    case Phase::kHandedOver:
    case Phase::kClosed:
      break;
  }
}

void HttpSession::Close() {
  if (phase_ == Phase::kClosed || phase_ == Phase::kHandedOver) return;
  phase_ = Phase::kClosed;
  AbandonStateRequest();
  if (state_stream_) {
    state_stream_->Cancel();
    state_stream_.reset();
  }
  if (rv_wait_id_ != 0) {
    context_->log.CancelWaitForRv(rv_wait_id_);
    rv_wait_id_ = 0;
  }
  if (refusal_) {
    refusal_.reset();
    --context_->refusing;
  }
  CloseConnection(socket_, [&] {
    deadline_.cancel();
    write_.Cancel();
  });
}

// ---------------------------------------------------------------------------
// Requests and plain responses

void HttpSession::DoReadRequest() {
  if (shutdown_requested_) return Close();
  phase_ = Phase::kReadingRequest;
  request_ = {};  // an error answer must not take the last request's method
  budget_account_.ClearRefused();
  // The parsed fields are stored in memory the budget pays for.
  parser_.emplace(std::piecewise_construct, std::make_tuple(),
                  std::make_tuple(BudgetAlloc(&budget_account_)));
  parser_->header_limit(static_cast<uint32_t>(std::min<size_t>(
      refusal_ ? kRefusedMaxHeaderBytes : context_->options.max_header_bytes,
      UINT32_MAX)));
  parser_->body_limit(kMaxRequestBodyBytes);
  ArmDeadline(refusal_ ? kRefusedRequestTimeout : kIdleTimeout);
  http::async_read(socket_, buffer_, *parser_,
                   Bind(&HttpSession::OnReadRequest));
}

void HttpSession::OnReadRequest(ErrorCode ec, size_t /*bytes*/) {
  if (phase_ != Phase::kReadingRequest) return;  // closed meanwhile
  deadline_.cancel();
  if (ec) return OnRequestError(ec);
  request_ = parser_->release();
  parser_.reset();
  keep_alive_ = request_.keep_alive();
  // Nothing reads the header fields or the body past this point, and a
  // watch would hold them for its life (up to --max-header-bytes of them).
  request_.clear();
  request_.body() = std::string();
  ReleaseRequestBuffer();
  HandleRequest();
}

void HttpSession::ReleaseRequestBuffer() {
  if (buffer_.size() == 0) {
    // Frees it all: a watch, or a connection between requests, holds none
    // of the budget. The next request starts again from 512 bytes.
    buffer_.shrink_to_fit();
  } else if (buffer_.capacity() > 16 * 1024) {
    // A pipelined next request: keep just its bytes. The copy is paid for
    // before the large buffer is given back; without room, flat_buffer
    // keeps that one (it swallows the refusal).
    buffer_.shrink_to_fit();
    budget_account_.ClearRefused();
  }
}

void HttpSession::OnRequestError(ErrorCode ec) {
  if (budget_account_.refused()) {
    // The request needed more memory than the connection buffer budget
    // has left: overload, not a bad request. Its bytes are let go of
    // before the answer is written.
    ++context_->buffer_refused_request;
    parser_.reset();
    request_ = {};
    buffer_.clear();
    ReleaseRequestBuffer();
    LogBufferBudgetRefusal(
        "answering a request 429: the connection buffer "
        "budget is exhausted "
        "(--max-connection-buffer-bytes)",
        context_->options.max_connection_buffer_bytes);
    return SendStatus(BufferBudgetExhaustedStatus(
                          context_->options.max_connection_buffer_bytes),
                      /*keep_alive=*/false);
  }
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

void HttpSession::HandleRequest() {
  if (refusal_) return SendStatus(*refusal_, /*keep_alive=*/false);
  beast::string_view method = request_.method_string();
  beast::string_view target = request_.target();
  ParsedRequest parsed =
      ParseRequest(std::string_view(method.data(), method.size()),
                   std::string_view(target.data(), target.size()));
  if (parsed.error) {
    SendStatus(*parsed.error, keep_alive_,
               parsed.error->code == 405 ? "GET" : "");
    return;
  }
  switch (parsed.route) {
    case RouteKind::kHealthz:
    case RouteKind::kLivez:
      return SendText(200, "ok", keep_alive_);
    case RouteKind::kReadyz:
      if (std::string why = context_->ready ? context_->ready() : "";
          !why.empty()) {
        return SendText(503, why, keep_alive_);
      }
      return SendText(200, "ok", keep_alive_);
    case RouteKind::kHandoff:
      return AskStateSource(Awaiting::kHandoffRv, &parsed.handoff);
    case RouteKind::kFreshRv:
      return AskStateSource(Awaiting::kFreshRv, nullptr);
    case RouteKind::kWatch:
      if (request_.version() < 11) {
        return SendStatus({400, "BadRequest",
                           "a watch needs HTTP/1.1 (chunked transfer encoding)",
                           std::nullopt},
                          /*keep_alive=*/false);
      }
      watch_.emplace();
      watch_->watch = std::move(parsed.watch);
      // Parsed: a watch does not keep its target (a long selector may be
      // most of --max-header-bytes) for its life.
      request_.target(beast::string_view());
      return StartWatch();
  }
}

void HttpSession::SendStatus(const K8sStatus& status, bool keep_alive,
                             const char* allow) {
  response_.emplace();
  response_->result(static_cast<unsigned>(status.code));
  if (*allow != '\0') response_->set(http::field::allow, allow);
  // As kube-apiserver does: client-go retries a 429 or 5xx only when this
  // header says when.
  if (status.details && status.details->retry_after_seconds > 0) {
    response_->set(http::field::retry_after,
                   std::to_string(status.details->retry_after_seconds));
  }
  response_->set(http::field::content_type, "application/json");
  response_->body() = StatusJson(status);
  SendResponse(keep_alive);
}

void HttpSession::SendText(unsigned code, std::string body, bool keep_alive) {
  response_.emplace();
  response_->result(code);
  response_->set(http::field::content_type, "text/plain; charset=utf-8");
  response_->set("X-Content-Type-Options", "nosniff");
  response_->body() = std::move(body);
  SendResponse(keep_alive);
}

void HttpSession::SendJson(unsigned code, std::string body, bool keep_alive) {
  response_.emplace();
  response_->result(code);
  response_->set(http::field::content_type, "application/json");
  response_->set(http::field::cache_control, "no-cache, private");
  response_->body() = std::move(body);
  SendResponse(keep_alive);
}

void HttpSession::SendResponse(bool keep_alive) {
  phase_ = Phase::kResponding;
  keep_alive_ = keep_alive && !shutdown_requested_;
  response_->version(11);
  response_->keep_alive(keep_alive_);
  response_->prepare_payload();
  if (request_.method() == http::verb::head) {
    // The header says how long the body would be; a HEAD answer has none.
    const size_t length = response_->body().size();
    response_->body().clear();
    response_->content_length(length);
  }
  write_.Begin(shutdown_requested_ ? kShutdownWriteGrace : kWriteStallTimeout,
               Bind(&HttpSession::OnWriteStalled));
  http::async_write(socket_, *response_, Bind(&HttpSession::OnWriteResponse));
}

void HttpSession::OnWriteResponse(ErrorCode ec, size_t /*bytes*/) {
  write_.End();
  if (phase_ != Phase::kResponding) return;
  response_.reset();
  if (ec || !keep_alive_ || shutdown_requested_) {
    ErrorCode ignored;
    socket_.shutdown(SessionSocket::shutdown_send, ignored);
    return Close();
  }
  if (reading_ahead_) {
    // No write is in flight, so cancel() aborts only the read-ahead; its
    // completion goes on with the next request.
    read_request_after_read_ahead_ = true;
    ErrorCode ignored;
    socket_.cancel(ignored);
    return;
  }
  DoReadRequest();
}

// ---------------------------------------------------------------------------
// Answers from the StateSource

void HttpSession::AskStateSource(Awaiting what, const HandoffRequest* handoff) {
  StateSource* state = context_->options.state;
  if (state == nullptr) {
    return SendStatus(
        ServiceUnavailableStatus(
            "walwatch runs without a state source: no initial state, "
            "handoff or fresh resourceVersion"),
        keep_alive_);
  }
  if (shutdown_requested_) {
    return SendStatus(ServiceUnavailableStatus("walwatch is shutting down"),
                      /*keep_alive=*/false);
  }
  phase_ = Phase::kWaitingForState;
  awaiting_ = what;
  AbandonStateRequest();
  const uint64_t token = answer_token_;
  auto wanted = std::make_shared<std::atomic<bool>>(true);
  state_request_wanted_ = wanted;
  ArmDeadline(kStateAnswerTimeout);
  std::weak_ptr<HttpSession> weak = weak_from_this();
  // Runs on a worker thread: only hand over to the strand. A session that
  // ended meanwhile is not kept alive for an answer nobody wants.
  StateSource::RvCallback done = [weak, token](StateSource::AnsweredRv rv,
                                               const StateError* error) {
    std::shared_ptr<HttpSession> self = weak.lock();
    if (!self) return;
    std::optional<StateError> copied;
    if (error) copied = *error;
    SessionExecutor strand = self->strand_;
    net::post(strand, [self = std::move(self), token, rv,
                       copied = std::move(copied)]() mutable {
      self->Guarded("state answer",
                    [&] { self->OnStateAnswer(token, rv, std::move(copied)); });
    });
  };
  StateSource::Wanted still_wanted = [wanted] { return wanted->load(); };
  if (what == Awaiting::kHandoffRv) {
    state->HandoffRv(*handoff, std::move(done), std::move(still_wanted));
  } else {
    state->FreshRv(std::move(done), std::move(still_wanted));
  }
  // Notice a client that gives up while the answer is worked out.
  if (what == Awaiting::kWatchStartRv) {
    if (!reading_for_disconnect_) DoReadForDisconnect();
  } else if (!reading_ahead_) {
    DoReadAhead();
  }
}

void HttpSession::DoReadAhead() {
  constexpr size_t kReadAheadBytes = 1024;
  // A client that pipelines more than a request's worth is not watched
  // further; the deadline still bounds the wait.
  if (buffer_.max_size() - buffer_.size() < kReadAheadBytes) return;
  boost::optional<decltype(buffer_)::mutable_buffers_type> space;
  try {
    space.emplace(buffer_.prepare(kReadAheadBytes));
  } catch (const std::length_error&) {
    // No room in the buffer budget: the deadline still bounds the wait.
    budget_account_.ClearRefused();
    return;
  }
  reading_ahead_ = true;
  socket_.async_read_some(*space, Bind(&HttpSession::OnReadAhead));
}

void HttpSession::OnReadAhead(ErrorCode ec, size_t bytes) {
  reading_ahead_ = false;
  buffer_.commit(bytes);
  if (phase_ == Phase::kClosed) return;
  if (ec && ec != net::error::operation_aborted) {
    // The client went away (or shut down its side: it can send no next
    // request either). Nobody is left to answer.
    LogDebug("client went away while its request waited",
             {{"error", ec.message()}});
    if (phase_ == Phase::kResponding && !read_request_after_read_ahead_) {
      keep_alive_ = false;  // OnWriteResponse closes
      return;
    }
    return Close();
  }
  if (read_request_after_read_ahead_) {
    read_request_after_read_ahead_ = false;
    return DoReadRequest();
  }
  // Still waiting: keep listening. Responding: OnWriteResponse goes on.
  if (!ec && phase_ == Phase::kWaitingForState) DoReadAhead();
}

void HttpSession::DoReadForDisconnect() {
  reading_for_disconnect_ = true;
  socket_.async_read_some(net::buffer(discard_),
                          Bind(&HttpSession::OnReadForDisconnect));
}

void HttpSession::OnReadForDisconnect(ErrorCode ec, size_t /*bytes*/) {
  reading_for_disconnect_ = false;
  // Closed or handed over, or a Status is being written whose end closes
  // the connection.
  if (phase_ != Phase::kWaitingForState) return;
  if (ec) {
    LogDebug("watch client went away", {{"error", ec.message()}});
    return Close();
  }
  DoReadForDisconnect();  // a client has nothing to say yet; drop it
}

void HttpSession::OnStateAnswer(uint64_t token, StateSource::AnsweredRv rv,
                                std::optional<StateError> error) {
  if (phase_ != Phase::kWaitingForState || token != answer_token_) return;
  AbandonStateRequest();
  deadline_.cancel();
  Awaiting what = awaiting_;
  awaiting_ = Awaiting::kNothing;
  if (error) {
    // A watch's read for disconnect is pending: its connection cannot carry
    // another request.
    return SendStatus(
        StateErrorStatus(error->code, error->reason, error->message),
        keep_alive_ && !reading_for_disconnect_);
  }
  if (what == Awaiting::kWatchStartRv) return HandOver()->StartAfter(rv.rv);
  SendJson(200, ResourceVersionJson(rv.rv, rv.latest), keep_alive_);
}

void HttpSession::GiveUpWaitingForState(const K8sStatus& status) {
  AbandonStateRequest();
  awaiting_ = Awaiting::kNothing;
  deadline_.cancel();
  if (rv_wait_id_ != 0) {
    context_->log.CancelWaitForRv(rv_wait_id_);
    rv_wait_id_ = 0;
  }
  // A watch waiting for its initial state has a read pending on the socket;
  // its connection cannot carry another request.
  bool keep_alive = keep_alive_ && !reading_for_disconnect_;
  if (state_stream_) {
    state_stream_->Cancel();
    state_stream_.reset();
  }
  SendStatus(status, keep_alive);
}

// ---------------------------------------------------------------------------
// A watch, up to its header

void HttpSession::StartWatch() {
  WatchStream::Spec& spec = *watch_;
  const WatchRequest& watch = spec.watch;
  // Every resource path is served, whether or not the table holds a row of
  // it (watchserver/PROTOCOL.md, "Paths"): the APIServer decides which resources
  // exist. The catalog only names the kind the bookmarks carry.
  spec.resource_key =
      EventLog::ResourceKey(watch.group, watch.version, watch.resource);
  spec.selection = {spec.resource_key, watch.cluster};
  // Selectors are compiled once per watch; every event is matched against
  // the fields its Event carries.
  std::string error = WatchFilter::Create(watch, &spec.filter);
  if (!error.empty()) {
    return SendStatus({400, "BadRequest", error, std::nullopt}, keep_alive_);
  }
  if (shutdown_requested_) {
    return SendStatus(ServiceUnavailableStatus("walwatch is shutting down"),
                      /*keep_alive=*/false);
  }
  spec.kind = context_->catalog.Resolve(
      GroupVersionResource{watch.group, watch.version, watch.resource});
  spec.api_version = ApiVersion(watch.group, watch.version);
  spec.barriers_at_start = context_->log.GetStats().barriers;

  EventLog& log = context_->log;
  const std::optional<uint64_t>& rv = watch.resource_version;
  if (rv && *rv > log.ceiling_rv()) {
    // Another history's (a failover on a binlog source): no wait reaches
    // it, and the watch from it is Expired.
    return HandOver()->StartAfter(*rv);
  }
  if (watch.send_initial_events == true) {
    // WatchList: the state at least as new as rv, an end bookmark, then
    // live events.
    if (rv && *rv > log.current_rv()) return WaitForResourceVersion(*rv);
    return StartInitialState();
  }
  if (watch.send_initial_events == false) {
    // As the apiserver: unset means "from the most recent", which the
    // database decides; "0" means "from any", so from what walwatch has.
    if (!rv) return AskStateSource(Awaiting::kWatchStartRv, nullptr);
    if (*rv == 0) return HandOver()->StartAfter(log.current_rv());
  } else if (!rv || *rv == 0) {
    return StartInitialState();
  }
  if (*rv > log.current_rv()) return WaitForResourceVersion(*rv);
  HandOver()->StartAfter(*rv);
}

void HttpSession::WaitForResourceVersion(uint64_t rv) {
  phase_ = Phase::kWaitingForRv;
  ArmDeadline(context_->options.too_large_rv_wait);
  // The wake runs on the replication thread (or here, if rv is already
  // reached) and only hands over to the strand. The deadline keeps the
  // session alive.
  rv_wait_id_ = context_->log.WaitForRv(
      rv, WakeOnStrand<&HttpSession::OnResourceVersionReached>());
}

void HttpSession::OnResourceVersionReached() {
  if (phase_ != Phase::kWaitingForRv) return;
  rv_wait_id_ = 0;  // it fired
  deadline_.cancel();
  ResourceVersionReached();
}

void HttpSession::ResourceVersionReached() {
  if (watch_->watch.send_initial_events == true) return StartInitialState();
  HandOver()->StartAfter(*watch_->watch.resource_version);
}

void HttpSession::StartInitialState() {
  StateSource* state = context_->options.state;
  if (state == nullptr) {
    return SendStatus(
        ServiceUnavailableStatus(
            "walwatch runs without a state source: it cannot send initial "
            "events; watch from a resourceVersion"),
        keep_alive_);
  }
  phase_ = Phase::kWaitingForState;
  awaiting_ = Awaiting::kInitialState;
  AbandonStateRequest();
  ArmDeadline(kStateAnswerTimeout);
  Metrics* metrics = context_->options.metrics;
  state_stream_ = std::make_shared<InitialStateStream>(
      context_->options.max_initial_state_queue_bytes,
      context_->options.initial_state_timeout,
      context_->options.initial_state_stall_timeout,
      [metrics] {
        if (metrics) metrics->InitialStateStalled();
      },
      context_->options.initial_state_min_rate);
  const WatchRequest& watch = watch_->watch;
  state->ReadState(
      StateQuery{watch.group, watch.version, watch.resource, watch.cluster,
                 watch.ns, watch.resource_version.value_or(0), client_},
      state_stream_);
  // Notice a client that gives up while the state is read.
  DoReadForDisconnect();
  PollStateBeforeReady();
}

void HttpSession::OnStateWake() {
  if (phase_ == Phase::kWaitingForState &&
      awaiting_ == Awaiting::kInitialState) {
    PollStateBeforeReady();
  }
}

void HttpSession::PollStateBeforeReady() {
  if (!state_stream_) return;
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t =
      state_stream_->Take(&taken, WakeOnStrand<&HttpSession::OnStateWake>());
  if (!t.failed && !t.ready && (!taken.empty() || t.finished)) {
    t.failed = true;
    t.error = {500, "InternalError",
               "the state reader sent events before their resourceVersion"};
  }
  if (t.failed) {
    // Nothing is written yet: the failure is the answer.
    return GiveUpWaitingForState(
        StateErrorStatus(t.error.code, t.error.reason, t.error.message));
  }
  if (!t.ready) return;  // the wake is armed
  deadline_.cancel();
  AbandonStateRequest();
  // The RV of the state is known: the stream can begin.
  WatchStream::InitialState initial{std::move(state_stream_), t.rv, t.finished,
                                    std::move(taken)};
  HandOver()->StartWithState(std::move(initial));
}

std::shared_ptr<WatchStream> HttpSession::HandOver() {
  // The read for disconnect the waits left pending would complete into
  // this session: the stream does its own.
  ErrorCode ignored;
  socket_.cancel(ignored);
  deadline_.cancel();
  phase_ = Phase::kHandedOver;
  awaiting_ = Awaiting::kNothing;
  auto stream = std::make_shared<WatchStream>(std::move(socket_), context_,
                                              std::move(*watch_));
  watch_.reset();
  // Stop() ends this session, or the stream in its place, whichever it
  // finds; the stream, if it came too late to be found.
  if (!context_->sessions.Replace(this, stream)) stream->Shutdown();
  return stream;
}

}  // namespace walwatch
