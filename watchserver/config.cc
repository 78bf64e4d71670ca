#include "watchserver/config.h"

#include <sys/un.h>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include "cdc/base/text.h"
#include "watchserver/loopback_address.h"
#include "watchserver/peer_credentials.h"

namespace walwatch {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kKi = uint64_t{1} << 10;
constexpr uint64_t kMi = uint64_t{1} << 20;
constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
constexpr char kRedacted[] = "********";

// ---------------------------------------------------------------------------
// Value syntaxes. Each Parse* returns false for text it does not accept.

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool ParseBool(std::string_view text, bool* value) {
  if (text == "true" || text == "1") {
    *value = true;
    return true;
  }
  if (text == "false" || text == "0") {
    *value = false;
    return true;
  }
  return false;
}
std::string FormatDuration(milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  const std::pair<const char*, int64_t> kUnits[] = {
      {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
  for (const auto& [suffix, unit] : kUnits) {
    if (ms >= unit) {
      out += std::to_string(ms / unit);
      out += suffix;
      ms %= unit;
    }
  }
  return out;
}

struct SizeUnit {
  std::string_view suffix;
  uint64_t bytes;
};
// Binary units first: FormatSize prefers them.
constexpr SizeUnit kSizeUnits[] = {
    {"Ti", kKi* kKi* kKi* kKi},
    {"Gi", kKi* kKi* kKi},
    {"Mi", kKi* kKi},
    {"Ki", kKi},
    {"T", 1000000000000},
    {"G", 1000000000},
    {"M", 1000000},
    {"k", 1000},
    {"K", 1000},
};

// "256Mi", "1Gi", "512Ki", "100M", "1G", or plain bytes.
bool ParseSize(std::string_view text, uint64_t* value) {
  uint64_t n;
  if (!ConsumeUnsigned(&text, &n)) return false;
  if (text.empty()) {
    *value = n;
    return true;
  }
  for (const SizeUnit& unit : kSizeUnits) {
    if (text == unit.suffix) {
      return !__builtin_mul_overflow(n, unit.bytes, value);
    }
  }
  return false;
}

std::string FormatSize(uint64_t bytes) {
  if (bytes != 0) {
    for (const SizeUnit& unit : kSizeUnits) {
      if (bytes % unit.bytes == 0) {
        return std::to_string(bytes / unit.bytes) + std::string(unit.suffix);
      }
    }
  }
  return std::to_string(bytes);
}

// "0660" or "660".
bool ParseFileMode(std::string_view text, mode_t* value) {
  if (text.empty() || text.size() > 5) return false;
  unsigned v = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return false;
    v = v * 8 + static_cast<unsigned>(c - '0');
  }
  if (v > 07777) return false;
  *value = static_cast<mode_t>(v);
  return true;
}

std::string FormatFileMode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode));
  return buf;
}

bool IsValidSlotName(std::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || IsDigit(c) || c == '_';
  });
}

// ---------------------------------------------------------------------------
// The flags, as data. Adding a flag is adding one entry to kFlags.

enum class Group { kGeneral, kPostgreSql, kServing, kEventLog, kLogging };

constexpr std::pair<Group, const char*> kGroupHeadings[] = {
    {Group::kPostgreSql, "PostgreSQL"},
    {Group::kServing, "Serving"},
    {Group::kEventLog, "Event log"},
    {Group::kLogging, "Logging"},
};

struct Flag {
  const char* name;  // Without the leading "--".
  Group group;
  const char* metavar;  // Shown after the flag in --help; null: boolean.
  const char* usage;    // One or more sentences for --help.
  // Replaces the shown default when the default value alone says too little.
  const char* default_text;
  // Stores `text` into *config. Returns "" or why `text` is not accepted,
  // for example "expected a size such as 256Mi".
  std::string (*parse)(std::string_view text, Config* config);
  // The value for display in --help and ConfigToJson; secrets redacted.
  std::string (*display)(const Config& config);
  bool json_number;  // ConfigToJson writes the value bare, not as a string.
  bool is_setting;   // Has an environment variable and is in ConfigToJson.
};

