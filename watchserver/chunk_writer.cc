#include "watchserver/chunk_writer.h"

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "cdc/base/logging.h"

namespace walwatch {

static_assert(kWriteStallTimeout > ChunkWriter::kSpillRetryDelay);

ChunkWriter::ChunkWriter(SessionSocket& socket, ServerContext& context)
    : socket_(socket),
      strand_(socket.get_executor()),
      context_(context),
      stall_(strand_),
      account_(&context.buffer_budget),
      spill_(BudgetAlloc(&account_)) {}

void ChunkWriter::Attach(std::weak_ptr<void> owner,
                         std::function<void(WatchEndReason)> end) {
  owner_ = std::move(owner);
  end_ = std::move(end);
}

void ChunkWriter::Shutdown() {
  shutting_down_ = true;
  if (stall_.in_flight()) ArmStallTimer(kShutdownWriteGrace);
}

void ChunkWriter::BeginBoundedWrite() {
  stall_.BeginUnbounded();
  ArmStallTimer(shutting_down_ ? kShutdownWriteGrace : kWriteStallTimeout);
}

void ChunkWriter::ArmStallTimer(Clock::duration after) {
  stall_.Arm(after, [this, owner = owner_.lock()](ErrorCode ec) {
    Guarded([&] { OnStalled(ec); });
  });
}

void ChunkWriter::OnStalled(ErrorCode ec) {
  if (!stall_.Overran(ec)) return;
  if (spill_deferred_ && !shutting_down_) {
    // The events of a write that found the buffer budget full: copy them
    // now, or end the watcher if there is still no room.
    if (RetryDeferredSpill()) return;
    // Its full socket cannot take the 410, so it gets a connection closed
    // mid-stream, which client-go sees and answers with a new watch.
    ++context_.buffer_refused_watch;
    LogBufferBudgetRefusal(
        "ending a stalled watcher: the connection buffer "
        "budget has no room for its pending write "
        "(--max-connection-buffer-bytes)",
        context_.options.max_connection_buffer_bytes);
    return end_(WatchEndReason::kBacklog);
  }
  LogWarn("closing a connection whose client stopped reading");
  // A slow watcher, dropped without the 410 its full socket cannot take.
  end_(WatchEndReason::kBacklog);
}

void ChunkWriter::Frame(bool live, uint64_t live_after_rv) {
  // Nothing is copied (see the header). Heap events are framed here:
  // chunk-size in lowercase hex, CRLF, data, CRLF (RFC 9112 7.1), as
  // http::make_chunk would, without its three allocations per write.
  static constexpr char kCrlf[] = "\r\n";
  pieces_.clear();
  next_piece_ = 0;
  size_lines_.clear();
  stats_ = {};
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
  for (const EventPtr& event : batch_) {
    ++stats_.by_type[static_cast<size_t>(event->type) % 3];
    if (live && !live_seen && event->commit_lsn > live_after_rv) {
      live_seen = true;
      stats_.live_commit_us = event->commit_time_us;
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
}

ChunkWriter::ErrorCode ChunkWriter::TrySend() {
  ErrorCode ec;
  if (!socket_.non_blocking()) socket_.non_blocking(true, ec);
  if (!ec) ec = SendPieces();
  return ec;
}

void ChunkWriter::WaitForClient() {
  BeginBoundedWrite();
  if (!Spill()) {
    // The buffer budget has no room for the copy. A client that reads
    // drains its socket well within kSpillRetryDelay: until then the write
    // keeps its events (the log's memory, for that long at most), then
    // tries again, and ends the watcher if it still cannot (OnStalled).
    spill_deferred_ = true;
    ArmStallTimer(kSpillRetryDelay);
  }
}

bool ChunkWriter::Spill() {
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
  batch_.clear();
  return true;
}

bool ChunkWriter::RetryDeferredSpill() {
  if (!Spill()) return false;
  spill_deferred_ = false;
  // The write waits for its client as any other, from now on.
  ArmStallTimer(shutting_down_ ? kShutdownWriteGrace
                               : kWriteStallTimeout - kSpillRetryDelay);
  return true;
}

ChunkWriter::ErrorCode ChunkWriter::SendPieces() {
  const int socket = socket_.native_handle();
  while (next_piece_ < pieces_.size()) {
    WritePiece& piece = pieces_[next_piece_];
    ssize_t n;
    if (piece.fd >= 0 && sendfile_ok_) {
      off_t offset = static_cast<off_t>(piece.offset);
      n = ::sendfile(socket, piece.fd, &offset, piece.size);
      if (n < 0 &&
          (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
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
        return boost::asio::error::would_block;
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

void ChunkWriter::ReleaseBuffers() {
  spill_deferred_ = false;
  batch_.clear();
  pieces_.clear();
  next_piece_ = 0;
  if (spill_.capacity() > 0) {
    decltype(spill_)(spill_.get_allocator()).swap(spill_);
  }
  // Keep room for a few events' writes; give back what a burst took.
  if (batch_.capacity() > kKeptWriteCapacity) {
    std::vector<EventPtr>().swap(batch_);
  }
  if (pieces_.capacity() > 2 * kKeptWriteCapacity + 2) {
    std::vector<WritePiece>().swap(pieces_);
  }
  if (size_lines_.capacity() > kKeptWriteCapacity) {
    std::vector<SizeLine>().swap(size_lines_);
  }
}

}  // namespace walwatch
