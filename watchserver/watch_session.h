// WatchSession is one client connection of HttpServer: it reads requests
// (Boost.Beast), answers health probes, the RV endpoints and errors with
// keep-alive, and serves a watch as a chunked stream: the initial state (from
// the StateSource) when the watch asks for it, then live events pulled from
// the EventLog with its own cursor, with bookmarks on a timer. A watch ends
// the connection: with a bookmark (if allowed) and the final chunk on
// timeoutSeconds or Stop(), after a 410 ERROR event when its cursor falls out
// of the log or its backlog passes the bound, or at once when the client goes
// away. schema/PROTOCOL.md is the wire contract.
//
// The methods are split by concern: watch_session.cc (lifetime, requests,
// plain responses, the RV endpoints) and watch_stream.cc (everything about a
// watch: where it starts, the initial state, streaming, bookmarks, its end).
//
// Ownership: a session owns itself, in the manner of the Beast examples. It
// lives exactly as long as an asynchronous operation (socket read or write,
// timer) holds shared_from_this(); the log's, the state stream's and the
// StateSource's wake-ups hold only a weak_ptr, so a session whose client
// disconnected is freed at once.
// Thread safety: everything but Shutdown() runs on the session's strand (the
// socket's executor). Shutdown() may be called from any thread.
//
// This header pulls in Asio and Beast: include it only from the serving code
// (http_server.cc, watch_session.cc), never from widely included headers.
#ifndef WALWATCH_WATCHSERVER_WATCH_SESSION_H_
#define WALWATCH_WATCHSERVER_WATCH_SESSION_H_

#include <array>
#include <atomic>
#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/model/event.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/model/state_source.h"
#include "watchserver/connection_budget.h"
#include "watchserver/event_log.h"
#include "watchserver/http_server.h"
#include "watchserver/k8s_status.h"
#include "watchserver/metrics.h"
#include "watchserver/request_parser.h"
#include "watchserver/selector.h"
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
                HttpServerOptions options, std::function<std::string()> ready)
      : log(log),
        catalog(catalog),
        options(std::move(options)),
        ready(std::move(ready)),
        buffer_budget(this->options.max_connection_buffer_bytes) {}

  EventLog& log;
  ResourceCatalog& catalog;
  const HttpServerOptions options;
  const std::function<std::string()> ready;  // "" or why not ready
  SessionRegistry sessions;
  // HttpServer::connections_refused().
  std::atomic<uint64_t> refused_limit{0};
  std::atomic<uint64_t> refused_peer{0};
  // Refused sessions still answering (WatchSession::Refuse): they do not
  // count against max_connections, and at most kMaxRefusing are open.
  std::atomic<size_t> refusing{0};
  static constexpr size_t kMaxRefusing = 16;
  // Request buffers and spilled writes of every session (connection_budget.h),
  // and its refusals (HttpServer::connection_buffer_refusals).
  ConnectionBudget buffer_budget;
  std::atomic<uint64_t> buffer_refused_request{0};
  std::atomic<uint64_t> buffer_refused_watch{0};
};

class WatchSession : public std::enable_shared_from_this<WatchSession> {
 public:
  // The session's strand, by its concrete type: with the type-erased
  // any_io_executor, every operation of the hot path paid for dynamic
  // dispatch (~4% of walwatch's samples at 1,000 watchers).
  using Executor =
      boost::asio::strand<boost::asio::io_context::executor_type>;
  // A Unix or a TCP connection, on its own strand.
  using Socket =
      boost::asio::basic_stream_socket<boost::asio::generic::stream_protocol,
                                       Executor>;
  using Timer = boost::asio::basic_waitable_timer<
      std::chrono::steady_clock,
      boost::asio::wait_traits<std::chrono::steady_clock>, Executor>;

  // `client` identifies the peer (PeerIdentity) for the state readers'
  // per-client share.
  WatchSession(Socket socket, std::shared_ptr<ServerContext> context,
               std::string client = "");
  ~WatchSession();

  WatchSession(const WatchSession&) = delete;
  WatchSession& operator=(const WatchSession&) = delete;

  // Registers with the context's registry and reads the first request.
  void Start();

  // Before Start(): answer the first request with `status` and close, for
  // a connection past the server's limit. Reading the request first lets
  // an HTTP client see the answer rather than a reset; a refused connection
  // gets 2 s and 64 KiB of header for it. The caller has counted it in
  // ServerContext::refusing, which Close() undoes.
  void Refuse(K8sStatus status) { refusal_ = std::move(status); }

