// fanout_ceiling: the fan-out benchmark with walwatch and PostgreSQL taken
// out, to measure what this machine allows at all. It serves N watch streams
// on a Unix socket, the way walwatch does (an HTTP/1.1 200 response with
// chunked framing, one JSON event line per event), and makes its own events
// at a fixed rate: no decoding, no event log, no locks, no selectors. Each
// event's line is built once and the same bytes are written to every
// watcher. fanout_client (the fan-out benchmark's client) reads and measures
// the streams exactly as it does walwatch's, so the latency and the CPU
// figures compare with tests/bench/fanout_bench.sh's.
//
//   fanout_ceiling --socket PATH --watchers N --rate R --duration S
//       [--batch-ms B] [--threads T] [--event-bytes E] [--sendfile]
//       [--start-file F] [--done-file F]
//
//   --batch-ms B     0 (the default): a watcher is written to as soon as an
//                    event is due (several events in one write only when
//                    the server has fallen behind), as walwatch does. B > 0:
//                    events are held back and written at most every B ms.
//   --threads T      writing threads (default 1); thread t serves the
//                    watchers i with i % T == t
//   --event-bytes E  the size of an event line (default 1265, the fan-out
//                    benchmark's ~1 KB objects)
//   --sendfile       each chunk is appended once to a memfd (one per
//                    writing thread) and sent to each watcher with
//                    sendfile(2) from it, rather than written from memory
//                    with writev(2): the kernel (6.5 and later) then hands
//                    the socket references to the file's pages instead of
//                    copying the bytes into it
//   --start-file F   wait for F (fanout_client's --ready-file) before the
//                    first event
//   --done-file F    written once the last event has been made, in
//                    bench_writer's --out format (last_seq_0=K), for
//                    fanout_client's --done-file
//
// Event k (1..R*S) is due at t0 + (k-1)/R and is stamped with that time, so
// the latency the client reports includes any lag of the server behind its
// schedule. Prints key=value lines on stdout: events, deliveries, writes
// (write() calls), writes_per_delivery, partial_writes (a full socket),
// behind_ms_max (the largest lag behind the schedule), server_cpu_s.
//
// Speaks only as much HTTP as the benchmark needs: each request is read with
// Boost.Beast's request parser and answered 200, whatever it asks for.

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.h"        // same directory
#include "bench_util.h"  // same directory

namespace {

using walwatch::bench::RealtimeNanos;

namespace http = boost::beast::http;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "fanout_ceiling: %s\n", message.c_str());
  std::exit(1);
}

