#include "cdc/postgres/slot_monitor.h"

#include <gtest/gtest.h>

namespace walwatch {
namespace {

// PostgreSQL's forms (syncrep_gram.y): a list, [FIRST] n (list), ANY n
// (list); '*' matches any walsender; names compare case-insensitively.
TEST(SynchronousStandbyNamesMatch, FindsWalwatchInEveryForm) {
  EXPECT_FALSE(SynchronousStandbyNamesMatch("", "walwatch"));
  EXPECT_FALSE(SynchronousStandbyNamesMatch("  ", "walwatch"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("*", "walwatch"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("\"*\"", "walwatch"));
  EXPECT_FALSE(SynchronousStandbyNamesMatch("s1, s2", "walwatch"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("s1, walwatch", "walwatch"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("s1,WalWatch", "walwatch"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("FIRST 1 (s1, *)", "walwatch"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("ANY 1 (*)", "walwatch-pod-0"));
  EXPECT_FALSE(SynchronousStandbyNamesMatch("ANY 2 (s1, s2)", "walwatch"));
  EXPECT_TRUE(
      SynchronousStandbyNamesMatch("2 (s1, walwatch-pod-0)", "walwatch-pod-0"));
  EXPECT_FALSE(
      SynchronousStandbyNamesMatch("2 (s1, walwatch-pod-0)", "walwatch-pod-1"));
  // Quoted names keep commas and spaces; "" is a quote.
  EXPECT_TRUE(SynchronousStandbyNamesMatch("\"walwatch-pod-0\"", "walwatch-pod-0"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("s1, \"a,b\"", "a,b"));
  EXPECT_FALSE(SynchronousStandbyNamesMatch("s1, \"a,b\"", "b"));
  EXPECT_TRUE(SynchronousStandbyNamesMatch("\"wal\"\"watch\"", "wal\"watch"));
  EXPECT_FALSE(SynchronousStandbyNamesMatch("walwatchx", "walwatch"));
}

}  // namespace
}  // namespace walwatch
