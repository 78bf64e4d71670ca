// Faults of walwatch's connection to PostgreSQL: connections cut by a TCP
// proxy, a silent partition (the proxy stalls), also during SIGTERM, the
// walsender terminated, and a walsender that sends nothing for longer than
// --replication-timeout while it decodes. The fixture and the shared script:
// support/fault_fixture.h.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/support/fault_fixture.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The silent-partition tests run walwatch with --replication-timeout 15s (the
// default is 60 s, as PostgreSQL's own wal_receiver_timeout) and allow it this
// long to notice a replication connection that carries nothing.
constexpr char kReplicationTimeout[] = "15s";
constexpr seconds kPartitionDetection{30};

TEST_F(FaultTest, ProxiedConnectionsCutAbruptly) {
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario().WithMetrics().ThroughProxy()));
  int pid = WaitForWalsender(kSlot, 0, seconds(10));
  ASSERT_NE(pid, 0);
  // 1) a plain cut: walwatch reconnects at once.
  EXPECT_GE(proxy_->CutAll(), 1u) << "no proxied connection to cut";
  pid = WaitForWalsender(kSlot, pid, seconds(30));
  ASSERT_NE(pid, 0) << "walwatch did not reconnect after the cut";
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  // 2) a cut, and the server unreachable for 2.5 s: several attempts with
  //    growing delays.
  proxy_->SetRefusing(true);
  EXPECT_GE(proxy_->CutAll(), 1u);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  std::this_thread::sleep_for(milliseconds(2500));  // the outage itself
  proxy_->SetRefusing(false);
  // The backoff may have grown to ~3 s by now (attempts only reset after
  // 30 s of streaming), plus up to 10 s per later attempt.
  pid = WaitForWalsender(kSlot, pid, seconds(30));
  ASSERT_NE(pid, 0) << "walwatch did not reconnect after the outage";
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  // 3) one more cut while the writer writes.
  EXPECT_GE(proxy_->CutAll(), 1u);
  pid = WaitForWalsender(kSlot, pid, seconds(30));
  ASSERT_NE(pid, 0) << "walwatch did not reconnect after the third cut";
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  StopWriterAndCheckExact(watchers());

  auto attempts = LogLines(*ww_, "reconnecting to PostgreSQL");
  EXPECT_GE(ExpectBackoff(*ww_), 4u);
  EXPECT_GE(LogLines(*ww_, "reconnect failed").size(), 2u);
  // During the outage the delays grew.
  int max_attempt = 0;
  for (const auto& l : attempts) {
    max_attempt = std::max(max_attempt, l.value("attempt", 0));
  }
  EXPECT_GE(max_attempt, 3) << "a 2.5 s outage should take >= 3 attempts";
  auto reconnects = Metric("walwatch_reconnects_total");
  ASSERT_TRUE(reconnects.has_value());
  EXPECT_GE(*reconnects, 3.0);
  EXPECT_EQ(writer_->errors(), 0u);  // the writer does not use the proxy
}

// A silent network partition: the proxy stops forwarding without closing
// anything, as a dropped route or a failed-over address would. walwatch asks
// for a keepalive every --status-interval (1 s), so a connection that has
// carried nothing for much longer is dead; it must notice, reconnect once
// the network is back, and the watch streams must stay open and exact.
TEST_F(FaultTest, SilentPartitionIsDetected) {
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario().ThroughProxy().Args(
      {"--replication-timeout", kReplicationTimeout})));
  int pid = WaitForWalsender(kSlot, 0, seconds(10));
  ASSERT_NE(pid, 0);
  proxy_->SetStalled(true);
  auto t0 = Clock::now();
  const bool detected = !WaitForLogLines(*ww_, "replication connection lost",
                                         1, kPartitionDetection)
                             .empty();
  auto took = Clock::now() - t0;
  // The network comes back; what was stalled is gone for good.
  proxy_->CutAll();
  proxy_->SetStalled(false);
  std::cerr << "[fault] partition "
            << (detected ? "detected after " : "not detected within ")
            << std::chrono::duration_cast<milliseconds>(took).count()
            << " ms\n";
  EXPECT_TRUE(detected) << "walwatch did not notice a silent partition within "
                        << kPartitionDetection.count() << " s";
  pid = WaitForWalsender(kSlot, pid, seconds(30));
  ASSERT_NE(pid, 0) << "walwatch did not reconnect after the partition";
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  StopWriterAndCheckExact(watchers());
}

// SIGTERM while the network is silently partitioned: walwatch must still
// exit 0 within 10 s, ending every stream with the final chunk (nothing it
// waits for on PostgreSQL's side may hold the shutdown).
TEST_F(FaultTest, SigtermDuringSilentPartitionExitsPromptly) {
  ASSERT_NO_FATAL_FAILURE(Begin(
      Scenario().ThroughProxy().Resuming().FirstWrites(kWritesPerPhase / 3)));
  proxy_->SetStalled(true);
  // Until each of walwatch's connections (replication: a status update every
  // second; the slot monitor: a poll every 2 s) has sent something that the
  // partition holds, so that it waits on the partitioned network.
  size_t connections = proxy_->active();
  ASSERT_GE(connections, 2u) << "replication and slot monitor connections";
  auto stall_deadline = In(seconds(30));
  while (Clock::now() < stall_deadline &&
         proxy_->waiting_while_stalled() < connections) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_EQ(proxy_->waiting_while_stalled(), connections)
      << "not every proxied connection waits on the partition";
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(10)));
  EXPECT_FALSE(FileExists(ww_->socket_path()));
  ASSERT_NO_FATAL_FAILURE(ExpectStreamsEndedWithTheFinalChunk(
      watchers(), seconds(5), /*stop=*/true));
  proxy_->SetStalled(false);
}