  // Any thread: ends the session soon. A stream is ended with a bookmark
  // (if allowed) and the final chunk; a connection between requests is
  // closed; a response being written is the connection's last; a request
  // waiting for the state source or a resourceVersion gets 503.
  void Shutdown();

 private:
  enum class Phase {
    kReadingRequest,
    kResponding,       // writing a Status, health or ResourceVersion response
    kWaitingForRv,     // resourceVersion ahead of the log: waiting for it
    kWaitingForState,  // waiting for the StateSource (see Awaiting)
    kStreaming,        // watch header sent (or being sent); chunks follow
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

  // Wraps a member function as a completion handler that keeps the session
  // alive and lets no exception escape into the io_context.
  template <class... Args>
  auto Bind(void (WatchSession::*handler)(Args...));
  template <class F>
  void Guarded(const char* where, F&& f);

  // Requests and plain responses (watch_session.cc).
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

  // Answers from the StateSource (watch_session.cc). The callbacks run on a
  // worker thread; they post to the strand, and an answer whose token is not
  // the current one (the session gave up on it) is dropped.
  void AskStateSource(Awaiting what, const HandoffRequest* handoff);
  void OnStateAnswer(uint64_t token, uint64_t rv,
                     std::optional<StateError> error);
  void GiveUpWaitingForState(const K8sStatus& status);
  // While a handoff or freshrv request waits for its answer, a read stays
  // pending on the socket, so that a client that goes away frees its state
  // worker at once rather than at kStateAnswerTimeout. What it reads (a
  // pipelined next request) stays in buffer_ for DoReadRequest; the
  // connection's keep-alive is untouched. A watch waiting for its start
  // uses DoReadForDisconnect instead: its connection ends with it anyway.
  void DoReadAhead();
  void OnReadAhead(ErrorCode ec, size_t bytes);

  // Where a watch starts (watch_stream.cc).
  void StartWatch();
  void WaitForResourceVersion(uint64_t rv);
  void OnResourceVersionReached();
  void ResourceVersionReached();
  void StartStreamAfter(uint64_t rv);
  void StartStream(uint64_t seq, uint64_t from_rv,
                   std::optional<K8sStatus> first_error);
  void WriteStreamHeader();
  void OnWriteHeader(ErrorCode ec, size_t bytes);

  // The initial state (watch_stream.cc).
  void StartInitialState();
  std::function<void()> StateWake();
  void OnStateWake();
  void PollStateBeforeReady();
  void PumpInitialState();
  void FinishInitialState();
  // The log dropped events after initial_rv_ while the state was sent: the
  // 410 ERROR event now, the rest of the state never.
  void ExpireInitialState();

  // Streaming (watch_stream.cc).
  void Pump();
  // What this watch sends for a live event: the event, a variant of it for
  // a MODIFIED that moved the object into (ADDED) or out of (DELETED, the
  // previous object) its label selection, or null.
  EventPtr ForThisWatch(EventPtr event) const;
  void WaitForLog();
  void OnLogAppend();
  void WriteEvents(std::vector<EventPtr> events, bool live);
  // Writes events_in_flight_: each run of events in a WireArena as the
  // chunks they are framed as there, with sendfile(2) from the arena's file;
  // each run of other events as one chunk, gathered from memory.
  void WriteEventsInFlight(bool live);
  // Writes pieces_ from next_piece_ on until all are written (no error),
  // the socket is full (would_block) or the write fails.
  ErrorCode SendPieces();
  // Before a write waits for its client: copies its unsent rest into
  // spill_ and lets go of its events, so that a slow client pins no
  // segment of the arena (whose events the log may evict meanwhile).
  // False if the connection buffer budget has no room for the copy: then
  // nothing was let go of.
  bool SpillRest();
  // After a SpillRest that found no room: the write keeps its events this
  // long (spill_deferred_), then spills or ends the watcher. A quarter of a
  // second, as the apiserver's watch cache gives a watcher whose buffer is
  // full before it closes it.
 public:
  static constexpr std::chrono::milliseconds kSpillRetryDelay{250};

