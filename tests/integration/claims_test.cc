// What README.md claims about walwatch, each read by a test (issue 19, part
// 5): the metrics it lists, read from a real scrape of /metrics; the metric
// names of the alerts, the dashboard and the docs, checked against such a
// scrape; --mapping FILE end to end on a table that is not `resources`;
// --retained-wal-warn; `walwatch watch --selector`; the 2 s write grace at
// shutdown; `walwatch slots drop --inactive-for` with an age above zero; and
// the container image's non-root user, which walwatch runs as.
//
// Not here, and why: these need a cluster of their own, which only the
// fault suite (fault_*_test.cc) runs; here they are read at their healthy
// value, 0, and there above it:
//  * walwatch_walsender_synchronous = 1: a synchronous standby
//    (FaultTest.AWalsenderMadeASynchronousStandbyIsReported).
//  * walwatch_history_resets_total = 1: a failover to a server that was
//    behind (FaultTest.AFailoverToAServerBehindLosesNothingAndFencesOldRvs).
//  * walwatch_busy_walsender_waits_total > 0: a walsender decoding a huge
//    transaction in silence (FaultTest.AWalsenderDecodingInSilenceIsWaitedFor).
//  * walwatch_decode_errors_total = 2: a SQL_ASCII cluster, whose wal2json
//    copies a Latin-1 name into messages that are not UTF-8
//    (FaultTest.AMessageThatIsNotUtf8Gives410NotSilence; the wal2json fuzz
//    target and the decoder's unit tests feed other undecodable messages).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/pg_cluster.h"
#include "tests/support/metric_value.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::MetricValue;

