#include "cdc/replay_window.h"

#include <algorithm>

#include "cdc/model/event_sink.h"

namespace walwatch {

uint64_t ReplayWindow::FlushToConfirm(const EventSink& log,
                                      uint64_t newest_received,
                                      int64_t now_unix_us) const {
  return std::max(WindowStart(log, newest_received, now_unix_us), confirmed_);
}

uint64_t ReplayWindow::WindowStart(const EventSink& log,
                                   uint64_t newest_received,
                                   int64_t now_unix_us) const {
  // Confirm up to the oldest transaction of the replay window, so that a
  // restart re-sends it; with nothing to keep, everything seen so far.
  uint64_t everything = log.current_rv() + 1;
  int64_t since =
      now_unix_us -
      std::chrono::duration_cast<std::chrono::microseconds>(age_).count();
  uint64_t oldest = log.OldestCommitSince(since);
  if (oldest == 0) return everything;
  // The window's limit in WAL: no further back than bytes_ behind the
  // newest position, at the first transaction committed there.
  uint64_t newest = std::max(newest_received, log.current_rv());
  if (newest <= bytes_ || oldest >= newest - bytes_) return oldest;
  // Seek, not Read: the transactions of a batch not yet woken for are not
  // readable, but they are in the log, and a restart must replay them.
  EventSink::SeekResult seek = log.Seek(newest - bytes_ - 1);
  if (seek.status != EventSink::SeekStatus::kOk) return oldest;
  if (seek.commit_lsn == 0) return everything;  // nothing that recent
  return std::max(oldest, seek.commit_lsn);
}

}  // namespace walwatch
