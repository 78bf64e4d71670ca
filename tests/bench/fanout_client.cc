// fanout_client: many watchers in one process. Opens N watches on walwatch's
// Unix socket, one connection each, and serves them all from one thread on
// epoll, so that the client costs little next to what it measures. The
// requests and the parsing of the answers are those of the tests' one watch
// client (tests/support/response_parser.h: Boost.Beast's response parser,
// the header, then the chunked framing, body bytes handed over in place).
// Its loop is its own: WatchHttpClient blocks on one connection and keeps
// each line it reads, where this one reads thousands of sockets as they
// become readable, splits event lines in the read buffer itself, and takes
// from each just what it needs:
//   * the type ({"type":"ERROR"...} counts as an error, with "code":410
//     separately; BOOKMARK is counted);
//   * metadata.resourceVersion (the line's one "resourceVersion": see
//     FieldFinder), which must increase along each stream (one row per
//     transaction: equal is a duplicate, lower is out of order);
//   * bench_writer's stamp annotation "W:SEQ:NS": NS gives commit -> receive
//     latency (receive = the clock right after the read() that completed the
//     line); with --check-seq, SEQ must be the writer's previous SEQ + 1 on
//     every stream (a gap counts lost events, a repeat a duplicate).
//
//   fanout_client --socket PATH (--path P | --paths-file F) --watchers N
//       [--ready-file F] [--done-file F] [--check-seq] [--duration S]
//       [--report-every S] [--quiet-ms MS] [--drain-timeout S]
//       [--connect-timeout S]
//
//   --path P         every watcher opens P; --paths-file F: watcher i opens
//                    line i % lines of F
//   --ready-file F   written once every watcher has its 200 header
//   --done-file F    bench_writer's --out: once it appears, the writer is
//                    done; the client waits until every watcher has its
//                    last_seq_W (with --check-seq), or until no byte has
//                    arrived for --quiet-ms (default 1000), at most
//                    --drain-timeout (default 60) seconds, then reports
//   --duration S     stop after S seconds of streaming instead
//   --report-every S a progress line on stderr every S seconds
//
// Prints key=value lines on stdout: watchers, connected, failed, events,
// event_bytes (the event lines' bytes, as retained by walwatch), bookmarks,
// errors, errors_410, ended (streams that ended), lost, duplicates,
// out_of_order, short_at_end (watchers without the writer's last seq),
// latency_p50_us, latency_p99_us, latency_p999_us, latency_max_us, samples,
// last_event_ns (CLOCK_REALTIME of the last event), client_cpu_s,
// first_error.
// Exit status 0 unless a watcher could not be opened.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base64.h"            // same directory
#include "bench_args.h"        // same directory
#include "bench_util.h"        // same directory
#include "latency_histogram.h"  // same directory
#include "tests/support/response_parser.h"

namespace {

using walwatch::bench::ReadFinalSeqs;
using walwatch::bench::RealtimeNanos;

using walwatch::bench::LatencyHistogram;
using walwatch::bench::MakeHistogram;
using walwatch::bench::Quantile;
using walwatch::test_support::GetRequestBytes;
using walwatch::test_support::ResponseParser;
namespace http = boost::beast::http;

volatile std::sig_atomic_t g_stop = 0;
extern "C" void OnSignal(int) { g_stop = 1; }

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "fanout_client: %s\n", message.c_str());
  std::exit(1);
}

double MonotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Parses the decimal digits at the start of `s`; false if there are none.
bool ParseU64(std::string_view s, uint64_t* out, size_t* used = nullptr) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    ++i;
  }
  if (i == 0) return false;
  *out = v;
  if (used) *used = i;
  return true;
}

// Finds a string field named by a quoted key ("resourceVersion") in an
// event line and returns its value, or empty: the last one searching
// backwards, the first one forwards. bench_writer's objects carry each
// field the client reads once, so both find the same; the direction only
// decides how much of the line is scanned. Where the fields lie depends on
// the database: jsonb orders keys by length, so "metadata" comes last but
// for "apiVersion" and the fields lie near the end of the line; MariaDB
// keeps the text as written, "metadata" near the start, before the spec and
// its padding. The Boyer-Moore-Horspool searchers (built once per key)
// skip most bytes, where a find() would stop at every '"' of the
// quote-dense JSON.
class FieldFinder {
 public:
  explicit FieldFinder(std::string key)
      : key_(std::move(key)),
        forward_(key_.begin(), key_.end()),
        backward_(key_.rbegin(), key_.rend()) {}

