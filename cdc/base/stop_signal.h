// StopSignal is a stop request that a thread blocked in poll(2) can wait on:
// once Raise()d, fd() stays readable for good. The replication stream's
// loop, its change source's waits and the database queries of cdc/ all end
// on one.
//
// Threads: Raise() may be called from any thread, and from a signal handler
// (an atomic store and a write(2) to an eventfd); the others from any.
#ifndef WALWATCH_CDC_BASE_STOP_SIGNAL_H_
#define WALWATCH_CDC_BASE_STOP_SIGNAL_H_

#include <atomic>
#include <chrono>

namespace walwatch {

class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  void Raise();
  bool raised() const;
  int fd() const { return fd_; }
  // Sleeps for `delay`, or less if raised meanwhile. True if the whole
  // delay passed, false if raised.
  bool WaitFor(std::chrono::milliseconds delay) const;

 private:
  const int fd_;  // an eventfd; -1 if none could be made (then raised() only)
  std::atomic<bool> raised_{false};
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_BASE_STOP_SIGNAL_H_
