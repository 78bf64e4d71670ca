#include "watchserver/config_flags.h"

#include <sys/un.h>

#include <iterator>

#include "cdc/base/logging.h"
#include "cdc/base/text.h"
#include "watchserver/config_values.h"
#include "watchserver/conninfo_redaction.h"
#include "watchserver/loopback_address.h"
#include "watchserver/peer_credentials.h"

namespace walwatch {
namespace {

using std::chrono::milliseconds;
using Group = Flag::Group;

constexpr uint64_t kMi = uint64_t{1} << 20;
constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

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

    {"source", Group::kGeneral, "postgres|mysql",
     "The database whose log walwatch reads: postgres, PostgreSQL's WAL "
     "through a logical replication slot (--conninfo, --slot, --plugin); or "
     "mysql, the binary log of a MySQL or MariaDB server, read as a replica "
     "reads it (--mysql-conninfo, --server-id). The other settings apply to "
     "both unless their heading says otherwise.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       if (t == "postgres" || t == "postgresql") {
         c->source = Config::Source::kPostgres;
       } else if (t == "mysql" || t == "mariadb") {
         c->source = Config::Source::kMysql;
       } else {
         return "expected postgres or mysql";
       }
       return "";
     },
     [](const Config& c) -> std::string {
       return c.source == Config::Source::kMysql ? "mysql" : "postgres";
     },
     false, true},

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
    {"plugin", Group::kPostgreSql, "NAME",
     "The logical decoding output plugin the slot uses: wal2json (its "
     "format-version 2; the server needs the wal2json extension) or "
     "pgoutput (built into PostgreSQL 10 and later; walwatch reads the "
     "mapped table's changes through --publication). An existing slot must "
     "have been created with the same plugin.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       if (t == "wal2json") {
         c->plugin = Config::Plugin::kWal2Json;
       } else if (t == "pgoutput") {
         c->plugin = Config::Plugin::kPgoutput;
       } else {
         return "expected wal2json or pgoutput";
       }
       return "";
     },
     [](const Config& c) -> std::string {
       return c.plugin == Config::Plugin::kPgoutput ? "pgoutput" : "wal2json";
     },
     false, true},
    {"publication", Group::kPostgreSql, "NAME",
     "With --plugin pgoutput: the publication to stream, which must publish "
     "the mapped table's inserts, updates, deletes and truncates. walwatch "
     "creates it (FOR TABLE the mapped table) when it is missing and it may; "
     "otherwise create it on the primary with schema/publication.sql.",
     "the slot's name",
     [](std::string_view t, Config* c) -> std::string {
       if (t.empty() || t.size() > 63) return "expected 1 to 63 bytes";
       c->publication = t;
       return "";
     },
     [](const Config& c) { return c.publication; }, false, true},
    {"pgoutput-protocol", Group::kPostgreSql, "N",
     "With --plugin pgoutput: the protocol version to ask for, 1 to 4, or "
     "auto: the highest the server offers (PostgreSQL 14: 2, 15: 3, 16 and "
     "later: 4). From version 2 on, large transactions are streamed before "
     "they commit, and walwatch holds them until their commit.",
     "auto",
     [](std::string_view t, Config* c) -> std::string {
       if (t == "auto") {
         c->pgoutput_protocol = 0;
       } else if (t.size() == 1 && t[0] >= '1' && t[0] <= '4') {
         c->pgoutput_protocol = t[0] - '0';
       } else {
         return "expected auto or 1 to 4";
       }
       return "";
     },
     [](const Config& c) -> std::string {
       return c.pgoutput_protocol == 0 ? std::string("auto")
                                       : std::to_string(c.pgoutput_protocol);
     },
     false, true},
    {"slot-failover", Group::kPostgreSql, nullptr,
     "Create the slot as a failover slot (PostgreSQL 17 and later): a "
     "standby with sync_replication_slots = on keeps a copy of it, so that "
     "after a promotion walwatch goes on from the copy with no relist. An "
     "existing slot that is not one is warned of at startup: drop it while "
     "walwatch is stopped to have it created as one.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseBool(t, &c->slot_failover) ? "" : "expected true or false";
     },
     [](const Config& c) -> std::string {
       return c.slot_failover ? "true" : "false";
     },
     true, true},
    {"mapping", Group::kPostgreSql, "PATH",
     "Table-mapping JSON file: which tables become which Kubernetes "
     "resources. On MySQL the table is in --mysql-conninfo's database; the "
     "file's schema is not read.",
     "built-in Clusterpedia resources mapping",
     [](std::string_view t, Config* c) -> std::string {
       c->mapping_path = t;
       return "";
     },
     [](const Config& c) { return c.mapping_path; }, false, true},
    {"status-interval", Group::kPostgreSql, "DURATION",
     "How often standby status updates are sent to PostgreSQL; on MySQL, "
     "how long the server stays silent before it sends a heartbeat with its "
     "position. More than 0 and less than 30s.",
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
     "5s), or, on MySQL, the binlog is still arriving; also bounds the "
     "commands that start streaming, and on MySQL every query. At least 5s.",
     nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDurationAtLeast(t, std::chrono::seconds(5),
                                   &c->replication_timeout);
     },
     [](const Config& c) { return FormatDuration(c.replication_timeout); },
     false, true},
    {"connect-timeout", Group::kPostgreSql, "DURATION",
     "Time allowed to connect to the database; at least 1s.", nullptr,
     [](std::string_view t, Config* c) -> std::string {
       return ParseDurationAtLeast(t, std::chrono::seconds(1),
                                   &c->connect_timeout);
     },
     [](const Config& c) { return FormatDuration(c.connect_timeout); }, false,
     true},

    // MySQL/MariaDB.
    {"mysql-conninfo", Group::kMySql, "CONNINFO",
     "The MySQL or MariaDB server, as key=value pairs (a value with spaces in "
     "single quotes): host, port (3306), socket (host empty or localhost), "
     "user, password, database (the table's; required), ssl-mode "
     "(DISABLED, REQUIRED or VERIFY_IDENTITY), ssl-ca, ssl-cert, ssl-key. "
     "Logged with the password masked.",
     "empty",
     [](std::string_view t, Config* c) -> std::string {
       c->mysql_conninfo = t;  // checked by main, never quoted back
       return "";
     },
     [](const Config& c) { return RedactConninfo(c.mysql_conninfo); }, false,
     true},
    {"server-id", Group::kMySql, "N",
     "walwatch's server id as a replica of the MySQL/MariaDB server: 1 to "
     "4294967295, other than the server's own and unique among everything "
     "that replicates from it (the server drops the older of two readers "
     "with one id). Give each walwatch replica its own, or use "
     "--server-id-from.",
     "unset",
     [](std::string_view t, Config* c) -> std::string {
       uint64_t n;
       if (!ParseUnsigned(t, &n) || n < 1 || n > 4294967295u) {
         return "expected an integer from 1 to 4294967295";
       }
       c->server_id = static_cast<uint32_t>(n);
       c->server_id_from.clear();
       return "";
     },
     [](const Config& c) {
       return c.server_id == 0 ? std::string() : std::to_string(c.server_id);
     },
     false, true},
    {"server-id-from", Group::kMySql, "TEXT",
     "Derive the server id from TEXT, e.g. walwatch-$(POD_NAME) in a pod "
     "spec: a hash of it, from 2147483648 up, so that each replica of a "
     "StatefulSet has its own and keeps it across restarts. walwatch also "
     "registers under TEXT (SHOW SLAVE HOSTS), which lets its startup check "
     "refuse an id another name holds. Replaces --server-id.",
     "unset (use --server-id)",
     [](std::string_view t, Config* c) -> std::string {
       if (t.empty()) return "";
       if (t.size() > 60) return "expected at most 60 bytes";
       c->server_id_from = std::string(t);
       c->server_id = 0;
       return "";
     },
     [](const Config& c) { return c.server_id_from; }, false, true},

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
    {"http-threads", Group::kServing, "N",
     "Threads serving HTTP; 1 to 64. More can help with many "
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
     "too little of it (see --initial-state-min-rate), before it gives back "
     "the "
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
     [](const Config& c) { return FormatSize(c.replay_window_bytes); }, false,
     true},
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

}  // namespace

FlagList AllFlags() { return {kFlags, std::size(kFlags)}; }

const Flag* FindFlag(std::string_view name) {
  for (const Flag& f : kFlags) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::string EnvName(const Flag& flag) {
  std::string env = "WALWATCH_";
  for (const char* p = flag.name; *p != '\0'; ++p) {
    const char c = *p;
    env += c == '-' ? '_' : (c >= 'a' && c <= 'z') ? c - 'a' + 'A' : c;
  }
  return env;
}

}  // namespace walwatch