  // `at` (if given): where the key starts, for a search before or after it.
  std::string_view Find(std::string_view line, bool forward = false,
                        size_t* at = nullptr) const {
    size_t p;  // just after the key
    if (forward) {
      auto it = std::search(line.begin(), line.end(), forward_);
      if (it == line.end()) return {};
      p = static_cast<size_t>(it - line.begin()) + key_.size();
    } else {
      auto rit = std::search(line.rbegin(), line.rend(), backward_);
      if (rit == line.rend()) return {};
      // rit points at the key's last character, read backwards.
      p = static_cast<size_t>(line.rend() - rit);
    }
    if (at) *at = p - key_.size();
    // jsonb_out writes ": ", walwatch's splice may write ":".
    while (p < line.size() && (line[p] == ' ' || line[p] == ':')) ++p;
    if (p >= line.size() || line[p] != '"') return {};
    size_t end = line.find('"', p + 1);
    if (end == std::string_view::npos) return {};
    return line.substr(p + 1, end - p - 1);
  }

 private:
  std::string key_;
  std::boyer_moore_horspool_searcher<std::string::const_iterator> forward_;
  std::boyer_moore_horspool_searcher<std::string::const_reverse_iterator>
      backward_;
};

// Latencies, one per event. Those under kFineUs are counted per whole
// microsecond in a flat array, one increment each, and folded into the shared
// log-binned histogram only when it is read: at 2M events/s, binning each
// (a log() per event) was ~7 % of the client's time, which the benchmark
// would have measured as walwatch's latency. A microsecond is far finer
// than the histogram's bins (1 % wide) wherever a percentile lands.
class Latencies {
 public:
  void Add(double us) {
    const size_t whole = us < 1 ? 1 : static_cast<size_t>(us);
    if (whole < kFineUs) {
      ++fine_[whole];
    } else {
      coarse_(us);
    }
  }
  double Quantile(double q) const {
    LatencyHistogram all = coarse_;
    for (size_t us = 1; us < kFineUs; ++us) {
      if (fine_[us] != 0) {
        all(static_cast<double>(us), boost::histogram::weight(fine_[us]));
      }
    }
    return walwatch::bench::Quantile(all, q);
  }

 private:
  static constexpr size_t kFineUs = size_t{1} << 21;  // ~2.1 s
  std::vector<uint32_t> fine_ = std::vector<uint32_t>(kFineUs);
  LatencyHistogram coarse_ = MakeHistogram();
};

struct Totals {
  uint64_t events = 0, event_bytes = 0, bookmarks = 0, errors = 0,
           errors_410 = 0, ended = 0, lost = 0, duplicates = 0,
           out_of_order = 0, samples = 0;
  double max_us = 0;
  int64_t last_event_ns = 0;  // CLOCK_REALTIME when the last event arrived
  std::string first_error;
  Latencies latency;
};

class Client;
struct Conn;

// What a connection's parser does with body data: hands it to the Client,
// in place.
struct BodyToClient {
  Client* client;
  Conn* conn;
  void operator()(std::string_view body) const;
};

struct Conn {
  int fd = -1;
  size_t index = 0;
  std::optional<ResponseParser<BodyToClient>> parser;
  std::string pending;  // bytes the parser has not taken yet
  std::string line;     // start of an event line split across reads
  bool header_done = false;
  bool closed = false;
  uint64_t last_rv = 0;
  std::vector<uint64_t> last_seq;  // per writer, with --check-seq
  uint64_t events = 0;
};

class Client {
 public:
  Client(bool check_seq, bool etcd, Totals* totals)
      : check_seq_(check_seq), etcd_(etcd), totals_(totals) {}

  void SetNow(int64_t now_ns) { now_ns_ = now_ns; }

  void OnLine(Conn& c, std::string_view line) {
    if (line.empty()) return;
    if (etcd_) {
      OnEtcdLine(c, line);
      return;
    }
    if (line.compare(0, 15, "{\"type\":\"ERROR\"") == 0) {
      OnError(line, line.find("\"code\":410") != std::string_view::npos);
      return;
    }
    if (line.compare(0, 18, "{\"type\":\"BOOKMARK\"") == 0) {
      ++totals_->bookmarks;
      return;
    }
    uint64_t rv = 0;
    size_t rv_at = line.size();
    const bool forward = forward_;
    const bool has_rv = ParseU64(rv_field_.Find(line, forward, &rv_at), &rv);
    std::string_view stamp;
    if (rv_at < line.size()) {
      // The next line is searched from the end this one had its metadata
      // nearer to (every line comes from the same database).
      forward_ = rv_at < line.size() / 2;
      // The stamp is an annotation, in the same metadata: before
      // resourceVersion in jsonb's order (keys by length), after it in the
      // writer's; so the search starts there, not at the line's end.
      stamp = forward ? stamp_field_.Find(line.substr(rv_at), true)
                      : stamp_field_.Find(line.substr(0, rv_at));
    }
    if (stamp.empty()) stamp = stamp_field_.Find(line, forward);
    OnEvent(c, has_rv ? rv : 0, stamp, line.size() + 1);  // with its newline
  }

