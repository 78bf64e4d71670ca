// The consumer's test on MariaDB (support/reflector_run.h says what is
// checked and its WALWATCH_REFLECTOR_* knobs; reflector_test.cc runs it on
// PostgreSQL): client-go reflector-style clients (list, watch with
// bookmarks and timeoutSeconds, resume from the last RV, relist on 410)
// read `walwatch --source mysql` over a mixed table whose hot resource
// overruns a small --max-log-bytes; every client's state must equal SQL.
//
// Some 410s are forced: four laggard clients of the hot resource resume
// only after the hot writer has written 2 MiB past their RV (a condition,
// not a time), so the 1 MiB log has evicted what they had not read.
//
// Every 410 Expired is witnessed by the binlog: a BinlogWitness (a replica
// connection of the test's own, through walwatch's BinlogReader) keeps the
// commit position of each transaction that gave an event, and a 410 that
// names RV R and floor F is right only if an event of the client's
// selection committed in (R, F]. BinlogWitnessTest shows the witness tells
// an event from a write that gives none.
//
// Sized for make test on a loaded 2-core machine: 20 s of writing unless
// WALWATCH_REFLECTOR_SECONDS says otherwise.
#include <gtest/gtest.h>

#include <iostream>
#include <limits>
#include <memory>

#include "tests/integration/support/mariadb_model_database.h"
#include "tests/integration/support/reflector_run.h"

namespace walwatch::itest {
namespace {

class MariaDbReflectorTest : public MariaDbModelDatabaseTest {};

TEST_F(MariaDbReflectorTest, ReflectorsAgreeWithSqlUnderAHotResource) {
  ReflectorConfig defaults;
  defaults.seconds = 20;
  defaults.laggards = 4;
  const ReflectorConfig config = ReflectorConfig::FromEnvironment(defaults);
  ReflectorOutcome outcome = RunReflectors(*this, config);
  std::cout << "[REFLECTOR] 410 Expired: " << outcome.expired << " ("
            << outcome.laggard_expired << " to the laggards), "
            << outcome.witnessed
            << " witnessed by the binlog; other 410s: " << outcome.other_410
            << std::endl;
  // The laggards fell behind the log: their resumes were refused, each
  // refusal witnessed by the binlog (RunReflectors checks every one), and
  // their relists ended equal to SQL like everyone's.
  if (config.laggards > 0) {
    EXPECT_GT(outcome.laggard_expired, 0)
        << "no laggard's resume was refused, though the hot writer wrote "
        << config.lag_bytes << " bytes past its RV into a log of "
        << config.max_log;
  }
  EXPECT_EQ(outcome.witnessed, outcome.expired);
}

// The witness the 410s are checked against answers no as well as yes: an
// INSERT and an UPDATE of the object are events, an event recording and
// another cluster's rows are not.
class BinlogWitnessTest : public MariaDbModelDatabaseTest {};

TEST_F(BinlogWitnessTest, ItTellsEventsFromWritesThatGiveNone) {
  std::unique_ptr<EventWitness> witness = StartEventWitness();
  Resource pod = Pod("c1", "default", "w");
  const uint64_t inserted = writer().Insert(pod);
  const uint64_t recorded = writer().RecordKubeEvent(pod, "Scheduled");
  pod.spec["nodeName"] = "node-2";
  const uint64_t updated = writer().Update(pod);
  const uint64_t other = writer().Insert(Pod("c2", "default", "x"));
  witness->CatchUp();
  ASSERT_LT(inserted, recorded);
  ASSERT_LT(recorded, updated);
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

  EXPECT_TRUE(witness->Witnessed("pods", "c1", inserted - 1, inserted));
  EXPECT_TRUE(witness->Witnessed("pods", "", inserted - 1, inserted));
  EXPECT_TRUE(witness->Witnessed("pods", "c1", recorded, updated));
  EXPECT_TRUE(witness->Witnessed("pods", "c2", updated, other));
  // The event recording between them gives no event.
  EXPECT_FALSE(witness->Witnessed("pods", "c1", inserted, updated - 1));
  // Nothing after the update in c1; nothing of another resource.
  EXPECT_FALSE(witness->Witnessed("pods", "c1", updated, kMax));
  EXPECT_FALSE(witness->Witnessed("deployments", "", 0, kMax));
  EXPECT_EQ(witness->transactions(), 3u);
}

}  // namespace
}  // namespace walwatch::itest
