#include "cdc/base/idle_socket.h"

#include <poll.h>

#include <cerrno>

namespace walwatch {

bool IdleSocketEnded(int fd) {
  if (fd < 0) return true;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  int n;
  do {
    n = poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n != 0;
}

}  // namespace walwatch
