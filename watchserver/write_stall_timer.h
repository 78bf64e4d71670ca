// WriteStallTimer keeps a connection to one write in flight and bounds how
// long that write may wait for its client: a client that stops reading
// must not hold its session, and what the write holds, for ever.
//
// Ownership: a member of its session (HttpSession for responses, a
// WatchStream's ChunkWriter for the stream); the expiry handler the session
// gives keeps the session alive.
// Thread safety: the session's strand only.
//
// Header-only; pulls in Asio through strand_session.h.
#ifndef WALWATCH_WATCHSERVER_WRITE_STALL_TIMER_H_
#define WALWATCH_WATCHSERVER_WRITE_STALL_TIMER_H_

#include <boost/asio/error.hpp>
#include <chrono>
#include <utility>

#include "cdc/base/clock.h"
#include "watchserver/strand_session.h"

namespace walwatch {

// A write the client does not drain within this long ends the connection
// (a watcher that stopped reading); during Stop() the bound is shorter.
inline constexpr auto kWriteStallTimeout = std::chrono::seconds(30);
inline constexpr auto kShutdownWriteGrace = std::chrono::seconds(2);

class WriteStallTimer {
 public:
  explicit WriteStallTimer(const SessionExecutor& strand) : timer_(strand) {}

  bool in_flight() const { return in_flight_; }

  // A write goes in flight, bounded by `after`: see Arm.
  template <class Handler>
  void Begin(Clock::duration after, Handler&& on_expiry) {
    in_flight_ = true;
    Arm(after, std::forward<Handler>(on_expiry));
  }
  // A write goes in flight unbounded: it went into the socket at once, and
  // only its completion is still to run.
  void BeginUnbounded() { in_flight_ = true; }
  // Bounds the write in flight anew, `after` from now. `on_expiry` runs
  // then, or with operation_aborted once the write ends or is bounded anew;
  // it asks Overran() whether the write did.
  template <class Handler>
  void Arm(Clock::duration after, Handler&& on_expiry) {
    armed_ = true;
    timer_.expires_after(after);
    timer_.async_wait(std::forward<Handler>(on_expiry));
  }
  // The write in flight has ended.
  void End() {
    in_flight_ = false;
    if (armed_) {
      armed_ = false;
      timer_.cancel();
    }
  }
  // In `on_expiry`: whether the write in flight overran its bound. False
  // for a cancelled wait, and for an expiry that was already queued when
  // its write ended (cancel() came too late to abort it) or when the bound
  // was moved: disarmed, it does not bound the write now in flight;
  // re-armed, the new expiry lies ahead.
  bool Overran(const boost::system::error_code& ec) const {
    return ec != boost::asio::error::operation_aborted && in_flight_ &&
           armed_ && timer_.expiry() <= Clock::now();
  }
  // The session is closing: the pending wait ends.
  void Cancel() { timer_.cancel(); }

 private:
  SessionTimer timer_;
  bool in_flight_ = false;
  // Whether timer_ bounds the write in flight.
  bool armed_ = false;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_WRITE_STALL_TIMER_H_
