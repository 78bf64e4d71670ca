#include <gtest/gtest.h>

#include <chrono>

#include "cdc/replication_stream.h"

namespace walwatch {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

ReplicationOptions Hold(milliseconds interval, bool automatic) {
  ReplicationOptions options;
  options.wake_interval = interval;
  options.wake_interval_auto = automatic;
  return options;
}

TEST(WakeHold, AFixedIntervalHoldsWhateverTheWake) {
  EXPECT_EQ(Hold(milliseconds(0), false).WakeHold(0), microseconds(0));
  EXPECT_EQ(Hold(milliseconds(0), false).WakeHold(5000), microseconds(0));
  EXPECT_EQ(Hold(milliseconds(5), false).WakeHold(0), milliseconds(5));
  EXPECT_EQ(Hold(milliseconds(5), false).WakeHold(1), milliseconds(5));
  EXPECT_EQ(Hold(milliseconds(1000), false).WakeHold(1), milliseconds(1000));
}

// auto: 10 us per watch the wake concerned, at most the interval.
TEST(WakeHold, AutoGrowsWithTheWatchersUpToTheInterval) {
  const ReplicationOptions options = Hold(milliseconds(10), true);
  EXPECT_EQ(options.WakeHold(0), microseconds(0));
  EXPECT_EQ(options.WakeHold(1), microseconds(10));
  EXPECT_EQ(options.WakeHold(100), microseconds(1000));
  EXPECT_EQ(options.WakeHold(999), microseconds(9990));
  EXPECT_EQ(options.WakeHold(1000), milliseconds(10));
  EXPECT_EQ(options.WakeHold(5000), milliseconds(10));
  // No overflow for any count.
  EXPECT_EQ(options.WakeHold(~size_t{0}), milliseconds(10));
  // An interval of 0 turns auto off too.
  EXPECT_EQ(Hold(milliseconds(0), true).WakeHold(1000), microseconds(0));
}

}  // namespace
}  // namespace walwatch
