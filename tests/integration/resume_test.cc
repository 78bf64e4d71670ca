// Resuming a watch from a resourceVersion: exactly the rest, a cut
// multi-row transaction again whole, 410 Expired for what the log no longer
// holds, and no duplicates when walwatch's walsender is killed and the
// server re-sends what walwatch had already received.
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {

class ResumeTest : public WalwatchTest {
 protected:
  // The raw lines of `events`.
  static std::vector<std::string> Raw(const std::vector<WatchEvent>& events,
                                      size_t from = 0) {
    std::vector<std::string> raw;
    for (size_t i = from; i < events.size(); ++i) raw.push_back(events[i].raw);
    return raw;
  }

  // Waits until the database has a walsender other than `old_pid` (0: any);
  // returns its pid, or 0 on timeout.
  int WaitForWalsender(int old_pid, std::chrono::seconds timeout) {
    auto deadline = In(timeout);
    while (Clock::now() < deadline) {
      auto rows = admin().Query(
          "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender' "
          "AND datname = $1 AND state IS DISTINCT FROM 'disabled'",
          {dbname()});
      for (const auto& row : rows) {
        int pid = std::stoi(*row[0]);
        if (pid != old_pid) return pid;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }
};

TEST_F(ResumeTest, FromAnyEventGivesExactlyTheRest) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient live;
  ASSERT_TRUE(OpenWatch(live, *ww, "/api/v1/pods"));

  // Ten single-row transactions of every kind.
  std::vector<Resource> pods;
  for (int i = 0; i < 4; ++i) {
    pods.push_back(Pod("c1", "default", "p" + std::to_string(i)));
    InsertRow(db(), pods.back());
  }
  for (int i = 0; i < 4; ++i) {
    pods[i].member_rv = "200";
    UpdateRow(db(), pods[i]);
  }
  DeleteRow(db(), pods[0]);
  DeleteRow(db(), pods[1]);
  std::vector<WatchEvent> all;
  ASSERT_TRUE(ReadEvents(live, 10, &all, In(kEventWait)));

  std::vector<size_t> cuts = {0, 3, 4, 8, 9};
  std::vector<std::unique_ptr<WatchClient>> resumed;
  for (size_t k : cuts) {
    resumed.push_back(std::make_unique<WatchClient>());
    ASSERT_TRUE(OpenWatch(*resumed.back(), *ww, "/api/v1/pods", all[k].rv()));
  }
  InsertRow(db(), Pod("c1", "default", "marker"));
  for (size_t i = 0; i < cuts.size(); ++i) {
    SCOPED_TRACE("resumed from event " + std::to_string(cuts[i]) + " rv " +
                 std::to_string(all[cuts[i]].rv()));
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadUntilName(*resumed[i], "marker", &got, In(kEventWait)))
        << Describe(got);
    got.pop_back();
    // Byte for byte the same lines as the live watch received.
    EXPECT_EQ(Raw(got), Raw(all, cuts[i] + 1)) << "got:\n" << Describe(got)
                                               << "want after:\n"
                                               << Describe(all);
  }
}

TEST_F(ResumeTest, FromInsideMultiRowTransactionResendsItWhole) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient live;
  ASSERT_TRUE(OpenWatch(live, *ww, "/api/v1/pods"));

  InsertRow(db(), Pod("c1", "default", "t0"));
  db().Exec("BEGIN");
  for (int i = 1; i <= 4; ++i) {
    InsertRow(db(), Pod("c1", "default", "t1-" + std::to_string(i)));
  }
  uint64_t x = CurrentXid(db());
  db().Exec("COMMIT");
  InsertRow(db(), Pod("c1", "default", "t2"));
  std::vector<WatchEvent> all;
  ASSERT_TRUE(ReadEvents(live, 6, &all, In(kEventWait)));
  ASSERT_EQ(all[4].rv(), observer().CommitLsn(x)) << Describe(all);
  ASSERT_LT(all[2].rv(), all[4].rv()) << Describe(all);

  // A client that saw t1-1 and t1-2 (rv = t0's commit) gets t1-* again.
  struct Cut {
    size_t from;        // resume from this event's RV
    size_t want_first;  // expect events from here on
  };
  for (Cut cut : {Cut{2, 1}, Cut{1, 1}, Cut{3, 1}, Cut{4, 5}}) {
    SCOPED_TRACE("resume from event " + std::to_string(cut.from));
    WatchClient w;
    ASSERT_TRUE(OpenWatch(w, *ww, "/api/v1/pods", all[cut.from].rv()));
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadEvents(w, all.size() - cut.want_first, &got, In(kEventWait)))
        << Describe(got);
    EXPECT_EQ(Raw(got), Raw(all, cut.want_first)) << Describe(got);
  }
}