 private:
  // Spills a deferred write if the budget has room now, and re-arms the
  // write timer as for any write waiting on its client.
  bool RetryDeferredSpill();
  void OnWritable(ErrorCode ec);
  // Empties events_in_flight_ and the pieces after a write, keeping room
  // for kKeptWriteCapacity events.
  void ReleaseWriteBuffers();
  static constexpr size_t kKeptWriteCapacity = 16;
  void OnWriteEvents(ErrorCode ec, size_t bytes);
  void ArmBookmarkTimer();
  void OnBookmarkTimer(ErrorCode ec);
  // Sets kind_ and kind_source_ from the catalog.
  void ResolveKind();
  void WriteBookmark(uint64_t rv, bool initial_events_end);
  void OnWriteBookmark(ErrorCode ec, size_t bytes);
  void FinishStream();
  void WriteErrorAndEnd(const K8sStatus& status, WatchEndReason reason);
  void OnWriteError(ErrorCode ec, size_t bytes);
  void WriteFinalChunk();
  void OnWriteFinalChunk(ErrorCode ec, size_t bytes);
  void DoReadForDisconnect();
  void OnReadForDisconnect(ErrorCode ec, size_t bytes);
  // The first reason given is the one counted when the stream ends.
  void SetEndReason(WatchEndReason reason);
  // 410 for a cursor that fell out of the log: kBarrier if a barrier was
  // appended since the watch started, else kExpired.
  WatchEndReason ExpiryReason() const;

  // One write in flight at a time (write_in_flight_). An asynchronous
  // write goes between BeginWrite and EndWrite, which arm and disarm the
  // write timer: a write the client does not drain in time closes the
  // connection. A write that went into the socket at once (WriteEvents)
  // arms no timer and ends with EndWrite too.
  void BeginWrite();
  void EndWrite();
  void ArmWriteTimer(Clock::duration after);
  void OnWriteStalled(ErrorCode ec);
  // The answer to the StateSource request in flight (if any) stops
  // mattering: bumps answer_token_ and tells the source.
  void AbandonStateRequest();

  void ArmDeadline(Clock::duration after);
  void ArmDeadlineAt(Clock::time_point at);
  void OnDeadline(ErrorCode ec);
  void OnShutdown();
  void Close();

  const Executor strand_;
  Socket socket_;
  const std::shared_ptr<ServerContext> context_;
  Phase phase_ = Phase::kReadingRequest;
  bool shutdown_requested_ = false;
  std::optional<K8sStatus> refusal_;  // see Refuse()

  // What this connection holds of the server's buffer budget: buffer_,
  // the parsed request's fields and spill_ allocate through it. Declared
  // before them, so that it outlives them.
  using BudgetAlloc = BudgetAllocator<char>;
  BudgetAccount budget_account_;

  // Request side.
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

  // One timer per phase's deadline (idle request read, resourceVersion
  // wait, state answer, watch timeout), one for bookmarks, and one bounding
  // the write in flight.
  Timer deadline_;
  Timer bookmark_timer_;
  Timer write_timer_;
  bool write_in_flight_ = false;
  // Whether write_timer_ bounds the write in flight. An expiry that was
  // already queued when its write completed finds it false and does
  // nothing, even if a later write (one that needed no timer) is in flight.
  bool write_timer_armed_ = false;

  // Waiting for the StateSource.
  Awaiting awaiting_ = Awaiting::kNothing;
  uint64_t answer_token_ = 0;  // bumped whenever an answer stops mattering
  // The StateSource request in flight reads this (Wanted); cleared with
  // each bump of answer_token_ by AbandonStateRequest.
  std::shared_ptr<std::atomic<bool>> state_request_wanted_;
  uint64_t rv_wait_id_ = 0;    // EventLog::WaitForRv id, 0 if none
  bool reading_ahead_ = false;  // DoReadAhead's read is pending
  // The response is written and the read-ahead was cancelled: its
  // completion reads the next request.
  bool read_request_after_read_ahead_ = false;

