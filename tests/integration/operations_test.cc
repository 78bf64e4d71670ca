// What an SRE relies on, through the real binary against PostgreSQL: the
// Prometheus counters move by exactly the events produced, and the watch CLI
// prints what a watcher receives.
#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

// Runs a command and returns its standard output (stderr merged when asked).
std::string RunCommand(const std::string& command, int* exit_code) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// The value of one sample line ("name{labels} value") of a scrape, or -1.
double Sample(const std::string& scrape, const std::string& series) {
  size_t at = 0;
  while ((at = scrape.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || scrape[at - 1] == '\n') {
      return std::stod(scrape.substr(at + series.size() + 1));
    }
    at += series.size();
  }
  return -1;
}

class OperationsTest : public WalwatchTest {};

TEST_F(OperationsTest, MetricsCountExactlyTheEventsProduced) {
  int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  auto options = DefaultOptions();
  options.metrics_address = "127.0.0.1:" + std::to_string(port);
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  const std::string scrape_cmd =
      "curl -sf http://127.0.0.1:" + std::to_string(port) + "/metrics";
  int rc = 0;
  std::string before = RunCommand(scrape_cmd, &rc);
  ASSERT_EQ(rc, 0) << "GET /metrics failed";

  WatchClient watch;
  ASSERT_TRUE(OpenWatch(watch, *ww, "/api/v1/pods"));
  Resource a = Pod("c1", "default", "m-a"), b = Pod("c1", "default", "m-b"),
           c = Pod("c1", "default", "m-c");
  InsertRow(db(), a);
  InsertRow(db(), b);
  InsertRow(db(), c);
  a.spec["x"] = 1;
  UpdateRow(db(), a);
  b.spec["x"] = 2;
  UpdateRow(db(), b);
  DeleteRow(db(), c);
  for (int i = 0; i < 6; ++i) {
    WatchEvent e;
    ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait))) << "event " << i;
  }
  std::string after = RunCommand(scrape_cmd, &rc);
  ASSERT_EQ(rc, 0);
  const std::map<std::string, double> expected = {
      {"ADDED", 3}, {"MODIFIED", 2}, {"DELETED", 1}};
  for (const auto& [type, n] : expected) {
    SCOPED_TRACE(type);
    std::string decoded = "walwatch_events_decoded_total{type=\"" + type + "\"}";
    std::string sent = "walwatch_events_sent_total{type=\"" + type + "\"}";
    ASSERT_GE(Sample(before, decoded), 0) << before;
    EXPECT_EQ(Sample(after, decoded) - Sample(before, decoded), n);
    EXPECT_EQ(Sample(after, sent) - Sample(before, sent), n);
  }
  EXPECT_EQ(Sample(after, "walwatch_watchers{group=\"\",resource=\"pods\","
                          "version=\"v1\"}"),
            1)
      << after;
  EXPECT_EQ(Sample(after, "walwatch_replication_streaming"), 1);
  std::string ready = RunCommand("curl -s -o /dev/null -w '%{http_code}' "
                          "http://127.0.0.1:" + std::to_string(port) + "/readyz",
                          &rc);
  EXPECT_EQ(ready, "200");
}

TEST_F(OperationsTest, WatchCliPrintsTheTableAndReports410) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  uint64_t fresh = FreshRv(*ww);
  ASSERT_NE(fresh, 0u);
  InsertRow(db(), Pod("c1", "default", "cli-pod"));
  int rc = 0;
  std::string out = RunCommand(std::string(WALWATCH_BINARY) +
                            " watch '/api/v1/pods?timeoutSeconds=2' --rv " +
                            std::to_string(fresh) + " --socket " +
                            ww->socket_path() + " 2>&1",
                        &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("TYPE"), std::string::npos) << out;
  EXPECT_NE(out.find("NAMESPACE"), std::string::npos) << out;
  // The row: ADDED, the cluster annotation, namespace, name.
  size_t row = out.find("ADDED");
  ASSERT_NE(row, std::string::npos) << out;
  std::string line = out.substr(row, out.find('\n', row) - row);
  EXPECT_NE(line.find("c1"), std::string::npos) << line;
  EXPECT_NE(line.find("default"), std::string::npos) << line;
  EXPECT_NE(line.find("cli-pod"), std::string::npos) << line;

  // A resourceVersion older than walwatch keeps: a clear 410, exit 1.
  out = RunCommand(std::string(WALWATCH_BINARY) + " watch /api/v1/pods --rv 1 --socket " +
                ww->socket_path() + " 2>&1",
            &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("410"), std::string::npos) << out;
  EXPECT_NE(out.find("Expired"), std::string::npos) << out;
}

}  // namespace
}  // namespace walwatch::itest