class ClaimsTest : public WalwatchTest {
 protected:
  // DefaultOptions with --metrics-address on a free loopback port.
  WalwatchOptions WithMetrics() {
    metrics_port_ = FreeLoopbackPort();
    EXPECT_NE(metrics_port_, 0);
    WalwatchOptions o = DefaultOptions();
    o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port_);
    return o;
  }

  std::string Scrape() {
    CommandResult r = RunCommand(
        {"curl", "-sf", "--max-time", "10",
         "http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics"},
        seconds(20));
    EXPECT_TRUE(r.exited && r.exit_code == 0)
        << "GET /metrics: " << r.Describe() << " " << r.output;
    return r.output;
  }

  // Polls the scrape until `pred` holds for the value of `series`, or the
  // deadline; *last gets the scrape that satisfied it.
  template <typename Pred>
  ::testing::AssertionResult WaitForMetric(const std::string& series, Pred pred,
                                           std::string* last = nullptr) {
    std::string scrape;
    for (const auto deadline = In(kEventWait);;) {
      scrape = Scrape();
      auto v = MetricValue(scrape, series);
      if (v && pred(*v)) {
        if (last) *last = scrape;
        return ::testing::AssertionSuccess();
      }
      if (Clock::now() > deadline) {
        return ::testing::AssertionFailure()
               << series << " = " << (v ? std::to_string(*v) : "absent")
               << " after " << kEventWait.count() << " s; scrape:\n"
               << scrape;
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
  }

  int metrics_port_ = 0;
};

// The event log's gauges, the lag and slot gauges, and the healthy values
// of the counters the fault suite drives.
TEST_F(ClaimsTest, MetricsDescribeTheEventLogTheLagAndTheSlot) {
  auto* ww = StartWalwatch(WithMetrics());
  ASSERT_NE(ww, nullptr);
  const std::string empty = Scrape();
  EXPECT_EQ(MetricValue(empty, "walwatch_event_log_events"), 0.0) << empty;

  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  std::vector<WatchEvent> events;
  for (int i = 0; i < 3; ++i) {
    InsertRow(db(), Pod("c1", "default", "claim-" + std::to_string(i)));
  }
  ASSERT_TRUE(ReadEvents(watch, 3, &events, In(kEventWait)));

  // The log holds exactly these three events (the seed rows were written
  // before walwatch created its slot); its oldest RV is no newer than the
  // first event's.
  std::string scrape;
  ASSERT_TRUE(WaitForMetric("walwatch_event_log_events",
                            [](double v) { return v == 3; }, &scrape));
  const auto bytes = MetricValue(scrape, "walwatch_event_log_bytes");
  ASSERT_TRUE(bytes.has_value()) << scrape;
  EXPECT_GE(*bytes, static_cast<double>(events[0].raw.size() * 3))
      << "3 events of at least " << events[0].raw.size() << " B";
  const auto oldest = MetricValue(scrape, "walwatch_event_log_oldest_rv");
  ASSERT_TRUE(oldest.has_value()) << scrape;
  EXPECT_GT(*oldest, 0);
  EXPECT_LE(*oldest, static_cast<double>(events[0].rv())) << scrape;

  // Lag in seconds: 0 when caught up, else no more than the time since the
  // last commit walwatch received (with slack for the scrape itself).
  const auto lag = MetricValue(scrape, "walwatch_replication_lag_seconds");
  const auto last_commit =
      MetricValue(scrape, "walwatch_last_commit_timestamp_seconds");
  ASSERT_TRUE(lag && last_commit) << scrape;
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  EXPECT_GE(*lag, 0);
  EXPECT_LE(*lag, now - *last_commit + 5) << scrape;
  EXPECT_GT(*last_commit, now - 600) << "the last commit is this test's";

  // Retained WAL: the slot keeps WAL back to its restart_lsn (the replay
  // window holds it there), so after these writes it is above zero and, as
  // polled every 2 s, no more than what the server reports a moment later.
  ASSERT_TRUE(WaitForMetric("walwatch_slot_retained_wal_bytes",
                            [](double v) { return v > 0; }, &scrape));
  const double retained =
      *MetricValue(scrape, "walwatch_slot_retained_wal_bytes");
  const double server_retained = std::stod(db().QueryValue(
      "SELECT (pg_current_wal_lsn() - restart_lsn)::bigint FROM "
      "pg_replication_slots WHERE slot_name = $1",
      {ww->options().slot}));
  EXPECT_LE(retained, server_retained);
  EXPECT_EQ(
      MetricValue(scrape, "walwatch_slot_wal_status{status=\"reserved\"}"),
      1.0)
      << scrape;

  // Healthy values: not a synchronous standby, nothing undecodable, no
  // history reset, no busy-walsender wait, no row error.
  for (const char* series :
       {"walwatch_walsender_synchronous", "walwatch_decode_errors_total",
        "walwatch_history_resets_total", "walwatch_busy_walsender_waits_total",
        "walwatch_row_errors_total"}) {
    EXPECT_EQ(MetricValue(scrape, series), 0.0) << series << "\n" << scrape;
  }
}

// README.md: the alerts, the Grafana dashboard and the docs name metrics the
// binary exports. check_manifests.py --scrape reads every name (and the
// reason/status/type values the alerts select) against a real scrape, taken
// while a watch is open (walwatch_watchers has a series only then) and after
// an event went out.
TEST_F(ClaimsTest, PackagingAndDocsNameOnlyScrapedMetrics) {
  auto* ww = StartWalwatch(WithMetrics());
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  InsertRow(db(), Pod("c1", "default", "scraped"));
  std::vector<WatchEvent> events;
  ASSERT_TRUE(ReadEvents(watch, 1, &events, In(kEventWait)));
  const std::string path = TempPath("metrics.txt");
  {
    std::ofstream out(path);
    out << Scrape();
  }
  CommandResult r = RunCommand(
      {"python3", WALWATCH_SOURCE_DIR "/tests/packaging/check_manifests.py",
       "--root", WALWATCH_SOURCE_DIR, "--scrape", path},
      seconds(60));
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.Describe() << "\n"
                                             << r.output;
}

// packaging/Dockerfile's image runs as a numeric, non-root USER, and walwatch
// needs nothing more: run as that uid and gid (with setpriv when the test
// runs as root; as the test's own user otherwise), it connects, streams,
// serves its socket and /readyz, and delivers a watch event.
TEST_F(ClaimsTest, TheImagesNonRootUserRunsWalwatch) {
  std::ifstream in(WALWATCH_SOURCE_DIR "/packaging/Dockerfile");
  ASSERT_TRUE(in) << "packaging/Dockerfile";
  std::string user;  // the last USER of the final stage
  const std::regex from(R"(^\s*FROM\s.*)", std::regex::icase);
  const std::regex user_re(R"(^\s*USER\s+(\S+)\s*$)", std::regex::icase);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, from)) user.clear();
    if (std::regex_match(line, m, user_re)) user = m[1];
  }
  std::smatch ids;
  ASSERT_TRUE(std::regex_match(user, ids, std::regex(R"((\d+):(\d+))")))
      << "the final stage's USER is '" << user << "', not numeric uid:gid";
  const int uid = std::stoi(ids[1]);
  const int gid = std::stoi(ids[2]);
  ASSERT_NE(uid, 0) << "USER " << user << " is root";
  ASSERT_NE(gid, 0) << "USER " << user << " has group root";

  // A socket directory the user owns, as the image's /run/walwatch; the
  // server over TCP (the sandbox's socket directory is the postgres user's).
  std::string dir = TempPath("nonroot.XXXXXX");
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::vector<std::string> argv;
  if (geteuid() == 0) {
    ASSERT_EQ(chown(dir.c_str(), uid, gid), 0);
    ASSERT_EQ(chmod(TempPath("").c_str(), 0711), 0);
    argv = {"setpriv",   "--reuid=" + std::to_string(uid),
            "--regid=" + std::to_string(gid), "--clear-groups"};
  }
  const int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string socket = dir + "/walwatch.sock";
  const std::string conninfo =
      "host=127.0.0.1 port=" + server().port + " dbname=" + dbname() +
      " user=postgres";
  argv.insert(argv.end(),
              {WALWATCH_BINARY, "--conninfo", conninfo, "--slot",
               UniqueName("nonroot"), "--socket", socket, "--metrics-address",
               "127.0.0.1:" + std::to_string(port)});
  ChildProcess ww({argv, TempPath("nonroot.log"), false, {}});

  // Ready: streaming, and the socket served.
  std::string ready;
  for (const auto deadline = In(kEventWait); Clock::now() < deadline;) {
    CommandResult r = RunCommand(
        {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time",
         "5", "http://127.0.0.1:" + std::to_string(port) + "/readyz"},
        seconds(10));
    ready = r.output;
    if (ready == "200" || !ww.Running()) break;
    std::this_thread::sleep_for(milliseconds(200));
  }
  ASSERT_EQ(ready, "200") << "walwatch as uid " << uid << ":\n"
                          << ww.StderrText();
  CommandResult owner = RunCommand({"stat", "-c", "%u:%g", socket}, seconds(5));
  EXPECT_EQ(owner.output, user + "\n") << "the socket's owner";

  HttpResponse fresh = HttpGet(socket, "/walwatch/v1/freshrv", In(kEventWait));
  auto doc = nlohmann::json::parse(fresh.body, nullptr, false);
  ASSERT_TRUE(fresh.ok && doc.contains("resourceVersion")) << fresh.body;
  WatchClient watch;
  ASSERT_TRUE(watch.Open(socket,
                         WatchTarget("/api/v1/pods",
                                     std::stoull(doc["resourceVersion"]
                                                     .get<std::string>())),
                         In(kEventWait)));
  InsertRow(db(), Pod("c1", "default", "nonroot"));
  std::vector<WatchEvent> events;
  ASSERT_TRUE(ReadEvents(watch, 1, &events, In(kEventWait)))
      << ww.StderrText();
  EXPECT_EQ(events[0].type, "ADDED");
  const ExitStatus stopped = ww.Stop();
  EXPECT_TRUE(stopped.exited && stopped.exit_code == 0)
      << stopped.Describe() << "\n" << ww.StderrText();
}