std::string JoinIds(const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

constexpr char kExpectDuration[] =
    "expected a duration such as 30s, 500ms or 1h30m";

// A duration flag with a lower bound: "" or why `text` is refused.
std::string ParseDurationAtLeast(std::string_view text, milliseconds min,
                                 milliseconds* value) {
  milliseconds d;
  if (!ParseDuration(text, &d)) return kExpectDuration;
  if (d < min) return "must be at least " + FormatDuration(min);
  *value = d;
  return "";
}

const Flag kFlags[] = {
    {"help", Group::kGeneral, nullptr, "Print this help and exit (also -h).",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseBool(t, &c->help) ? "" : "expected true or false";
     },
     [](const Config& c) -> std::string { return c.help ? "true" : "false"; },
     false, false},

    // PostgreSQL.
    {"conninfo", Group::kPostgreSql, "CONNINFO",
     "libpq connection string, key=value or a postgresql:// URI. Empty means "
     "the PG* environment variables, as in psql.",
     "empty (PG* environment variables)",
     [](std::string_view t, Config* c) -> std::string {
       c->conninfo = t;
       return "";
     },
     [](const Config& c) { return RedactConninfo(c.conninfo); }, false, true},
    {"slot", Group::kPostgreSql, "NAME",
     "Logical replication slot to stream from: 1 to 63 characters from a-z, "
     "0-9 and _.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       if (!IsValidSlotName(t)) {
         return "expected 1 to 63 characters from a-z, 0-9 and _";
       }
       c->slot = t;
       return "";
     },
     [](const Config& c) { return c.slot; }, false, true},
    {"slot-from", Group::kPostgreSql, "TEXT",
     "Derive the slot name from TEXT, e.g. walwatch_$(POD_NAME) in a pod "
     "spec: lower-cased, other characters become _, and a name over 63 bytes "
     "is cut to 54 plus _ and a hash of the whole. Replaces --slot.",
     "unset (use --slot)",
     [](std::string_view t, Config* c) -> std::string {
       if (t.empty()) return "";
       c->slot = SlotNameFrom(t);
       c->slot_from = std::string(t);
       return "";
     },
     [](const Config& c) { return c.slot_from; }, false, true},
    {"mapping", Group::kPostgreSql, "PATH",
     "Table-mapping JSON file: which tables become which Kubernetes resources.",
     "built-in Clusterpedia resources mapping",
     [](std::string_view t, Config* c) -> std::string {
       c->mapping_path = t;
       return "";
     },
     [](const Config& c) { return c.mapping_path; }, false, true},
    {"status-interval", Group::kPostgreSql, "DURATION",
     "How often standby status updates are sent to PostgreSQL; more than 0 "
     "and less than 30s.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       milliseconds d;
       if (!ParseDuration(t, &d)) return kExpectDuration;
       if (d <= milliseconds(0) || d >= std::chrono::seconds(30)) {
         return "must be more than 0 and less than 30s";
       }
       c->status_interval = d;
       return "";
     },
     [](const Config& c) { return FormatDuration(c.status_interval); }, false,
     true},
    {"replication-timeout", Group::kPostgreSql, "DURATION",
     "A replication connection that carries no message for this long is "
     "taken as dead (a silent network partition) and reopened, unless its "
     "walsender is seen busy decoding (asked on another connection, within "
     "5s); also bounds the commands that start streaming. At least 5s.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDurationAtLeast(t, std::chrono::seconds(5),
                                   &c->replication_timeout);
     },
     [](const Config& c) { return FormatDuration(c.replication_timeout); },
     false, true},
    {"connect-timeout", Group::kPostgreSql, "DURATION",
     "Time allowed to connect to PostgreSQL; at least 1s.", nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDurationAtLeast(t, std::chrono::seconds(1),
                                   &c->connect_timeout);
     },
     [](const Config& c) { return FormatDuration(c.connect_timeout); }, false,
     true},

    // Serving.
    {"socket", Group::kServing, "PATH",
     "Unix socket the watch API is served on.", nullptr,
     [](std::string_view t, Config* c) -> std::string {
       if (t.empty() || t.size() > kMaxSocketPath) {
         return "expected a path of 1 to " + std::to_string(kMaxSocketPath) +
                " bytes";
       }
       c->socket_path = t;
       return "";
     },
     [](const Config& c) { return c.socket_path; }, false, true},
    {"socket-mode", Group::kServing, "MODE",
     "Permissions of the socket file, in octal.", nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseFileMode(t, &c->socket_mode)
                  ? ""
                  : "expected an octal file mode such as 0660";
     },
     [](const Config& c) { return FormatFileMode(c.socket_mode); }, false,
     true},
    {"kinds", Group::kServing, "PATH",
     "JSON file declaring resources' kinds, [{\"group\":\"example.com\","
     "\"version\":\"v1\",\"resource\":\"widgets\",\"kind\":\"Widget\"}], "
     "for the bookmarks of resources the table has no row of (CRDs); a bad "
     "file stops walwatch at startup. Kinds seen in the table win over it, "
     "and it wins over the built-in table of Kubernetes' own resources.",
     "empty (built-in kinds and those seen in the table)",
     [](std::string_view t, Config* c) -> std::string {
       c->kinds_path = t;
       return "";
     },
     [](const Config& c) { return c.kinds_path; }, false, true},
    {"allow-uids", Group::kServing, "IDS",
     "Only these user ids (comma-separated) may use the socket, checked with "
     "SO_PEERCRED; a refusal is logged. With --allow-gids, either matches.",
     "empty (anyone who can open the socket file)",
     [](std::string_view t, Config* c) -> std::string {
       return ParseIdList(t, &c->allow_uids);
     },
     [](const Config& c) { return JoinIds(c.allow_uids); }, false, true},
    {"allow-gids", Group::kServing, "IDS",
     "Only peers whose primary group id is one of these may use the socket.",
     "empty (anyone who can open the socket file)",
     [](std::string_view t, Config* c) -> std::string {
       return ParseIdList(t, &c->allow_gids);
     },
     [](const Config& c) { return JoinIds(c.allow_gids); }, false, true},
    {"tcp-listen", Group::kServing, "ADDR:PORT",
     "Also serve the watch API on this loopback TCP address, for kubectl, "
     "e.g. 127.0.0.1:8080 or [::1]:8080. Only loopback addresses are "
     "accepted: the API has no authentication.",
     "empty (no TCP listener)",
     [](std::string_view t, Config* c) -> std::string {
       if (t.empty()) {
         c->tcp_listen.clear();
         c->tcp_listen_address.clear();
         c->tcp_listen_port = 0;
         return "";
       }
       // Port 0 (any free port) is for tests: kubectl needs to know it.
       if (!ParseLoopbackAddress(t, &c->tcp_listen_address,
                                 &c->tcp_listen_port) ||
           c->tcp_listen_port == 0) {
         return "expected a loopback address and port such as "
                "127.0.0.1:8080";
       }
       c->tcp_listen = t;
       return "";
     },
     [](const Config& c) { return c.tcp_listen; }, false, true},
    {"http-threads", Group::kServing, "N", "Threads serving HTTP; 1 to 64. More can help with many "
     "watchers on a machine with cores to spare.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       uint64_t n;
       if (!ParseUnsigned(t, &n) || n < 1 || n > 64) {
         return "expected an integer from 1 to 64";
       }
       c->http_threads = static_cast<int>(n);
       return "";
     },
     [](const Config& c) { return std::to_string(c.http_threads); }, true,
     true},
    {"too-large-rv-wait", Group::kServing, "DURATION",
     "How long a request whose resourceVersion is ahead of the stream waits "
     "for the stream to catch up before it is answered \"too large\".",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDuration(t, &c->too_large_rv_wait) ? "" : kExpectDuration;
     },
     [](const Config& c) { return FormatDuration(c.too_large_rv_wait); }, false,
     true},
    {"initial-state-timeout", Group::kServing, "DURATION",
     "How long a watch may take to send its initial state (WatchList, or a "
     "watch from resourceVersion 0). The state is read in one REPEATABLE "
     "READ snapshot, which stays open while the client reads, holding back "
     "VACUUM and a state reader: a client that reads more slowly gets 410 "
     "Expired once this has passed, and relists. 0: no limit.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDuration(t, &c->initial_state_timeout) ? ""
                                                          : kExpectDuration;
     },
     [](const Config& c) { return FormatDuration(c.initial_state_timeout); },
     false, true},
    {"initial-state-stall-timeout", Group::kServing, "DURATION",
     "How long a state reader waits for a client that takes none of its "
     "initial state (the 4 MiB of events queued for it stay unread), or "
     "too little of it (see --initial-state-min-rate), before it gives back the "
     "reader and the snapshot: the watch ends with 410 Expired and the "
     "client relists. Keep it below 30s: a write the client does not drain "
     "for 30s closes its connection without the 410. 0 (no limit, only "
     "--initial-state-timeout) or at least 1s.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       std::chrono::milliseconds d;
       if (!ParseDuration(t, &d)) return kExpectDuration;
       if (d.count() != 0 && d < std::chrono::seconds(1)) {
         return "must be 0 (no limit) or at least 1s";
       }
       c->initial_state_stall_timeout = d;
       return "";
     },
     [](const Config& c) {
       return FormatDuration(c.initial_state_stall_timeout);
     },
     false, true},
    {"initial-state-min-rate", Group::kServing, "SIZE",
     "Bytes per second a client must take of its initial state while the "
     "state reader waits for it: over each --initial-state-stall-timeout "
     "that the reader spends waiting on the client's full queue, the "
     "client must have taken this much per second, or the watch ends with "
     "410 Expired and the reader and its snapshot are given back. So a "
     "client that trickles frees them as surely as one that stopped. A "
     "reader that is itself slower than the client never waits and is "
     "never judged. 0: any progress will do. The default, 1Mi, is far "
     "below what a client on the Unix socket reads.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       uint64_t n;
       if (!ParseSize(t, &n)) return "expected a size such as 1Mi";
       c->initial_state_min_rate = n;
       return "";
     },
     [](const Config& c) { return FormatSize(c.initial_state_min_rate); },
     false, true},
    {"bookmark-interval", Group::kServing, "DURATION",
     "A watch with allowWatchBookmarks=true gets a BOOKMARK about this often "
     "(each interval shortened by up to 5% at random); at least 1s. The "
     "Kubernetes apiserver sends one about every minute.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDurationAtLeast(t, std::chrono::seconds(1),
                                   &c->bookmark_interval);
     },
     [](const Config& c) { return FormatDuration(c.bookmark_interval); }, false,
     true},
    {"wake-interval", Group::kServing, "auto|DURATION",
     "How long after waking watchers walwatch waits before waking them "
     "again: what PostgreSQL sends meanwhile goes out with the next wake, "
     "so each watcher gets more events in fewer writes, which costs "
     "walwatch, the kernel and the clients less per event, for up to this "
     "much more latency. What comes after a quiet spell goes at once. "
     "auto: 10us for each watch of the resources the last wake changed, "
     "at most 10ms (one watcher: 10us; 1,000: 10ms). A duration, 0 to 1s: "
     "that long after every wake (0: wake them after every read from "
     "PostgreSQL).",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       if (t == "auto") {
         c->wake_interval = std::chrono::milliseconds(10);
         c->wake_interval_auto = true;
         return "";
       }
       std::chrono::milliseconds d;
       if (!ParseDuration(t, &d)) {
         return "expected auto or a duration such as 5ms";
       }
       if (d > std::chrono::seconds(1)) return "must be at most 1s";
       c->wake_interval = d;
       c->wake_interval_auto = false;
       return "";
     },
     [](const Config& c) {
       return c.wake_interval_auto ? std::string("auto")
                                   : FormatDuration(c.wake_interval);
     },
     false, true},
    {"sendfile", Group::kServing, nullptr,
     "Keep the event log's lines in a memfd and send them to watchers with "
     "sendfile(2), so that every socket gets references to the same pages "
     "instead of a copy; at 1,000 watchers this is most of the cost of a "
     "delivery. false keeps them on the heap and copies them into each "
     "socket. walwatch copies by itself where the system has no memfd or "
     "refuses sendfile to a socket.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseBool(t, &c->sendfile) ? "" : "expected true or false";
     },
     [](const Config& c) -> std::string {
       return c.sendfile ? "true" : "false";
     },
     true, true},

    {"max-watcher-backlog", Group::kServing, "SIZE",
     "Most unsent event bytes a watcher may lag behind the newest event; a "
     "slower watcher ends with 410 Expired and must relist. Never less than "
     "half of the event log's budget, the largest transaction it keeps.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       uint64_t n;
       if (!ParseSize(t, &n) || static_cast<size_t>(n) != n) {
         return "expected a size such as 64Mi";
       }
       if (n < 64 * 1024) return "must be at least 64Ki";
       c->max_watcher_backlog_bytes = static_cast<size_t>(n);
       return "";
     },
     [](const Config& c) { return FormatSize(c.max_watcher_backlog_bytes); },
     false, true},
    {"max-connections", Group::kServing, "auto|N",
     "Most client connections open at once, on the socket and --tcp-listen "
     "together; 1 to 1000000. More are answered 429 TooManyRequests "
     "(Retry-After: 1) and closed (16 at a time; more are closed at once), "
     "so that watchers cannot take the file descriptors walwatch needs for "
     "PostgreSQL. auto: the open-file limit (whose soft limit walwatch "
     "raises to the hard one) less 128 and --state-workers.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       if (t == "auto") {
         c->max_connections = 0;
         return "";
       }
       uint64_t n;
       if (!ParseUnsigned(t, &n) || n < 1 || n > 1000000) {
         return "expected auto or an integer from 1 to 1000000";
       }
       c->max_connections = static_cast<size_t>(n);
       return "";
     },
     [](const Config& c) {
       return c.max_connections == 0 ? std::string("auto")
                                     : std::to_string(c.max_connections);
     },
     false, true},
    {"max-connection-buffer-bytes", Group::kServing, "SIZE",
     "Memory all connections together may hold in request buffers (requests "
     "being read, up to 1 MiB of header each) and in the pending writes of "
     "watchers that stopped reading (up to 256 KiB each); at least 4Mi. A "
     "request past it is answered 429 TooManyRequests (Retry-After: 1); a "
     "stalled watcher past it is ended (its connection closed) as a slow "
     "watcher. The default, 128Mi, is 128 requests of the largest header, "
     "or 512 stalled watchers, at once, whatever --max-connections is.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       uint64_t n;
       if (!ParseSize(t, &n) || static_cast<size_t>(n) != n) {
         return "expected a size such as 128Mi";
       }
       // One request of the largest header: its buffer while it doubles,
       // and its parsed fields.
       if (n < 4 * kMi) return "must be at least 4Mi";
       c->max_connection_buffer_bytes = static_cast<size_t>(n);
       return "";
     },
     [](const Config& c) { return FormatSize(c.max_connection_buffer_bytes); },
     false, true},
    {"metrics-address", Group::kServing, "HOST:PORT",
     "Serve Prometheus /metrics and the probes /healthz, /livez and /readyz "
     "over TCP here; use the pod IP or 0.0.0.0:9187 to be scraped from "
     "outside the pod. --metrics-address= (empty, on the command line): "
     "not served.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       if (!t.empty() && t.rfind(':') == std::string_view::npos) {
         return "expected HOST:PORT such as 127.0.0.1:9187";
       }
       c->metrics_address = t;
       return "";
     },
     [](const Config& c) { return c.metrics_address; }, false, true},
    {"ready-max-lag", Group::kServing, "SIZE",
     "/readyz fails while PostgreSQL's WAL is more than this ahead of what "
     "walwatch has decoded.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseSize(t, &c->ready_max_lag_bytes)
                  ? ""
                  : "expected a size such as 16Mi";
     },
     [](const Config& c) { return FormatSize(c.ready_max_lag_bytes); }, false,
     true},
    {"state-workers", Group::kPostgreSql, "N",
     "Threads, each with its own connection, that read initial states and "
     "answer list handoffs; 1 to 64. One more thread (and connection) "
     "answers only handoffs and fresh RVs, so that initial states never "
     "hold them all. One client (a Unix socket peer's process, or every "
     "TCP peer) holds at most half of them (at least 1) with initial "
     "states; its further ones wait for its own.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       uint64_t n;
       if (!ParseUnsigned(t, &n) || n < 1 || n > 64) {
         return "expected an integer from 1 to 64";
       }
       c->state_workers = static_cast<int>(n);
       return "";
     },
     [](const Config& c) { return std::to_string(c.state_workers); }, true,
     true},
    {"retained-wal-warn", Group::kPostgreSql, "SIZE",
     "Log a warning when the replication slot retains more WAL than this.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseSize(t, &c->retained_wal_warn_bytes)
                  ? ""
                  : "expected a size such as 1Gi";
     },
     [](const Config& c) { return FormatSize(c.retained_wal_warn_bytes); },
     false, true},

    // Event log.
    {"replay-window", Group::kEventLog, "DURATION",
     "After a restart the slot re-sends this much history, so watches with "
     "an RV inside it continue without 410. Longer keeps more WAL on the "
     "server.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDuration(t, &c->replay_window) ? "" : kExpectDuration;
     },
     [](const Config& c) { return FormatDuration(c.replay_window); }, false,
     true},
    {"replay-window-bytes", Group::kEventLog, "SIZE",
     "The replay window's limit in WAL: the slot is held back at most this "
     "far behind the newest position received, whatever --replay-window "
     "says, so a busy server keeps at most this much WAL for it.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseSize(t, &c->replay_window_bytes)
                  ? ""
                  : "expected a size such as 512Mi";
     },
     [](const Config& c) { return FormatSize(c.replay_window_bytes); },
     false, true},
    // Event log.
    {"max-log-bytes", Group::kEventLog, "SIZE",
     "Memory budget of the in-memory event log; at least 1Mi. Its memory "
     "may pass the budget by two 2 MiB segments of its file (see "
     "--sendfile). A watch that falls behind the oldest retained event ends "
     "with 410 Expired.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       uint64_t n;
       if (!ParseSize(t, &n) || static_cast<size_t>(n) != n) {
         return "expected a size such as 256Mi";
       }
       if (n < kMi) return "must be at least 1Mi";
       c->max_log_bytes = static_cast<size_t>(n);
       return "";
     },
     [](const Config& c) { return FormatSize(c.max_log_bytes); }, false, true},

    // Logging.
    {"log-level", Group::kLogging, "LEVEL",
     "Least severe level logged: debug, info, warn or error.", nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseLogLevel(t, &c->log_level)
                  ? ""
                  : "expected one of debug, info, warn, error";
     },
     [](const Config& c) -> std::string { return LogLevelName(c.log_level); },
     false, true},
};

