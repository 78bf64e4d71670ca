// ReplayWindow decides the position the replication loop confirms to its
// change source (ChangeSource::Confirm), DESIGN.md "Feedback and the replay
// window":
//   * the commit of the oldest transaction the sink still holds that
//     committed within the window's age (10 minutes by default), so that
//     after a restart the source delivers the window again and the log is
//     rebuilt;
//   * but no further back than the window's bytes behind the newest
//     position received, at the first transaction committed there;
//   * with nothing to keep, everything seen: the sink's current RV + 1.
// It is never past what the sink holds (current RV + 1), and never moves
// back within one history: the window's byte limit moves with the newest
// position received, which starts again from 0 on each connection, and
// what a source once confirmed it may already have dropped (older
// PostgreSQL 15 minors even let a slot's confirmed_flush retreat below its
// restart_lsn, and what lies between would never be re-sent).
//
// Threads: the replication thread only.
#ifndef WALWATCH_CDC_REPLAY_WINDOW_H_
#define WALWATCH_CDC_REPLAY_WINDOW_H_

#include <chrono>
#include <cstdint>

namespace walwatch {

class EventSink;

class ReplayWindow {
 public:
  ReplayWindow(std::chrono::milliseconds age, uint64_t bytes)
      : age_(age), bytes_(bytes) {}

  // The position to confirm now, given the newest position the source
  // received on this connection and the wall time.
  uint64_t FlushToConfirm(const EventSink& log, uint64_t newest_received,
                          int64_t now_unix_us) const;

  // `flush` (from FlushToConfirm) was confirmed.
  void Confirmed(uint64_t flush) { confirmed_ = flush; }
  // The history went back (ChangeReceiver::HistoryReset): positions of the
  // old one say nothing of the new one, and confirming one could pass the
  // new server's WAL.
  void ResetHistory() { confirmed_ = 0; }

 private:
  // The window's position alone, before the never-back rule.
  uint64_t WindowStart(const EventSink& log, uint64_t newest_received,
                       int64_t now_unix_us) const;

  const std::chrono::milliseconds age_;
  const uint64_t bytes_;
  uint64_t confirmed_ = 0;  // the highest position confirmed
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_REPLAY_WINDOW_H_
