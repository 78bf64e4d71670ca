// ChunkWriter writes one watch stream's HTTP response: the header (200,
// chunked), runs of events as chunks, a line (a bookmark, an ERROR event) as
// one chunk, and the final chunk. One write is in flight at a time, and a
// write its client does not drain in time ends the stream as a slow
// watcher's (WatchEndReason::kBacklog).
//
// Events go out without a copy. An event of the log is already framed as a
// chunk in its WireArena's file (a memfd), and consecutive events there are
// consecutive chunks: a run of them is sent with one sendfile(2), which
// hands the socket the file's pages. Other events (a watch's variants, and
// all of them where there is no arena) are gathered from their shared wire
// bytes into one chunk per run, in one sendmsg. A write is tried at once,
// since a client that keeps up has room in its socket; what the socket
// cannot take waits for the client, copied into a spill buffer charged to
// the connection buffer budget (connection_budget.h), so that a slow client
// pins no segment of the arena while the log may evict it.
//
// Ownership: a member of its WatchStream, which Attach()es itself before the
// first write; every asynchronous operation of the writer keeps that stream
// alive, as the stream's own do. Each Write* call's `done(ErrorCode)` runs
// on the strand once that write has ended; it must keep the stream alive
// too (WatchStream::Bind does).
// Thread safety: the stream's strand only.
//
// Pulls in Asio and Beast: include it only from watch_stream.*.
#ifndef WALWATCH_WATCHSERVER_CHUNK_WRITER_H_
#define WALWATCH_WATCHSERVER_CHUNK_WRITER_H_

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cdc/model/event.h"
#include "watchserver/connection_budget.h"
#include "watchserver/metrics.h"
#include "watchserver/server_context.h"
#include "watchserver/strand_session.h"
#include "watchserver/write_stall_timer.h"

namespace walwatch {

class ChunkWriter {
 public:
  using ErrorCode = boost::system::error_code;

  // After a write found the connection buffer budget too full to spill,
  // it keeps its events this long, then spills or ends the watcher. A
  // quarter of a second, as the apiserver's watch cache gives a watcher
  // whose buffer is full before it closes it.
  static constexpr std::chrono::milliseconds kSpillRetryDelay{250};

  // `socket` is the stream's, and outlives this writer.
  ChunkWriter(SessionSocket& socket, ServerContext& context);
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  // Before the first write: `owner` is the stream this writer belongs to,
  // and `end` ends it: with kBacklog when a write stalled, with kError when
  // a handler of the writer's own threw.
  void Attach(std::weak_ptr<void> owner,
              std::function<void(WatchEndReason)> end);

  bool in_flight() const { return stall_.in_flight(); }
  // walwatch is stopping: the write in flight, and each one after it, gets
  // kShutdownWriteGrace to go out.
  void Shutdown();
  // The stream is closing: the write timer stops.
  void Cancel() { stall_.Cancel(); }

  // The watch's response header: 200, JSON, chunked; the connection ends
  // with the stream.
  template <class Handler>
  void WriteHeader(Handler&& done) {
    namespace http = boost::beast::http;
    header_ = {};
    header_.result(http::status::ok);
    header_.version(11);
    header_.set(http::field::content_type, "application/json");
    header_.set(http::field::cache_control, "no-cache, private");
    header_.keep_alive(false);
    header_.chunked(true);
    serializer_.emplace(header_);
    BeginBoundedWrite();
    http::async_write_header(socket_, *serializer_,
                             Completion(std::forward<Handler>(done)));
  }

  // `line` as one chunk; it must stay as it is until `done` runs.
  template <class Handler>
  void WriteChunk(const std::string& line, Handler&& done) {
    BeginBoundedWrite();
    boost::asio::async_write(
        socket_, boost::beast::http::make_chunk(boost::asio::buffer(line)),
        Completion(std::forward<Handler>(done)));
  }

  template <class Handler>
  void WriteLastChunk(Handler&& done) {
    BeginBoundedWrite();
    boost::asio::async_write(socket_, boost::beast::http::make_chunk_last(),
                             Completion(std::forward<Handler>(done)));
  }

  // The events of the next WriteBatch, in order, at least one: the stream
  // fills it. A write keeps them, and so their wire bytes, alive until it
  // has sent or spilled them; then it empties the batch, keeping room for a
  // few events, so that a write of a few events allocates nothing.
  std::vector<EventPtr>& batch() { return batch_; }

  // Writes batch(). `live`: the events come from the log (not the initial
  // state); the oldest committed after `live_after_rv` is counted in
  // batch_stats().
  template <class Handler>
  void WriteBatch(bool live, uint64_t live_after_rv, Handler&& done) {
    Frame(live, live_after_rv);
    // Written now, the write needs no asynchronous operation, allocation or
    // timer. Its completion is posted to the io_context, behind the other
    // sessions' wakes (as an asynchronous write's would be), and enters the
    // strand from there: posted to the strand, it would run right after
    // this handler, and the last of many watchers woken by one event would
    // write later.
    const ErrorCode ec = TrySend();
    if (ec != boost::asio::error::would_block) {
      stall_.BeginUnbounded();
      boost::asio::post(
          strand_.get_inner_executor(),
          [this, done = std::forward<Handler>(done), ec]() mutable {
            boost::asio::dispatch(strand_,
                                  [this, done = std::move(done), ec]() mutable {
                                    Guarded([&] { EndBatch(done, ec); });
                                  });
          });
      return;
    }
    // The socket is full: the rest goes when the client reads.
    WaitForClient();
    AwaitWritable(std::forward<Handler>(done));
  }