// A row whose object is not a JSON object cannot become an event: it is
// logged, counted in walwatch_row_errors_total, and every watch ends with
// 410.
TEST_F(ClaimsTest, ARowThatCannotBecomeAnEventIsCountedAndEndsEveryWatch) {
  auto* ww = StartWalwatch(WithMetrics());
  ASSERT_NE(ww, nullptr);
  ASSERT_EQ(MetricValue(Scrape(), "walwatch_row_errors_total"), 0.0);
  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  InsertRow(db(), Pod("c1", "default", "not-an-object"),
            "[\"an\", \"array\"]");
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "ERROR") << e.raw;
  EXPECT_EQ(e.object.value("code", 0), 410) << e.raw;
  EXPECT_TRUE(WaitForMetric("walwatch_row_errors_total",
                            [](double v) { return v == 1; }));
  bool logged = false;
  for (const auto& line : ww->LogLines()) {
    logged |= line.value("msg", "") == "a row could not become a watch event";
  }
  EXPECT_TRUE(logged) << ww->StderrText();
}

// A mapping file at `path` for public.`table` with the mapping tests'
// column names.
void WriteMapping(const std::string& path, const std::string& table) {
  std::ofstream(path) << nlohmann::json{
      {"schema", "public"},
      {"table", table},
      {"columns",
       {{"group", "api_group"},
        {"version", "api_version"},
        {"resource", "kind_plural"},
        {"kind", "type_name"},
        {"cluster", "site"},
        {"namespace", "ns"},
        {"name", "title"},
        {"uid", "id"},
        {"object", "body"}}}}.dump(2);
}