const Flag* FindFlag(std::string_view name) {
  for (const Flag& f : kFlags) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

// "max-log-bytes" -> "WALWATCH_MAX_LOG_BYTES".
std::string EnvName(const Flag& flag) {
  std::string env = "WALWATCH_";
  for (const char* p = flag.name; *p != '\0'; ++p) {
    const char c = *p;
    env += c == '-' ? '_' : (c >= 'a' && c <= 'z') ? c - 'a' + 'A' : c;
  }
  return env;
}

// The value of `name` in `envp`, or null. The first entry wins, as getenv.
const char* LookupEnv(const char* const* envp, const std::string& name) {
  if (envp == nullptr) return nullptr;
  for (; *envp != nullptr; ++envp) {
    const std::string_view entry = *envp;
    if (entry.size() > name.size() && entry[name.size()] == '=' &&
        entry.compare(0, name.size(), name) == 0) {
      return *envp + name.size() + 1;
    }
  }
  return nullptr;
}

// A value inside an error message: quoted and escaped, so the message stays
// one line whatever the value holds.
std::string Quote(std::string_view value) {
  std::string out;
  AppendJsonString(&out, value);
  return out;
}

// A flag name inside an error message: as is when it is plain, else quoted.
std::string FlagForMessage(std::string_view arg) {
  const bool plain = std::all_of(arg.begin(), arg.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) ||
           c == '-' || c == '_';
  });
  return plain ? std::string(arg) : Quote(arg);
}