TEST_F(FaultTest, WalsenderTerminated) {
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario()));
  int pid = WaitForWalsender(kSlot, 0, seconds(10));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("termination #" + std::to_string(round + 1));
    ASSERT_NE(pid, 0);
    EXPECT_EQ(db().QueryValue("SELECT pg_terminate_backend($1)",
                              {std::to_string(pid)}),
              "t");
    pid = WaitForWalsender(kSlot, pid, seconds(30));
    ASSERT_NE(pid, 0) << "walwatch did not reconnect";
    ASSERT_TRUE(MoreWrites(kWritesPerPhase));
  }
  StopWriterAndCheckExact(watchers());
  EXPECT_GE(LogLines(*ww_, "replication resumed").size(), 3u);
  // One reconnect (at least) per termination, each within the backoff.
  EXPECT_GE(ExpectBackoff(*ww_), 3u)
      << "fewer 'reconnecting to PostgreSQL' lines than terminations";
  EXPECT_EQ(writer_->errors(), 0u);
}

// A transaction of another table so large that decoding it takes longer
// than --replication-timeout: PostgreSQL 15's walsender sends nothing
// meanwhile. walwatch must wait for it rather than reconnect: a new
// walsender would decode the same transaction again, as silently, for ever.
//
// The writes committed after the big transaction are only sent once the
// walsender has decoded it: late, not lost. So the test waits for that
// (walwatch's current RV passes a marker committed after it) before it
// checks delivery, and sizes the transaction from this machine's measured
// decoding speed rather than from another machine's.
TEST_F(FaultTest, AWalsenderDecodingInSilenceIsWaitedFor) {
  constexpr seconds kTimeout{5};
  // Decoding the big transaction should take about this long: well over
  // the timeout, without making the test slow.
  constexpr double kTargetDecodeSeconds = 3.0 * kTimeout.count();
  constexpr int64_t kCalibrationRows = 2000000;
  const std::string busy =
      "the walsender sends nothing while it decodes a large transaction of "
      "other tables; waiting for it";
  StartCluster();
  db().Exec("CREATE TABLE bulk_other (n int)");
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(
      Scenario()
          .WithMetrics()
          .Args({"--replication-timeout=" + std::to_string(kTimeout.count()) +
                 "s"})
          .FirstWrites(kWritesPerPhase / 3)));
  // Inserts `rows` narrow rows (cheap to insert; their decoding still costs
  // per row) in one transaction and waits until walwatch has passed it;
  // returns the seconds from its commit until then.
  auto insert_and_pass = [&](int64_t rows) -> double {
    {
      PgConnection big(Conninfo());
      big.Exec("INSERT INTO bulk_other SELECT g FROM generate_series(1, " +
               std::to_string(rows) + ") g");
    }
    auto committed = Clock::now();
    uint64_t after = Marker();  // commits after it
    // Generous: a slow, loaded machine decodes slowly, and that is no fault.
    auto passed = WaitForCurrentRv(after, seconds(900));
    EXPECT_TRUE(passed) << "walwatch did not get past a transaction of "
                        << rows << " rows";
    if (!passed) return -1;
    return std::chrono::duration<double>(Clock::now() - committed).count();
  };
  const double calibration = insert_and_pass(kCalibrationRows);
  ASSERT_GT(calibration, 0);
  const int64_t rows = std::clamp<int64_t>(
      static_cast<int64_t>(kCalibrationRows * kTargetDecodeSeconds /
                           std::max(calibration, 0.1)),
      kCalibrationRows, 60000000);
  std::cerr << "[fault] " << kCalibrationRows << " rows decoded in "
            << calibration << " s; the big transaction: " << rows
            << " rows\n";
  const size_t busy_before = LogLines(*ww_, busy).size();
  const auto waits_before = Metric("walwatch_busy_walsender_waits_total");
  ASSERT_TRUE(waits_before) << "walwatch_busy_walsender_waits_total";

  ASSERT_NO_FATAL_FAILURE(StartTraffic());
  const double decoded = insert_and_pass(rows);
  ASSERT_GT(decoded, 0);
  std::cerr << "[fault] " << rows << " rows decoded in " << decoded
            << " s after their commit\n";
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  // Everything is decoded: what the watchers miss now is lost, not late.
  StopWriterAndCheckExact(watchers());
  EXPECT_GT(LogLines(*ww_, busy).size(), busy_before)
      << "decoding took " << decoded << " s, not over the "
      << kTimeout.count() << " s timeout, so nothing was tested";
  // Each receive timeout spent waiting is counted. The wait ended before
  // walwatch got past the big transaction, which insert_and_pass waited
  // for, so the counter has risen by now.
  EXPECT_GT(Metric("walwatch_busy_walsender_waits_total").value_or(0),
            *waits_before)
      << "walwatch_busy_walsender_waits_total";
  auto lost = LogLines(*ww_, "replication connection lost");
  EXPECT_TRUE(lost.empty()) << lost[0].dump();
}

}  // namespace
}  // namespace walwatch::itest