// --mapping FILE: a table that is not `resources`, with other column names,
// columns in another order and one the mapping does not name, watched end
// to end (ADDED, MODIFIED, DELETED) through the socket.
TEST_F(ClaimsTest, MappingFileWatchesAnotherTable) {
  db().Exec(
      "CREATE TABLE widgets (extra int, body jsonb NOT NULL, id text PRIMARY "
      "KEY, title text NOT NULL, ns text NOT NULL, site text NOT NULL, "
      "type_name text NOT NULL, kind_plural text NOT NULL, api_version text "
      "NOT NULL, api_group text NOT NULL);"
      "ALTER TABLE widgets REPLICA IDENTITY FULL;");
  const std::string mapping = TempPath("widgets.mapping.json");
  WriteMapping(mapping, "widgets");
  auto object = [](const std::string& name, int size) {
    return nlohmann::json{{"apiVersion", "example.com/v1"},
                          {"kind", "Widget"},
                          {"metadata",
                           {{"name", name},
                            {"namespace", "shop"},
                            {"uid", "uid-" + name},
                            {"labels", {{"app", "widgets"}}}}},
                          {"spec", {{"size", size}}}};
  };
  auto insert = [&](const std::string& name, int size) {
    db().Query(
        "INSERT INTO widgets (extra, body, id, title, ns, site, type_name, "
        "kind_plural, api_version, api_group) VALUES (7, $1::jsonb, $2, $3, "
        "'shop', 'c1', 'Widget', 'widgets', 'v1', 'example.com')",
        {object(name, size).dump(), "uid-" + name, name});
  };
  insert("w-seed", 0);  // the resource exists before walwatch starts

  WalwatchOptions o = DefaultOptions();
  o.extra_args = {"--mapping", mapping};
  auto* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);
  WatchClient watch;
  ASSERT_TRUE(
      OpenWatch(watch, *ww, "/apis/example.com/v1/namespaces/shop/widgets"));
  insert("w-1", 1);
  db().Query("UPDATE widgets SET body = $1::jsonb WHERE id = 'uid-w-1'",
             {object("w-1", 2).dump()});
  db().Exec("DELETE FROM widgets WHERE id = 'uid-w-1'");
  // A row of `resources` is not this walwatch's business.
  InsertRow(db(), Pod("c1", "shop", "not-a-widget"));
  insert("w-2", 3);

  std::vector<WatchEvent> events;
  ASSERT_TRUE(ReadUntilName(watch, "w-2", &events, In(kEventWait)));
  ASSERT_EQ(events.size(), 4u) << Describe(events);
  const char* types[] = {"ADDED", "MODIFIED", "DELETED", "ADDED"};
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE(events[i].raw);
    EXPECT_EQ(events[i].type, types[i]);
    EXPECT_EQ(events[i].object["kind"], "Widget");
    EXPECT_EQ(events[i].ns(), "shop");
    EXPECT_GT(events[i].rv(), 0u);
  }
  EXPECT_EQ(events[0].name(), "w-1");
  EXPECT_EQ(events[1].object["spec"]["size"], 2);
  EXPECT_EQ(events[3].name(), "w-2");
}

