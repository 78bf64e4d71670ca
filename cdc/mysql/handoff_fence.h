// HandoffFence: the resourceVersions a handoff refuses after a failover to
// a server with another server_id (binlog_recovery.cc). The old server's
// files and offsets, placed in the new server's range, may come back as a
// list's position: an APIServer listed on the old server and asks for the
// RV through a connection that already reaches the new one, which gives
// the position the new server's history. Watches need no such fence: every
// RV a client holds of the old server lies in the old server's range,
// which the event log refuses as a whole (its floor and ceiling), so the
// new server's RVs serve watches at once.
//
// Thread safety: Set on the replication thread, Contains on any.
#ifndef WALWATCH_CDC_MYSQL_HANDOFF_FENCE_H_
#define WALWATCH_CDC_MYSQL_HANDOFF_FENCE_H_

#include <cstdint>

#include "cdc/base/mutex.h"

namespace walwatch::mysql {

class HandoffFence {
 public:
  // The fence is (lo, hi] from now on, replacing the last one; none if
  // hi <= lo.
  void Set(uint64_t lo, uint64_t hi) {
    MutexLock lock(&mu_);
    lo_ = lo;
    hi_ = hi;
  }
  bool Contains(uint64_t rv) const {
    MutexLock lock(&mu_);
    return rv > lo_ && rv <= hi_;
  }

 private:
  mutable Mutex mu_;
  uint64_t lo_ GUARDED_BY(mu_) = 0;
  uint64_t hi_ GUARDED_BY(mu_) = 0;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_HANDOFF_FENCE_H_
