#include "tests/unit/support/fake_state_source.h"

#include <algorithm>
#include <chrono>

namespace walwatch::server_test {

void FakeStateSource::set_manual(bool manual) {
  std::lock_guard<std::mutex> lock(mu_);
  manual_ = manual;
}

void FakeStateSource::set_answer(Answer answer) {
  std::lock_guard<std::mutex> lock(mu_);
  answer_ = std::move(answer);
}

void FakeStateSource::set_hold(bool hold) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_ = hold;
}

std::vector<bool> FakeStateSource::held_wanted() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<bool> out;
  for (const Held& h : held_) out.push_back(h.wanted());
  return out;
}

void FakeStateSource::ReleaseHeld(Answer answer) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_ = false;
  for (Held& h : held_) {
    threads_.emplace_back([done = std::move(h.done), answer] {
      done({answer.rv, std::max(answer.rv, answer.latest)},
         answer.error ? &*answer.error : nullptr);
    });
  }
  held_.clear();
}

void FakeStateSource::ReadState(const StateQuery& query,
                                std::shared_ptr<InitialStateStream> stream) {
  std::lock_guard<std::mutex> lock(mu_);
  queries_.push_back(query);
  ++read_states_;
  if (manual_) {
    streams_.push_back(stream);
    cv_.notify_all();
    return;
  }
  uint64_t rv = log_->current_rv();
  threads_.emplace_back([stream, rv] {
    stream->Ready(rv);
    stream->Finish();
  });
}

void FakeStateSource::HandoffRv(const HandoffPosition& at, RvCallback done,
                                Wanted wanted) {
  std::lock_guard<std::mutex> lock(mu_);
  handoffs_.push_back(at);
  Reply(std::move(done), std::move(wanted));
}

void FakeStateSource::FreshRv(RvCallback done, Wanted wanted) {
  std::lock_guard<std::mutex> lock(mu_);
  ++fresh_rvs_;
  Reply(std::move(done), std::move(wanted));
}

std::shared_ptr<InitialStateStream> FakeStateSource::WaitForStream() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::seconds(5),
                    [&] { return !streams_.empty(); })) {
    return nullptr;
  }
  auto stream = streams_.front();
  streams_.pop_front();
  return stream;
}

int FakeStateSource::read_states() const {
  std::lock_guard<std::mutex> lock(mu_);
  return read_states_;
}

int FakeStateSource::fresh_rvs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fresh_rvs_;
}

std::vector<StateQuery> FakeStateSource::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queries_;
}

std::vector<HandoffPosition> FakeStateSource::handoffs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handoffs_;
}

void FakeStateSource::JoinAll() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void FakeStateSource::Reply(RvCallback done, Wanted wanted) {
  if (hold_) {
    held_.push_back({std::move(done), std::move(wanted)});
    return;
  }
  Answer answer = answer_;
  threads_.emplace_back([done = std::move(done), answer] {
    done({answer.rv, std::max(answer.rv, answer.latest)},
         answer.error ? &*answer.error : nullptr);
  });
}

}  // namespace walwatch::server_test
