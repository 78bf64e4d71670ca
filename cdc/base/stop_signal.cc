#include "cdc/base/stop_signal.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

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

}  // namespace walwatch