  // What the last WriteBatch wrote: its events by type (EventType's value),
  // and the commit time of its oldest event committed after live_after_rv
  // (0: none).
  struct BatchStats {
    std::array<uint64_t, 3> by_type{};
    int64_t live_commit_us = 0;
  };
  const BatchStats& batch_stats() const { return stats_; }

 private:
  // The write in flight, in pieces: bytes in memory, or (fd >= 0) the same
  // bytes in a WireArena's file, which go out with sendfile(2). Heap
  // events' chunks are framed by their size_lines_ and a CRLF. Reused from
  // write to write, as is batch_'s capacity (up to kKeptWriteCapacity).
  struct WritePiece {
    const char* data;
    size_t size;
    int fd;           // -1: memory only
    uint64_t offset;  // of data in fd
  };
  using SizeLine = std::array<char, 2 * sizeof(size_t) + 2>;  // hex, CRLF
  // In a write of several pieces, a run of the file shorter than this is
  // gathered from memory with the rest rather than sent with sendfile.
  static constexpr size_t kMinSendfileBytes = 4096;
  static constexpr size_t kKeptWriteCapacity = 16;

  template <class Handler>
  auto Completion(Handler&& done) {
    return [this, done = std::forward<Handler>(done)](
               ErrorCode ec, size_t /*bytes*/) mutable {
      Guarded([&] {
        stall_.End();
        done(ec);
      });
    };
  }

  template <class Handler>
  void AwaitWritable(Handler&& done) {
    socket_.async_wait(
        SessionSocket::wait_write,
        [this, done = std::forward<Handler>(done)](ErrorCode ec) mutable {
          Guarded([&] {
            if (!ec) ec = SendPieces();
            if (ec == boost::asio::error::would_block) {
              // Less is left to copy now, and the budget may have room.
              if (spill_deferred_) RetryDeferredSpill();
              return AwaitWritable(std::move(done));
            }
            EndBatch(done, ec);
          });
        });
  }

  template <class Handler>
  void EndBatch(Handler& done, ErrorCode ec) {
    stall_.End();
    ReleaseBuffers();
    done(ec);
  }

  template <class F>
  void Guarded(F&& f) {
    RunGuarded("write", std::forward<F>(f),
               [this] { end_(WatchEndReason::kError); });
  }

  // Sets pieces_ (and stats_) for batch_.
  void Frame(bool live, uint64_t live_after_rv);
  // Puts the socket in non-blocking mode and SendPieces().
  ErrorCode TrySend();
  // Writes pieces_ from next_piece_ on until all are written (no error),
  // the socket is full (would_block) or the write fails.
  ErrorCode SendPieces();
  // The write waits for its client: bounds it, and spills its rest (or
  // defers that, see kSpillRetryDelay).
  void WaitForClient();
  // Copies the unsent rest into spill_ and lets go of the events. False if
  // the connection buffer budget has no room for the copy: then nothing
  // was let go of.
  bool Spill();
  // Spills a deferred write if the budget has room now, and bounds the
  // write again as any write waiting on its client.
  bool RetryDeferredSpill();
  void BeginBoundedWrite();
  void ArmStallTimer(Clock::duration after);
  void OnStalled(ErrorCode ec);
  // Empties batch_ and the pieces after a write, keeping room for
  // kKeptWriteCapacity events.
  void ReleaseBuffers();

  SessionSocket& socket_;
  const SessionExecutor strand_;
  ServerContext& context_;
  std::weak_ptr<void> owner_;
  std::function<void(WatchEndReason)> end_;
  WriteStallTimer stall_;
  bool shutting_down_ = false;

  boost::beast::http::response<boost::beast::http::empty_body> header_;
  std::optional<
      boost::beast::http::response_serializer<boost::beast::http::empty_body>>
      serializer_;

  std::vector<EventPtr> batch_;
  BatchStats stats_;
  std::vector<WritePiece> pieces_;
  size_t next_piece_ = 0;  // the first not wholly written
  std::vector<SizeLine> size_lines_;
  // Cleared if the kernel refuses sendfile to this socket: the arena's
  // bytes then go from their mapping, like the rest.
  bool sendfile_ok_ = true;
  bool spill_deferred_ = false;  // see kSpillRetryDelay
  // What spill_ holds of the connection buffer budget. Declared before it,
  // so that it outlives it.
  using BudgetAlloc = BudgetAllocator<char>;
  BudgetAccount account_;
  // Spill()'s copy, while the write waits.
  std::basic_string<char, std::char_traits<char>, BudgetAlloc> spill_;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_CHUNK_WRITER_H_
