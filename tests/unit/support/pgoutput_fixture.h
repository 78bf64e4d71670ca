// What PgoutputDecoder's tests (tests/unit/pgoutput_*_test.cc) share: a
// table of the nine mapped columns and its rows, as pgoutput_builder.h's
// messages carry them, and the fixture that decodes them with the default
// mapping (pgoutput_fixture.cc).
//
// Thread safety: for one test's thread.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_PGOUTPUT_FIXTURE_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_PGOUTPUT_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cdc/postgres/pgoutput_decoder.h"
#include "schema/table_mapping.h"
#include "tests/unit/support/pgoutput_builder.h"

namespace walwatch::testing_pgoutput {

inline constexpr uint32_t kResourcesRel = 16385;
inline constexpr uint32_t kOtherRel = 16390;

// 2026-12-02 13:21:36 UTC, in µs since the Unix epoch.
inline constexpr int64_t kDayStartUs = 1796217696000000;

inline constexpr char kObject[] =
    R"({"kind": "Pod", "metadata": {"name": "p"}})";

// A table with the nine mapped columns (the default mapping's names), an
// unmapped key column first and an unmapped one among them.
std::vector<RelColumn> PodColumns();
Tuple PodRow(const std::string& name, const std::string& object = kObject);

// The key of REPLICA IDENTITY DEFAULT or USING INDEX: pgoutput sends the
// columns outside the key as nulls; they are absent, as wal2json leaves them
// out, and never null.
std::vector<RelColumn> KeyedByClusterAndUid();
Tuple KeyOnly(const std::string& name);

// Every field of `image` absent.
void ExpectNoColumns(const RowImage& image);

// A decoder of the default mapping, and the checks of one message.
class PgoutputDecoderTest : public ::testing::Test {
 protected:
  PgoutputDecoderTest();

  // The record of `message`, which must decode.
  LogicalRecord DecodeOk(const std::string& message, uint64_t wal_start = 0);
  // The error of `message`, which must be refused with one line.
  std::string DecodeError(const std::string& message, uint64_t wal_start = 0);
  // The Relation of public.resources, PodColumns().
  void AnnouncePods();

  TableMapping mapping_;
  PgoutputDecoder decoder_;
};

}  // namespace walwatch::testing_pgoutput

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_PGOUTPUT_FIXTURE_H_
