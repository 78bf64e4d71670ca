// What the server's sendfile(2) calls did, in the HTTP server's unit test
// binary. sendfile_counter.cc defines sendfile there, in place of libc's
// (the server is linked in statically): it makes the same system call and
// counts. The WireArena tests prove with it that the arena's bytes went out
// through sendfile, not through the copying fallback, which would serve the
// same streams.
//
// Thread safety: the counters are atomics; any thread.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_SENDFILE_COUNTER_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_SENDFILE_COUNTER_H_

#include <atomic>
#include <cstdint>

namespace walwatch::server_test {

struct SendfileCounts {
  std::atomic<uint64_t> bytes{0};         // sent
  std::atomic<uint64_t> calls{0};         // that sent something
  std::atomic<uint64_t> short_writes{0};  // calls that sent part of a piece
  std::atomic<uint64_t> would_block{0};   // calls refused with EAGAIN
  std::atomic<uint64_t> broken_pipe{0};   // calls failed with EPIPE
};
extern SendfileCounts sendfile_counts;

}  // namespace walwatch::server_test

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_SENDFILE_COUNTER_H_
