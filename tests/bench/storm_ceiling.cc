// storm_ceiling: the relist storm's two programs (tests/bench/
// relist_storm_bench.sh), so that walwatch's storm and the machine's limit
// are read by the same reader.
//
//   storm_ceiling read --socket PATH --path PATH [--ready-file F]
//       [--go-file F] [--save FILE] [--timeout S]
//
// One WatchList, read as an informer waits for it: connects, creates
// --ready-file, waits (inotify, no polling) until --go-file exists, sends
// the request and reads the chunked stream in large blocks until the end of
// the initial events, the BOOKMARK annotated "k8s.io/initial-events-end"
// (watchserver/PROTOCOL.md, "Where a watch starts"), then closes. It counts
// event lines, not their contents: every line before that bookmark must be
// an ADDED event; an ERROR event, another kind of event, the end of the
// stream, an answer other than 200 or the timeout ends it with status 1
// and a message; a 429 or 504 is retried, as client-go retries them, after
// the wait it asks for (walwatch answers 504 to a WatchList that waited 60 s
// for a state worker). No JSON parsing: one memchr per line, no copy but of
// the line that straddles two reads. Prints one line:
//
//   objects=N rv=P start_ns=T0 header_ns=TH end_ns=T1 body_bytes=B
//   retries=K cpu_s=C
//
// (P: the end bookmark's resourceVersion; T0: when it sent the request; TH:
// when it had the 200 header (walwatch writes it once the state's RV is
// known: after a state worker took the request and took its snapshot); T1:
// when it had the bookmark; B: the body's bytes, chunk framing included, up
// to the end of the chunk holding the bookmark; K: the 429s and 504s
// retried; C: its own CPU time).
// --save FILE writes those B bytes, as they came, to FILE.
//
//   storm_ceiling serve --socket PATH --body FILE --watchers N
//       [--threads T] [--sendfile]
//
// The machine's limit for the same storm: accepts N connections, and to
// each request answers a 200 header and then FILE's bytes (a body saved by
// `read --save`), from memory, to all N sockets at once: no database, no
// JSON, no event log. --threads T writing threads (default 2), thread t
// serving connections i with i % T == t; each writes as much as a socket
// takes (writev, non-blocking) and moves on, as walwatch's sessions do.
// --sendfile: from a memfd holding FILE with sendfile(2) instead, so that
// the kernel hands the sockets references to its pages rather than copies.
// Exits once every connection has all of FILE, printing key=value lines:
// watchers, body_bytes, writes, full_socket_waits, server_cpu_s,
// first_request_ns, last_byte_ns.
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_args.h"  // same directory
#include "bench_util.h"  // same directory

