#include "tests/integration/support/fault_fixture.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/watch_client.h"
#include "tests/support/metric_value.h"

namespace walwatch::itest {

using std::chrono::milliseconds;
using std::chrono::seconds;

ModelFilter FaultTest::ToModelFilter(const WatchFilter& f) {
  ModelFilter m;
  if (f.kind == "Pod") {
    m.resource = {"", "v1", "pods", "Pod", true};
  } else {
    m.resource = {"apps", "v1", "deployments", "Deployment", true};
  }
  m.cluster = f.cluster;
  m.ns = f.ns;
  return m;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

const std::vector<WatchFilter>& FaultTest::Filters() {
  static const std::vector<WatchFilter> filters = {
      {"/api/v1/pods", "Pod", "", ""},
      {"/clusters/c1/api/v1/pods", "Pod", "c1", ""},
      {"/api/v1/namespaces/ns-b/pods", "Pod", "", "ns-b"},
      {"/apis/apps/v1/deployments", "Deployment", "", ""},
      {"/clusters/c2/apis/apps/v1/namespaces/ns-a/deployments", "Deployment",
       "c2", "ns-a"},
  };
  return filters;
}

void FaultTest::SetUp() {
  char tmpl[] = "/tmp/walwatch-faultit.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  tmpdir_ = tmpl;
  started_ = Clock::now();
}

void FaultTest::TearDown() {
  for (auto& w : all_watchers_) w->Stop();
  if (writer_) writer_->Stop();
  for (auto& p : walwatches_) {
    if (p->Running()) p->Stop();
  }
  walwatches_.clear();  // dumps stderr on failure
  proxy_.reset();
  holder_.reset();
  if (cluster_ && HasFailure()) {
    // Without the writer's refused reconnects, which can fill it.
    std::istringstream in(cluster_->LogText());
    std::string log, line;
    size_t refused = 0;
    while (std::getline(in, line)) {
      if (line.find("the database system is shutting down") !=
              std::string::npos ||
          line.find("the database system is starting up") !=
              std::string::npos) {
        ++refused;
        continue;
      }
      log += line + "\n";
    }
    if (log.size() > 20000) log = "..." + log.substr(log.size() - 20000);
    log += "(" + std::to_string(refused) +
           " lines 'the database system is shutting down/starting up' "
           "left out)\n";
    std::cerr << "---- PostgreSQL log (tail) ----\n"
              << log << "---- end of PostgreSQL log ----\n";
  }
  db_.reset();
  cluster_.reset();
  const char* keep = std::getenv("WALWATCH_TEST_KEEP_LOGS");
  if (HasFailure() || (keep && *keep == '1')) {
    std::cerr << "fault test files kept in " << tmpdir_ << "\n";
  } else {
    std::error_code ec;
    std::filesystem::remove_all(tmpdir_, ec);
  }
  std::cerr << "[fault] "
            << ::testing::UnitTest::GetInstance()->current_test_info()->name()
            << " took "
            << std::chrono::duration_cast<milliseconds>(Clock::now() -
                                                        started_)
                       .count() /
                   1000.0
            << " s\n";
}

// --- The shared script ------------------------------------------------------

void FaultTest::Begin(const Scenario& s) {
  StartCluster(s.cluster);
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(s));
  ASSERT_NO_FATAL_FAILURE(StartTraffic());
}

void FaultTest::StartCluster(PgCluster::Options options) {
  cluster_ = std::make_unique<PgCluster>(std::move(options));
  PrepareDatabase(*cluster_);
  db_ = std::make_unique<PgConnection>(Conninfo());
}

void FaultTest::PrepareDatabase(const PgCluster& cluster) {
  {
    PgConnection admin(cluster.Conninfo("postgres"));
    admin.Exec(std::string("CREATE DATABASE ") + kDb);
  }
  PgConnection db(cluster.Conninfo(kDb));
  db.Exec(ReadFileOrThrow(SchemaPath()));
  db.Exec(
      "CREATE TABLE fault_marker (id bigserial PRIMARY KEY);"
      "CREATE TABLE other_table (id bigserial PRIMARY KEY, payload jsonb);"
      "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
      "namespace, name, uid, resource_version, object, created_at, "
      "synced_at) VALUES "
      "('', 'v1', 'pods', 'Pod', 'seed', 'seed', 'seed-pod', 'uid-seed-pod',"
      " '1', '{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
      "\"seed-pod\",\"namespace\":\"seed\",\"uid\":\"uid-seed-pod\","
      "\"resourceVersion\":\"1\",\"annotations\":{\"shadow.clusterpedia.io/"
      "cluster-name\":\"seed\"}}}', now(), now()),"
      "('apps', 'v1', 'deployments', 'Deployment', 'seed', 'seed', "
      "'seed-deploy', 'uid-seed-deploy', '1', '{\"apiVersion\":\"apps/v1\","
      "\"kind\":\"Deployment\",\"metadata\":{\"name\":\"seed-deploy\","
      "\"namespace\":\"seed\",\"uid\":\"uid-seed-deploy\","
      "\"resourceVersion\":\"1\",\"annotations\":{\"shadow.clusterpedia.io/"
      "cluster-name\":\"seed\"}}}', now(), now())");
}

void FaultTest::LaunchWalwatch(const Scenario& s) {
  scenario_ = s;
  WalwatchOptions o = Options();
  if (s.through_proxy) {
    proxy_ = std::make_unique<TcpProxy>(cluster_->SocketPath());
    o.conninfo = "host=127.0.0.1 port=" + std::to_string(proxy_->port()) +
                 " dbname=" + kDb + " user=postgres";
  }
  if (!s.conninfo.empty()) o.conninfo = s.conninfo;
  if (s.metrics) {
    metrics_port_ = FreeLoopbackPort();
    ASSERT_NE(metrics_port_, 0) << "no free loopback port for /metrics";
    o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port_);
  }
  o.extra_args = s.walwatch_args;
  o.max_log_bytes = s.max_log_bytes;
  ww_options_ = o;
  ww_ = Launch(std::move(o));
  ASSERT_NE(ww_, nullptr);
}

