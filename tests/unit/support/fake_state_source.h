// FakeStateSource: a StateSource the HTTP server's unit tests drive.
// ReadState either answers by itself (an empty state at the log's current
// RV, like a table with no such rows) or hands the stream to the test
// (manual). HandoffRv and FreshRv answer with `answer` from a thread of
// their own, as a worker would, or (held) keep the request unanswered for
// the test to look at.
//
// Thread safety: every method may be called from any thread. The threads
// it starts post to the server's io_context: JoinAll() them before it stops.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_FAKE_STATE_SOURCE_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_FAKE_STATE_SOURCE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cdc/model/state_source.h"
#include "watchserver/event_log.h"

namespace walwatch::server_test {

class FakeStateSource : public StateSource {
 public:
  explicit FakeStateSource(EventLog* log) : log_(log) {}
  ~FakeStateSource() override { JoinAll(); }

  struct Answer {
    uint64_t rv = 0;
    std::optional<StateError> error;
    uint64_t latest = 0;  // StateSource::AnsweredRv's; at most rv: rv
  };

  void set_manual(bool manual);
  void set_answer(Answer answer);
  void set_hold(bool hold);
  // Held requests: whether each is still wanted.
  std::vector<bool> held_wanted() const;
  // Answers every held request with `answer`, as a worker would, and stops
  // holding.
  void ReleaseHeld(Answer answer);

  void ReadState(const StateQuery& query,
                 std::shared_ptr<InitialStateStream> stream) override;
  void HandoffRv(const HandoffPosition& at, RvCallback done,
                 Wanted wanted) override;
  void FreshRv(RvCallback done, Wanted wanted) override;

  // Manual mode: the next stream a watch asked for (null after 5 s).
  std::shared_ptr<InitialStateStream> WaitForStream();

  int read_states() const;
  int fresh_rvs() const;
  std::vector<StateQuery> queries() const;
  std::vector<HandoffPosition> handoffs() const;

  void JoinAll();

 private:
  void Reply(RvCallback done, Wanted wanted);  // mu_ held

  EventLog* const log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool manual_ = false;
  bool hold_ = false;
  struct Held {
    RvCallback done;
    Wanted wanted;
  };
  std::vector<Held> held_;
  Answer answer_;
  int read_states_ = 0;
  int fresh_rvs_ = 0;
  std::vector<StateQuery> queries_;
  std::deque<std::shared_ptr<InitialStateStream>> streams_;
  std::vector<HandoffPosition> handoffs_;
  std::vector<std::thread> threads_;
};

}  // namespace walwatch::server_test

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_FAKE_STATE_SOURCE_H_
