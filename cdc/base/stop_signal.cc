#include "cdc/base/stop_signal.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "cdc/base/clock.h"

namespace walwatch {

StopSignal::StopSignal() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

StopSignal::~StopSignal() {
  if (fd_ >= 0) close(fd_);
}

void StopSignal::Raise() {
  raised_ = true;
  uint64_t one = 1;
  if (fd_ >= 0) {
    ssize_t n = write(fd_, &one, sizeof(one));  // never read: stays readable
    (void)n;
  }
}

bool StopSignal::raised() const { return raised_.load(); }

bool StopSignal::WaitFor(std::chrono::milliseconds delay) const {
  const auto deadline = Clock::now() + delay;
  while (!raised()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) return true;
    pollfd fd = {fd_, POLLIN, 0};
    poll(&fd, 1, static_cast<int>(left.count()));
  }
  return false;
}

}  // namespace walwatch