void FaultTest::StartTraffic() {
  start_rv_ = Marker();
  watchers_0_ = StartWatchers(*ww_, start_rv_, scenario_.policy);
  StartWriter();
  ASSERT_TRUE(MoreWrites(scenario_.first_writes));
}

WalwatchProcess* FaultTest::Relaunch() {
  ww_ = Launch(ww_options_);
  return ww_;
}

WalwatchOptions FaultTest::Options() {
  WalwatchOptions o;
  o.conninfo = Conninfo();
  o.slot = kSlot;
  o.socket_path = tmpdir_ + "/ww.sock";
  o.log_level = "info";
  return o;
}

WalwatchProcess& FaultTest::Spawn(WalwatchOptions options) {
  std::string log =
      tmpdir_ + "/walwatch" + std::to_string(walwatches_.size()) + ".stderr";
  walwatches_.push_back(
      std::make_unique<WalwatchProcess>(std::move(options), log));
  return *walwatches_.back();
}

WalwatchProcess* FaultTest::Launch(WalwatchOptions options) {
  WalwatchProcess& p = Spawn(std::move(options));
  auto ready = p.WaitReady(seconds(30));
  if (!ready) {
    ADD_FAILURE() << ready.message();
    return nullptr;
  }
  return &p;
}

uint64_t FaultTest::Marker() {
  return MarkerCommitLsn(Conninfo(), "fault_marker");
}

ModelState FaultTest::SqlState(const WatchFilter& f) {
  PgConnection conn(Conninfo());
  return QueryModelState(conn, ToModelFilter(f));
}

FaultStoreFactory FaultTest::WriterStore() {
  return [conninfo = Conninfo()] { return PgFaultStore(conninfo); };
}

// --- The writer and the watchers ----------------------------------------------

FaultWriter& FaultTest::StartWriter(FaultWriter::Options options) {
  options.connect = WriterStore();
  options.seed = seed_;
  writer_ = std::make_unique<FaultWriter>(options);
  writer_->Start();
  return *writer_;
}

