// Counts the heap allocations of a test binary, to prove that a hot path
// allocates nothing. counting_new.cc replaces the global operator new and
// delete of the whole binary that links it; while g_count_allocations is
// true every operator new adds one to g_allocations.
//
//   g_allocations = 0;
//   g_count_allocations = true;
//   ... the code under test ...
//   g_count_allocations = false;
//   EXPECT_EQ(g_allocations.load(), 0);
//
// Link it into a binary of its own: it counts for every test in it.
// Thread safety: the counters are atomics; any thread may allocate.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_COUNTING_NEW_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_COUNTING_NEW_H_

#include <atomic>

extern std::atomic<bool> g_count_allocations;
extern std::atomic<int> g_allocations;

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_COUNTING_NEW_H_