TEST_F(ResumeTest, TooOldResourceVersionGetsExpiredThenEnd) {
  auto options = DefaultOptions();
  options.max_log_bytes = "1Mi";
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);

  uint64_t x_first = InsertRow(db(), Pod("c1", "default", "first"));
  // ~2.4 MB of events in 100 transactions: the first ones are evicted.
  Resource big = Pod("c1", "default", "");
  big.spec["blob"] = std::string(24000, 'x');
  for (int i = 0; i < 100; ++i) {
    big.name = "big-" + std::to_string(i);
    InsertRow(db(), big);
  }
  uint64_t c_first = observer().CommitLsn(x_first);

  // Wait until walwatch has everything: a fresh watch sees a later marker.
  {
    WatchClient now;
    ASSERT_TRUE(OpenWatch(now, *ww, "/api/v1/pods"));
    InsertRow(db(), Pod("c1", "default", "marker"));
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadUntilName(now, "marker", &got, In(kEventWait)));
  }

  WatchClient old;
  ASSERT_TRUE(OpenWatch(old, *ww, "/api/v1/pods", c_first));
  WatchEvent e;
  ASSERT_TRUE(old.NextEvent(&e, In(kEventWait)));
  EXPECT_EQ(e.type, "ERROR") << e.raw.substr(0, 300);
  EXPECT_EQ(e.object.value("kind", ""), "Status") << e.raw;
  EXPECT_EQ(e.object.value("apiVersion", ""), "v1") << e.raw;
  EXPECT_EQ(e.object.value("status", ""), "Failure") << e.raw;
  EXPECT_EQ(e.object.value("reason", ""), "Expired") << e.raw;
  EXPECT_EQ(e.object.value("code", 0), 410) << e.raw;
  EXPECT_EQ(e.object.value("message", "").rfind("too old resource version", 0),
            0u)
      << e.raw;
  EXPECT_TRUE(old.ExpectEnd(In(kEventWait)));
}

TEST_F(ResumeTest, WalsenderTerminationNeitherDuplicatesNorLoses) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  WatchClient live;
  ASSERT_TRUE(OpenWatch(live, *ww, "/api/v1/pods"));
  int walsender = WaitForWalsender(0, std::chrono::seconds(10));
  ASSERT_NE(walsender, 0) << "walwatch has no walsender on " << dbname();

  std::vector<std::string> written;
  uint64_t first_xid = 0;
  auto write = [&](int n) {
    for (int i = 0; i < n; ++i) {
      std::string name = "r" + std::to_string(written.size());
      uint64_t xid = InsertRow(db(), Pod("c1", "default", name));
      if (written.empty()) first_xid = xid;
      written.push_back(name);
    }
  };
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    write(10);
    ASSERT_EQ(admin().QueryValue("SELECT pg_terminate_backend($1::int)::text",
                                 {std::to_string(walsender)}),
              "true");
    // The slot still holds walwatch's replay window (DESIGN.md: flush is
    // the oldest transaction in the window), so the server re-sends r0...
    // on reconnect: the duplicates walwatch must drop.
    uint64_t confirmed = ParseLsn(admin().QueryValue(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = $1",
        {ww->options().slot}));
    EXPECT_LE(confirmed, observer().CommitLsn(first_xid))
        << "the slot's confirmed_flush_lsn passed the first row's commit; "
           "nothing will be re-sent, so this test checks less";
    write(10);  // while walwatch reconnects
    int next = WaitForWalsender(walsender, std::chrono::seconds(30));
    ASSERT_NE(next, 0) << "walwatch did not reconnect";
    walsender = next;
    write(5);
  }
  InsertRow(db(), Pod("c1", "default", "marker"));
  written.push_back("marker");

  std::vector<WatchEvent> got;
  ASSERT_TRUE(ReadUntilName(live, "marker", &got, In(std::chrono::seconds(40))))
      << Describe(got);
  std::vector<std::string> names;
  for (const auto& e : got) names.push_back(e.name());
  EXPECT_EQ(names, written) << "each row exactly once, in order";

  // The log holds no duplicate either: a resume from the first event
  // replays exactly the rest.
  WatchClient resumed;
  ASSERT_TRUE(OpenWatch(resumed, *ww, "/api/v1/pods", got[0].rv()));
  std::vector<WatchEvent> again;
  ASSERT_TRUE(ReadUntilName(resumed, "marker", &again, In(kEventWait)))
      << Describe(again);
  std::vector<std::string> want(written.begin() + 1, written.end());
  std::vector<std::string> again_names;
  for (const auto& e : again) again_names.push_back(e.name());
  EXPECT_EQ(again_names, want);
  EXPECT_EQ(Raw(again), Raw(got, 1));
}

}  // namespace
}  // namespace walwatch::itest
