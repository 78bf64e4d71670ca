// HttpSession is one client connection of HttpServer, as long as it speaks
// plain HTTP: it reads requests (Boost.Beast) and routes them. It answers
// health probes, the RV endpoints (/walwatch/v1/handoff and freshrv, from
// the StateSource) and errors with keep-alive, refuses a connection past
// the server's limits with 429, and takes a watch request as far as its 200
// header: it checks the request, and waits for the resourceVersion the
// watch starts from (one newer than the log's, a fresh one from the
// StateSource, or the initial state's), answering a Status if that fails.
// Then it hands the connection over to a WatchStream (watch_stream.h),
// which takes its place in the SessionRegistry, and its part is done.
// watchserver/PROTOCOL.md is the wire contract.
//
// Ownership: a StrandSession (strand_session.h): it owns itself, alive while
// an asynchronous operation holds shared_from_this(); the log's, the state
// stream's and the StateSource's answers hold only a weak_ptr, so a session
// whose client disconnected is freed at once.
// Thread safety: everything but Shutdown() runs on the session's strand (the
// socket's executor). Shutdown() may be called from any thread.
//
// Its .cc is some 700 lines: every phase of a request shares the one
// socket, read buffer, deadline and StateSource answer token, and a request
// waiting for an answer still reads, to notice a client that leaves.
//
// Pulls in Asio and Beast: include it only from the serving code
// (http_server.cc, http_session.cc).
#ifndef WALWATCH_WATCHSERVER_HTTP_SESSION_H_
#define WALWATCH_WATCHSERVER_HTTP_SESSION_H_

#include <array>
#include <atomic>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cdc/model/state_source.h"
#include "watchserver/connection_budget.h"
#include "watchserver/k8s_status.h"
#include "watchserver/request_parser.h"
#include "watchserver/server_context.h"
#include "watchserver/strand_session.h"
#include "watchserver/watch_request.h"
#include "watchserver/watch_stream.h"
#include "watchserver/write_stall_timer.h"

namespace walwatch {

class HttpSession : public StrandSession<HttpSession> {
 public:
  // `client` identifies the peer (PeerIdentity) for the state readers'
  // per-client share.
  HttpSession(SessionSocket socket, std::shared_ptr<ServerContext> context,
              std::string client = "");
  ~HttpSession() override;

  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // Registers with the context's registry and reads the first request.
  void Start();

  // Before Start(): answer the first request with `status` and close, for
  // a connection past the server's limit. Reading the request first lets
  // an HTTP client see the answer rather than a reset; a refused connection
  // gets 2 s and 64 KiB of header for it. The caller has counted it in
  // ServerContext::refusing, which Close() undoes.
  void Refuse(K8sStatus status) { refusal_ = std::move(status); }

  // Any thread: ends the session soon. A connection between requests is
  // closed; a response being written is the connection's last; a request
  // waiting for the state source or a resourceVersion gets 503. (A watch
  // already handed over is its WatchStream's to end.)
  void Shutdown() override;

 private:
  friend class StrandSession<HttpSession>;

  enum class Phase {
    kReadingRequest,
    kResponding,       // writing a Status, health or ResourceVersion response
    kWaitingForRv,     // a watch's resourceVersion is ahead of the log
    kWaitingForState,  // waiting for the StateSource (see Awaiting)
    kHandedOver,       // the connection is a WatchStream's now
    kClosed,
  };
  // What a session in kWaitingForState waits for.
  enum class Awaiting {
    kNothing,
    kInitialState,  // the state stream's Ready: its RV, then the header
    kHandoffRv,     // GET /walwatch/v1/handoff's answer
    kFreshRv,       // GET /walwatch/v1/freshrv's answer
    kWatchStartRv,  // a fresh RV to start a watch from (no initial events)
  };
  using ErrorCode = boost::system::error_code;

  // How long a request waits for the StateSource's answer (the state's RV,
  // a handoff, a fresh RV) before 504: its workers may all be busy reading
  // large states.
  static constexpr std::chrono::seconds kStateAnswerTimeout{60};