// ---------------------------------------------------------------------------
// Conninfo redaction.

bool IsConninfoSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

bool IsSecretKey(std::string_view key) {
  return key == "password" || key == "sslpassword";
}

using Span = std::pair<size_t, size_t>;  // [begin, end) of a secret.

// key=value form, tokenized as libpq's conninfo_parse does: whitespace
// separates pairs, spaces may surround '=', a value is either unquoted (ends
// at whitespace) or in single quotes, and a backslash escapes the next
// character in both. False if the string does not parse.
bool FindKeywordSecrets(std::string_view s, std::vector<Span>* secrets) {
  size_t i = 0;
  while (true) {
    while (i < s.size() && IsConninfoSpace(s[i])) ++i;
    if (i == s.size()) return true;
    const size_t key_begin = i;
    while (i < s.size() && s[i] != '=' && !IsConninfoSpace(s[i])) ++i;
    const std::string_view key = s.substr(key_begin, i - key_begin);
    while (i < s.size() && IsConninfoSpace(s[i])) ++i;
    if (i == s.size() || s[i] != '=') return false;
    ++i;
    while (i < s.size() && IsConninfoSpace(s[i])) ++i;
    const size_t value_begin = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (true) {
        if (i == s.size()) return false;  // Unterminated quote.
        if (s[i] == '\\') {
          i += i + 1 < s.size() ? 2 : 1;
        } else if (s[i] == '\'') {
          ++i;
          break;
        } else {
          ++i;
        }
      }
    } else {
      while (i < s.size() && !IsConninfoSpace(s[i])) {
        i += s[i] == '\\' && i + 1 < s.size() ? 2 : 1;
      }
    }
    if (IsSecretKey(key) && i > value_begin) {
      secrets->emplace_back(value_begin, i);
    }
  }
}

