// ConnectionBudget bounds, across the process, the memory connections hold
// beyond the event log: the buffers of requests being read (the bytes
// received, and the header fields Beast parsed from them) and the spilled
// writes of watchers that stopped reading (ChunkWriter::Spill). Without
// it, --max-connections clients each sending up to --max-header-bytes for a
// minute, or thousands of stalled watchers each holding a 256 KiB write for
// 30 s, would hold gigabytes no other bound sees.
//
// A session charges through a BudgetAccount, and its buffers allocate through
// a BudgetAllocator bound to that account, so what is counted is what is
// allocated, at the moment it is allocated. An allocation the budget has no
// room for is refused: the allocator throws std::length_error, which Beast's
// read turns into http::error::buffer_overflow (and RequestParser into
// header_limit), and the account remembers it (refused()) so that the
// session can answer 429 rather than 431.
//
// Thread safety: ConnectionBudget may be used from any thread. A
// BudgetAccount, and every allocator bound to it, belong to one session's
// strand; it must outlive every container that allocates through it.
#ifndef WALWATCH_WATCHSERVER_CONNECTION_BUDGET_H_
#define WALWATCH_WATCHSERVER_CONNECTION_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>

namespace walwatch {

class ConnectionBudget {
 public:
  // `limit` bytes in all; 0: no limit (only counted).
  explicit ConnectionBudget(size_t limit) : limit_(limit) {}
  ConnectionBudget(const ConnectionBudget&) = delete;
  ConnectionBudget& operator=(const ConnectionBudget&) = delete;

  // Takes `bytes` if the total stays within the limit. Never lets the total
  // pass it, even for a moment, so the gauge read from used() never does.
  bool TryCharge(size_t bytes);
  void Release(size_t bytes);

  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

// One session's share of a ConnectionBudget. Gives back what it still holds
// when destroyed.
class BudgetAccount {
 public:
  // `budget` may be null: nothing is counted or refused.
  explicit BudgetAccount(ConnectionBudget* budget) : budget_(budget) {}
  ~BudgetAccount();
  BudgetAccount(const BudgetAccount&) = delete;
  BudgetAccount& operator=(const BudgetAccount&) = delete;

  // False, and refused() from then on, if the budget has no room.
  bool Charge(size_t bytes);
  void Release(size_t bytes);

  size_t held() const { return held_; }
  bool refused() const { return refused_; }
  void ClearRefused() { refused_ = false; }

 private:
  ConnectionBudget* const budget_;
  size_t held_ = 0;
  bool refused_ = false;
};

// A std::allocator that charges a BudgetAccount, for Beast's flat_buffer and
// basic_fields and for std::basic_string. Default-constructed it charges
// nothing (a container not yet given the session's allocator). It travels
// with its memory on copy, move and swap, so memory is always given back to
// the account that paid for it.
template <class T>
class BudgetAllocator {
 public:
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  BudgetAllocator() noexcept = default;
  explicit BudgetAllocator(BudgetAccount* account) noexcept
      : account_(account) {}
  template <class U>
  BudgetAllocator(const BudgetAllocator<U>& other) noexcept
      : account_(other.account()) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (account_ != nullptr && !account_->Charge(bytes)) {
      throw std::length_error("connection buffer budget exhausted");
    }
    try {
      return std::allocator<T>().allocate(n);
    } catch (...) {
      if (account_ != nullptr) account_->Release(bytes);
      throw;
    }
  }
  void deallocate(T* p, size_t n) noexcept {
    std::allocator<T>().deallocate(p, n);
    if (account_ != nullptr) account_->Release(n * sizeof(T));
  }

  BudgetAccount* account() const noexcept { return account_; }

  template <class U>
  bool operator==(const BudgetAllocator<U>& other) const noexcept {
    return account_ == other.account();
  }
  template <class U>
  bool operator!=(const BudgetAllocator<U>& other) const noexcept {
    return account_ != other.account();
  }

 private:
  BudgetAccount* account_ = nullptr;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_CONNECTION_BUDGET_H_