namespace {

using walwatch::bench::RealtimeNanos;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "storm_ceiling: %s\n", message.c_str());
  std::exit(1);
}

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    Die("socket path too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// --- read --------------------------------------------------------------------

// The event lines of a WatchList up to the end of its initial events.
// Feed() takes the body's payload (chunk framing removed) in any pieces.
class InitialEventsScanner {
 public:
  void Feed(std::string_view payload) {
    while (!payload.empty()) {
      const void* nl = std::memchr(payload.data(), '\n', payload.size());
      if (nl == nullptr) {
        partial_.append(payload);
        return;
      }
      size_t len = static_cast<const char*>(nl) - payload.data();
      if (partial_.empty()) {
        Line(payload.substr(0, len));
      } else {
        partial_.append(payload.substr(0, len));
        Line(partial_);
        partial_.clear();
      }
      payload.remove_prefix(len + 1);
    }
  }

  bool ended() const { return ended_; }
  uint64_t objects() const { return objects_; }
  const std::string& rv() const { return rv_; }

 private:
  static bool StartsWith(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
  }

  void Line(std::string_view line) {
    if (ended_) return;  // live events after the state: not counted
    if (StartsWith(line, "{\"type\":\"ADDED\"")) {
      ++objects_;
      return;
    }
    if (StartsWith(line, "{\"type\":\"BOOKMARK\"") &&
        line.find("\"k8s.io/initial-events-end\":\"true\"") !=
            std::string_view::npos) {
      static constexpr std::string_view kRv = "\"resourceVersion\":\"";
      size_t at = line.find(kRv);
      if (at == std::string_view::npos) {
        Die("an end bookmark without a resourceVersion: " + std::string(line));
      }
      at += kRv.size();
      size_t end = line.find('"', at);
      rv_ = std::string(line.substr(at, end - at));
      if (rv_.empty() ||
          rv_.find_first_not_of("0123456789") != std::string::npos) {
        Die("an end bookmark with a bad resourceVersion: " + std::string(line));
      }
      ended_ = true;
      return;
    }
    Die("after " + std::to_string(objects_) +
        " ADDED events, not an ADDED event nor the end bookmark: " +
        std::string(line.substr(0, 400)));
  }

  std::string partial_;  // a line that straddles two pieces
  bool ended_ = false;
  uint64_t objects_ = 0;
  std::string rv_;
};

// HTTP/1.1 chunked framing: hands each chunk's payload to the scanner and
// says when it stands between two chunks.
class ChunkDecoder {
 public:
  explicit ChunkDecoder(InitialEventsScanner* scanner) : scanner_(scanner) {}

  // Consumes `block` up to its end, or up to the end of the chunk in which
  // the scanner saw the end bookmark; returns the bytes consumed.
  size_t Feed(std::string_view block) {
    size_t i = 0;
    while (i < block.size()) {
      if (scanner_->ended() && state_ == State::kSize && !in_size_) return i;
      const char c = block[i];
      switch (state_) {
        case State::kSize:
          in_size_ = true;
          if (c == '\n') {
            if (!size_digits_) Die("a chunk without a size");
            if (size_ == 0) Die("the stream ended before the end bookmark");
            state_ = State::kData;
            in_size_ = false;
            size_digits_ = false;
          } else if (c == ';' || c == '\r') {
            in_extension_ = true;
          } else if (!in_extension_) {
            int v = HexValue(c);
            if (v < 0) Die(std::string("bad chunk size byte '") + c + "'");
            size_ = size_ * 16 + static_cast<uint64_t>(v);
            size_digits_ = true;
          }
          if (state_ == State::kData) in_extension_ = false;
          ++i;
          break;
        case State::kData: {
          size_t take = static_cast<size_t>(
              std::min<uint64_t>(size_, block.size() - i));
          scanner_->Feed(block.substr(i, take));
          size_ -= take;
          i += take;
          if (size_ == 0) state_ = State::kDataEnd;
          break;
        }
        case State::kDataEnd:  // "\r\n" after the payload
          if (c == '\n') state_ = State::kSize;
          else if (c != '\r') Die("no CRLF after a chunk");
          ++i;
          break;
      }
    }
    return i;
  }

  bool between_chunks() const { return state_ == State::kSize && !in_size_; }

 private:
  enum class State { kSize, kData, kDataEnd };

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  InitialEventsScanner* scanner_;
  State state_ = State::kSize;
  bool in_size_ = false;  // a size line begun
  bool size_digits_ = false;
  bool in_extension_ = false;
  uint64_t size_ = 0;
};

// Blocks until `file` exists, on inotify: a hundred readers waiting cost
// nothing, and all of them see it within microseconds of its creation.
void WaitForFile(const std::string& file) {
  std::string dir = file.substr(0, file.rfind('/') + 1);
  if (dir.empty()) dir = ".";
  int in = inotify_init1(IN_CLOEXEC);
  if (in < 0) Die(Errno("inotify_init1"));
  if (inotify_add_watch(in, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
    Die(Errno(("inotify_add_watch " + dir).c_str()));
  }
  alignas(inotify_event) char buf[4096];
  while (access(file.c_str(), F_OK) != 0) {
    if (read(in, buf, sizeof buf) < 0 && errno != EINTR) {
      Die(Errno("inotify read"));
    }
  }
  close(in);
}

int Connect(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Die(Errno("socket"));
  sockaddr_un addr = UnixAddress(socket_path);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Die(Errno(("connect " + socket_path).c_str()));
  }
  return fd;
}

void SendRequest(int fd, const std::string& path) {
  std::string request = "GET " + path +
                        " HTTP/1.1\r\nHost: localhost\r\n"
                        "Accept: application/json\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    Die(Errno("write"));
  }
}