// URI form: postgresql://[user[:password]@][hosts][/dbname][?key=value&...].
// Two independent passes, erring toward redacting too much: a password typed
// with a raw '@', '/' or '?' (libpq wants them percent-encoded) must not leak.
//  1. The userinfo ends at the last '@' in the string; after its first ':'
//     is the password.
//  2. password= and sslpassword= parameters after the first '?'.
void FindUriSecrets(std::string_view s, size_t prefix_len,
                    std::vector<Span>* secrets) {
  const size_t at = s.rfind('@');
  if (at != std::string_view::npos && at >= prefix_len) {
    const size_t colon = s.find(':', prefix_len);
    if (colon < at && colon + 1 < at) secrets->emplace_back(colon + 1, at);
  }
  size_t q = s.find('?', prefix_len);
  if (q == std::string_view::npos) return;
  size_t i = q + 1;
  while (i <= s.size()) {
    size_t end = s.find('&', i);
    if (end == std::string_view::npos) end = s.size();
    const std::string_view param = s.substr(i, end - i);
    const size_t eq = param.find('=');
    if (eq != std::string_view::npos && eq + 1 < param.size()) {
      // A key with a malformed escape is taken as written: it names no
      // secret (and libpq refuses the URI).
      const std::string_view raw_key = param.substr(0, eq);
      std::string key;
      if (!PercentDecode(raw_key, /*plus_is_space=*/false, &key)) {
        key.assign(raw_key);
      }
      if (IsSecretKey(key)) secrets->emplace_back(i + eq + 1, end);
    }
    i = end + 1;
  }
}

}  // namespace

