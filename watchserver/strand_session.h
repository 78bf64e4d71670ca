// What the sessions of a connection (HttpSession, then perhaps a WatchStream)
// are made of: the socket and timer types of a connection on its own strand;
// StrandSession, the base that makes their completion handlers keep them
// alive and lets no exception escape into the io_context; and
// CloseConnection, how each ends its connection.
//
// Ownership: a session owns itself, in the manner of the Beast examples. It
// lives exactly as long as an asynchronous operation (socket read or write,
// timer) holds shared_from_this(); what other threads call back (the event
// log's and the state reader's wake-ups) holds only a weak_ptr, so a
// session whose client disconnected is freed at once.
// Thread safety: a session's handlers run on its strand, one at a time.
//
// Header-only, and it pulls in Asio: include it only from the serving code
// (http_server.cc and the sessions), never from widely included headers.
#ifndef WALWATCH_WATCHSERVER_STRAND_SESSION_H_
#define WALWATCH_WATCHSERVER_STRAND_SESSION_H_

#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <utility>

#include "cdc/base/logging.h"
#include "watchserver/server_context.h"

namespace walwatch {

// A session's strand, by its concrete type: with the type-erased
// any_io_executor, every operation of the hot path paid for dynamic
// dispatch (~4% of walwatch's samples at 1,000 watchers).
using SessionExecutor =
    boost::asio::strand<boost::asio::io_context::executor_type>;
// A Unix or a TCP connection, on its own strand.
using SessionSocket =
    boost::asio::basic_stream_socket<boost::asio::generic::stream_protocol,
                                     SessionExecutor>;
using SessionTimer = boost::asio::basic_waitable_timer<
    std::chrono::steady_clock,
    boost::asio::wait_traits<std::chrono::steady_clock>, SessionExecutor>;

// Runs `f`. An exception out of it is logged with `where`, and then
// `on_failure` ends the session: a handler that throws must not unwind
// into the io_context, nor leave its connection open and forgotten.
template <class F, class OnFailure>
void RunGuarded(const char* where, F&& f, OnFailure&& on_failure) {
  try {
    f();
    return;
  } catch (const std::exception& e) {
    LogError("watch session failed", {{"where", where}, {"error", e.what()}});
  } catch (...) {
    LogError("watch session failed", {{"where", where}, {"error", "unknown"}});
  }
  on_failure();
}

// Ends a session's connection: `cancel_timers` stops its timers (which can
// fail only if a timer is broken, and closing matters more), then the
// socket is shut down both ways and closed.
template <class CancelTimers>
void CloseConnection(SessionSocket& socket, CancelTimers&& cancel_timers) {
  try {
    cancel_timers();
  } catch (const std::exception&) {
  }
  boost::system::error_code ignored;
  socket.shutdown(SessionSocket::shutdown_both, ignored);
  socket.close(ignored);
}

// The base of a session class `Derived` (CRTP), which must have a private
// `void Fail()` that ends it after a handler threw, and befriend this base.
template <class Derived>
class StrandSession : public Session,
                      public std::enable_shared_from_this<Derived> {
 protected:
  explicit StrandSession(SessionExecutor strand) : strand_(std::move(strand)) {}

  // Wraps a member function as a completion handler that keeps the session
  // alive and runs guarded.
  template <class... Args>
  auto Bind(void (Derived::*handler)(Args...)) {
    return [self = this->shared_from_this(), handler](Args... args) {
      self->Guarded("completion handler",
                    [&] { (self.get()->*handler)(args...); });
    };
  }

  template <class F>
  void Guarded(const char* where, F&& f) {
    RunGuarded(where, std::forward<F>(f),
               [this] { static_cast<Derived*>(this)->Fail(); });
  }

  // A wake-up for another thread to call (the event log's appender, the
  // state reader): it only posts kHandler to the strand, where it runs
  // guarded. It holds nothing but a weak_ptr, which keeps it small enough
  // for std::function to store without an allocation.
  template <void (Derived::*kHandler)()>
  auto WakeOnStrand() {
    return [weak = this->weak_from_this()] {
      if (std::shared_ptr<Derived> self = weak.lock()) {
        SessionExecutor strand = self->strand_;
        boost::asio::post(strand, [self = std::move(self)] {
          self->Guarded("wake-up", [&] { (self.get()->*kHandler)(); });
        });
      }
    };
  }

  const SessionExecutor strand_;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_STRAND_SESSION_H_