// One read(2) of what has come, waiting for it until `deadline_ns`; 0 at
// the end of the stream. `what` names the wait in the timeout's message.
size_t ReadSome(int fd, std::vector<char>& buf, int64_t deadline_ns,
                const std::string& what) {
  for (;;) {
    int64_t left_ms = (deadline_ns - RealtimeNanos()) / 1000000;
    if (left_ms <= 0) Die("timed out " + what);
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (r < 0 && errno != EINTR) Die(Errno("poll"));
    if (r <= 0) continue;
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR && errno != EAGAIN) Die(Errno("read"));
  }
}

// The seconds a 429 or 504 answer asks the client to wait: its Retry-After
// header, else its Status's retryAfterSeconds, else 1.
int RetryAfterSeconds(const std::string& answer) {
  for (const char* key : {"\r\nRetry-After: ", "\"retryAfterSeconds\":"}) {
    size_t at = answer.find(key);
    if (at != std::string::npos) {
      int s = std::atoi(answer.c_str() + at + std::strlen(key));
      if (s > 0) return s;
    }
  }
  return 1;
}

int Read(int argc, char** argv) {
  std::string socket_path, path, ready_file, go_file, save;
  int timeout_s = 600;
  const walwatch::bench::Flags flags(
      "storm_ceiling read",
      "usage: storm_ceiling read --socket PATH --path PATH [--ready-file F] "
      "[--go-file F] [--save FILE] [--timeout S]");
  flags.Parse(argc, argv,
              {{"--socket", &socket_path},
               {"--path", &path},
               {"--ready-file", &ready_file},
               {"--go-file", &go_file},
               {"--save", &save},
               {"--timeout", &timeout_s}});
  if (socket_path.empty() || path.empty()) {
    flags.Usage("--socket and --path are required");
  }

  int fd = Connect(socket_path);
  if (!ready_file.empty()) {
    int r = open(ready_file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (r < 0) Die(Errno(("create " + ready_file).c_str()));
    close(r);
  }
  if (!go_file.empty()) WaitForFile(go_file);

  FILE* out = nullptr;
  if (!save.empty()) {
    out = std::fopen(save.c_str(), "wb");
    if (out == nullptr) Die(Errno(("open " + save).c_str()));
  }
  const int64_t start_ns = RealtimeNanos();
  const int64_t deadline_ns = start_ns + int64_t{timeout_s} * 1000000000;
  std::vector<char> buf(1 << 20);

  // The 200 header. A 429 or 504 (walwatch's state workers all busy for
  // 60 s) is retried after the wait it asks for, as client-go retries them.
  std::string header;
  int retries = 0;
  for (SendRequest(fd, path);;) {
    size_t n = ReadSome(fd, buf, deadline_ns, "waiting for an answer");
    if (n == 0) Die("the connection closed before an answer");
    header.append(buf.data(), n);
    size_t end = header.find("\r\n\r\n");
    if (end == std::string::npos) continue;
    if (header.compare(0, 12, "HTTP/1.1 200") == 0) {
      header.erase(0, end + 4);  // the body's first bytes
      break;
    }
    if (header.compare(0, 12, "HTTP/1.1 429") != 0 &&
        header.compare(0, 12, "HTTP/1.1 504") != 0) {
      Die("answer: " + header.substr(0, 600));
    }
    // The Status's first bytes came with the header, or come now.
    if (header.find("retryAfterSeconds") == std::string::npos) {
      n = ReadSome(fd, buf, deadline_ns, "reading a refusal");
      header.append(buf.data(), n);
    }
    int wait_s = RetryAfterSeconds(header);
    close(fd);
    ++retries;
    sleep(static_cast<unsigned>(wait_s));
    header.clear();
    fd = Connect(socket_path);
    SendRequest(fd, path);
  }
  const int64_t header_ns = RealtimeNanos();

  InitialEventsScanner scanner;
  ChunkDecoder chunks(&scanner);
  uint64_t body_bytes = 0;
  std::string_view block = header;
  for (;;) {
    size_t used = chunks.Feed(block);
    if (out != nullptr && std::fwrite(block.data(), 1, used, out) != used) {
      Die(Errno(("write " + save).c_str()));
    }
    body_bytes += used;
    if (scanner.ended() && chunks.between_chunks()) break;
    const std::string when =
        "after " + std::to_string(scanner.objects()) + " objects";
    size_t n = ReadSome(fd, buf, deadline_ns, when);
    if (n == 0) Die("the stream ended " + when + ", before the end bookmark");
    block = std::string_view(buf.data(), n);
  }
  const int64_t end_ns = RealtimeNanos();
  close(fd);
  if (out != nullptr && std::fclose(out) != 0) {
    Die(Errno(("close " + save).c_str()));
  }
  std::printf(
      "objects=%llu rv=%s start_ns=%lld header_ns=%lld end_ns=%lld "
      "body_bytes=%llu retries=%d cpu_s=%.3f\n",
      static_cast<unsigned long long>(scanner.objects()), scanner.rv().c_str(),
      static_cast<long long>(start_ns), static_cast<long long>(header_ns),
      static_cast<long long>(end_ns),
      static_cast<unsigned long long>(body_bytes), retries, CpuSeconds());
  return 0;
}

// --- serve -------------------------------------------------------------------

constexpr std::string_view kHeader =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    "Transfer-Encoding: chunked\r\n\r\n";

struct Conn {
  int fd = -1;
  std::string request;      // until its blank line
  bool answering = false;   // the request is complete
  size_t sent = 0;          // of kHeader, then the body
  bool done = false;
};

struct ThreadStats {
  uint64_t writes = 0, full = 0;
  int64_t first_request_ns = 0, last_byte_ns = 0;
};

struct Body {
  std::string bytes;  // copy mode
  int memfd = -1;     // --sendfile
  size_t size = 0;
};

// Reads what has come of a request; true once its blank line has.
bool ReadRequest(Conn& c) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      c.request.append(buf, static_cast<size_t>(n));
      if (c.request.find("\r\n\r\n") != std::string::npos) return true;
      continue;
    }
    if (n == 0) Die("a reader closed before its request was complete");
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return false;
    Die(Errno("read"));
  }
}