// --mapping FILE on a table that has no index leading with the group,
// version and resource columns, and whose group column may be NULL (a
// core resource, here): walwatch still learns at startup the kind of every
// resource the table holds, so bookmarks carry the rows' kinds rather than
// guesses from the plural.
TEST_F(ClaimsTest, MappingFileTableWithoutTheIndexStillGivesItsKindsAtStartup) {
  db().Exec(
      "CREATE TABLE gadgets (id text PRIMARY KEY, api_group text, "
      "api_version text NOT NULL, kind_plural text NOT NULL, type_name text "
      "NOT NULL, site text NOT NULL, ns text NOT NULL, title text NOT NULL, "
      "body jsonb NOT NULL);"
      "ALTER TABLE gadgets REPLICA IDENTITY FULL;"
      "INSERT INTO gadgets VALUES "
      "('u1', 'example.com', 'v1', 'gadgets', 'GadGet', 'c1', 'ns', 'a', '{}'),"
      "('u2', NULL, 'v1', 'gizmos', 'GizMo', 'c1', 'ns', 'b', '{}'),"
      "('u3', NULL, 'v1', 'thingamajigs', 'ThingaMaJig', 'c1', 'ns', 'c', "
      "'{}')");
  const std::string mapping = TempPath("gadgets.mapping.json");
  WriteMapping(mapping, "gadgets");
  WalwatchOptions o = DefaultOptions();
  o.extra_args = {"--mapping", mapping, "--bookmark-interval", "1s"};
  auto* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);
  const struct {
    std::string path, kind;
  } kInTable[] = {{"/apis/example.com/v1/gadgets", "GadGet"},
                  {"/api/v1/gizmos", "GizMo"},
                  {"/api/v1/thingamajigs", "ThingaMaJig"}};
  for (const auto& t : kInTable) {
    SCOPED_TRACE(t.path);
    nlohmann::json bookmark;
    ASSERT_TRUE(FirstBookmarkOn(ww->socket_path(), t.path, &bookmark));
    EXPECT_EQ(bookmark.value("kind", ""), t.kind) << bookmark;
  }
}

// --retained-wal-warn: above it, walwatch warns in its log, naming its slot
// and the retained bytes.
TEST_F(ClaimsTest, RetainedWalWarnLogsAboveTheThreshold) {
  WalwatchOptions o = DefaultOptions();
  o.extra_args = {"--retained-wal-warn", "1Ki"};
  auto* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);
  for (int i = 0; i < 20; ++i) {
    InsertRow(db(), Pod("c1", "default", "wal-" + std::to_string(i)));
  }
  const std::string kMsg = "the replication slot retains much WAL";
  auto warnings = [&] {
    std::vector<nlohmann::json> found;
    for (const auto& line : ww->LogLines()) {
      if (line.value("msg", "").rfind(kMsg, 0) == 0) found.push_back(line);
    }
    return found;
  };
  for (const auto deadline = In(kEventWait); warnings().empty();) {
    ASSERT_LT(Clock::now(), deadline) << "no warning; log:\n"
                                      << ww->StderrText();
    std::this_thread::sleep_for(milliseconds(200));
  }
  const nlohmann::json warning = warnings()[0];
  EXPECT_EQ(warning.value("level", ""), "warn") << warning.dump();
  EXPECT_EQ(warning.value("slot", ""), o.slot) << warning.dump();
  ASSERT_TRUE(warning.contains("retained_bytes")) << warning.dump();
  EXPECT_GT(warning["retained_bytes"].get<double>(), 1024.0);
}