std::string RedactConninfo(const std::string& conninfo) {
  std::vector<Span> secrets;
  size_t prefix_len = 0;
  for (std::string_view prefix : {"postgresql://", "postgres://"}) {
    if (conninfo.compare(0, prefix.size(), prefix) == 0) {
      prefix_len = prefix.size();
    }
  }
  if (prefix_len > 0) {
    FindUriSecrets(conninfo, prefix_len, &secrets);
  } else if (!FindKeywordSecrets(conninfo, &secrets)) {
    return kRedacted;  // Unparsable: cannot tell where a password ends.
  }
  std::sort(secrets.begin(), secrets.end());
  std::string out;
  size_t copied = 0;
  for (const auto& [begin, end] : secrets) {
    if (end <= copied) continue;  // Inside a span already replaced.
    if (begin >= copied) {
      out.append(conninfo, copied, begin - copied);
      out += kRedacted;
    }
    copied = end;
  }
  out.append(conninfo, copied, std::string::npos);
  return out;
}

std::string ParseConfig(int argc, const char* const* argv,
                        const char* const* envp, Config* out) {
  *out = Config{};
  std::vector<bool> set_by_flag(std::size(kFlags), false);

  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h") arg = "--help";
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) {
      if (arg.size() >= 2 && arg[0] == '-') {
        return "unknown flag " + FlagForMessage(arg) + " (see --help)";
      }
      return "unexpected argument " + Quote(arg) +
             ": walwatch takes only flags (see --help)";
    }
    const std::string_view body = arg.substr(2);
    const size_t eq = body.find('=');
    const std::string_view name = body.substr(0, eq);
    const Flag* flag = FindFlag(name);
    if (flag == nullptr) {
      return "unknown flag --" + FlagForMessage(name) + " (see --help)";
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = body.substr(eq + 1);
    } else if (flag->metavar == nullptr) {
      value = "true";
    } else if (i + 1 < argc &&
               std::string_view(argv[i + 1]).compare(0, 2, "--") != 0) {
      value = argv[++i];
    } else {
      return std::string("flag --") + flag->name + " needs a value";
    }
    if (std::string why = flag->parse(value, out); !why.empty()) {
      return "invalid value " + Quote(value) + " for --" + flag->name + ": " +
             why;
    }
    set_by_flag[static_cast<size_t>(flag - kFlags)] = true;
    if (out->help) return "";
  }

  // --slot and --slot-from set the same thing: one given on the command
  // line wins over either in the environment.
  const size_t slot = static_cast<size_t>(FindFlag("slot") - kFlags);
  const size_t slot_from = static_cast<size_t>(FindFlag("slot-from") - kFlags);
  if (set_by_flag[slot] || set_by_flag[slot_from]) {
    set_by_flag[slot] = set_by_flag[slot_from] = true;
  }

  for (size_t f = 0; f < std::size(kFlags); ++f) {
    const Flag& flag = kFlags[f];
    if (!flag.is_setting || set_by_flag[f]) continue;
    const std::string env = EnvName(flag);
    const char* value = LookupEnv(envp, env);
    if (value == nullptr || *value == '\0') continue;
    if (std::string why = flag.parse(value, out); !why.empty()) {
      return "invalid value " + Quote(value) + " for " + env + " (--" +
             flag.name + "): " + why;
    }
  }
  return "";
}