// Writes as much of the answer as the socket takes.
void WriteAnswer(Conn& c, const Body& body, ThreadStats& stats) {
  const size_t total = kHeader.size() + body.size;
  while (c.sent < total) {
    ssize_t n;
    if (body.memfd >= 0 && c.sent >= kHeader.size()) {
      off_t off = static_cast<off_t>(c.sent - kHeader.size());
      n = sendfile(c.fd, body.memfd, &off,
                   body.size - static_cast<size_t>(off));
    } else {
      iovec iov[2];
      int count = 0;
      if (c.sent < kHeader.size()) {
        iov[count++] = {const_cast<char*>(kHeader.data()) + c.sent,
                        kHeader.size() - c.sent};
      }
      if (body.memfd < 0) {
        size_t off = c.sent > kHeader.size() ? c.sent - kHeader.size() : 0;
        iov[count++] = {const_cast<char*>(body.bytes.data()) + off,
                        body.size - off};
      }
      n = writev(c.fd, iov, count);
    }
    ++stats.writes;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        ++stats.full;
        return;
      }
      Die(Errno("write"));
    }
    c.sent += static_cast<size_t>(n);
  }
  c.done = true;
  stats.last_byte_ns = std::max(stats.last_byte_ns, RealtimeNanos());
  // A Unix socket's peer still reads what is queued after this close.
  close(c.fd);
}

void Serve(std::vector<Conn*> conns, const Body* body, ThreadStats* stats) {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Conn*> waiting;
    for (Conn* c : conns) {
      if (c->done) continue;
      const short events = c->answering ? POLLOUT : POLLIN;
      fds.push_back({c->fd, events, 0});
      waiting.push_back(c);
    }
    if (fds.empty()) return;
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Die(Errno("poll"));
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      Conn& c = *waiting[i];
      if (fds[i].revents == 0) continue;
      if (!c.answering) {
        if (fds[i].revents & (POLLERR | POLLHUP)) Die("a reader went away");
        if (!ReadRequest(c)) continue;
        c.answering = true;
        if (stats->first_request_ns == 0) {
          stats->first_request_ns = RealtimeNanos();
        }
      } else if (fds[i].revents & (POLLERR | POLLHUP)) {
        Die("a reader went away before it had the whole body");
      }
      WriteAnswer(c, *body, *stats);
    }
  }
}