  // Watch state.
  WatchRequest watch_;
  WatchFilter filter_;
  std::string kind_;         // of the watched resource, for bookmarks
  KindSource kind_source_ = KindSource::kGuessed;  // where kind_ came from
  std::string api_version_;  // "v1", "apps/v1"...
  uint64_t seq_ = 0;         // next event in the log to consider
  // The RV of the last event or bookmark sent, or where the watch started:
  // bookmarks never go below it.
  uint64_t last_rv_ = 0;
  uint64_t barriers_at_start_ = 0;
  boost::beast::http::response<boost::beast::http::empty_body> stream_head_;
  std::optional<
      boost::beast::http::response_serializer<boost::beast::http::empty_body>>
      serializer_;
  std::optional<K8sStatus> first_error_;  // sent right after the header
  bool waiting_for_log_ = false;
  bool finish_requested_ = false;  // end with the final chunk when idle
  bool ending_ = false;            // ERROR event or final chunk under way
  bool reading_for_disconnect_ = false;
  std::vector<EventPtr> events_in_flight_;  // keep wire bytes alive
  // The log's current RV when this watch began reading it. Events
  // committed above it reached the log while the watch ran: their
  // commit-to-write is walwatch's latency. Those at or below it are a
  // resumed watch catching up with the past, minutes old maybe; observing
  // them would read as latency.
  uint64_t live_after_rv_ = 0;
  // The write in flight, in pieces: bytes in memory, or (fd >= 0) the
  // same bytes in a WireArena's file, which go out with sendfile(2). Heap
  // events' chunks are framed by their size_lines_ and kCrlf. Reused from
  // write to write, as is events_in_flight_'s capacity (up to
  // kKeptWriteCapacity): a write of a few events allocates nothing.
  struct WritePiece {
    const char* data;
    size_t size;
    int fd;           // -1: memory only
    uint64_t offset;  // of data in fd
  };
  std::vector<WritePiece> pieces_;
  // In a write of several pieces, a run of the file shorter than this is
  // gathered from memory with the rest rather than sent with sendfile.
  static constexpr size_t kMinSendfileBytes = 4096;
  size_t next_piece_ = 0;  // the first not wholly written
  using SizeLine = std::array<char, 2 * sizeof(size_t) + 2>;  // hex, CRLF
  std::vector<SizeLine> size_lines_;
  // Cleared if the kernel refuses sendfile to this socket: the arena's
  // bytes then go from their mapping, like the rest.
  bool sendfile_ok_ = true;
  bool spill_deferred_ = false;  // see kSpillRetryDelay
  // SpillRest's copy, while the write waits; charged to the budget.
  std::basic_string<char, std::char_traits<char>, BudgetAlloc> spill_;
  // What OnWriteEvents counts for the write in flight, taken as it starts
  // (SpillRest may let go of its events): events by type, and the commit
  // time of its oldest event committed while the watch ran (0: none).
  std::array<uint64_t, 3> in_flight_by_type_{};
  int64_t in_flight_live_commit_us_ = 0;
  std::string error_line_;                  // ERROR event being written
  std::string bookmark_line_;               // BOOKMARK event being written
  std::vector<EventPtr> read_batch_;
  std::vector<uint64_t> read_seqs_;  // the seq of each of read_batch_
  std::string resource_key_;  // EventLog::ResourceKey of watch_ (StartWatch)
  // resource_key_ and watch_'s cluster: what the log's floors are of.
  EventLog::Selection selection_;
  std::array<char, 256> discard_;  // bytes a client sends mid-stream

  // The initial state: from the state stream's Ready (RV initial_rv_) until
  // every event has been sent; then the live stream continues after
  // initial_rv_.
  std::shared_ptr<InitialStateStream> state_stream_;
  const std::string client_;  // StateQuery::client of its initial states
  bool initial_ = false;       // streaming the initial state
  bool initial_done_ = false;  // the stream has given every event
  uint64_t initial_rv_ = 0;
  std::vector<EventPtr> initial_pending_;  // taken and matching, not sent
  size_t initial_sent_ = 0;                // of initial_pending_

  // Bookmarks.
  bool bookmark_due_ = false;
  bool final_bookmark_sent_ = false;
  bool bookmark_rearm_ = false;  // the bookmark in flight is a periodic one
  bool go_live_after_write_ = false;  // the WatchList end bookmark

  // A stream counts, in the metrics and in the log's watchers of
  // resource_key_ (EventLog::AddWatcher), from its header until Close().
  bool watch_counted_ = false;
  std::optional<WatchEndReason> end_reason_;
};

// Logs that the connection buffer budget refused an allocation, at most
// once per 10 s for the whole process; `limit` is the budget.
void LogBufferBudgetRefusal(const char* what, size_t limit);

// Both halves of the session (watch_session.cc, watch_stream.cc) use these.
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
    SetEndReason(WatchEndReason::kError);
    Close();
  } catch (...) {
    LogError("watch session failed", {{"where", where}, {"error", "unknown"}});
    SetEndReason(WatchEndReason::kError);
    Close();
  }
}

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_WATCH_SESSION_H_