  // --etcd: one message of etcd's JSON gateway, {"result":{"header":...,
  // "events":[{"kv":{"key":B64,...,"mod_revision":"N",...,"value":B64}},
  // ...]}}; the stamp is in the base64 value, near its start.
  void OnEtcdLine(Conn& c, std::string_view line) {
    if (line.find("\"error\"") != std::string_view::npos ||
        line.find("\"canceled\":true") != std::string_view::npos) {
      OnError(line, line.find("\"compact_revision\"") != std::string_view::npos);
      return;
    }
    size_t at = line.find("\"events\":[");
    if (at == std::string_view::npos) return;  // created, progress notify
    std::vector<size_t> starts;
    for (size_t p = line.find("{\"kv\":", at); p != std::string_view::npos;
         p = line.find("{\"kv\":", p + 6)) {
      starts.push_back(p);
    }
    for (size_t i = 0; i < starts.size(); ++i) {
      size_t end = i + 1 < starts.size() ? starts[i + 1] : line.size();
      std::string_view event = line.substr(starts[i], end - starts[i]);
      uint64_t rv = 0;
      size_t rv_at = event.find("\"mod_revision\":\"");
      if (rv_at != std::string_view::npos) ParseU64(event.substr(rv_at + 16), &rv);
      std::string_view stamp;
      size_t v = event.find("\"value\":\"");
      if (v != std::string_view::npos) {
        std::string_view b64 = event.substr(v + 9);
        b64 = b64.substr(0, std::min(b64.find('"'), kEtcdStampWithin));
        walwatch::bench::DecodeBase64(b64, &decoded_);
        stamp = stamp_field_.Find(decoded_);
      }
      OnEvent(c, rv, stamp, event.size());
    }
  }
  void OnError(std::string_view line, bool expired) {
    ++totals_->errors;
    if (expired) ++totals_->errors_410;
    if (totals_->first_error.empty()) {
      totals_->first_error = std::string(line.substr(0, 300));
    }
  }

  // One event of `bytes` on stream `c`: its resourceVersion (0: none) must
  // increase along the stream; its stamp "W:SEQ:NS" gives the latency and,
  // with --check-seq, the writer's sequence.
  void OnEvent(Conn& c, uint64_t rv, std::string_view stamp, size_t bytes) {
    ++c.events;
    ++totals_->events;
    totals_->last_event_ns = now_ns_;
    totals_->event_bytes += bytes;
    if (rv != 0) {
      if (rv == c.last_rv) {
        ++totals_->duplicates;
      } else if (rv < c.last_rv) {
        ++totals_->out_of_order;
      }
      c.last_rv = std::max(c.last_rv, rv);
    }
    uint64_t w = 0, seq = 0, ns = 0;
    size_t used = 0;
    if (!ParseU64(stamp, &w, &used) || used >= stamp.size()) return;
    stamp.remove_prefix(used + 1);
    if (!ParseU64(stamp, &seq, &used) || used >= stamp.size()) return;
    stamp.remove_prefix(used + 1);
    if (!ParseU64(stamp, &ns) || ns == 0) return;  // setup rows: "0:0:0"
    double us = (now_ns_ - static_cast<int64_t>(ns)) / 1e3;
    totals_->latency.Add(us);
    totals_->max_us = std::max(totals_->max_us, us);
    ++totals_->samples;
    if (check_seq_) {
      if (w >= c.last_seq.size()) c.last_seq.resize(w + 1, 0);
      uint64_t& last = c.last_seq[w];
      if (seq > last + 1) totals_->lost += seq - last - 1;
      if (seq <= last) ++totals_->duplicates;
      last = std::max(last, seq);
    }
  }

