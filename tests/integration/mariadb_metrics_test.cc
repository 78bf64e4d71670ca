// walwatch on MariaDB, read through its /metrics as Prometheus reads it:
// the binlog retention it exports is the server's own setting, followed as
// an operator changes it, beside the replay window that retention must
// cover (the alert WalwatchBinlogRetentionShort compares the two); and the
// metric names that packaging/ and the docs give for MySQL/MariaDB only are
// in a real scrape (check_manifests.py --scrape --source mysql).
//
// On the exclusive server: the test changes global settings.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "tests/integration/support/mariadb_walwatch.h"
#include "tests/support/metric_value.h"

namespace walwatch::itest {
namespace {

using std::chrono::seconds;
using test_support::MetricValue;

class MariaDbRetentionTest : public MariaDbWalwatchTest {
 protected:
  void TearDown() override {
    if (!saved_retention_.empty()) {
      writer().Run("SET GLOBAL binlog_expire_logs_seconds = " +
                   saved_retention_);
    }
    MariaDbWalwatchTest::TearDown();
  }

  // The server's binlog_expire_logs_seconds, as the server reports it.
  double ServerRetention() {
    std::optional<std::string> v;
    EXPECT_EQ(writer().conn().QueryValue(
                  "SELECT @@GLOBAL.binlog_expire_logs_seconds", &v),
              "");
    return v ? std::stod(*v) : -2;
  }

  std::string Scrape() {
    CommandResult r = RunCommand(
        {"curl", "-sf", "--max-time", "10",
         "http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics"},
        seconds(20));
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.Describe() << r.output;
    return r.output;
  }

  // Scrapes until `series` equals `want`, or the deadline.
  ::testing::AssertionResult WaitForValue(const std::string& series,
                                          double want) {
    std::string scrape;
    std::optional<double> v;
    for (const auto deadline = In(kEventWait);;) {
      scrape = Scrape();
      v = MetricValue(scrape, series);
      if (v && *v == want) return ::testing::AssertionSuccess();
      if (Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return ::testing::AssertionFailure()
           << series << " = " << (v ? std::to_string(*v) : "absent")
           << ", expected " << want << " after " << kEventWait.count()
           << " s; scrape:\n"
           << scrape;
  }

  int metrics_port_ = 0;
  std::string saved_retention_;
};

TEST_F(MariaDbRetentionTest, TheRetentionGaugeIsTheServersSetting) {
  {
    std::optional<std::string> v;
    ASSERT_EQ(writer().conn().QueryValue(
                  "SELECT @@GLOBAL.binlog_expire_logs_seconds", &v),
              "");
    ASSERT_TRUE(v.has_value());
    saved_retention_ = *v;
  }
  metrics_port_ = FreeLoopbackPort();
  ASSERT_NE(metrics_port_, 0);
  WalwatchOptions o = Options({"--replay-window", "15m"});
  o.metrics_address = "127.0.0.1:" + std::to_string(metrics_port_);
  auto* ww = StartWalwatch(o);
  ASSERT_NE(ww, nullptr);

  EXPECT_TRUE(WaitForValue("walwatch_replay_window_seconds", 15 * 60));
  EXPECT_TRUE(
      WaitForValue("walwatch_binlog_retention_seconds", ServerRetention()));

  // Changed while walwatch runs: in seconds (an odd value, not a whole
  // number of days), in days (MariaDB 10.6+ keeps the two in step: the
  // server's seconds are read back, not assumed), and off.
  writer().Run("SET GLOBAL binlog_expire_logs_seconds = 97200");
  ASSERT_EQ(ServerRetention(), 97200);
  EXPECT_TRUE(WaitForValue("walwatch_binlog_retention_seconds", 97200));

  writer().Run("SET GLOBAL expire_logs_days = 3");
  const double days = ServerRetention();
  EXPECT_EQ(days, 3 * 86400);
  EXPECT_TRUE(WaitForValue("walwatch_binlog_retention_seconds", days));

  writer().Run("SET GLOBAL binlog_expire_logs_seconds = 0");
  ASSERT_EQ(ServerRetention(), 0);
  EXPECT_TRUE(WaitForValue("walwatch_binlog_retention_seconds", 0));

  // The names packaging/ and the docs give for MySQL only are in this
  // scrape (a PostgreSQL scrape has none of them: ClaimsTest checks the
  // rest against one).
  const std::string path = TempPath("metrics.txt");
  {
    std::ofstream out(path);
    out << Scrape();
  }
  CommandResult r = RunCommand(
      {"python3", WALWATCH_SOURCE_DIR "/tests/packaging/check_manifests.py",
       "--root", WALWATCH_SOURCE_DIR, "--scrape", path, "--source", "mysql"},
      seconds(60));
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.Describe() << "\n" << r.output;
}

}  // namespace
}  // namespace walwatch::itest
