// WatchSession: the watch. Where it starts (resourceVersion rules), the
// initial state, the live stream from the EventLog, bookmarks, and how it
// ends. schema/PROTOCOL.md is the contract this implements.
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/span.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/write.hpp>
#include <random>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "cdc/model/resource_catalog.h"
#include "watchserver/event_log.h"
#include "watchserver/watch_session.h"

namespace walwatch {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

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

// Moves events from `from` (starting at *next) into a batch of at most
// `max_bytes` of wire (at least one event).
std::vector<EventPtr> TakeWriteBatch(const std::vector<EventPtr>& from,
                                     size_t* next, size_t max_bytes) {
  std::vector<EventPtr> batch;
  size_t bytes = 0;
  while (*next < from.size()) {
    const EventPtr& event = from[*next];
    if (!batch.empty() && bytes + event->wire().size() > max_bytes) break;
    bytes += event->wire().size();
    batch.push_back(event);
    ++*next;
  }
  return batch;
}

}  // namespace

// ---------------------------------------------------------------------------
// Where a watch starts

void WatchSession::StartWatch() {
  // Every resource path is served, whether or not the table holds a row of
  // it (schema/PROTOCOL.md, "Paths"): the APIServer decides which resources
  // exist. The catalog only names the kind the bookmarks carry.
  resource_key_ =
      EventLog::ResourceKey(watch_.group, watch_.version, watch_.resource);
  selection_ = {resource_key_, watch_.cluster};
  // Selectors are compiled once per watch; every event is matched against
  // the fields its Event carries.
  std::string error = WatchFilter::Create(watch_, &filter_);
  if (!error.empty()) {
    return SendStatus({400, "BadRequest", error, std::nullopt}, keep_alive_);
  }
  if (shutdown_requested_) {
    return SendStatus(ServiceUnavailableStatus("walwatch is shutting down"),
                      /*keep_alive=*/false);
  }
  ResolveKind();
  api_version_ = ApiVersion(watch_.group, watch_.version);
  barriers_at_start_ = context_->log.GetStats().barriers;

  EventLog& log = context_->log;
  const std::optional<uint64_t>& rv = watch_.resource_version;
  if (watch_.send_initial_events == true) {
    // WatchList: the state at least as new as rv, an end bookmark, then
    // live events.
    if (rv && *rv > log.current_rv()) return WaitForResourceVersion(*rv);
    return StartInitialState();
  }
  if (watch_.send_initial_events == false) {
    // As the apiserver: unset means "from the most recent", which the
    // database decides; "0" means "from any", so from what walwatch has.
    if (!rv) return AskStateSource(Awaiting::kWatchStartRv, nullptr);
    if (*rv == 0) return StartStreamAfter(log.current_rv());
  } else if (!rv || *rv == 0) {
    return StartInitialState();
  }
  if (*rv > log.current_rv()) return WaitForResourceVersion(*rv);
  StartStreamAfter(*rv);
}

void WatchSession::WaitForResourceVersion(uint64_t rv) {
  phase_ = Phase::kWaitingForRv;
  ArmDeadline(context_->options.too_large_rv_wait);
  std::weak_ptr<WatchSession> weak = weak_from_this();
  // Runs on the replication thread (or here, if rv is already reached):
  // only hand over to the strand. The deadline keeps the session alive.
  rv_wait_id_ = context_->log.WaitForRv(rv, [weak] {
    if (std::shared_ptr<WatchSession> self = weak.lock()) {
      Executor strand = self->strand_;
      net::post(strand, [self = std::move(self)] {
        self->Guarded("resourceVersion reached",
                      [&] { self->OnResourceVersionReached(); });
      });
    }
  });
}

void WatchSession::OnResourceVersionReached() {
  if (phase_ != Phase::kWaitingForRv) return;
  rv_wait_id_ = 0;  // it fired
  deadline_.cancel();
  ResourceVersionReached();
}

void WatchSession::ResourceVersionReached() {
  if (watch_.send_initial_events == true) return StartInitialState();
  StartStreamAfter(*watch_.resource_version);
}

