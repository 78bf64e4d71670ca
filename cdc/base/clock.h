// The two clocks walwatch reads, named once for every folder.
//
//  * Clock (std::chrono::steady_clock) measures intervals and deadlines:
//    timeouts, holds, backoff, status-update timers. It never jumps.
//  * NowUnixMicros() is wall time in microseconds since the Unix epoch: what
//    is compared with commit timestamps (wal2json's, PostgreSQL's) and sent
//    to the server in status updates. It may jump with the system clock.
//
// Header-only. Thread safety: both read the system's clocks; any thread.
#ifndef WALWATCH_CDC_BASE_CLOCK_H_
#define WALWATCH_CDC_BASE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace walwatch {

using Clock = std::chrono::steady_clock;

inline int64_t NowUnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace walwatch

#endif  // WALWATCH_CDC_BASE_CLOCK_H_