void SleepUntil(int64_t realtime_ns) {
  timespec ts{static_cast<time_t>(realtime_ns / 1000000000),
              static_cast<long>(realtime_ns % 1000000000)};
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

struct Options {
  std::string socket;
  size_t watchers = 0;
  double rate = 0;
  double duration_s = 0;
  double batch_ms = 0;
  size_t threads = 1;
  size_t event_bytes = 1265;
  bool sendfile = false;
  std::string start_file, done_file;
};

const walwatch::bench::Flags kFlags(
    "fanout_ceiling",
    "usage: fanout_ceiling --socket PATH --watchers N --rate R "
    "--duration S [--batch-ms B] [--threads T] [--event-bytes E] "
    "[--sendfile] [--start-file F] [--done-file F]");

Options Parse(int argc, char** argv) {
  Options o;
  kFlags.Parse(argc, argv,
               {{"--socket", &o.socket},
                {"--watchers", &o.watchers},
                {"--rate", &o.rate},
                {"--duration", &o.duration_s},
                {"--batch-ms", &o.batch_ms},
                {"--threads", &o.threads},
                {"--event-bytes", &o.event_bytes},
                {"--sendfile", &o.sendfile},
                {"--start-file", &o.start_file},
                {"--done-file", &o.done_file}});
  if (o.socket.empty() || o.watchers == 0 || o.rate <= 0 ||
      o.duration_s <= 0 || o.threads == 0 || o.batch_ms < 0) {
    kFlags.Usage("--socket, --watchers, --rate and --duration are required");
  }
  return o;
}

// One event line of about `bytes` bytes, shaped like walwatch's: the stamp
// fanout_client reads, then the resourceVersion, last in metadata.
std::string EventLine(uint64_t seq, int64_t stamp_ns, size_t bytes) {
  char tail[256];
  int n = std::snprintf(
      tail, sizeof tail,
      "\"},\"metadata\":{\"name\":\"bench-0\",\"namespace\":\"default\","
      "\"annotations\":{\"bench.walwatch.io/stamp\":\"0:%llu:%lld\"},"
      "\"resourceVersion\":\"%llu\"},\"apiVersion\":\"apps/v1\"}}\n",
      static_cast<unsigned long long>(seq), static_cast<long long>(stamp_ns),
      static_cast<unsigned long long>(seq));
  std::string line =
      "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Deployment\","
      "\"spec\":{\"padding\":\"";
  size_t fixed = line.size() + static_cast<size_t>(n);
  line.append(bytes > fixed ? bytes - fixed : 0, 'x');
  line.append(tail, static_cast<size_t>(n));
  return line;
}

// A chunk (one batch of events, framed) is built once and shared by every
// watcher's queue, as walwatch shares an event's bytes.
using Chunk = std::shared_ptr<const std::string>;

struct Watcher {
  int fd = -1;
  std::deque<Chunk> queue;  // chunks the socket had no room for yet
  size_t offset = 0;        // bytes of queue.front() already written
  // --sendfile: the bytes of the thread's memfd sent so far; everything up
  // to the file's end is due.
  off_t sent = 0;
};

// --sendfile: one writing thread's chunks, appended to a memfd.
struct EventFile {
  int fd = -1;
  off_t end = 0;
};

struct Stats {
  uint64_t writes = 0, partial_writes = 0, deliveries = 0;
  int64_t behind_ns_max = 0;
};

// One write(2)-like call that returned `n`, counted: kSome if it wrote,
// kRetry after EINTR, kFull (counted too) when the socket is full. Any
// other error ends the program.
enum class Wrote { kSome, kRetry, kFull };
Wrote Check(ssize_t n, const char* call, Stats& stats) {
  ++stats.writes;
  if (n >= 0) return Wrote::kSome;
  if (errno == EINTR) return Wrote::kRetry;
  if (errno != EAGAIN) Die(std::string(call) + ": " + std::strerror(errno));
  ++stats.partial_writes;
  return Wrote::kFull;
}

// --sendfile: sends as much of the file as the watcher's socket takes.
void FlushFile(Watcher& w, const EventFile& file, Stats& stats) {
  while (w.sent < file.end) {
    ssize_t n = sendfile(w.fd, file.fd, &w.sent,
                         static_cast<size_t>(file.end - w.sent));
    const Wrote wrote = Check(n, "sendfile", stats);
    if (wrote == Wrote::kRetry) continue;
    if (wrote == Wrote::kFull) return;
    if (w.sent < file.end) {
      ++stats.partial_writes;
      return;  // the socket is full
    }
  }
}

// Writes as much of a watcher's queue as its socket takes, up to 64 chunks
// per writev.
void Flush(Watcher& w, Stats& stats) {
  while (!w.queue.empty()) {
    iovec iov[64];
    size_t count = 0;
    for (const Chunk& c : w.queue) {
      if (count == 64) break;
      size_t skip = count == 0 ? w.offset : 0;
      iov[count++] = {const_cast<char*>(c->data()) + skip, c->size() - skip};
    }
    ssize_t n = writev(w.fd, iov, static_cast<int>(count));
    const Wrote wrote = Check(n, "writev", stats);
    if (wrote == Wrote::kRetry) continue;
    if (wrote == Wrote::kFull) return;
    size_t done = static_cast<size_t>(n);
    while (done > 0) {
      size_t left = w.queue.front()->size() - w.offset;
      if (done < left) {
        w.offset += done;
        ++stats.partial_writes;
        return;  // the socket is full
      }
      done -= left;
      w.queue.pop_front();
      w.offset = 0;
    }
  }
}

// One writing thread: makes events 1..total on the shared schedule and writes
// each batch, as one chunk, to its watchers.
void Serve(const Options& o, std::vector<Watcher*> watchers, int64_t t0_ns,
           uint64_t total, std::atomic<size_t>* produced, Stats* stats) {
  const double interval_ns = 1e9 / o.rate;
  const int64_t batch_ns = static_cast<int64_t>(o.batch_ms * 1e6);
  auto due_at = [&](uint64_t seq) {
    return t0_ns + static_cast<int64_t>((seq - 1) * interval_ns);
  };
  EventFile file;
  if (o.sendfile) {
    file.fd = memfd_create("events", MFD_CLOEXEC);
    if (file.fd < 0) Die(std::string("memfd_create: ") + std::strerror(errno));
  }
  auto pending = [&](const Watcher* w) {
    return o.sendfile ? w->sent < file.end : !w->queue.empty();
  };
  auto flush = [&](Watcher* w) {
    if (o.sendfile) {
      FlushFile(*w, file, *stats);
    } else {
      Flush(*w, *stats);
    }
  };
  uint64_t next = 1;
  int64_t last_wake = 0;
  while (next <= total) {
    SleepUntil(std::max(due_at(next), last_wake + batch_ns));
    const int64_t now = RealtimeNanos();
    last_wake = now;
    uint64_t last = std::min<uint64_t>(
        total, static_cast<uint64_t>((now - t0_ns) / interval_ns) + 1);
    stats->behind_ns_max = std::max(stats->behind_ns_max, now - due_at(last));
    std::string body;
    for (uint64_t seq = next; seq <= last; ++seq) {
      body += EventLine(seq, due_at(seq), o.event_bytes);
    }
    char size_line[32];
    int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", body.size());
    auto chunk = std::make_shared<std::string>(size_line, static_cast<size_t>(n));
    *chunk += body;
    *chunk += "\r\n";
    if (o.sendfile) {
      if (pwrite(file.fd, chunk->data(), chunk->size(), file.end) !=
          static_cast<ssize_t>(chunk->size())) {
        Die(std::string("pwrite: ") + std::strerror(errno));
      }
      file.end += static_cast<off_t>(chunk->size());
    } else {
      for (Watcher* w : watchers) w->queue.push_back(chunk);
    }
    for (Watcher* w : watchers) flush(w);
    stats->deliveries += (last - next + 1) * watchers.size();
    next = last + 1;
  }
  produced->fetch_add(1);
  // Then until every watcher has all of it.
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Watcher*> waiting;
    for (Watcher* w : watchers) {
      if (!pending(w)) continue;
      fds.push_back({w->fd, POLLOUT, 0});
      waiting.push_back(w);
    }
    if (fds.empty()) {
      if (file.fd >= 0) close(file.fd);
      return;
    }
    if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) {
      Die(std::string("poll: ") + std::strerror(errno));
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLERR | POLLHUP)) Die("a watcher went away");
      if (fds[i].revents & POLLOUT) flush(waiting[i]);
    }
  }
}