void WatchSession::StartStreamAfter(uint64_t rv) {
  EventLog& log = context_->log;
  EventLog::SeekResult seek = log.Seek(rv, selection_);
  if (seek.status == EventLog::SeekStatus::kExpired) {
    return StartStream(log.tail_seq(), rv,
                       ExpiredStatus(rv, log.FloorRv(selection_)));
  }
  StartStream(seek.seq, rv, std::nullopt);
}

void WatchSession::StartStream(uint64_t seq, uint64_t from_rv,
                               std::optional<K8sStatus> first_error) {
  seq_ = seq;
  live_after_rv_ = context_->log.current_rv();
  last_rv_ = from_rv;
  first_error_ = std::move(first_error);
  WriteStreamHeader();
  LogDebug("watch started", {{"group", watch_.group},
                             {"version", watch_.version},
                             {"resource", watch_.resource},
                             {"kind", kind_},
                             {"kind_source", KindSourceName(kind_source_)},
                             {"cluster", watch_.cluster},
                             {"namespace", watch_.ns},
                             {"from_rv", from_rv}});
}

void WatchSession::WriteStreamHeader() {
  phase_ = Phase::kStreaming;
  awaiting_ = Awaiting::kNothing;

  stream_head_ = {};
  stream_head_.result(http::status::ok);
  stream_head_.version(11);
  stream_head_.set(http::field::content_type, "application/json");
  stream_head_.set(http::field::cache_control, "no-cache, private");
  // The connection ends with the stream.
  stream_head_.keep_alive(false);
  stream_head_.chunked(true);
  serializer_.emplace(stream_head_);

  // timeoutSeconds counts from here, the start of the stream.
  ArmDeadline(StreamTimeout(watch_));
  if (!watch_counted_) {
    watch_counted_ = true;
    context_->log.AddWatcher(resource_key_);
    if (Metrics* metrics = context_->options.metrics) {
      metrics->WatchStarted(watch_.group, watch_.version, watch_.resource);
    }
  }
  BeginWrite();
  http::async_write_header(socket_, *serializer_,
                           Bind(&WatchSession::OnWriteHeader));
  // A read stays pending for the whole stream: it completes when the client
  // goes away, which is how an idle watch notices.
  if (!reading_for_disconnect_) DoReadForDisconnect();
}

