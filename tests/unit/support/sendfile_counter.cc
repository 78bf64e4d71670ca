// A source of the test binary itself, not of a library: an object that only
// a static library held would be linked in only if something named it, and
// then libc's sendfile would go uncounted.
#include "tests/unit/support/sendfile_counter.h"

#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace walwatch::server_test {

SendfileCounts sendfile_counts;

}  // namespace walwatch::server_test

extern "C" ssize_t sendfile(int out_fd, int in_fd, off_t* offset,
                            size_t count) noexcept {
  using walwatch::server_test::sendfile_counts;
  const long n = ::syscall(SYS_sendfile, out_fd, in_fd, offset, count);
  if (n > 0) {
    sendfile_counts.bytes += static_cast<uint64_t>(n);
    ++sendfile_counts.calls;
    if (static_cast<size_t>(n) < count) ++sendfile_counts.short_writes;
  } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    ++sendfile_counts.would_block;
  } else if (n < 0 && errno == EPIPE) {
    ++sendfile_counts.broken_pipe;
  }
  return n;
}