namespace {

// Appends `text` word-wrapped to `width` columns, each line indented.
void AppendWrapped(std::string* out, std::string_view text, size_t indent,
                   size_t width) {
  size_t column = 0;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view()
                                           : text.substr(space + 1);
    if (word.empty()) continue;
    if (column > 0 && column + 1 + word.size() > width) {
      out->push_back('\n');
      column = 0;
    }
    if (column == 0) {
      out->append(indent, ' ');
      column = indent;
    } else {
      out->push_back(' ');
      ++column;
    }
    out->append(word);
    column += word.size();
  }
  out->push_back('\n');
}

void AppendFlagHelp(std::string* out, const Flag& flag) {
  *out += "  --";
  *out += flag.name;
  if (flag.metavar != nullptr) {
    *out += ' ';
    *out += flag.metavar;
  }
  *out += '\n';
  constexpr size_t kIndent = 6, kWidth = 79;
  AppendWrapped(out, flag.usage, kIndent, kWidth);
  if (!flag.is_setting) return;
  std::string tail = "Default: ";
  if (flag.default_text != nullptr) {
    tail += flag.default_text;
  } else {
    const std::string value = flag.display(Config{});
    tail += value.empty() ? "empty" : value;
  }
  tail += ". Env: " + EnvName(flag) + ".";
  // Not wrapped: one line states both, so grep finds them together.
  out->append(kIndent, ' ');
  *out += tail;
  *out += '\n';
}

}  // namespace