::testing::AssertionResult FaultTest::MoreWrites(size_t n, seconds timeout) {
  size_t target = writer_->writes() + n;
  if (writer_->WaitForWrites(target, In(timeout))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "the writer reached " << writer_->writes() << " of " << target
         << " writes; fatal: '" << writer_->fatal() << "'";
}

std::vector<FaultWatcher*> FaultTest::StartWatchers(
    const WalwatchProcess& ww, uint64_t rv, FaultWatcher::Policy policy) {
  std::vector<FaultWatcher*> started;
  for (const auto& f : Filters()) {
    initial_states_[all_watchers_.size()] = SqlState(f);
    all_watchers_.push_back(
        std::make_unique<FaultWatcher>(ww.socket_path(), f, rv, policy));
    auto r = all_watchers_.back()->Start();
    EXPECT_TRUE(r);
    started.push_back(all_watchers_.back().get());
  }
  return started;
}

std::vector<FaultWatcher*> FaultTest::StartWatchersFromNow(
    FaultWatcher::Policy policy, size_t* from) {
  writer_->Pause();
  uint64_t rv = Marker();
  *from = writer_->writes();
  auto started = StartWatchers(*ww_, rv, policy);
  writer_->Resume();
  return started;
}

void FaultTest::StopWriterAndCheckExact(
    const std::vector<FaultWatcher*>& watchers, size_t from,
    std::vector<FaultWatcher*> since_start) {
  writer_->Stop();
  ASSERT_EQ(writer_->fatal(), "");
  ASSERT_TRUE(writer_->WriteTail());
  const auto from_log = writer_->Log(from);
  const auto whole_log = writer_->Log(0);
  const size_t first_since_start = watchers.size();
  std::vector<FaultWatcher*> all = watchers;
  all.insert(all.end(), since_start.begin(), since_start.end());
  auto log_of = [&](size_t i) -> const auto& {
    return i < first_since_start ? from_log : whole_log;
  };
  auto deadline = In(kDeliveryWait);
  for (size_t i = 0; i < all.size(); ++i) {
    size_t n = 0;
    for (const auto& e : log_of(i)) n += all[i]->filter().Matches(e);
    all[i]->WaitForEvents(n, deadline);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    FaultWatcher* w = all[i];
    const auto& log = log_of(i);
    w->Stop();
    EXPECT_TRUE(ExactlyOnceInOrder(log, *w));
    // Independently, support/model.h's checker: the events applied to the
    // starting state give exactly what SQL holds now, and none of them
    // contradicts the state it applies to.
    WatchModel model(InitialState(w), w->start_rv(), WatchModel::Options{});
    size_t contradictions = 0;
    for (const auto& e : w->Snapshot().events) {
      auto applied = model.Apply(e);
      if (!applied && contradictions++ == 0) {
        ADD_FAILURE() << w->filter().path << ": " << applied.message();
      }
    }
    EXPECT_EQ(contradictions, 0u) << w->filter().path;
    EXPECT_TRUE(
        CompareModelStates(SqlState(w->filter()), model.state(), &model))
        << w->filter().path;
  }
  size_t total = 0;
  for (auto* w : all) total += w->events();
  std::cerr << "[fault] " << whole_log.size() << " writes checked; " << total
            << " events received by " << all.size()
            << " watchers; writer errors resolved: " << writer_->errors()
            << "\n";
}

uint64_t FaultTest::StopWriterBeforeFailover() {
  writer_->Stop();
  EXPECT_EQ(writer_->fatal(), "");
  EXPECT_TRUE(writer_->WriteTail());
  before_failover_ = writer_->Log();
  want_before_failover_.clear();
  uint64_t highest = 0;
  for (auto* w : watchers()) {
    size_t& want = want_before_failover_[w];
    for (const auto& e : before_failover_) want += w->filter().Matches(e);
    EXPECT_TRUE(w->WaitForEvents(want, In(kDeliveryWait))) << w->filter().path;
    // Its last event is the writer's tail: it has received everything.
    auto r = w->Snapshot();
    if (!r.events.empty()) highest = std::max(highest, r.events.back().rv());
  }
  return highest;
}

void FaultTest::ExpectEveryWriteThenExpired(seconds timeout) {
  const auto expired_by = In(timeout);
  for (auto* w : watchers()) {
    EXPECT_TRUE(w->WaitForExpired(expired_by)) << w->filter().path;
    w->Stop();
    EXPECT_TRUE(PrefixThenExpired(before_failover_, *w));
    EXPECT_EQ(w->events(), want_before_failover_[w])
        << w->filter().path
        << ": not every write before the failover arrived before the 410";
  }
}

void FaultTest::ExpectAllExpired(const std::vector<FaultWatcher*>& watchers,
                                 size_t from, seconds timeout) {
  auto deadline = In(timeout);
  for (auto* w : watchers) {
    EXPECT_TRUE(w->WaitForExpired(deadline))
        << w->filter().path << " got no 410 within " << timeout.count()
        << " s";
  }
  auto log = writer_->Log(from);
  for (auto* w : watchers) {
    w->Stop();
    EXPECT_TRUE(PrefixThenExpired(log, *w));
  }
}

void FaultTest::RelistAndCheckExact(std::vector<FaultWatcher*> untouched) {
  size_t from = 0;
  auto fresh = StartWatchersFromNow(FaultWatcher::Policy::kStayOpen, &from);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  StopWriterAndCheckExact(fresh, from, std::move(untouched));
}

void FaultTest::ExpectAWatchFromIsExpiredAtOnce(uint64_t rv) {
  FaultWatcher late(ww_->socket_path(), Filters()[0], rv,
                    FaultWatcher::Policy::kStayOpen);
  ASSERT_TRUE(late.Start());
  EXPECT_TRUE(late.WaitForExpired(In(seconds(20))));
  EXPECT_EQ(late.events(), 0u);
}

const ModelState& FaultTest::InitialState(const FaultWatcher* w) {
  for (size_t i = 0; i < all_watchers_.size(); ++i) {
    if (all_watchers_[i].get() == w) return initial_states_[i];
  }
  throw std::logic_error("unknown watcher");
}

// --- Faults -------------------------------------------------------------------

void FaultTest::WhileWalwatchIsFrozen(
    const std::function<::testing::AssertionResult()>& fault,
    const std::function<void()>& then) {
  writer_->Pause();
  ASSERT_EQ(kill(ww_->pid(), SIGSTOP), 0);
  const ::testing::AssertionResult done = fault();
  writer_->Resume();
  const ::testing::AssertionResult wrote =
      done ? MoreWrites(kWritesPerPhase / 2)
           : ::testing::AssertionFailure() << "not written: the fault failed";
  if (wrote && then) then();
  ASSERT_EQ(kill(ww_->pid(), SIGCONT), 0);
  ASSERT_TRUE(done);
  ASSERT_TRUE(wrote);
}

void FaultTest::SigtermExpectingCleanExit(WalwatchProcess& ww, seconds bound,
                                          milliseconds* took) {
  auto t0 = Clock::now();
  ASSERT_EQ(kill(ww.pid(), SIGTERM), 0);
  auto status = ww.WaitExit(bound);
  auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
  if (took) *took = ms;
  std::cerr << "[fault] SIGTERM: "
            << (status ? "exited after " : "still running after ")
            << ms.count() << " ms\n";
  ASSERT_TRUE(status.has_value())
      << "walwatch did not exit within " << bound.count() << " s of SIGTERM";
  EXPECT_TRUE(status->exited && status->exit_code == 0) << status->Describe();
}

void FaultTest::ExpectStreamsEndedWithTheFinalChunk(
    const std::vector<FaultWatcher*>& watchers, seconds wait, bool stop) {
  for (auto* w : watchers) {
    auto deadline = In(wait);
    while (w->Snapshot().stream_ends.empty() && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (stop) w->Stop();
    auto ends = w->Snapshot().stream_ends;
    ASSERT_FALSE(ends.empty()) << w->filter().path;
    EXPECT_EQ(ends[0], "end")
        << w->filter().path << ": the stream did not end with the final chunk";
  }
}

void FaultTest::PqFinish::operator()(pg_conn* conn) const { PQfinish(conn); }

void FaultTest::SpawnWhileAnotherWalsenderHoldsTheSlot() {
  StartCluster();
  db().Exec("SELECT pg_create_logical_replication_slot('" +
            std::string(kSlot) + "', 'wal2json')");
  holder_.reset(PQconnectdb((Conninfo() + " replication=database").c_str()));
  PGresult* started =
      PQstatus(holder_.get()) != CONNECTION_OK
          ? nullptr
          : PQexec(holder_.get(),
                   ("START_REPLICATION SLOT " + std::string(kSlot) +
                    " LOGICAL 0/0 (\"format-version\" '2')")
                       .c_str());
  const bool held = PQresultStatus(started) == PGRES_COPY_BOTH;
  PQclear(started);
  ASSERT_TRUE(held) << "cannot hold the slot: "
                    << PQerrorMessage(holder_.get());
  ww_ = &Spawn(Options());
}

bool FaultTest::WaitUntilASlotIsBeingCreated() {
  auto deadline = In(seconds(30));
  while (Clock::now() < deadline) {
    if (db().QueryValue("SELECT count(*) FROM pg_stat_activity WHERE query "
                        "LIKE '%pg_create_logical_replication_slot%' AND "
                        "state = 'active' AND pid <> pg_backend_pid()") ==
        "1") {
      return true;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

// --- What walwatch and PostgreSQL say -------------------------------------------

std::vector<nlohmann::json> FaultTest::LogLines(const WalwatchProcess& ww,
                                                const std::string& msg) {
  std::vector<nlohmann::json> out;
  for (auto& l : ww.LogLines()) {
    if (l.value("msg", "") == msg) out.push_back(l);
  }
  return out;
}

std::vector<nlohmann::json> FaultTest::WaitForLogLines(
    const WalwatchProcess& ww, const std::string& msg, size_t n,
    seconds timeout) {
  auto deadline = In(timeout);
  auto lines = LogLines(ww, msg);
  while (lines.size() < n && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
    lines = LogLines(ww, msg);
  }
  return lines;
}

void FaultTest::ExpectANewRowArrives(const WalwatchProcess& ww) {
  WatchClient watch;
  ASSERT_TRUE(watch.Open(ww.socket_path(),
                         "/api/v1/pods?watch=1&resourceVersion=" +
                             std::to_string(Marker()),
                         In(seconds(20))));
  ASSERT_EQ(watch.status(), 200) << watch.body();
  InsertRow(db(), Pod("c1", "default", "after-the-wait"));
  WatchEvent added;
  ASSERT_TRUE(watch.NextEvent(&added, In(seconds(20))));
  EXPECT_EQ(added.name(), "after-the-wait") << added.raw;
}

std::optional<double> FaultTest::Metric(const std::string& sample) {
  return test_support::MetricValue(
      ScrapeMetrics(metrics_port_, In(seconds(5))), sample);
}

std::optional<double> FaultTest::WaitForMetric(const std::string& sample,
                                               double want, seconds timeout) {
  auto deadline = In(timeout);
  std::optional<double> v = Metric(sample);
  while (v != want && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
    v = Metric(sample);
  }
  return v;
}

::testing::AssertionResult FaultTest::WaitForCurrentRv(uint64_t rv,
                                                       seconds timeout) {
  auto deadline = In(timeout);
  std::optional<double> v;
  while (Clock::now() < deadline) {
    v = Metric("walwatch_current_rv");
    if (v && *v >= static_cast<double>(rv)) {
      return ::testing::AssertionSuccess();
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return ::testing::AssertionFailure()
         << "walwatch_current_rv stayed at " << (v ? *v : -1.0) << ", below "
         << rv << " for " << timeout.count() << " s";
}

void FaultTest::ExpectRecreatedRecently() {
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  double at = Metric("walwatch_slot_recreated_timestamp_seconds").value_or(0);
  EXPECT_GT(at, now - 120) << "walwatch_slot_recreated_timestamp_seconds";
  EXPECT_LE(at, now + 1) << "walwatch_slot_recreated_timestamp_seconds";
}

int FaultTest::WalsenderPid(const std::string& slot) {
  auto rows = db().Query(
      "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 "
      "AND active_pid IS NOT NULL",
      {slot});
  return rows.empty() ? 0 : std::stoi(*rows[0][0]);
}

int FaultTest::WaitForWalsender(const std::string& slot, int old_pid,
                                seconds timeout) {
  auto deadline = In(timeout);
  while (Clock::now() < deadline) {
    int pid = WalsenderPid(slot);
    if (pid != 0 && pid != old_pid) return pid;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return 0;
}

size_t FaultTest::ExpectBackoff(const WalwatchProcess& ww) {
  auto lines = LogLines(ww, "reconnecting to PostgreSQL");
  for (const auto& l : lines) {
    int attempt = l.value("attempt", 0);
    double delay = l.value("delay_ms", -1.0);
    double base = std::min(10000.0, 200.0 * std::pow(2.0, attempt - 1));
    EXPECT_GE(attempt, 1) << l.dump();
    EXPECT_GE(delay, base * 0.8 - 1) << l.dump();
    EXPECT_LE(delay, base * 1.2 + 1) << l.dump();
  }
  return lines.size();
}

}  // namespace walwatch::itest