void WatchSession::OnWriteHeader(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  if (phase_ != Phase::kStreaming) return;
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

void WatchSession::StartInitialState() {
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
  state->ReadState(StateQuery{watch_.group, watch_.version, watch_.resource,
                              watch_.cluster, watch_.ns,
                              watch_.resource_version.value_or(0), client_},
                   state_stream_);
  // Notice a client that gives up while the state is read.
  DoReadForDisconnect();
  PollStateBeforeReady();
}

std::function<void()> WatchSession::StateWake() {
  std::weak_ptr<WatchSession> weak = weak_from_this();
  // Runs on the state reader's thread: only hand over to the strand.
  return [weak] {
    if (std::shared_ptr<WatchSession> self = weak.lock()) {
      Executor strand = self->strand_;
      net::post(strand, [self = std::move(self)] {
        self->Guarded("initial state", [&] { self->OnStateWake(); });
      });
    }
  };
}

void WatchSession::OnStateWake() {
  if (phase_ == Phase::kWaitingForState &&
      awaiting_ == Awaiting::kInitialState) {
    PollStateBeforeReady();
  } else if (phase_ == Phase::kStreaming && initial_) {
    Pump();
  }
}

void WatchSession::PollStateBeforeReady() {
  if (!state_stream_) return;
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t = state_stream_->Take(&taken, StateWake());
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
  initial_ = true;
  initial_rv_ = t.rv;
  initial_done_ = t.finished;
  initial_pending_.clear();
  initial_sent_ = 0;
  for (EventPtr& event : taken) {
    if (!event->wire().empty() && filter_.Matches(*event)) {
      initial_pending_.push_back(std::move(event));
    }
  }
  // The RV of the state is known: the stream can begin.
  StartStream(/*seq=*/0, initial_rv_, std::nullopt);
}

void WatchSession::PumpInitialState() {
  // The live stream continues from the log after initial_rv_. Once the log
  // has dropped events after it, the rest of the state would be sent only
  // to end in the same 410: end now.
  if (initial_rv_ < context_->log.FloorRv(selection_)) {
    return ExpireInitialState();
  }
  const size_t max_bytes = context_->options.max_write_bytes;
  if (initial_sent_ < initial_pending_.size()) {
    return WriteEvents(
        TakeWriteBatch(initial_pending_, &initial_sent_, max_bytes),
        /*live=*/false);
  }
  initial_pending_.clear();
  initial_sent_ = 0;
  if (!initial_done_) {
    for (int i = 0; i < kStateBatchesPerTurn; ++i) {
      std::vector<EventPtr> taken;
      InitialStateStream::Taken t = state_stream_->Take(&taken, StateWake());
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
      for (EventPtr& event : taken) {
        if (!event->wire().empty() && filter_.Matches(*event)) {
          initial_pending_.push_back(std::move(event));
        }
      }
      if (t.finished) {
        initial_done_ = true;
        break;
      }
      if (taken.empty()) return;  // nothing new: the wake is armed
      if (!initial_pending_.empty()) break;
    }
    if (!initial_pending_.empty()) {
      return WriteEvents(
          TakeWriteBatch(initial_pending_, &initial_sent_, max_bytes),
          /*live=*/false);
    }
    if (!initial_done_) {
      // Batch after batch matched nothing: yield the thread.
      net::post(strand_, Bind(&WatchSession::Pump));
      return;
    }
  }
  FinishInitialState();
}

void WatchSession::ExpireInitialState() {
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
      {{"resource", watch_.resource},
       {"state_rv", initial_rv_},
       {"floor_rv", log.FloorRv(selection_)}});
  WriteErrorAndEnd(ExpiredStatus(initial_rv_, log.FloorRv(selection_)),
                   ExpiryReason());
}

void WatchSession::FinishInitialState() {
  initial_ = false;
  state_stream_.reset();  // finished: nothing left to cancel
  // The live stream continues exactly after the state's RV.
  EventLog& log = context_->log;
  EventLog::SeekResult seek = log.Seek(initial_rv_, selection_);
  if (seek.status == EventLog::SeekStatus::kExpired) {
    return WriteErrorAndEnd(ExpiredStatus(initial_rv_, log.FloorRv(selection_)),
                            ExpiryReason());
  }
  seq_ = seek.seq;
  // live_after_rv_ stays where StartStream put it: an event that reached
  // the log while the state was sent waited for it, and its commit-to-write
  // time says so.
  last_rv_ = std::max(last_rv_, initial_rv_);
  if (watch_.send_initial_events == true) {
    go_live_after_write_ = true;
    return WriteBookmark(initial_rv_, /*initial_events_end=*/true);
  }
  ArmBookmarkTimer();
  Pump();
}

// ---------------------------------------------------------------------------
// Streaming