  // Body bytes of one chunk: complete lines are handled in place.
  void OnBody(Conn& c, std::string_view body) {
    while (!body.empty()) {
      size_t nl = body.find('\n');
      if (nl == std::string_view::npos) {
        c.line.append(body);
        return;
      }
      if (c.line.empty()) {
        OnLine(c, body.substr(0, nl));
      } else {
        c.line.append(body.substr(0, nl));
        OnLine(c, c.line);
        c.line.clear();
      }
      body.remove_prefix(nl + 1);
    }
  }

 private:
  // How far into an etcd value the stamp lies, in base64 characters: the
  // object's metadata comes first (bench_writer's ObjectJson).
  static constexpr size_t kEtcdStampWithin = 1024;

  const bool check_seq_;
  const bool etcd_;
  Totals* totals_;
  std::string decoded_;  // an etcd value's first bytes
  bool forward_ = false;  // FieldFinder's direction for the next line
  const FieldFinder rv_field_{"\"resourceVersion\""};
  const FieldFinder stamp_field_{"\"bench.walwatch.io/stamp\""};
  int64_t now_ns_ = 0;
};

void BodyToClient::operator()(std::string_view body) const {
  client->OnBody(*conn, body);
}

struct Options {
  std::string socket;
  std::string etcd;  // HOST:PORT of etcd's JSON gateway, instead of --socket
  std::vector<std::string> paths;
  size_t watchers = 1;
  std::string ready_file, done_file;
  bool check_seq = false;
  double duration_s = 0;
  double report_every_s = 0;
  int quiet_ms = 1000;
  double drain_timeout_s = 60;
  double connect_timeout_s = 120;
};

const walwatch::bench::Flags kFlags(
    "fanout_client",
    "usage: fanout_client (--socket PATH | --etcd HOST:PORT) "
    "(--path P | --paths-file F) "
    "--watchers N [--ready-file F] [--done-file F] [--check-seq] "
    "[--duration S] [--report-every S] [--quiet-ms MS] "
    "[--drain-timeout S] [--connect-timeout S]");

Options Parse(int argc, char** argv) {
  Options o;
  auto paths_file = [&o](const std::string& file) {
    std::ifstream in(file);
    if (!in) kFlags.Usage("cannot read --paths-file");
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) o.paths.push_back(line);
    }
  };
  kFlags.Parse(argc, argv,
               {{"--socket", &o.socket},
                {"--etcd", &o.etcd},
                {"--path", [&o](const std::string& p) { o.paths.push_back(p); }},
                {"--paths-file", paths_file},
                {"--watchers", &o.watchers},
                {"--ready-file", &o.ready_file},
                {"--done-file", &o.done_file},
                {"--check-seq", &o.check_seq},
                {"--duration", &o.duration_s},
                {"--report-every", &o.report_every_s},
                {"--quiet-ms", &o.quiet_ms},
                {"--drain-timeout", &o.drain_timeout_s},
                {"--connect-timeout", &o.connect_timeout_s}});
  if (o.socket.empty() == o.etcd.empty() || o.paths.empty() ||
      o.watchers == 0) {
    kFlags.Usage("--socket or --etcd, a path and --watchers are required");
  }
  return o;
}

void RaiseFdLimit(size_t need) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur >= need) return;
  rl.rlim_cur = need;
  if (rl.rlim_max < need) rl.rlim_max = need;  // root may raise it
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    Die("cannot raise the open-file limit to " + std::to_string(need) +
        " (ulimit -n)");
  }
}

// etcd's watch of every key under `prefix`, as its JSON gateway takes it.
std::string EtcdWatchRequest(const std::string& prefix) {
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);
  std::string body = "{\"create_request\":{\"key\":\"" +
                     walwatch::bench::EncodeBase64(prefix) +
                     "\",\"range_end\":\"" +
                     walwatch::bench::EncodeBase64(end) + "\"}}";
  return "POST /v3/watch HTTP/1.1\r\nHost: localhost\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Opens one watch: on walwatch's Unix socket, or with --etcd, on etcd's
