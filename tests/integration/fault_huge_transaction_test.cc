// One huge transaction (100k rows, ~325 MB of objects) on the watched table
// and on a filtered one: walwatch's memory stays bounded, nothing times out,
// and the watchers of what it changed get a 410 (watched) or everything
// (filtered). Heavy: tests/CMakeLists.txt runs these alone. The fixture and
// the shared script: support/fault_fixture.h.
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/fault_fixture.h"

namespace walwatch::itest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class HugeTransactionTest : public FaultTest,
                            public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override {
    rss_.Stop();
    FaultTest::TearDown();
  }

  RssSampler rss_;
};

TEST_P(HugeTransactionTest, BoundedMemoryNoTimeoutAnd410OrAll) {
  const bool watched = GetParam();
  // A short timeout, so that a walwatch that stops answering while a huge
  // transaction streams in (or while the walsender skips one) is caught.
  PgCluster::Options c;
  c.settings = {"wal_sender_timeout = 10s"};
  StartCluster(c);
  ASSERT_NO_FATAL_FAILURE(LaunchWalwatch(Scenario()
                                             .WithMetrics()
                                             .MaxLogBytes("64Mi")
                                             .FirstWrites(kWritesPerPhase / 3)));
  const pid_t pid = ww_->pid();
  uint64_t baseline_rss = ProcessRssBytes(pid);
  rss_.Start(pid);
  ASSERT_NO_FATAL_FAILURE(StartTraffic());

  // ~3 KB objects (spec.data: 94 md5s), as Clusterpedia stores them.
  const size_t rows = HugeTransactionRows();
  std::string object =
      "jsonb_build_object('apiVersion', 'v1', 'kind', 'Pod', 'metadata', "
      "jsonb_build_object('name', 'huge-' || g, 'namespace', 'huge', 'uid', "
      "'uid-huge-' || g, 'resourceVersion', '1', 'annotations', "
      "jsonb_build_object('shadow.clusterpedia.io/cluster-name', 'huge')), "
      "'spec', jsonb_build_object('seq', 0, 'data', "
      "repeat(md5(g::text), 94)))";
  std::string sql =
      watched
          ? "INSERT INTO resources (\"group\", version, resource, kind, "
            "cluster, namespace, name, uid, resource_version, object, "
            "created_at, synced_at) SELECT '', 'v1', 'pods', 'Pod', 'huge', "
            "'huge', 'huge-' || g, 'uid-huge-' || g, '1', " +
                object + ", now(), now() FROM generate_series(1, " +
                std::to_string(rows) + ") g"
          : "INSERT INTO other_table (payload) SELECT " + object +
                " FROM generate_series(1, " + std::to_string(rows) + ") g";
  auto t0 = Clock::now();
  {
    PgConnection huge(Conninfo());
    huge.Exec(sql);
  }
  auto inserted = Clock::now();
  uint64_t after = Marker();  // commits after the huge transaction
  size_t bytes = std::stoull(db().QueryValue(
      watched ? "SELECT sum(length(object::text)) FROM resources WHERE "
                "cluster = 'huge'"
              : "SELECT sum(length(payload::text)) FROM other_table"));
  ASSERT_TRUE(WaitForCurrentRv(after, seconds(150)));
  auto decoded = Clock::now();
  ASSERT_TRUE(MoreWrites(kWritesPerPhase / 3));
  rss_.Stop();
  uint64_t peak = ProcessPeakRssBytes(pid);
  std::cerr << "[fault] huge transaction on "
            << (watched ? "the watched table" : "a filtered table") << ": "
            << rows << " rows, " << bytes / 1000000 << " MB of objects; insert "
            << std::chrono::duration_cast<milliseconds>(inserted - t0).count()
            << " ms, decoded by walwatch after "
            << std::chrono::duration_cast<milliseconds>(decoded - inserted)
                   .count()
            << " ms more; walwatch RSS baseline " << baseline_rss / 1000000
            << " MB, max sampled " << rss_.max() / 1000000 << " MB, VmHWM "
            << peak / 1000000 << " MB\n";
  if (rows >= 100000) {
    EXPECT_GE(bytes, 300u * 1000 * 1000);
  }
  // The log holds 64 MiB; one transaction may hold half of it while it is
  // assembled; plus the process's own few tens of MB. 400 MB is well below
  // the 300+ MB a transaction held whole would need on top of that.
  EXPECT_LT(peak, 400u * 1000 * 1000);
  EXPECT_EQ(cluster_->LogText().find(
                "terminating walsender process due to replication timeout"),
            std::string::npos);
  EXPECT_TRUE(ww_->Running());

  if (watched) {
    // Larger than half of --max-log-bytes: a loss of pods in cluster huge.
    // The watches of pods in every cluster (a namespace does not narrow a
    // floor) get 410; those of cluster c1's pods, and of deployments, go on
    // and stay exact.
    std::vector<FaultWatcher*> touched, untouched;
    for (auto* w : watchers()) {
      const bool pods_everywhere =
          w->filter().kind == "Pod" && w->filter().cluster.empty();
      (pods_everywhere ? touched : untouched).push_back(w);
    }
    ASSERT_FALSE(touched.empty());
    ASSERT_FALSE(untouched.empty());
    ExpectAllExpired(touched);
    for (auto* w : untouched) {
      EXPECT_FALSE(w->expired()) << w->filter().path << " was ended";
    }
    EXPECT_GE(Metric("walwatch_barriers_total").value_or(0), 1.0);
    EXPECT_EQ(LogLines(*ww_, "a transaction is larger than --max-log-bytes "
                             "allows; the watches of the resources it "
                             "changed must relist")
                      .size() +
                  LogLines(*ww_, "a transaction's events are larger than "
                                 "--max-log-bytes; the watches of the "
                                 "resources it changed must relist")
                      .size(),
              1u);
    if (HasFailure()) return;
    RelistAndCheckExact(untouched);
  } else {
    StopWriterAndCheckExact(watchers());
    EXPECT_EQ(Metric("walwatch_barriers_total").value_or(-1), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, HugeTransactionTest, ::testing::Bool(),
                         [](const auto& info) {
                           return std::string(info.param ? "Watched"
                                                         : "Filtered");
                         });

}  // namespace
}  // namespace walwatch::itest
