// watch_count: the drain benchmark's watcher. Opens one watch on walwatch's
// Unix socket, reads the chunked stream in large blocks, counts the events
// until it has seen --count ADDED events, and prints
//
//   <ADDED events> <unix ns of the first event> <unix ns of the last event>
//
// It does no more than pg_recvlogical writing to /dev/null does (one large
// read per burst, no copies, no JSON parsing), so that the drain compares
// walwatch with pg_recvlogical rather than with curl, pipes and grep.
//
//   watch_count --socket PATH --path '/api/v1/pods?watch=1&resourceVersion=N'
//               --count N [--timeout SECONDS]
//
// Exit status: 0 when --count ADDED events arrived; 1 on an ERROR event, the
// end of the stream, a non-200 answer or the timeout (with a message).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bench_args.h"  // same directory

namespace {

int64_t UnixNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "watch_count: %s\n", message.c_str());
  std::exit(1);
}

// Counts `needle` in a stream of blocks, also across block boundaries.
class Counter {
 public:
  explicit Counter(std::string_view needle) : needle_(needle) {}

  uint64_t Feed(std::string_view block) {
    const size_t k = needle_.size() - 1;
    uint64_t found = 0;
    if (!tail_.empty()) {
      // A match that starts in the kept tail and ends in this block.
      std::string seam = tail_;
      seam.append(block.substr(0, k));
      found += CountIn(seam);
    }
    found += CountIn(block);
    // Keep the last k bytes seen: too short to hold a whole match, so none
    // is counted twice.
    tail_.append(block.substr(block.size() - std::min(block.size(), k)));
    if (tail_.size() > k) tail_.erase(0, tail_.size() - k);
    return found;
  }

 private:
  uint64_t CountIn(std::string_view s) const {
    uint64_t n = 0;
    const char* p = s.data();
    const char* end = s.data() + s.size();
    while (static_cast<size_t>(end - p) >= needle_.size()) {
      const void* hit = memmem(p, end - p, needle_.data(), needle_.size());
      if (!hit) break;
      ++n;
      p = static_cast<const char*>(hit) + needle_.size();
    }
    return n;
  }

  std::string_view needle_;
  std::string tail_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path, path;
  uint64_t want = 0;
  int timeout_s = 600;
  const walwatch::bench::Flags flags(
      "watch_count",
      "usage: watch_count --socket PATH --path PATH --count N [--timeout S]");
  flags.Parse(argc, argv,
              {{"--socket", &socket_path},
               {"--path", &path},
               {"--count", &want},
               {"--timeout", &timeout_s}});
  if (socket_path.empty() || path.empty() || want == 0) {
    flags.Usage("--socket, --path and --count are required");
  }

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) Fail("socket path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Fail("connect " + socket_path + ": " + std::strerror(errno));
  }
  std::string request = "GET " + path +
                        " HTTP/1.1\r\nHost: localhost\r\n"
                        "Accept: application/json\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    Fail(std::string("write: ") + std::strerror(errno));
  }

  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<char> buf(1 << 20);
  Counter added("{\"type\":\"ADDED\"");
  Counter errors("{\"type\":\"ERROR\"");
  uint64_t count = 0;
  int64_t first_ns = 0, last_ns = 0;
  bool header_done = false;
  std::string header;
  while (count < want) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      Fail("timed out after " + std::to_string(count) + " of " +
           std::to_string(want) + " events");
    }
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno != EINTR) Fail(std::string("poll: ") + std::strerror(errno));
    if (r <= 0) continue;
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      Fail(std::string("read: ") + std::strerror(errno));
    }
    if (n == 0) {
      Fail("the stream ended after " + std::to_string(count) + " of " +
           std::to_string(want) + " events");
    }
    std::string_view block(buf.data(), static_cast<size_t>(n));
    if (!header_done) {
      header.append(block);
      size_t end = header.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      if (header.compare(0, 12, "HTTP/1.1 200") != 0) {
        Fail("answer: " + header.substr(0, 400));
      }
      header_done = true;
      block = std::string_view(header).substr(end + 4);
    }
    if (errors.Feed(block) > 0) {
      Fail("an ERROR event after " + std::to_string(count) + " events: " +
           std::string(block.substr(0, 400)));
    }
    uint64_t got = added.Feed(block);
    if (got > 0) {
      last_ns = UnixNanos();
      if (count == 0) first_ns = last_ns;
      count += got;
    }
  }
  close(fd);
  std::printf("%llu %lld %lld\n", static_cast<unsigned long long>(count),
              static_cast<long long>(first_ns), static_cast<long long>(last_ns));
  return 0;
}