// gateway (`path` is then the key prefix).
int Connect(const Options& o, const std::string& path) {
  int fd;
  int rc;
  if (o.etcd.empty()) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) Die(std::string("socket: ") + std::strerror(errno));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (o.socket.size() >= sizeof(addr.sun_path)) Die("socket path too long");
    std::memcpy(addr.sun_path, o.socket.c_str(), o.socket.size() + 1);
    // Blocking: a full accept backlog makes connect wait rather than fail.
    rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) Die(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    size_t colon = o.etcd.rfind(':');
    if (colon == std::string::npos ||
        inet_pton(AF_INET, o.etcd.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
      Die("--etcd: HOST:PORT with an IPv4 address, not " + o.etcd);
    }
    addr.sin_port = htons(static_cast<uint16_t>(std::atoi(o.etcd.c_str() + colon + 1)));
    rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (rc != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  std::string request =
      o.etcd.empty() ? GetRequestBytes(path) : EtcdWatchRequest(path);
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  RaiseFdLimit(o.watchers + 64);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  Totals totals;
  Client client(o.check_seq, !o.etcd.empty(), &totals);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) Die(std::string("epoll_create1: ") + std::strerror(errno));

  std::vector<std::unique_ptr<Conn>> conns;
  conns.reserve(o.watchers);
  size_t failed = 0;
  for (size_t i = 0; i < o.watchers; ++i) {
    const std::string& path = o.paths[i % o.paths.size()];
    int fd = Connect(o, path);
    if (fd < 0) {
      if (failed++ == 0) {
        std::fprintf(stderr, "fanout_client: connect %s: %s\n",
                     o.socket.c_str(), std::strerror(errno));
      }
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->index = i;
    Conn* raw = c.get();
    c->parser.emplace(BodyToClient{&client, raw});
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = raw;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      Die(std::string("epoll_ctl: ") + std::strerror(errno));
    }
    conns.push_back(std::move(c));
  }
  if (failed > 0) {
    std::fprintf(stderr, "fanout_client: %zu of %zu watchers failed to connect\n",
                 failed, o.watchers);
  }

  std::vector<char> buf(1 << 20);
  std::vector<epoll_event> events(1024);
  size_t headers = 0, open = conns.size(), bad_status = 0;
  size_t closed_before_header = 0;
  bool ready = false;
  const double t_start = MonotonicSeconds();
  double t_ready = 0, t_last_byte = t_start, t_done_seen = 0;
  double next_report = 0, next_done_check = 0;
  std::vector<uint64_t> final_seqs;
  bool done_seen = false;

  auto close_conn = [&](Conn& c, bool ended) {
    if (c.closed) return;
    c.closed = true;
    epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    --open;
    if (!c.header_done) ++closed_before_header;
    if (ended) ++totals.ended;
  };

  while (!g_stop) {
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    if (n < 0 && errno != EINTR) Die(std::string("epoll_wait: ") + std::strerror(errno));
    for (int k = 0; k < n; ++k) {
      Conn& c = *static_cast<Conn*>(events[k].data.ptr);
      if (c.closed) continue;
      ssize_t got = read(c.fd, buf.data(), buf.size());
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        close_conn(c, true);
        continue;
      }
      if (got == 0) {
        close_conn(c, true);
        continue;
      }
      client.SetNow(RealtimeNanos());
      t_last_byte = MonotonicSeconds();
      std::string_view in(buf.data(), static_cast<size_t>(got));
      if (!c.pending.empty()) {
        c.pending.append(in);
        in = c.pending;
      }
      boost::beast::error_code ec;
      const size_t used_total = c.parser->Parse(in, &ec);
      // The header may end in the same Parse() that then needs more.
      if (!ec && !c.header_done && c.parser->header_done()) {
        c.header_done = true;
        if (c.parser->status() != 200) {
          if (bad_status++ == 0) {
            std::fprintf(stderr, "fanout_client: answer %u on watcher %zu\n",
                         c.parser->status(), c.index);
          }
          if (totals.first_error.empty()) {
            totals.first_error = "HTTP " + std::to_string(c.parser->status());
          }
          ++totals.errors;
          ec = http::error::end_of_stream;
        } else {
          ++headers;
        }
      }
      if (ec || c.parser->done()) {
        close_conn(c, true);
        continue;
      }
      // Keep what the parser did not take (a partial chunk header).
      std::string rest(in.substr(used_total));
      c.pending.swap(rest);
    }

    const double now = MonotonicSeconds();
    if (!ready && headers + closed_before_header >= conns.size()) {
      ready = true;
      t_ready = now;
      std::fprintf(stderr, "fanout_client: %zu watchers streaming (%.1f s to open)\n",
                   headers, now - t_start);
      if (!o.ready_file.empty()) {
        FILE* f = std::fopen(o.ready_file.c_str(), "w");
        if (f) std::fclose(f);
      }
    }
    if (!ready && now - t_start > o.connect_timeout_s) {
      Die("watchers not streaming after " + std::to_string(o.connect_timeout_s) +
          " s: " + std::to_string(headers) + " of " + std::to_string(conns.size()));
    }
    if (o.report_every_s > 0 && now >= next_report) {
      if (next_report > 0) {
        std::fprintf(stderr,
                     "fanout_client: t=%.0f open=%zu events=%llu errors=%llu "
                     "ended=%llu lost=%llu duplicates=%llu p99_ms=%.1f\n",
                     now - t_start, open,
                     static_cast<unsigned long long>(totals.events),
                     static_cast<unsigned long long>(totals.errors),
                     static_cast<unsigned long long>(totals.ended),
                     static_cast<unsigned long long>(totals.lost),
                     static_cast<unsigned long long>(totals.duplicates),
                     totals.latency.Quantile(0.99) / 1e3);
      }
      next_report = now + o.report_every_s;
    }
    if (ready && o.duration_s > 0 && now - t_ready >= o.duration_s) break;
    if (ready && !o.done_file.empty()) {
      if (!done_seen && now >= next_done_check) {
        next_done_check = now + 0.1;
        final_seqs = ReadFinalSeqs(o.done_file, &done_seen);
        if (done_seen) t_done_seen = now;
      }
      if (done_seen) {
        bool all = o.check_seq;
        if (all) {
          for (const auto& c : conns) {
            if (c->closed) continue;
            for (size_t w = 0; w < final_seqs.size() && all; ++w) {
              if (final_seqs[w] == 0) continue;
              all = w < c->last_seq.size() && c->last_seq[w] >= final_seqs[w];
            }
            if (!all) break;
          }
        }
        if (all) break;
        if (!o.check_seq && (now - t_last_byte) * 1e3 >= o.quiet_ms &&
            now - t_done_seen >= o.quiet_ms / 1e3) {
          break;
        }
        if (now - t_done_seen >= o.drain_timeout_s) {
          std::fprintf(stderr, "fanout_client: drain timed out after %.0f s\n",
                       o.drain_timeout_s);
          break;
        }
      }
    }
    if (open == 0 && ready) break;
  }

  uint64_t short_at_end = 0;
  if (o.check_seq && done_seen) {
    for (const auto& c : conns) {
      for (size_t w = 0; w < final_seqs.size(); ++w) {
        if (final_seqs[w] == 0) continue;
        if (w >= c->last_seq.size() || c->last_seq[w] < final_seqs[w]) {
          ++short_at_end;
          break;
        }
      }
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
               ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  for (auto& c : conns) close_conn(*c, false);

  std::printf("watchers=%zu\nconnected=%zu\nfailed=%zu\nstreaming=%zu\n",
              o.watchers, conns.size(), failed, headers);
  std::printf("events=%llu\nevent_bytes=%llu\nbookmarks=%llu\nerrors=%llu\n"
              "errors_410=%llu\nended=%llu\nlost=%llu\nduplicates=%llu\n"
              "out_of_order=%llu\nshort_at_end=%llu\n",
              static_cast<unsigned long long>(totals.events),
              static_cast<unsigned long long>(totals.event_bytes),
              static_cast<unsigned long long>(totals.bookmarks),
              static_cast<unsigned long long>(totals.errors),
              static_cast<unsigned long long>(totals.errors_410),
              static_cast<unsigned long long>(totals.ended),
              static_cast<unsigned long long>(totals.lost),
              static_cast<unsigned long long>(totals.duplicates),
              static_cast<unsigned long long>(totals.out_of_order),
              static_cast<unsigned long long>(short_at_end));
  std::printf("samples=%llu\nlatency_p50_us=%.0f\nlatency_p99_us=%.0f\n"
              "latency_p999_us=%.0f\nlatency_max_us=%.0f\n",
              static_cast<unsigned long long>(totals.samples),
              totals.latency.Quantile(0.5), totals.latency.Quantile(0.99),
              totals.latency.Quantile(0.999), totals.max_us);
  std::printf("last_event_ns=%lld\n", static_cast<long long>(totals.last_event_ns));
  std::printf("client_cpu_s=%.2f\nseconds=%.2f\n", cpu,
              MonotonicSeconds() - (t_ready > 0 ? t_ready : t_start));
  std::string first_error = totals.first_error;
  std::replace(first_error.begin(), first_error.end(), '\n', ' ');
  std::replace(first_error.begin(), first_error.end(), '\'', '"');
  std::printf("first_error='%s'\n", first_error.c_str());
  return failed > 0 ? 1 : 0;
}
