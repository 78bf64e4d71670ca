// WatchStream serves one watch on a connection that an HttpSession handed
// over to it at the watch's 200 header, as Beast's advanced_server hands an
// upgraded connection from its http_session to a websocket_session. From
// there the stream owns the connection until it ends: where in the log the
// watch starts, its initial state (when the watch asked for one), then live
// events pulled from the EventLog with its own cursor, bookmarks on a timer,
// and its end: with a bookmark (if allowed) and the final chunk on
// timeoutSeconds or Shutdown(), after a 410 ERROR event when its cursor
// falls out of the log or its backlog passes the bound, or at once when the
// client goes away. Its ChunkWriter (chunk_writer.h) does the writing.
// watchserver/PROTOCOL.md is the contract this implements.
//
// Ownership: a StrandSession (strand_session.h): it owns itself, alive while
// an asynchronous operation holds shared_from_this(); the log's and the
// state stream's wake-ups hold only a weak_ptr.
// Thread safety: everything but Shutdown() runs on the strand (the socket's
// executor); Shutdown() may be called from any thread.
//
// Its .cc is some 650 lines: a stream's parts (the initial state, the live
// pump, bookmarks, the end) all move one cursor and one last_rv_ and share
// one write in flight; split apart, they would pass those back and forth.
//
// Pulls in Asio and Beast: include it only from the serving code.
#ifndef WALWATCH_WATCHSERVER_WATCH_STREAM_H_
#define WALWATCH_WATCHSERVER_WATCH_STREAM_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cdc/model/event.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/model/state_source.h"
#include "watchserver/chunk_writer.h"
#include "watchserver/event_log.h"
#include "watchserver/k8s_status.h"
#include "watchserver/metrics.h"
#include "watchserver/watch_filter.h"
#include "watchserver/server_context.h"
#include "watchserver/strand_session.h"
#include "watchserver/watch_request.h"

namespace walwatch {

class WatchStream : public StrandSession<WatchStream> {
 public:
  // What the HTTP session made of the watch request before the stream
  // began (it answered any error in it).
  struct Spec {
    WatchRequest watch;
    WatchFilter filter;  // the selectors, compiled once per watch
    // EventLog::ResourceKey of the watch, and with its cluster what the
    // log's floors are of.
    std::string resource_key;
    EventLog::Selection selection;
    // The kind its bookmarks carry, and where it came from.
    ResolvedKind kind;
    std::string api_version;  // "v1", "apps/v1"...
    // EventLog::GetStats().barriers when the request came: a 410 after a
    // barrier since then counts as WatchEndReason::kBarrier.
    uint64_t barriers_at_start = 0;
  };

  // An initial state whose RV is known (InitialStateStream::Take said
  // ready): its events follow the header, then the live stream continues
  // after `rv`.
  struct InitialState {
    std::shared_ptr<InitialStateStream> stream;
    uint64_t rv = 0;
    bool finished = false;        // the stream has given every event
    std::vector<EventPtr> taken;  // what Take gave so far, not yet filtered
  };

  // `socket` has no operation pending.
  WatchStream(SessionSocket socket, std::shared_ptr<ServerContext> context,
              Spec spec);
  ~WatchStream() override;

  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // One of these, once: writes the header, then the watch's events after
  // `rv` (a 410 ERROR event and the end if the log no longer has them
  // all), or the initial state and the events after it.
  void StartAfter(uint64_t rv);
  void StartWithState(InitialState state);

  // Any thread: ends the stream soon, with a bookmark (if allowed) and the
  // final chunk.
  void Shutdown() override;

 private:
  friend class StrandSession<WatchStream>;
  using ErrorCode = boost::system::error_code;

  // Where the stream starts.
  void Begin();
  void StartStream(uint64_t seq, uint64_t from_rv,
                   std::optional<K8sStatus> first_error);
  void OnWriteHeader(ErrorCode ec);

  // The initial state.
  void PumpInitialState();
  // Takes the matching events of `taken` into initial_pending_.
  void KeepMatching(std::vector<EventPtr>* taken);
  void FinishInitialState();
  // The log dropped events after initial_rv_ while the state was sent: the
  // 410 ERROR event now, the rest of the state never.
  void ExpireInitialState();
  void OnStateWake();

  // Streaming.
  void Pump();
  // What this watch sends for a live event: the event, a variant of it for
  // a MODIFIED that moved the object into (ADDED) or out of (DELETED, the
  // previous object) its label selection, or null.
  EventPtr ForThisWatch(EventPtr event) const;
  void WaitForLog();
  void OnLogAppend();
  void WriteBatch(bool live);
  void OnWriteEvents(ErrorCode ec);

  // Bookmarks.
  void ArmBookmarkTimer();
  void OnBookmarkTimer(ErrorCode ec);
  // Sets spec_.kind from the catalog.
  void ResolveKind();
  void WriteBookmark(uint64_t rv, bool initial_events_end);
  void OnWriteBookmark(ErrorCode ec);

  // The end.
  void FinishStream();
  void WriteErrorAndEnd(const K8sStatus& status, WatchEndReason reason);
  void OnWriteError(ErrorCode ec);
  void WriteFinalChunk();
  void OnWriteFinalChunk(ErrorCode ec);
  void DoReadForDisconnect();
  void OnReadForDisconnect(ErrorCode ec, size_t bytes);
  // The first reason given is the one counted when the stream ends.
  void SetEndReason(WatchEndReason reason);
  // 410 for a cursor that fell out of the log: kBarrier if a barrier was
  // appended since the watch was asked for, else kExpired.
  WatchEndReason ExpiryReason() const;
  void OnDeadline(ErrorCode ec);
  void OnShutdown();
  void Fail();  // a handler threw
  void Close();

  SessionSocket socket_;
  const std::shared_ptr<ServerContext> context_;
  Spec spec_;
  ChunkWriter writer_;  // after socket_, which it writes to
  bool closed_ = false;

  // timeoutSeconds, and bookmarks.
  SessionTimer deadline_;
  SessionTimer bookmark_timer_;

  uint64_t seq_ = 0;  // next event in the log to consider
  // The RV of the last event or bookmark sent, or where the watch started:
  // bookmarks never go below it.
  uint64_t last_rv_ = 0;
  // The log's current RV when this watch began reading it. Events
  // committed above it reached the log while the watch ran: their
  // commit-to-write is walwatch's latency. Those at or below it are a
  // resumed watch catching up with the past, minutes old maybe; observing
  // them would read as latency.
  uint64_t live_after_rv_ = 0;
  std::optional<K8sStatus> first_error_;  // sent right after the header
  bool waiting_for_log_ = false;
  bool finish_requested_ = false;  // end with the final chunk when idle
  bool ending_ = false;            // ERROR event or final chunk under way
  std::string error_line_;         // ERROR event being written
  std::string bookmark_line_;      // BOOKMARK event being written
  std::vector<EventPtr> read_batch_;
  std::vector<uint64_t> read_seqs_;  // the seq of each of read_batch_
  std::array<char, 256> discard_;    // bytes a client sends mid-stream

  // The initial state: from StartWithState (RV initial_rv_) until every
  // event has been sent; then the live stream continues after initial_rv_.
  std::shared_ptr<InitialStateStream> state_stream_;
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

  // A stream counts, in the metrics and in the log's watchers of its
  // resource (EventLog::AddWatcher), from its header until Close().
  bool watch_counted_ = false;
  std::optional<WatchEndReason> end_reason_;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_WATCH_STREAM_H_
