// Mutex, MutexLock and CondVar: std::mutex, std::lock_guard and
// std::condition_variable with clang's capability attributes
// (cdc/base/thread_annotations.h), so that the clang build checks every
// GUARDED_BY field. They cost nothing over the std types they wrap.
//
//   Mutex mu_;
//   int n_ GUARDED_BY(mu_);
//   void Add() EXCLUDES(mu_) { MutexLock lock(&mu_); ++n_; }
//
// CondVar waits on a MutexLock's mutex, which the caller holds:
//   MutexLock lock(&mu_);
//   while (!ready_) cv_.Wait(&lock);
//
// Thread safety: as the std types.
#ifndef WALWATCH_CDC_BASE_MUTEX_H_
#define WALWATCH_CDC_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "cdc/base/thread_annotations.h"

namespace walwatch {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // For a function that the analysis cannot follow (a callback run under a
  // lock taken elsewhere): states that the caller holds it.
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope. Unlock()/Lock() let a scope drop it for a
// while (to run callbacks outside it) and take it back.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  friend class CondVar;
  Mutex* const mu_;
  bool held_ = true;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases the lock's mutex while it waits, and holds it again on return
  // (also on a spurious wake-up: wait in a loop on the condition).
  void Wait(MutexLock* lock) {
    std::unique_lock<std::mutex> u(lock->mu_->mu_, std::adopt_lock);
    cv_.wait(u);
    u.release();
  }
  // As Wait, until `deadline`; false if it passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(MutexLock* lock,
                 const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock<std::mutex> u(lock->mu_->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(u, deadline) == std::cv_status::no_timeout;
    u.release();
    return woken;
  }
  template <typename Rep, typename Period>
  bool WaitFor(MutexLock* lock, const std::chrono::duration<Rep, Period>& d) {
    return WaitUntil(lock, std::chrono::steady_clock::now() + d);
  }
  // As the std predicate overloads: wait while !pred(), which runs with the
  // mutex held. The analysis does not follow into `pred`: mark a lambda
  // that reads guarded state REQUIRES(mu) itself.
  template <typename Pred>
  void Wait(MutexLock* lock, Pred pred) NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) Wait(lock);
  }
  // Returns pred() as it stood at the end: false if the deadline passed
  // first.
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(MutexLock* lock,
                 const std::chrono::time_point<Clock, Duration>& deadline,
                 Pred pred) NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) {
      if (!WaitUntil(lock, deadline)) return pred();
    }
    return true;
  }
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(MutexLock* lock, const std::chrono::duration<Rep, Period>& d,
               Pred pred) {
    return WaitUntil(lock, std::chrono::steady_clock::now() + d,
                     std::move(pred));
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_BASE_MUTEX_H_
