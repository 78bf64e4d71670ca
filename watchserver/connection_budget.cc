#include "watchserver/connection_budget.h"

#include <cassert>

namespace walwatch {

bool ConnectionBudget::TryCharge(size_t bytes) {
  size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ != 0 && (bytes > limit_ || used > limit_ - bytes)) {
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + bytes,
                                        std::memory_order_relaxed));
  return true;
}

void ConnectionBudget::Release(size_t bytes) {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
}

BudgetAccount::~BudgetAccount() {
  // Every container charging this account is destroyed before it; what is
  // left would be a leak of the count, not of memory.
  assert(held_ == 0);
  if (budget_ != nullptr && held_ != 0) budget_->Release(held_);
}

bool BudgetAccount::Charge(size_t bytes) {
  if (budget_ != nullptr && !budget_->TryCharge(bytes)) {
    refused_ = true;
    return false;
  }
  held_ += bytes;
  return true;
}

void BudgetAccount::Release(size_t bytes) {
  assert(bytes <= held_);
  held_ -= bytes;
  if (budget_ != nullptr) budget_->Release(bytes);
}

}  // namespace walwatch