Body LoadBody(const std::string& file, bool use_sendfile) {
  Body body;
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die(Errno(("open " + file).c_str()));
  struct stat st{};
  if (fstat(fd, &st) != 0) Die(Errno("fstat"));
  body.size = static_cast<size_t>(st.st_size);
  body.bytes.resize(body.size);
  for (size_t got = 0; got < body.size;) {
    ssize_t n = read(fd, body.bytes.data() + got, body.size - got);
    if (n <= 0) Die(Errno(("read " + file).c_str()));
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (use_sendfile) {
    body.memfd = memfd_create("body", MFD_CLOEXEC);
    if (body.memfd < 0) Die(Errno("memfd_create"));
    for (size_t put = 0; put < body.size;) {
      ssize_t n = pwrite(body.memfd, body.bytes.data() + put, body.size - put,
                         static_cast<off_t>(put));
      if (n <= 0) Die(Errno("pwrite"));
      put += static_cast<size_t>(n);
    }
    std::string().swap(body.bytes);
  }
  return body;
}

int ServeMain(int argc, char** argv) {
  std::string socket_path, body_file;
  size_t watchers = 0, threads = 2;
  bool use_sendfile = false;
  const walwatch::bench::Flags flags(
      "storm_ceiling serve",
      "usage: storm_ceiling serve --socket PATH --body FILE --watchers N "
      "[--threads T] [--sendfile]");
  flags.Parse(argc, argv,
              {{"--socket", &socket_path},
               {"--body", &body_file},
               {"--watchers", &watchers},
               {"--threads", &threads},
               {"--sendfile", &use_sendfile}});
  if (socket_path.empty() || body_file.empty() || watchers == 0 ||
      threads == 0) {
    flags.Usage("--socket, --body and --watchers are required");
  }
  std::signal(SIGPIPE, SIG_IGN);
  const Body body = LoadBody(body_file, use_sendfile);

  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) Die(Errno("socket"));
  sockaddr_un addr = UnixAddress(socket_path);
  unlink(socket_path.c_str());
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 4096) != 0) {
    Die(Errno(("listen on " + socket_path).c_str()));
  }
  std::vector<Conn> conns(watchers);
  for (Conn& c : conns) {
    c.fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c.fd < 0) Die(Errno("accept"));
  }
  close(listener);

  threads = std::min(threads, watchers);
  std::vector<ThreadStats> stats(threads);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    std::vector<Conn*> mine;
    for (size_t i = t; i < conns.size(); i += threads) {
      mine.push_back(&conns[i]);
    }
    pool.emplace_back(Serve, std::move(mine), &body, &stats[t]);
  }
  for (std::thread& t : pool) t.join();

  ThreadStats sum;
  for (const ThreadStats& s : stats) {
    sum.writes += s.writes;
    sum.full += s.full;
    if (sum.first_request_ns == 0 ||
        s.first_request_ns < sum.first_request_ns) {
      sum.first_request_ns = s.first_request_ns;
    }
    sum.last_byte_ns = std::max(sum.last_byte_ns, s.last_byte_ns);
  }
  std::printf(
      "watchers=%zu\nbody_bytes=%zu\nwrites=%llu\nfull_socket_waits=%llu\n"
      "server_cpu_s=%.3f\nfirst_request_ns=%lld\nlast_byte_ns=%lld\n",
      watchers, body.size, static_cast<unsigned long long>(sum.writes),
      static_cast<unsigned long long>(sum.full), CpuSeconds(),
      static_cast<long long>(sum.first_request_ns),
      static_cast<long long>(sum.last_byte_ns));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  // Flags::Parse skips argv[0]: here the role.
  if (role == "read") return Read(argc - 1, argv + 1);
  if (role == "serve") return ServeMain(argc - 1, argv + 1);
  std::fprintf(stderr,
               "usage: storm_ceiling read --socket PATH --path PATH ...\n"
               "       storm_ceiling serve --socket PATH --body FILE "
               "--watchers N ...\n");
  return 2;
}
