// The allocation counter the MatchesDoesNotAllocate tests rely on: were the
// replacement operator new not linked in, they would pass whatever Matches()
// did.
#include "tests/unit/support/counting_new.h"

#include <gtest/gtest.h>

#include <memory>

namespace {

TEST(CountingNew, CountsOnlyWhileArmed) {
  g_allocations = 0;
  auto before = std::make_unique<int>(1);
  EXPECT_EQ(g_allocations.load(), 0);
  g_count_allocations = true;
  auto counted = std::make_unique<int>(2);
  auto also_counted = std::make_unique<long>(3);
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 2);
}

}  // namespace
