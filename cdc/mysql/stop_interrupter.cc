#include "cdc/mysql/stop_interrupter.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "cdc/base/stop_signal.h"

namespace walwatch::mysql {

StopInterrupter::StopInterrupter(const StopSignal* stop)
    : stop_(stop), quit_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  thread_ = std::thread([this] { Loop(); });
}

StopInterrupter::~StopInterrupter() {
  uint64_t one = 1;
  ssize_t n = write(quit_fd_, &one, sizeof(one));
  (void)n;
  thread_.join();
  if (quit_fd_ >= 0) close(quit_fd_);
}

void StopInterrupter::Loop() {
  for (;;) {
    pollfd fds[2] = {{stop_->fd(), POLLIN, 0}, {quit_fd_, POLLIN, 0}};
    // Without an eventfd the signal is only a flag: look at it each second.
    const int r = poll(fds, 2, stop_->fd() < 0 ? 1000 : -1);
    if (r < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (!stop_->raised()) continue;
    MutexLock lock(&mu_);
    raised_ = true;
    for (auto& [id, interrupt] : interrupts_) interrupt();
    return;
  }
}

uint64_t StopInterrupter::Register(std::function<void()> interrupt) {
  MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  if (raised_ || stop_->raised()) interrupt();
  interrupts_.emplace(id, std::move(interrupt));
  return id;
}

void StopInterrupter::Unregister(uint64_t id) {
  MutexLock lock(&mu_);
  interrupts_.erase(id);
}

}  // namespace walwatch::mysql
