// InitialStateStream (cdc/model/state_source.h), the queue between a state
// reader and the watch it sends to: a consumer too slow, one that takes
// nothing, and one that trickles are each given up on.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cdc/model/state_source.h"
#include "tests/unit/support/server_events.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The state reader holds a snapshot open while it waits for the client:
// past --initial-state-timeout a client that slow gets 410 and relists.
TEST(InitialStateStreamTest, AConsumerTooSlowFailsTheStreamWith410) {
  InitialStateStream stream(/*max_queued_bytes=*/1,
                            std::chrono::milliseconds(200));
  stream.Ready(kFloorRv);
  ASSERT_TRUE(stream.Push({StatePod("a", kFloorRv)}));   // the queue was empty
  EXPECT_FALSE(stream.Push({StatePod("b", kFloorRv)}));  // nobody takes "a"
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t = stream.Take(&taken, [] {});
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.error.code, 410);
  EXPECT_EQ(t.error.reason, "Expired");
  EXPECT_EQ(t.error.message,
            "the initial state was not read within 200 ms "
            "(--initial-state-timeout): the client reads too slowly; relist");
}

// A client that takes nothing for the stall timeout gives the reader back
// long before the overall one; one that keeps taking does not.
TEST(InitialStateStreamTest, AConsumerThatTakesNothingStallsTheStream) {
  int stalls = 0;
  InitialStateStream stream(/*max_queued_bytes=*/1, std::chrono::minutes(5),
                            std::chrono::seconds(1), [&stalls] { ++stalls; });
  stream.Ready(kFloorRv);
  ASSERT_TRUE(stream.Push({StatePod("a", kFloorRv)}));
  std::thread consumer([&] {
    std::vector<EventPtr> taken;
    // Takes "a" within the stall timeout, then nothing more.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stream.Take(&taken, [] {});
  });
  EXPECT_TRUE(stream.Push({StatePod("b", kFloorRv)}));
  consumer.join();
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(stream.Push({StatePod("c", kFloorRv)}));  // nobody takes "b"
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(stalls, 1);
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t = stream.Take(&taken, [] {});
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.error.code, 410);
  EXPECT_EQ(t.error.message,
            "the initial state was not read for 1 s "
            "(--initial-state-stall-timeout): the client reads too slowly; "
            "relist");
}

// A consumer that takes one event every 50 ms keeps the producer waiting on
// a full queue nearly all the time while taking a few KiB per second: with
// --initial-state-min-rate it gives the reader back after about one stall
// timeout of waiting; with a rate of 0 (any progress will do) it keeps it.
// Fails without the rate: every Push's own wait is short, so the stall bound
// never comes due and only the 5 minute bound would end the stream.
struct Trickle {
  uint64_t min_rate = 0;
  int stalls = 0;
  int pushed = 0;
  bool refused = false;
  std::string message;
};

void RunTrickle(Trickle* run, std::chrono::milliseconds consumer_for) {
  InitialStateStream stream(/*max_queued_bytes=*/1, std::chrono::minutes(5),
                            std::chrono::seconds(1), [run] { ++run->stalls; },
                            run->min_rate);
  stream.Ready(kFloorRv);
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    const auto until = std::chrono::steady_clock::now() + consumer_for;
    while (!stop && std::chrono::steady_clock::now() < until) {
      std::vector<EventPtr> taken;
      stream.Take(&taken, [] {});
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // An upper bound for a loaded machine, not a measure of speed.
  const auto bound =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < bound) {
    if (!stream.Push({StatePod("p" + std::to_string(run->pushed), kFloorRv)})) {
      run->refused = true;
      break;
    }
    if (++run->pushed >= 60) break;  // the consumer took 60: enough to judge
  }
  stop = true;
  stream.Cancel();
  consumer.join();
  std::vector<EventPtr> taken;
  InitialStateStream::Taken t = stream.Take(&taken, [] {});
  if (t.failed) run->message = t.error.message;
}

TEST(InitialStateStreamTest, AConsumerThatTricklesIsEndedByTheMinimumRate) {
  Trickle slow;
  slow.min_rate = 1 << 20;
  RunTrickle(&slow, std::chrono::seconds(60));
  EXPECT_TRUE(slow.refused) << "pushed " << slow.pushed;
  EXPECT_LT(slow.pushed, 60);
  EXPECT_EQ(slow.stalls, 1);
  EXPECT_EQ(slow.message,
            "the initial state was read at less than 1 MiB/s "
            "(--initial-state-min-rate) for 1 s "
            "(--initial-state-stall-timeout): the client reads too slowly; "
            "relist");

  // 60 events at one per 50 ms: three stall windows of waiting, each with
  // progress.
  Trickle any;
  any.min_rate = 0;
  RunTrickle(&any, std::chrono::seconds(60));
  EXPECT_FALSE(any.refused) << any.message;
  EXPECT_EQ(any.pushed, 60);
  EXPECT_EQ(any.stalls, 0);
}

}  // namespace
}  // namespace walwatch::server_test