// Accepts one watch: reads its request with Beast's parser and answers 200.
int AcceptWatch(int listener) {
  int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) Die(std::string("accept: ") + std::strerror(errno));
  http::request_parser<http::empty_body> parser;
  std::string buffered;
  char buf[4096];
  while (!parser.is_done()) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) Die("a watcher closed before its request was complete");
    buffered.append(buf, static_cast<size_t>(n));
    boost::beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(buffered), ec);
    if (ec && ec != http::error::need_more) Die("bad request: " + ec.message());
    buffered.erase(0, used);
  }
  static const char kHeader[] =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  if (write(fd, kHeader, sizeof kHeader - 1) != sizeof kHeader - 1) {
    Die("cannot write a response header");
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  std::signal(SIGPIPE, SIG_IGN);
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < o.watchers + 64) {
    rl.rlim_cur = std::max<rlim_t>(rl.rlim_max, o.watchers + 64);
    rl.rlim_max = rl.rlim_cur;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) Die("cannot raise the open-file limit");
  }

  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (o.socket.size() >= sizeof(addr.sun_path)) Die("socket path too long");
  std::memcpy(addr.sun_path, o.socket.c_str(), o.socket.size() + 1);
  unlink(o.socket.c_str());
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 4096) != 0) {
    Die("cannot listen on " + o.socket + ": " + std::strerror(errno));
  }

  std::vector<Watcher> watchers(o.watchers);
  for (Watcher& w : watchers) w.fd = AcceptWatch(listener);
  close(listener);
  if (!o.start_file.empty()) {
    while (access(o.start_file.c_str(), F_OK) != 0) {
      SleepUntil(RealtimeNanos() + 10000000);
    }
  }

  const uint64_t total = static_cast<uint64_t>(o.rate * o.duration_s);
  const int64_t t0 = RealtimeNanos() + 10000000;
  std::atomic<size_t> produced{0};
  std::vector<Stats> stats(o.threads);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < o.threads; ++t) {
    std::vector<Watcher*> mine;
    for (size_t i = t; i < watchers.size(); i += o.threads) mine.push_back(&watchers[i]);
    threads.emplace_back(Serve, std::cref(o), std::move(mine), t0, total,
                         &produced, &stats[t]);
  }
  while (produced.load() < o.threads) SleepUntil(RealtimeNanos() + 1000000);
  if (!o.done_file.empty()) {
    std::string tmp = o.done_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) Die("cannot write " + tmp);
    std::fprintf(f, "writes=%llu\nlast_seq_0=%llu\n",
                 static_cast<unsigned long long>(total),
                 static_cast<unsigned long long>(total));
    std::fclose(f);
    std::rename(tmp.c_str(), o.done_file.c_str());
  }
  for (std::thread& t : threads) t.join();

  // The client closes its watches once it has every event.
  for (Watcher& w : watchers) {
    fcntl(w.fd, F_SETFL, fcntl(w.fd, F_GETFL) & ~O_NONBLOCK);
    pollfd p{w.fd, POLLIN | POLLRDHUP, 0};
    poll(&p, 1, 120000);
    close(w.fd);
  }

  Stats sum;
  for (const Stats& s : stats) {
    sum.writes += s.writes;
    sum.partial_writes += s.partial_writes;
    sum.deliveries += s.deliveries;
    sum.behind_ns_max = std::max(sum.behind_ns_max, s.behind_ns_max);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("events=%llu\ndeliveries=%llu\nwrites=%llu\n"
              "writes_per_delivery=%.3f\npartial_writes=%llu\n"
              "behind_ms_max=%.1f\nserver_cpu_s=%.2f\n",
              static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(sum.deliveries),
              static_cast<unsigned long long>(sum.writes),
              sum.deliveries ? static_cast<double>(sum.writes) / sum.deliveries : 0,
              static_cast<unsigned long long>(sum.partial_writes),
              sum.behind_ns_max / 1e6,
              ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                  ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
  return 0;
}
