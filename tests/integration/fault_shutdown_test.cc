// walwatch itself stopped: SIGTERM (a clean end of every stream, the last
// status update, exit 0) and SIGKILL, and the restarts after them, which
// watchers resume from without a 410. The fixture and the shared script:
// support/fault_fixture.h.
#include <signal.h>

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

TEST_F(FaultTest, WalwatchSigtermAndSigkillRestartsResumeWithout410) {
  ASSERT_NO_FATAL_FAILURE(Begin(Scenario().Resuming()));

  // SIGTERM: exit 0 within 10 s, socket removed, every stream ended with
  // the final chunk.
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(10)));
  EXPECT_FALSE(FileExists(ww_->socket_path())) << "socket left after SIGTERM";
  EXPECT_EQ(LogLines(*ww_, "sent the last status update").size(), 1u);
  // Each watcher has seen its stream end (and is now reconnecting).
  ASSERT_NO_FATAL_FAILURE(ExpectStreamsEndedWithTheFinalChunk(
      watchers(), seconds(10), /*stop=*/false));
  // The slot was confirmed no further than the replay window's start: the
  // first event any watcher received is still ahead of confirmed_flush.
  uint64_t first_rv = UINT64_MAX;
  for (auto* w : watchers()) {
    auto r = w->Snapshot();
    if (!r.events.empty()) first_rv = std::min(first_rv, r.events[0].rv());
  }
  uint64_t confirmed = ParseLsn(db().QueryValue(
      "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE "
      "slot_name = $1",
      {kSlot}));
  EXPECT_LE(confirmed, first_rv)
      << "confirmed_flush_lsn passed the replay window's first commit";

  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));  // written while it is down
  ASSERT_NE(Relaunch(), nullptr);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));

  // SIGKILL: no clean end; the socket file stays and the next process must
  // replace it.
  ASSERT_EQ(kill(ww_->pid(), SIGKILL), 0);
  auto status = ww_->WaitExit(seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->signal, SIGKILL);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 2));
  ASSERT_NE(Relaunch(), nullptr);
  ASSERT_TRUE(MoreWrites(kWritesPerPhase));

  StopWriterAndCheckExact(watchers());
  for (auto* w : watchers()) {
    auto r = w->Snapshot();
    EXPECT_GE(r.reconnects, 2u) << w->filter().path;
    EXPECT_FALSE(r.error_event.has_value()) << w->filter().path;
    std::cerr << "[fault] " << w->filter().path << ": reconnects "
              << r.reconnects << ", refused opens " << r.open_failures
              << ", 504 retries " << r.retries_504 << "\n";
  }
}

TEST_F(FaultTest, SigtermEndsStreamsSendsLastStatusAndExitsZero) {
  // Confirm everything received, so the last status update is visible in
  // confirmed_flush_lsn (with the default window it stays at the window's
  // start, which the restart test checks).
  ASSERT_NO_FATAL_FAILURE(Begin(
      Scenario().WithMetrics().Args({"--replay-window", "0s"}).Resuming()));
  uint64_t before = Marker();
  ASSERT_TRUE(WaitForCurrentRv(before, seconds(20)));

  milliseconds took{0};
  ASSERT_NO_FATAL_FAILURE(SigtermExpectingCleanExit(*ww_, seconds(10), &took));
  EXPECT_LT(took, seconds(10));
  EXPECT_FALSE(FileExists(ww_->socket_path()));
  writer_->Stop();

  auto last = LogLines(*ww_, "sent the last status update");
  ASSERT_EQ(last.size(), 1u) << "no 'sent the last status update' log line";
  uint64_t flush = ParseLsn(last[0].value("flush_lsn", "0/0"));
  EXPECT_GT(flush, before) << "the last status update does not cover what "
                              "walwatch had received";
  EXPECT_EQ(LogLines(*ww_, "stopped").size(), 1u);
  // The server took it.
  auto deadline = In(seconds(10));
  std::string confirmed;
  while (Clock::now() < deadline) {
    auto rows = db().Query(
        "SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots "
        "WHERE slot_name = $1",
        {kSlot});
    if (rows.size() == 1 && *rows[0][1] == "f") {
      confirmed = *rows[0][0];
      if (ParseLsn(confirmed) >= flush) break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(confirmed.empty() ? 0 : ParseLsn(confirmed), flush)
      << "confirmed_flush_lsn " << confirmed << " vs the last status update's "
      << FormatLsn(flush);
  ASSERT_NO_FATAL_FAILURE(ExpectStreamsEndedWithTheFinalChunk(
      watchers(), seconds(0), /*stop=*/true));
  for (auto* w : watchers()) {
    EXPECT_FALSE(w->Snapshot().error_event.has_value()) << w->filter().path;
  }
}

}  // namespace
}  // namespace walwatch::itest