  // Requests and plain responses.
  void DoReadRequest();
  void OnReadRequest(ErrorCode ec, size_t bytes);
  void OnRequestError(ErrorCode ec);
  // Gives back the request buffer's memory if it holds no bytes: a
  // connection not reading a request holds none of the budget.
  void ReleaseRequestBuffer();
  void HandleRequest();
  // `allow`: the Allow header of a 405, or "".
  void SendStatus(const K8sStatus& status, bool keep_alive,
                  const char* allow = "");
  void SendText(unsigned code, std::string body, bool keep_alive);
  void SendJson(unsigned code, std::string body, bool keep_alive);
  void SendResponse(bool keep_alive);
  void OnWriteResponse(ErrorCode ec, size_t bytes);
  void OnWriteStalled(ErrorCode ec);

  // Answers from the StateSource. The callbacks run on a worker thread;
  // they post to the strand, and an answer whose token is not the current
  // one (the session gave up on it) is dropped.
  void AskStateSource(Awaiting what, const HandoffRequest* handoff);
  void OnStateAnswer(uint64_t token, StateSource::AnsweredRv rv,
                     std::optional<StateError> error);
  void GiveUpWaitingForState(const K8sStatus& status);
  // The answer to the StateSource request in flight (if any) stops
  // mattering: bumps answer_token_ and tells the source.
  void AbandonStateRequest();
  // While a handoff or freshrv request waits for its answer, a read stays
  // pending on the socket, so that a client that goes away frees its state
  // worker at once rather than at kStateAnswerTimeout. What it reads (a
  // pipelined next request) stays in buffer_ for DoReadRequest; the
  // connection's keep-alive is untouched. A watch waiting for its start
  // uses DoReadForDisconnect instead: its connection ends with it anyway.
  void DoReadAhead();
  void OnReadAhead(ErrorCode ec, size_t bytes);
  void DoReadForDisconnect();
  void OnReadForDisconnect(ErrorCode ec, size_t bytes);

  // A watch, up to its header: where it starts (the resourceVersion rules
  // of watchserver/PROTOCOL.md), and the waits before it can.
  void StartWatch();
  void WaitForResourceVersion(uint64_t rv);
  void OnResourceVersionReached();
  void ResourceVersionReached();
  void StartInitialState();
  void OnStateWake();
  void PollStateBeforeReady();
  // The header is due: the connection becomes a WatchStream's, which is
  // returned to be started.
  std::shared_ptr<WatchStream> HandOver();

  void ArmDeadline(Clock::duration after);
  void OnDeadline(ErrorCode ec);
  void OnShutdown();
  void Fail() { Close(); }  // a handler threw
  void Close();

  SessionSocket socket_;
  const std::shared_ptr<ServerContext> context_;
  Phase phase_ = Phase::kReadingRequest;
  bool shutdown_requested_ = false;
  std::optional<K8sStatus> refusal_;  // see Refuse()

  // What this connection holds of the server's buffer budget: buffer_,
  // the parsed request's fields allocate through it. Declared before them,
  // so that it outlives them.
  using BudgetAlloc = BudgetAllocator<char>;
  BudgetAccount budget_account_;

  boost::beast::basic_flat_buffer<BudgetAlloc> buffer_;
  using Request = boost::beast::http::request<
      boost::beast::http::string_body,
      boost::beast::http::basic_fields<BudgetAlloc>>;
  std::optional<RequestParser<boost::beast::http::string_body, BudgetAlloc>>
      parser_;
  Request request_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>>
      response_;
  bool keep_alive_ = false;

  // The phase's deadline: idle request read, resourceVersion wait, state
  // answer. And the bound on a response's write.
  SessionTimer deadline_;
  WriteStallTimer write_;

  // Waiting for the StateSource.
  Awaiting awaiting_ = Awaiting::kNothing;
  uint64_t answer_token_ = 0;  // bumped whenever an answer stops mattering
  // The StateSource request in flight reads this (Wanted); cleared with
  // each bump of answer_token_ by AbandonStateRequest.
  std::shared_ptr<std::atomic<bool>> state_request_wanted_;
  uint64_t rv_wait_id_ = 0;     // EventLog::WaitForRv id, 0 if none
  bool reading_ahead_ = false;  // DoReadAhead's read is pending
  // The response is written and the read-ahead was cancelled: its
  // completion reads the next request.
  bool read_request_after_read_ahead_ = false;
  bool reading_for_disconnect_ = false;
  std::array<char, 256> discard_;  // what a watch's client sends meanwhile

  // The watch being started, until HandOver moves it into its stream.
  std::optional<WatchStream::Spec> watch_;
  // Its initial state, read until its RV is known.
  std::shared_ptr<InitialStateStream> state_stream_;
  const std::string client_;  // StateQuery::client of its initial states
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_HTTP_SESSION_H_