void WatchSession::Pump() {
  if (phase_ != Phase::kStreaming || write_in_flight_ || ending_) return;
  if (finish_requested_) return FinishStream();
  if (initial_) return PumpInitialState();

  EventLog& log = context_->log;
  if (bookmark_due_) {
    // While this watch waited only for its own resource's events
    // (WaitForLog), other resources' may have piled up behind its cursor:
    // step over them (ReadForWatch below does the same).
    seq_ = log.SkipOtherResources(seq_, selection_);
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
      seq_, selection_, kEventsPerRead, &read_batch_, &read_seqs_);
  if (read.status == EventLog::ReadStatus::kExpired) {
    read_batch_.clear();
    return WriteErrorAndEnd(ExpiredStatus(last_rv_, log.FloorRv(selection_)),
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
  // They are taken straight into events_in_flight_ (no write is in
  // flight), whose capacity is reused.
  const size_t max_bytes = context_->options.max_write_bytes;
  std::vector<EventPtr>& matching = events_in_flight_;
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

  if (!matching.empty()) return WriteEventsInFlight(/*live=*/true);
  if (full_batch) {
    // Nothing for this watch in a whole batch: yield the thread before the
    // next one so that one watch cannot hold it through a long backlog.
    net::post(strand_, Bind(&WatchSession::Pump));
    return;
  }
  WaitForLog();
}

EventPtr WatchSession::ForThisWatch(EventPtr event) const {
  // An empty chunk would read as the final one; such an event is a bug
  // upstream, never something to send.
  if (event->wire().empty()) return nullptr;
  const bool now = filter_.Matches(*event);
  const LabelSelector& labels = filter_.label_selector();
  if (event->type != EventType::kModified || event->prev_wire().empty() ||
      labels.Empty()) {
    return now ? std::move(event) : nullptr;
  }
  // The labels changed. Everything else a watch filters on is the same
  // before and after a MODIFIED, so the object was in the selection iff its
  // old labels match and it passes the rest of the filter, which it does
  // if it passes now.
  auto passes_but_for_labels = [&] {
    const WatchFilterSpec& spec = filter_.spec();
    return event->resource() == spec.resource &&
           event->group() == spec.group && event->version() == spec.version &&
           (spec.cluster.empty() || event->cluster() == spec.cluster) &&
           (spec.ns.empty() || event->ns() == spec.ns) &&
           filter_.field_selector().Matches(*event);
  };
  const bool before = labels.Matches(event->prev_labels()) &&
                      (now || passes_but_for_labels());
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

void WatchSession::WaitForLog() {
  if (waiting_for_log_) return;
  waiting_for_log_ = true;
  std::weak_ptr<WatchSession> weak = weak_from_this();
  // Runs on the appending thread: only hand over to the strand. The log
  // holds nothing but the weak_ptr, so a session that ends is freed at once;
  // the strong reference taken here moves into the posted handler. Only an
  // event of the watched resource (or a barrier) wakes it: with watches
  // spread over many resources, an append wakes just its own watchers.
  context_->log.WaitForAppendOf(seq_, resource_key_, weak, [weak] {
    if (std::shared_ptr<WatchSession> self = weak.lock()) {
      Executor strand = self->strand_;
      net::post(strand, [self = std::move(self)] {
        self->Guarded("log append", [&] { self->OnLogAppend(); });
      });
    }
  });
}

void WatchSession::OnLogAppend() {
  waiting_for_log_ = false;
  if (phase_ == Phase::kStreaming) Pump();
}

void WatchSession::WriteEvents(std::vector<EventPtr> events, bool live) {
  events_in_flight_ = std::move(events);
  WriteEventsInFlight(live);
}

void WatchSession::WriteEventsInFlight(bool live) {
  // Nothing is copied. An event of the log is already framed as a chunk in
  // the arena's file, and consecutive events there are consecutive chunks:
  // a run of them is one piece, sent with sendfile, which hands the socket
  // the file's pages rather than a copy. Other events (variants, and all of
  // them without an arena) are gathered from their shared wire bytes into
  // one chunk per run, framed here: chunk-size in lowercase hex, CRLF, data,
  // CRLF (RFC 9112 7.1), as http::make_chunk would, without its three
  // allocations per write.
  static constexpr char kCrlf[] = "\r\n";
  pieces_.clear();
  next_piece_ = 0;
  size_lines_.clear();
  in_flight_by_type_ = {};
  in_flight_live_commit_us_ = 0;
  bool live_seen = false;  // events are in commit order: the first counts
  // A heap run's size-line piece, until its size is known: data null,
  // offset the index of its line in size_lines_ (which may still grow, so
  // pointers into it are taken at the end).
  size_t run_head = 0;
  size_t run_bytes = 0;
  bool in_run = false;
  auto end_run = [&] {
    pieces_.push_back({kCrlf, 2, -1, 0});
    SizeLine& line = size_lines_.emplace_back();
    char* end = std::to_chars(line.data(), line.data() + 2 * sizeof(size_t),
                              run_bytes, 16)
                    .ptr;
    *end++ = '\r';
    *end++ = '\n';
    pieces_[run_head] = {nullptr, static_cast<size_t>(end - line.data()), -1,
                         size_lines_.size() - 1};
    in_run = false;
  };
  Event::Frame frame;
  for (const EventPtr& event : events_in_flight_) {
    ++in_flight_by_type_[static_cast<size_t>(event->type) % 3];
    if (live && !live_seen && event->commit_lsn > live_after_rv_) {
      live_seen = true;
      in_flight_live_commit_us_ = event->commit_time_us;
    }
    if (event->GetFrame(&frame)) {
      if (in_run) end_run();
      WritePiece* last = pieces_.empty() ? nullptr : &pieces_.back();
      if (last != nullptr && last->fd == frame.fd &&
          last->offset + last->size == frame.offset &&
          last->data + last->size == frame.data) {
        last->size += frame.size;
      } else {
        pieces_.push_back({frame.data, frame.size, frame.fd, frame.offset});
      }
      continue;
    }
    if (!in_run) {
      in_run = true;
      run_head = pieces_.size();
      run_bytes = 0;
      pieces_.push_back({});  // the size line, once the size is known
    }
    std::string_view wire = event->wire();
    pieces_.push_back({wire.data(), wire.size(), -1, 0});
    run_bytes += wire.size();
  }
  if (in_run) end_run();
  // A short run of the file (a watcher whose selector takes every few
  // events) is cheaper copied than spliced: gathered from the mapping with
  // its neighbours, many go in one sendmsg instead of a sendfile each.
  const bool several = pieces_.size() > 1;
  for (WritePiece& piece : pieces_) {
    if (piece.data == nullptr) {
      piece.data = size_lines_[piece.offset].data();
      piece.offset = 0;
    } else if (several && piece.size < kMinSendfileBytes) {
      piece.fd = -1;
    }
  }
  last_rv_ = std::max(last_rv_, events_in_flight_.back()->rv);

  // Write now: a client that keeps up has room in its socket buffer, and
  // the write goes in without an asynchronous operation, its allocation, or
  // the write-stall timer. The completion is posted to the io_context,
  // behind the other sessions' wakes (as an asynchronous write's would be),
  // and enters the strand from there: posted to the strand, it would run
  // right after this handler, and the last of many watchers woken by one
  // event would write later.
  ErrorCode ec;
  if (!socket_.non_blocking()) socket_.non_blocking(true, ec);
  if (!ec) ec = SendPieces();
  if (ec != net::error::would_block) {
    write_in_flight_ = true;  // until OnWriteEvents; no timer to arm
    net::post(strand_.get_inner_executor(),
              [self = shared_from_this(), ec]() mutable {
                Executor strand = self->strand_;
                net::dispatch(strand, [self = std::move(self), ec] {
                  self->Guarded("write", [&] { self->OnWriteEvents(ec, 0); });
                });
              });
    return;
  }
  // The socket is full: write the rest when the client reads, with the
  // stall timer running.
  BeginWrite();
  if (!SpillRest()) {
    // The buffer budget has no room for the copy. A client that reads
    // drains its socket well within kSpillRetryDelay: until then the write
    // keeps its events (the log's memory, for that long at most), then
    // tries again, and ends the watcher if it still cannot
    // (OnWriteStalled).
    spill_deferred_ = true;
    ArmWriteTimer(kSpillRetryDelay);
  }
  socket_.async_wait(Socket::wait_write, Bind(&WatchSession::OnWritable));
}

bool WatchSession::SpillRest() {
  size_t bytes = 0;
  for (size_t i = next_piece_; i < pieces_.size(); ++i) {
    bytes += pieces_[i].size;
  }
  spill_.clear();
  try {
    spill_.reserve(bytes);
  } catch (const std::length_error&) {
    return false;  // the budget refused it (BudgetAllocator)
  }
  for (size_t i = next_piece_; i < pieces_.size(); ++i) {
    spill_.append(pieces_[i].data, pieces_[i].size);
  }
  pieces_.clear();
  pieces_.push_back({spill_.data(), spill_.size(), -1, 0});
  next_piece_ = 0;
  events_in_flight_.clear();
  return true;
}

WatchSession::ErrorCode WatchSession::SendPieces() {
  const int socket = socket_.native_handle();
  while (next_piece_ < pieces_.size()) {
    WritePiece& piece = pieces_[next_piece_];
    ssize_t n;
    if (piece.fd >= 0 && sendfile_ok_) {
      off_t offset = static_cast<off_t>(piece.offset);
      n = ::sendfile(socket, piece.fd, &offset, piece.size);
      if (n < 0 && (errno == EINVAL || errno == ENOSYS ||
                    errno == EOPNOTSUPP)) {
        // The kernel or a sandbox refuses it: said once per process.
        static std::atomic<bool> logged{false};
        if (!logged.exchange(true)) {
          LogWarn("sendfile refused on a watch connection; copying instead",
                  {{"error", std::strerror(errno)}});
        }
        sendfile_ok_ = false;
        continue;
      }
      if (n == 0) {
        // The arena's pages are there while the event is: a bug.
        LogError("sendfile wrote nothing from the event file");
        return boost::system::errc::make_error_code(
            boost::system::errc::io_error);
      }
    } else {
      std::array<iovec, 64> iov;
      size_t count = 0;
      for (size_t i = next_piece_; i < pieces_.size() && count < iov.size();
           ++i) {
        if (pieces_[i].fd >= 0 && sendfile_ok_) break;
        iov[count++] = {const_cast<char*>(pieces_[i].data), pieces_[i].size};
      }
      msghdr message{};
      message.msg_iov = iov.data();
      message.msg_iovlen = count;
      n = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return net::error::would_block;
      }
      return ErrorCode(errno, boost::system::system_category());
    }
    for (size_t left = static_cast<size_t>(n); left > 0;) {
      WritePiece& done = pieces_[next_piece_];
      const size_t k = std::min(left, done.size);
      done.data += k;
      done.size -= k;
      done.offset += k;
      left -= k;
      if (done.size == 0) ++next_piece_;
    }
  }
  return {};
}

void WatchSession::OnWritable(ErrorCode ec) {
  if (!ec) ec = SendPieces();
  if (ec == net::error::would_block) {
    // Less is left to copy now, and the budget may have room again.
    if (spill_deferred_) RetryDeferredSpill();
    socket_.async_wait(Socket::wait_write, Bind(&WatchSession::OnWritable));
    return;
  }
  OnWriteEvents(ec, 0);
}

void WatchSession::ReleaseWriteBuffers() {
  spill_deferred_ = false;
  events_in_flight_.clear();
  pieces_.clear();
  next_piece_ = 0;
  if (spill_.capacity() > 0) {
    decltype(spill_)(spill_.get_allocator()).swap(spill_);
  }
  // Keep room for a few events' writes; give back what a burst took.
  if (events_in_flight_.capacity() > kKeptWriteCapacity) {
    std::vector<EventPtr>().swap(events_in_flight_);
  }
  if (pieces_.capacity() > 2 * kKeptWriteCapacity + 2) {
    std::vector<WritePiece>().swap(pieces_);
  }
  if (size_lines_.capacity() > kKeptWriteCapacity) {
    std::vector<SizeLine>().swap(size_lines_);
  }
}

void WatchSession::OnWriteEvents(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  if (phase_ != Phase::kStreaming) {
    ReleaseWriteBuffers();
    return;
  }
  if (ec) {
    ReleaseWriteBuffers();
    SetEndReason(WatchEndReason::kClientClosed);
    return Close();
  }
  if (Metrics* metrics = context_->options.metrics) {
    for (EventType type :
         {EventType::kAdded, EventType::kModified, EventType::kDeleted}) {
      uint64_t n = in_flight_by_type_[static_cast<size_t>(type)];
      if (n != 0) metrics->EventsSent(type, n);
    }
    // One observation per write, from its oldest event that reached the
    // log while this watch ran (events are in commit order).
    if (in_flight_live_commit_us_ > 0) {
      metrics->ObserveCommitToWrite(
          std::max<int64_t>(0, NowUnixMicros() - in_flight_live_commit_us_) /
          1e6);
    }
  }
  ReleaseWriteBuffers();
  Pump();
}

void WatchSession::ArmBookmarkTimer() {
  const std::chrono::milliseconds interval =
      context_->options.bookmark_interval;
  if (!watch_.allow_watch_bookmarks || interval.count() <= 0) return;
  bookmark_timer_.expires_after(BookmarkDelay(interval));
  bookmark_timer_.async_wait(Bind(&WatchSession::OnBookmarkTimer));
}

void WatchSession::OnBookmarkTimer(ErrorCode ec) {
  if (ec == net::error::operation_aborted) return;
  if (phase_ != Phase::kStreaming) return;
  bookmark_due_ = true;
  Pump();
}

void WatchSession::ResolveKind() {
  ResolvedKind resolved = context_->catalog.Resolve(
      GroupVersionResource{watch_.group, watch_.version, watch_.resource});
  kind_ = std::move(resolved.kind);
  kind_source_ = resolved.source;
}

void WatchSession::WriteBookmark(uint64_t rv, bool initial_events_end) {
  // A kind the table has not confirmed may become known while the watch
  // runs (the resource's first row arrives): each bookmark asks again.
  if (kind_source_ != KindSource::kSeen) ResolveKind();
  bookmark_line_ = BookmarkEventLine(kind_, api_version_, rv,
                                     initial_events_end);
  last_rv_ = std::max(last_rv_, rv);
  BeginWrite();
  net::async_write(socket_, http::make_chunk(net::buffer(bookmark_line_)),
                   Bind(&WatchSession::OnWriteBookmark));
}

void WatchSession::OnWriteBookmark(ErrorCode ec, size_t /*bytes*/) {
  EndWrite();
  if (phase_ != Phase::kStreaming) return;
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

void WatchSession::FinishStream() {
  // A last bookmark, so that the client resumes from the newest RV rather
  // than from its last event's. Not during the initial state: its RV would
  // claim events the client has not received.
  if (!initial_ && watch_.allow_watch_bookmarks && !final_bookmark_sent_) {
    final_bookmark_sent_ = true;
    seq_ = context_->log.SkipOtherResources(seq_, selection_);
    uint64_t rv = context_->log.ResumeRvAt(seq_);
    if (rv != 0) {
      bookmark_rearm_ = false;
      return WriteBookmark(std::max(rv, last_rv_), false);
    }
  }
  WriteFinalChunk();
}

void WatchSession::WriteErrorAndEnd(const K8sStatus& status,
                                    WatchEndReason reason) {
  SetEndReason(reason);
  ending_ = true;
  LogInfo("watch ended with an error event",
          {{"code", status.code},
           {"reason", WatchEndReasonName(reason)},
           {"message", status.message}});
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
  reading_for_disconnect_ = true;
  socket_.async_read_some(net::buffer(discard_),
                          Bind(&WatchSession::OnReadForDisconnect));
}

void WatchSession::OnReadForDisconnect(ErrorCode ec, size_t /*bytes*/) {
  reading_for_disconnect_ = false;
  // Closed, or a Status is being written whose end closes the connection.
  if (phase_ == Phase::kClosed || phase_ == Phase::kResponding) return;
  if (ec) {
    LogDebug("watch client went away", {{"error", ec.message()}});
    SetEndReason(WatchEndReason::kClientClosed);
    return Close();
  }
  DoReadForDisconnect();  // a client has nothing to say mid-stream; drop it
}

void WatchSession::SetEndReason(WatchEndReason reason) {
  if (!end_reason_) end_reason_ = reason;
}

WatchEndReason WatchSession::ExpiryReason() const {
  return context_->log.GetStats().barriers != barriers_at_start_
             ? WatchEndReason::kBarrier
             : WatchEndReason::kExpired;
}

}  // namespace walwatch