// `walwatch watch --selector`: only the matching objects are printed.
TEST_F(ClaimsTest, WatchCliSelectorPrintsOnlyMatchingObjects) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  const uint64_t rv = FreshRv(*ww);
  ASSERT_NE(rv, 0u);
  ChildProcess::Options cli_options;
  cli_options.argv = {WALWATCH_BINARY, "watch", "/api/v1/pods", "--socket",
                      ww->socket_path(), "--rv", std::to_string(rv),
                      "--selector", "tier=front", "-o", "json"};
  cli_options.stderr_path = TempPath("watch-cli.stderr");
  cli_options.pipe_stdout = true;
  ChildProcess cli(cli_options);
  auto with_tier = [](const Resource& r, const std::string& tier) {
    nlohmann::json o = r.Object();
    o["metadata"]["labels"]["tier"] = tier;
    return std::make_pair(r, o.dump());
  };
  // A non-matching object first: a client that ignored the selector would
  // print it before the matching one.
  for (const auto& [r, obj] :
       {with_tier(Pod("c1", "default", "back-1"), "back"),
        with_tier(Pod("c1", "default", "front-1"), "front"),
        with_tier(Pod("c1", "default", "back-2"), "back"),
        with_tier(Pod("c1", "default", "front-2"), "front")}) {
    InsertRow(db(), r, obj);
  }
  std::vector<std::string> names;
  while (names.size() < 2) {
    auto line = cli.ReadStdoutLine(In(kEventWait));
    ASSERT_TRUE(line.has_value())
        << "walwatch watch printed " << names.size()
        << " lines; stderr: " << cli.StderrText();
    auto ev = nlohmann::json::parse(*line, nullptr, false);
    ASSERT_TRUE(ev.is_object()) << *line;
    names.push_back(ev["object"]["metadata"].value("name", ""));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"front-1", "front-2"}));
}