std::string HelpText() {
  std::string out =
      "Usage: walwatch [flags]\n"
      "       walwatch watch PATH [...]      print a watch stream "
      "(walwatch watch --help)\n"
      "       walwatch slots list|drop [...] list or drop walwatch's "
      "replication slots\n"
      "                                      (walwatch slots --help)\n"
      "\n"
      "Streams changes from a PostgreSQL logical replication slot (wal2json)\n"
      "and serves them as Kubernetes watch events.\n"
      "\n"
      "Flags are written --flag value or --flag=value. Every flag except\n"
      "--help can also be set with the environment variable named with it;\n"
      "the command line wins, and an empty variable counts as unset.\n"
      "Durations: 500ms, 30s, 10m, 1h30m, or a bare number of seconds.\n"
      "Sizes: 256Mi, 1Gi, 512Ki, 100M, 1G, or bytes.\n"
      "\n";
  for (const Flag& flag : kFlags) {
    if (flag.group == Group::kGeneral) AppendFlagHelp(&out, flag);
  }
  for (const auto& [group, heading] : kGroupHeadings) {
    out += '\n';
    out += heading;
    out += ":\n";
    for (const Flag& flag : kFlags) {
      if (flag.group == group) AppendFlagHelp(&out, flag);
    }
  }
  return out;
}

std::string ConfigToJson(const Config& config) {
  std::string out = "{";
  for (const Flag& flag : kFlags) {
    if (!flag.is_setting) continue;
    if (out.size() > 1) out += ',';
    AppendJsonString(&out, flag.name);
    out += ':';
    const std::string value = flag.display(config);
    if (flag.json_number) {
      out += value;
    } else {
      AppendJsonString(&out, value);
    }
  }
  out += '}';
  return out;
}

std::string SlotNameFrom(std::string_view text) {
  std::string name;
  for (char c : text) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_';
    name += ok ? l : '_';
  }
  if (name.size() <= 63) return name;
  // FNV-1a over the whole text keeps long names that share a prefix apart.
  uint32_t h = 2166136261u;
  for (unsigned char c : text) {
    h ^= c;
    h *= 16777619u;
  }
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", h);
  return name.substr(0, 54) + "_" + hex;
}

}  // namespace walwatch
