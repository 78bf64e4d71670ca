// WatchStream: where a watch starts in the log, its initial state, the live
// stream from the EventLog, bookmarks, and how it ends. watchserver/PROTOCOL.md
// is the contract this implements.
#include "watchserver/watch_stream.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"

namespace walwatch {

namespace net = boost::asio;

namespace {

// Events taken from the log per Read, before filtering.
constexpr size_t kEventsPerRead = 256;
// Batches taken from the state stream per turn on the strand when none of
// them matches the watch's selectors; then the strand is yielded.
constexpr int kStateBatchesPerTurn = 64;
// Longest timeoutSeconds honoured as given; steady_clock must not overflow.
constexpr int64_t kMaxTimeoutSeconds = int64_t{365} * 24 * 3600;

std::mt19937& Rng() {
  thread_local std::mt19937 rng{std::random_device{}()};
  return rng;
}

std::chrono::seconds StreamTimeout(const WatchRequest& watch) {
  if (watch.timeout_seconds && *watch.timeout_seconds > 0) {
    return std::chrono::seconds(
        std::min(*watch.timeout_seconds, kMaxTimeoutSeconds));
  }
  // As the apiserver: a random timeout between 30 and 60 minutes, so that
  // watches opened together do not all end together.
  return std::chrono::seconds(
      std::uniform_int_distribution<int>(30 * 60, 60 * 60 - 1)(Rng()));
}

// The bookmark interval shortened by up to 5% at random.
std::chrono::milliseconds BookmarkDelay(std::chrono::milliseconds interval) {
  int64_t jitter = std::uniform_int_distribution<int64_t>(
      0, std::max<int64_t>(0, interval.count() / 20))(Rng());
  return std::chrono::milliseconds(
      std::max<int64_t>(1, interval.count() - jitter));
}

// Moves events from `from` (starting at *next) into `batch`, up to
// `max_bytes` of wire (at least one event).
void TakeWriteBatch(const std::vector<EventPtr>& from, size_t* next,
                    size_t max_bytes, std::vector<EventPtr>* batch) {
  size_t bytes = 0;
  while (*next < from.size()) {
    const EventPtr& event = from[*next];
    if (!batch->empty() && bytes + event->wire().size() > max_bytes) break;
    bytes += event->wire().size();
    batch->push_back(event);
    ++*next;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Lifetime

WatchStream::WatchStream(SessionSocket socket,
                         std::shared_ptr<ServerContext> context, Spec spec)
    : StrandSession(socket.get_executor()),
      socket_(std::move(socket)),
      context_(std::move(context)),
      spec_(std::move(spec)),
      writer_(socket_, *context_),
      deadline_(strand_),
      bookmark_timer_(strand_) {}

WatchStream::~WatchStream() {
  // Close() cancelled the state stream; this is for a stream that never
  // got there (an exception while being set up).
  if (state_stream_) state_stream_->Cancel();
  context_->sessions.Remove(this);
}

void WatchStream::Shutdown() {
  net::post(strand_, Bind(&WatchStream::OnShutdown));
}

void WatchStream::OnShutdown() {
  if (closed_) return;
  if (!ending_) SetEndReason(WatchEndReason::kShutdown);
  finish_requested_ = true;
  // A write in flight gets a short while to go out; then Pump finishes.
  writer_.Shutdown();
  if (!writer_.in_flight()) Pump();
}

void WatchStream::OnDeadline(ErrorCode ec) {
  if (ec == net::error::operation_aborted) return;
  // A handler already queued when the timer was re-armed: not our deadline.
  if (deadline_.expiry() > Clock::now()) return;
  if (closed_) return;
  if (!ending_) SetEndReason(WatchEndReason::kTimeout);
  finish_requested_ = true;
  Pump();
}

void WatchStream::Fail() {
  SetEndReason(WatchEndReason::kError);
  Close();
}

void WatchStream::Close() {
  if (closed_) return;
  closed_ = true;
  if (state_stream_) {
    state_stream_->Cancel();
    state_stream_.reset();
  }
  if (watch_counted_) {
    watch_counted_ = false;
    context_->log.RemoveWatcher(spec_.resource_key);
    if (Metrics* metrics = context_->options.metrics) {
      const WatchRequest& watch = spec_.watch;
      metrics->WatchEnded(watch.group, watch.version, watch.resource,
                          end_reason_.value_or(WatchEndReason::kError));
    }
  }
  CloseConnection(socket_, [&] {
    deadline_.cancel();
    bookmark_timer_.cancel();
    writer_.Cancel();
  });
}

// ---------------------------------------------------------------------------
// Where the stream starts

void WatchStream::StartAfter(uint64_t rv) {
  EventLog& log = context_->log;
  EventLog::SeekResult seek = log.Seek(rv, spec_.selection);
  if (seek.status == EventLog::SeekStatus::kExpired) {
    return StartStream(log.tail_seq(), rv,
                       ExpiredStatus(rv, log.FloorRv(spec_.selection)));
  }
  StartStream(seek.seq, rv, std::nullopt);
}

void WatchStream::StartWithState(InitialState state) {
  state_stream_ = std::move(state.stream);
  initial_ = true;
  initial_rv_ = state.rv;
  initial_done_ = state.finished;
  initial_pending_.clear();
  initial_sent_ = 0;
  KeepMatching(&state.taken);
  // The RV of the state is known: the stream can begin.
  StartStream(/*seq=*/0, initial_rv_, std::nullopt);
}

void WatchStream::StartStream(uint64_t seq, uint64_t from_rv,
                              std::optional<K8sStatus> first_error) {
  writer_.Attach(weak_from_this(), [this](WatchEndReason reason) {
    SetEndReason(reason);
    Close();
  });
  seq_ = seq;
  live_after_rv_ = context_->log.current_rv();
  last_rv_ = from_rv;
  first_error_ = std::move(first_error);

  // timeoutSeconds counts from here, the start of the stream.
  deadline_.expires_after(StreamTimeout(spec_.watch));
  deadline_.async_wait(Bind(&WatchStream::OnDeadline));
  const WatchRequest& watch = spec_.watch;
  watch_counted_ = true;
  context_->log.AddWatcher(spec_.resource_key);
  if (Metrics* metrics = context_->options.metrics) {
    metrics->WatchStarted(watch.group, watch.version, watch.resource);
  }
  writer_.WriteHeader(Bind(&WatchStream::OnWriteHeader));
  // A read stays pending for the whole stream: it completes when the client
  // goes away, which is how an idle watch notices.
  DoReadForDisconnect();
  LogDebug("watch started", {{"group", watch.group},
                             {"version", watch.version},
                             {"resource", watch.resource},
                             {"kind", spec_.kind.kind},
                             {"kind_source", KindSourceName(spec_.kind.source)},
                             {"cluster", watch.cluster},
                             {"namespace", watch.ns},
                             {"from_rv", from_rv}});
}

void WatchStream::OnWriteHeader(ErrorCode ec) {
  if (closed_) return;
  if (ec) {
    SetEndReason(WatchEndReason::kClientClosed);
    return Close();
  }
  if (first_error_) {
    K8sStatus status = std::move(*first_error_);
    first_error_.reset();
    return WriteErrorAndEnd(status, ExpiryReason());
  }
  if (!initial_) ArmBookmarkTimer();
  Pump();
}

// ---------------------------------------------------------------------------
// The initial state

void WatchStream::KeepMatching(std::vector<EventPtr>* taken) {
  for (EventPtr& event : *taken) {
    if (!event->wire().empty() && spec_.filter.Matches(*event)) {
      initial_pending_.push_back(std::move(event));
    }
  }
}

void WatchStream::OnStateWake() {
  if (!closed_ && initial_) Pump();
}

void WatchStream::PumpInitialState() {
  // The live stream continues from the log after initial_rv_. Once the log
  // has dropped events after it, the rest of the state would be sent only
  // to end in the same 410: end now.
  if (initial_rv_ < context_->log.FloorRv(spec_.selection)) {
    return ExpireInitialState();
  }
  const size_t max_bytes = context_->options.max_write_bytes;
  if (initial_sent_ < initial_pending_.size()) {
    TakeWriteBatch(initial_pending_, &initial_sent_, max_bytes,
                   &writer_.batch());
    return WriteBatch(/*live=*/false);
  }
  initial_pending_.clear();
  initial_sent_ = 0;
  if (!initial_done_) {
    for (int i = 0; i < kStateBatchesPerTurn; ++i) {
      std::vector<EventPtr> taken;
      InitialStateStream::Taken t = state_stream_->Take(
          &taken, WakeOnStrand<&WatchStream::OnStateWake>());
      if (t.failed) {
        initial_pending_.clear();
        if (t.error.code == 410) {
          // This client read too slowly (--initial-state-timeout, or
          // --initial-state-stall-timeout): like a watcher too far behind,
          // it relists.
          return WriteErrorAndEnd(
              K8sStatus{410, "Expired", t.error.message, std::nullopt},
              WatchEndReason::kBacklog);
        }
        return WriteErrorAndEnd(
            K8sStatus{500, "InternalError",
                      "reading the initial state failed: " + t.error.message,
                      std::nullopt},
            WatchEndReason::kError);
      }
      KeepMatching(&taken);
      if (t.finished) {
        initial_done_ = true;
        break;
      }
      if (taken.empty()) return;  // nothing new: the wake is armed
      if (!initial_pending_.empty()) break;
    }
    if (!initial_pending_.empty()) {
      TakeWriteBatch(initial_pending_, &initial_sent_, max_bytes,
                     &writer_.batch());
      return WriteBatch(/*live=*/false);
    }
    if (!initial_done_) {
      // Batch after batch matched nothing: yield the thread.
      net::post(strand_, Bind(&WatchStream::Pump));
      return;
    }
  }
  FinishInitialState();
}

void WatchStream::ExpireInitialState() {
  initial_pending_.clear();
  initial_sent_ = 0;
  if (state_stream_) {
    state_stream_->Cancel();
    state_stream_.reset();
  }
  EventLog& log = context_->log;
  LogWarn(
      "a watch's initial state took longer to send than the event log "
      "retains events; it ends with 410 (raise --max-log-bytes if this "
      "repeats)",
      {{"resource", spec_.watch.resource},
       {"state_rv", initial_rv_},
       {"floor_rv", log.FloorRv(spec_.selection)}});
  WriteErrorAndEnd(ExpiredStatus(initial_rv_, log.FloorRv(spec_.selection)),
                   ExpiryReason());
}

void WatchStream::FinishInitialState() {
  initial_ = false;
  state_stream_.reset();  // finished: nothing left to cancel
  // The live stream continues exactly after the state's RV.
  EventLog& log = context_->log;
  EventLog::SeekResult seek = log.Seek(initial_rv_, spec_.selection);
  if (seek.status == EventLog::SeekStatus::kExpired) {
    return WriteErrorAndEnd(
        ExpiredStatus(initial_rv_, log.FloorRv(spec_.selection)),
        ExpiryReason());
  }
  seq_ = seek.seq;
  // live_after_rv_ stays where StartStream put it: an event that reached
  // the log while the state was sent waited for it, and its commit-to-write
  // time says so.
  last_rv_ = std::max(last_rv_, initial_rv_);
  if (spec_.watch.send_initial_events == true) {
    go_live_after_write_ = true;
    return WriteBookmark(initial_rv_, /*initial_events_end=*/true);
  }
  ArmBookmarkTimer();
  Pump();
}

// ---------------------------------------------------------------------------
// Streaming

void WatchStream::Pump() {
  if (closed_ || writer_.in_flight() || ending_) return;
  if (finish_requested_) return FinishStream();
  if (initial_) return PumpInitialState();

  EventLog& log = context_->log;
  const EventLog::Selection& selection = spec_.selection;
  if (bookmark_due_) {
    // While this watch waited only for its own resource's events
    // (WaitForLog), other resources' may have piled up behind its cursor:
    // step over them (ReadForWatch below does the same).
    seq_ = log.SkipOtherResources(seq_, selection);
    bookmark_due_ = false;
    // Everything before seq_ has been sent or filtered out: resuming from
    // this RV continues exactly here. 0: the cursor fell out of the log, and
    // the read below says so.
    uint64_t rv = log.ResumeRvAt(seq_);
    if (rv != 0) {
      bookmark_rearm_ = true;
      return WriteBookmark(std::max(rv, last_rv_), false);
    }
    ArmBookmarkTimer();
  }

  read_batch_.clear();
  read_seqs_.clear();
  const EventLog::WatchRead read = log.ReadForWatch(
      seq_, selection, kEventsPerRead, &read_batch_, &read_seqs_);
  if (read.status == EventLog::ReadStatus::kExpired) {
    read_batch_.clear();
    return WriteErrorAndEnd(ExpiredStatus(last_rv_, log.FloorRv(selection)),
                            ExpiryReason());
  }
  if (read_batch_.empty()) {
    seq_ = read.next_seq;
    return WaitForLog();
  }
  const uint64_t backlog = read.backlog_bytes;
  if (backlog > context_->options.max_backlog_bytes) {
    read_batch_.clear();
    return WriteErrorAndEnd(
        BacklogStatus(backlog, context_->options.max_backlog_bytes),
        WatchEndReason::kBacklog);
  }

  // Take matching events up to max_write_bytes (at least one); the cursor
  // moves past every event looked at, matching or not. Events move from
  // read_batch_ to the write: each delivery costs one reference count
  // increment (in Read) and one decrement (after the write), atomics on a
  // cache line every HTTP thread touches.
  // They are taken straight into the writer's batch (no write is in
  // flight), whose capacity is reused.
  const size_t max_bytes = context_->options.max_write_bytes;
  std::vector<EventPtr>& matching = writer_.batch();
  size_t bytes = 0;
  size_t consumed = 0;
  for (EventPtr& event : read_batch_) {
    if (EventPtr out = ForThisWatch(std::move(event))) {
      if (!matching.empty() && bytes + out->wire().size() > max_bytes) break;
      bytes += out->wire().size();
      matching.push_back(std::move(out));
    }
    ++consumed;
  }
  const bool full_batch = read_batch_.size() == kEventsPerRead;
  seq_ = consumed == read_seqs_.size() ? read.next_seq : read_seqs_[consumed];
  read_batch_.clear();

  if (!matching.empty()) return WriteBatch(/*live=*/true);
  if (full_batch) {
    // Nothing for this watch in a whole batch: yield the thread before the
    // next one so that one watch cannot hold it through a long backlog.
    net::post(strand_, Bind(&WatchStream::Pump));
    return;
  }
  WaitForLog();
}

EventPtr WatchStream::ForThisWatch(EventPtr event) const {
  // An empty chunk would read as the final one; such an event is a bug
  // upstream, never something to send.
  if (event->wire().empty()) return nullptr;
  const WatchFilter& filter = spec_.filter;
  const bool now = filter.Matches(*event);
  const LabelSelector& labels = filter.label_selector();
  if (event->type != EventType::kModified || event->prev_wire().empty() ||
      labels.Empty()) {
    return now ? std::move(event) : nullptr;
  }
  // The labels changed. Everything else a watch filters on is the same
  // before and after a MODIFIED, so the object was in the selection iff its
  // old labels match and it passes the rest of the filter, which it does
  // if it passes now.
  auto passes_but_for_labels = [&] {
    const WatchFilterSpec& spec = filter.spec();
    return event->resource() == spec.resource && event->group() == spec.group &&
           event->version() == spec.version &&
           (spec.cluster.empty() || event->cluster() == spec.cluster) &&
           (spec.ns.empty() || event->ns() == spec.ns) &&
           filter.field_selector().Matches(*event);
  };
  const bool before =
      labels.Matches(event->prev_labels()) && (now || passes_but_for_labels());
  if (now == before) return now ? event : nullptr;
  // As the apiserver's cacher: entering the selection is ADDED, leaving it
  // is DELETED with the previous object (at this event's RV).
  // The variant carries no filter fields: it is only written.
  constexpr std::string_view kModified = "{\"type\":\"MODIFIED\",";
  constexpr std::string_view kAdded = "{\"type\":\"ADDED\",";
  MutableEventPtr variant;
  if (before) {
    variant = Event::Make({}, event->prev_wire());
    variant->type = EventType::kDeleted;
  } else {
    std::string_view wire = event->wire();
    if (wire.substr(0, kModified.size()) != kModified) return event;
    std::string_view rest = wire.substr(kModified.size());
    variant = Event::Allocate({}, kAdded.size() + rest.size());
    char* out = variant->mutable_wire();
    std::memcpy(out, kAdded.data(), kAdded.size());
    std::memcpy(out + kAdded.size(), rest.data(), rest.size());
    variant->type = EventType::kAdded;
  }
  variant->rv = event->rv;
  variant->commit_lsn = event->commit_lsn;
  variant->xid = event->xid;
  variant->last_in_txn = event->last_in_txn;
  variant->commit_time_us = event->commit_time_us;
  return variant;
}

void WatchStream::WaitForLog() {
  if (waiting_for_log_) return;
  waiting_for_log_ = true;
  // The wake runs on the appending thread and only hands over to the
  // strand. The log holds nothing but weak_ptrs, so a stream that ends is
  // freed at once. Only an event of the watched resource (or a barrier)
  // wakes it: with watches spread over many resources, an append wakes
  // just its own watchers.
  context_->log.WaitForAppendOf(seq_, spec_.resource_key, weak_from_this(),
                                WakeOnStrand<&WatchStream::OnLogAppend>());
}

void WatchStream::OnLogAppend() {
  waiting_for_log_ = false;
  if (!closed_) Pump();
}

void WatchStream::WriteBatch(bool live) {
  last_rv_ = std::max(last_rv_, writer_.batch().back()->rv);
  writer_.WriteBatch(live, live_after_rv_, Bind(&WatchStream::OnWriteEvents));
}

void WatchStream::OnWriteEvents(ErrorCode ec) {
  if (closed_) return;
  if (ec) {
    SetEndReason(WatchEndReason::kClientClosed);
    return Close();
  }
  if (Metrics* metrics = context_->options.metrics) {
    const ChunkWriter::BatchStats& sent = writer_.batch_stats();
    for (EventType type :
         {EventType::kAdded, EventType::kModified, EventType::kDeleted}) {
      uint64_t n = sent.by_type[static_cast<size_t>(type)];
      if (n != 0) metrics->EventsSent(type, n);
    }
    // One observation per write, from its oldest event that reached the
    // log while this watch ran (events are in commit order).
    if (sent.live_commit_us > 0) {
      metrics->ObserveCommitToWrite(
          std::max<int64_t>(0, NowUnixMicros() - sent.live_commit_us) / 1e6);
    }
  }
  Pump();
}

// ---------------------------------------------------------------------------
// Bookmarks

void WatchStream::ArmBookmarkTimer() {
  const std::chrono::milliseconds interval =
      context_->options.bookmark_interval;
  if (!spec_.watch.allow_watch_bookmarks || interval.count() <= 0) return;
  bookmark_timer_.expires_after(BookmarkDelay(interval));
  bookmark_timer_.async_wait(Bind(&WatchStream::OnBookmarkTimer));
}

void WatchStream::OnBookmarkTimer(ErrorCode ec) {
  if (ec == net::error::operation_aborted) return;
  if (closed_) return;
  bookmark_due_ = true;
  Pump();
}

void WatchStream::ResolveKind() {
  const WatchRequest& watch = spec_.watch;
  spec_.kind = context_->catalog.Resolve(
      GroupVersionResource{watch.group, watch.version, watch.resource});
}

void WatchStream::WriteBookmark(uint64_t rv, bool initial_events_end) {
  // A kind the table has not confirmed may become known while the watch
  // runs (the resource's first row arrives): each bookmark asks again.
  if (spec_.kind.source != KindSource::kSeen) ResolveKind();
  bookmark_line_ = BookmarkEventLine(spec_.kind.kind, spec_.api_version, rv,
                                     initial_events_end);
  last_rv_ = std::max(last_rv_, rv);
  writer_.WriteChunk(bookmark_line_, Bind(&WatchStream::OnWriteBookmark));
}

void WatchStream::OnWriteBookmark(ErrorCode ec) {
  if (closed_) return;
  if (ec) {
    SetEndReason(WatchEndReason::kClientClosed);
    return Close();
  }
  if (Metrics* metrics = context_->options.metrics) metrics->BookmarksSent(1);
  if (go_live_after_write_ || bookmark_rearm_) {
    go_live_after_write_ = false;
    bookmark_rearm_ = false;
    ArmBookmarkTimer();
  }
  Pump();
}

// ---------------------------------------------------------------------------
// The end

void WatchStream::FinishStream() {
  // A last bookmark, so that the client resumes from the newest RV rather
  // than from its last event's. Not during the initial state: its RV would
  // claim events the client has not received.
  if (!initial_ && spec_.watch.allow_watch_bookmarks && !final_bookmark_sent_) {
    final_bookmark_sent_ = true;
    seq_ = context_->log.SkipOtherResources(seq_, spec_.selection);
    uint64_t rv = context_->log.ResumeRvAt(seq_);
    if (rv != 0) {
      bookmark_rearm_ = false;
      return WriteBookmark(std::max(rv, last_rv_), false);
    }
  }
  WriteFinalChunk();
}

void WatchStream::WriteErrorAndEnd(const K8sStatus& status,
                                   WatchEndReason reason) {
  SetEndReason(reason);
  ending_ = true;
  LogInfo("watch ended with an error event",
          {{"code", status.code},
           {"reason", WatchEndReasonName(reason)},
           {"message", status.message}});
  error_line_ = WatchErrorEventLine(status);
  writer_.WriteChunk(error_line_, Bind(&WatchStream::OnWriteError));
}

void WatchStream::OnWriteError(ErrorCode ec) {
  if (closed_) return;
  if (ec) return Close();
  WriteFinalChunk();
}

void WatchStream::WriteFinalChunk() {
  ending_ = true;
  writer_.WriteLastChunk(Bind(&WatchStream::OnWriteFinalChunk));
}

void WatchStream::OnWriteFinalChunk(ErrorCode ec) {
  if (closed_) return;
  ErrorCode ignored;
  socket_.shutdown(SessionSocket::shutdown_send, ignored);
  Close();
}

void WatchStream::DoReadForDisconnect() {
  socket_.async_read_some(net::buffer(discard_),
                          Bind(&WatchStream::OnReadForDisconnect));
}

void WatchStream::OnReadForDisconnect(ErrorCode ec, size_t /*bytes*/) {
  if (closed_) return;
  if (ec) {
    LogDebug("watch client went away", {{"error", ec.message()}});
    SetEndReason(WatchEndReason::kClientClosed);
    return Close();
  }
  DoReadForDisconnect();  // a client has nothing to say mid-stream; drop it
}

void WatchStream::SetEndReason(WatchEndReason reason) {
  if (!end_reason_) end_reason_ = reason;
}

WatchEndReason WatchStream::ExpiryReason() const {
  return context_->log.GetStats().barriers != spec_.barriers_at_start
             ? WatchEndReason::kBarrier
             : WatchEndReason::kExpired;
}

}  // namespace walwatch