// A Unix-socket watch that sends its request and then does not read.
class StalledWatcher {
 public:
  StalledWatcher(const std::string& socket_path, const std::string& target) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socket_path.copy(addr.sun_path, sizeof addr.sun_path - 1);
    connected_ =
        connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    const std::string request =
        "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    connected_ = connected_ &&
                 send(fd_, request.data(), request.size(), MSG_NOSIGNAL) ==
                     static_cast<ssize_t>(request.size());
  }
  ~StalledWatcher() {
    if (fd_ >= 0) close(fd_);
  }
  StalledWatcher(const StalledWatcher&) = delete;
  StalledWatcher& operator=(const StalledWatcher&) = delete;

  bool connected() const { return connected_; }
  // Everything the server sent, until it closed (or the deadline).
  std::string Drain(Clock::time_point deadline) {
    std::string all;
    timeval tv{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[65536];
    while (Clock::now() < deadline) {
      ssize_t n = read(fd_, buf, sizeof buf);
      if (n == 0) break;
      if (n > 0) all.append(buf, n);
    }
    return all;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// SIGTERM: a watcher whose socket is full (it stopped reading) is given 2 s
// and then closed; walwatch exits 0; a reading watcher gets the final chunk.
TEST_F(ClaimsTest, ShutdownGivesAStalledWatcherTwoSeconds) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  const uint64_t rv = FreshRv(*ww);
  ASSERT_NE(rv, 0u);
  StalledWatcher stalled(ww->socket_path(), WatchTarget("/api/v1/pods", rv));
  ASSERT_TRUE(stalled.connected());
  WatchClient reader;
  ASSERT_TRUE(OpenWatch(reader, *ww, "/api/v1/pods", rv));
  // About 6 MB of events: far more than the stalled socket's buffers hold.
  const std::string filler(60000, 'x');
  constexpr int kRows = 100;
  for (int i = 0; i < kRows; ++i) {
    Resource r = Pod("c1", "default", "big-" + std::to_string(i));
    r.spec["filler"] = filler;
    InsertRow(db(), r);
  }
  std::vector<WatchEvent> events;
  ASSERT_TRUE(ReadEvents(reader, kRows, &events, In(seconds(60))));

  const auto sigterm = Clock::now();
  ASSERT_EQ(kill(ww->pid(), SIGTERM), 0);
  auto status = ww->WaitExit(seconds(30));
  const double took =
      std::chrono::duration<double>(Clock::now() - sigterm).count();
  ASSERT_TRUE(status.has_value()) << "walwatch did not exit within 30 s";
  EXPECT_TRUE(status->exited && status->exit_code == 0) << status->Describe();
  EXPECT_GE(took, 1.9) << "the stalled watcher was not given its 2 s";
  EXPECT_LE(took, 10.0) << "the grace is 2 s, not the 30 s write timeout";
  EXPECT_TRUE(reader.ExpectEnd(In(kEventWait))) << "the reading watcher";
  // The stalled one was cut: what it finally reads does not end with the
  // final chunk.
  const std::string rest = stalled.Drain(In(kEventWait));
  EXPECT_GT(rest.size(), 0u);
  EXPECT_FALSE(rest.size() >= 5 &&
               rest.compare(rest.size() - 5, 5, "0\r\n\r\n") == 0)
      << "the stalled watcher got the whole stream (" << rest.size()
      << " bytes)";
}

// `walwatch slots drop --inactive-for` with an age above zero, on a private
// cluster (the test switches WAL segments, which the shared server's other
// tests must not see): a slot inactive for less than the age stays; once
// the WAL segment holding its position is older than the age, it is
// dropped.
TEST(ClaimsSlotsTest, DropInactiveForAnAgeAboveZero) {
  PgCluster::Options small;
  small.settings = {"max_replication_slots = 4", "max_wal_senders = 4"};
  std::unique_ptr<PgCluster> cluster;
  try {
    cluster = std::make_unique<PgCluster>(small);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const std::string conninfo = cluster->Conninfo("postgres");
  PgConnection db(conninfo);
  db.Exec(
      "SELECT pg_create_logical_replication_slot('walwatch_gone', "
      "'wal2json')");
  auto drop = [&](const std::string& age) {
    return RunCommand({WALWATCH_BINARY, "slots", "drop", "--inactive-for", age,
                       "--conninfo", conninfo},
                      seconds(30));
  };
  auto slot_exists = [&] {
    return db.QueryValue(
               "SELECT count(*) FROM pg_replication_slots WHERE "
               "slot_name = 'walwatch_gone'") == "1";
  };
  CommandResult young = drop("1h");
  EXPECT_EQ(young.exit_code, 0) << young.output;
  EXPECT_NE(young.output.find("no inactive slot"), std::string::npos)
      << young.output;
  EXPECT_TRUE(slot_exists());

  // The slot's segment is left behind and ages.
  db.Exec("CREATE TABLE t (x int); INSERT INTO t VALUES (1)");
  db.Exec("SELECT pg_switch_wal()");
  db.Exec("INSERT INTO t VALUES (2)");
  CommandResult dropped;
  for (const auto deadline = In(seconds(30));;) {
    dropped = drop("2s");
    if (dropped.output.find("dropped walwatch_gone") != std::string::npos) {
      break;
    }
    ASSERT_EQ(dropped.exit_code, 0) << dropped.output;
    ASSERT_LT(Clock::now(), deadline)
        << dropped.output << "\n"
        << RunCommand({WALWATCH_BINARY, "slots", "list", "--conninfo",
                       conninfo},
                      seconds(30))
               .output
        << db.QueryValue(
               "SELECT string_agg(name || ' ' || modification::text, ', ') "
               "FROM pg_ls_waldir()")
        << " slot segment "
        << db.QueryValue(
               "SELECT pg_walfile_name(confirmed_flush_lsn) || ' ' || "
               "confirmed_flush_lsn::text FROM pg_replication_slots");
    ASSERT_TRUE(slot_exists()) << "dropped without saying so: "
                               << dropped.output;
    std::this_thread::sleep_for(milliseconds(500));
  }
  EXPECT_EQ(dropped.exit_code, 0) << dropped.output;
  EXPECT_FALSE(slot_exists());
}

}  // namespace
}  // namespace walwatch::itest
