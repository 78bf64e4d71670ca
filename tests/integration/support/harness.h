// The PostgreSQL integration tests' common ground: Clusterpedia-shaped rows
// (watch_rows.h) written the way Clusterpedia's internalstorage writes them
// (one autocommit statement each, GORM's SQL), and WalwatchTest, a fixture
// that runs walwatch on the test's own database, slot and socket.
//
// Header-only so that it needs no build change; every write returns the
// writing transaction's xid so that CommitObserver can give its commit LSN.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_HARNESS_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_HARNESS_H_

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/support/pg.h"
#include "tests/integration/support/walwatch_process.h"
#include "tests/integration/support/watch_client.h"
#include "tests/integration/support/watch_rows.h"

namespace walwatch::itest {

// Whether an executable `name` is on PATH (as execvp would find it).
inline bool OnPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// The one line a test that runs kubectl skips with where there is none
// (tests/tools/install-deps.sh installs Debian's kubernetes-client; a
// ctest run on a machine without it still passes):
//   if (!OnPath("kubectl")) GTEST_SKIP() << kNoKubectl;
inline constexpr const char* kNoKubectl =
    "kubectl is not on PATH: this test runs it (tests/tools/install-deps.sh "
    "installs Debian's kubernetes-client)";

// GORM's INSERT for an ADDED object, whose object column is `object_json`
// (any JSON text: a test may store what Clusterpedia never would).
inline uint64_t InsertRow(PgConnection& conn, const Resource& r,
                          const std::string& object_json) {
  return std::stoull(conn.QueryValue(
      "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
      "namespace, name, owner_uid, uid, resource_version, object, created_at, "
      "synced_at) VALUES ($1, $2, $3, $4, $5, $6, $7, '', $8, $9, $10::jsonb, "
      "now(), now()) RETURNING pg_current_xact_id()::text",
      {r.group, r.version, r.resource, r.kind, r.cluster, r.ns, r.name, r.uid,
       r.member_rv, object_json}));
}
// The same, with the object as Clusterpedia stores it.
inline uint64_t InsertRow(PgConnection& conn, const Resource& r) {
  return InsertRow(conn, r, r.Object().dump());
}

// Enough pods (`rows` of ~2 KB each, namespace "bulk" of cluster c1) that an
// initial state nobody reads fills the socket and the stream's queue, so
// that its reader blocks. One statement.
inline void InsertBulkPods(PgConnection& conn, int rows) {
  conn.Exec(
      "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
      "namespace, name, owner_uid, uid, resource_version, object, "
      "created_at, synced_at) SELECT '', 'v1', 'pods', 'Pod', 'c1', 'bulk', "
      "'bulk-' || g, '', 'uid-bulk-' || g, '1', jsonb_build_object("
      "'apiVersion', 'v1', 'kind', 'Pod', 'metadata', jsonb_build_object("
      "'name', 'bulk-' || g, 'namespace', 'bulk', 'uid', 'uid-bulk-' || g), "
      "'spec', jsonb_build_object('data', repeat(md5(g::text), 64))), now(), "
      "now() FROM generate_series(1, " +
      std::to_string(rows) + ") g");
}

// GORM's UPDATE for a MODIFIED object (also used for a new uid), whose
// object column becomes `object_json`.
inline uint64_t UpdateRow(PgConnection& conn, const Resource& r,
                          const std::string& object_json) {
  auto rows = conn.Query(
      "UPDATE resources SET created_at = now(), object = $1::jsonb, "
      "owner_uid = '', resource_version = $2, uid = $3, synced_at = now() "
      "WHERE cluster = $4 AND \"group\" = $5 AND version = $6 AND "
      "resource = $7 AND namespace = $8 AND name = $9 "
      "RETURNING pg_current_xact_id()::text",
      {object_json, r.member_rv, r.uid, r.cluster, r.group, r.version,
       r.resource, r.ns, r.name});
  if (rows.size() != 1) throw PgError("UpdateRow: no row " + r.name);
  return std::stoull(*rows[0][0]);
}
// The same, with the object as Clusterpedia stores it.
inline uint64_t UpdateRow(PgConnection& conn, const Resource& r) {
  return UpdateRow(conn, r, r.Object().dump());
}

// GORM's DELETE for a DELETED object.
inline uint64_t DeleteRow(PgConnection& conn, const Resource& r) {
  auto rows = conn.Query(
      "DELETE FROM resources WHERE cluster = $1 AND \"group\" = $2 AND "
      "version = $3 AND resource = $4 AND namespace = $5 AND name = $6 "
      "RETURNING pg_current_xact_id()::text",
      {r.cluster, r.group, r.version, r.resource, r.ns, r.name});
  if (rows.size() != 1) throw PgError("DeleteRow: no row " + r.name);
  return std::stoull(*rows[0][0]);
}

// Clusterpedia's event recording: events columns only, object untouched.
inline uint64_t RecordKubeEvent(PgConnection& conn, const Resource& r,
                                const std::string& reason) {
  auto rows = conn.Query(
      "UPDATE resources SET "
      "events = JSONB_SET(COALESCE(events, '{}'::jsonb), ARRAY[$1], "
      "  jsonb_build_object('reason', $1::text, 'count', 1)), "
      "event_resource_versions = JSONB_SET(COALESCE(event_resource_versions, "
      "  '{}'::jsonb), ARRAY[$1], to_jsonb('7'::text)) "
      "WHERE cluster = $2 AND uid = $3 RETURNING pg_current_xact_id()::text",
      {reason, r.cluster, r.uid});
  if (rows.size() != 1) throw PgError("RecordKubeEvent: no row " + r.name);
  return std::stoull(*rows[0][0]);
}

inline uint64_t CurrentXid(PgConnection& conn) {
  return std::stoull(conn.QueryValue("SELECT pg_current_xact_id()::text"));
}

// Checks the RV rule for the `n` events `events[first..first+n)` of
// transaction `xid` (watchserver/PROTOCOL.md, "resourceVersion"): the last event
// carries the transaction's commit LSN c; the others c - 1. The latter is
// checked in two steps: first what resuming needs (previous commit <= rv <
// commit, so a resume from it gets the transaction again whole), then the
// documented exact value.
inline void ExpectTransactionRvs(CommitObserver& observer, uint64_t xid,
                          const std::vector<WatchEvent>& events, size_t first,
                          size_t n) {
  uint64_t commit = observer.CommitLsn(xid);
  uint64_t previous = observer.PreviousCommitLsn(xid);
  std::string txn = "transaction " + std::to_string(xid) + " (" +
                    std::to_string(n) + " events), commit " +
                    FormatLsn(commit) + " = " + std::to_string(commit) +
                    ", previous commit " + FormatLsn(previous) + " = " +
                    std::to_string(previous);
  ASSERT_GE(events.size(), first + n);
  EXPECT_EQ(events[first + n - 1].rv(), commit)
      << "last event of " << txn << ": " << events[first + n - 1].name();
  size_t out_of_range = 0, not_previous = 0;
  std::string first_bad;
  for (size_t i = first; i + 1 < first + n; ++i) {
    uint64_t rv = events[i].rv();
    if (rv < previous || rv >= commit) {
      if (out_of_range++ == 0) {
        first_bad = events[i].name() + " rv " + std::to_string(rv);
      }
    }
    if (rv != commit - 1) ++not_previous;
  }
  EXPECT_EQ(out_of_range, 0u)
      << "events before the last of " << txn
      << " must carry an RV in [previous commit, commit); first bad: "
      << first_bad;
  // They all carry commit - 1, a position no other commit can hold.
  EXPECT_EQ(not_previous, 0u)
      << not_previous << " event(s) before the last of " << txn
      << " carry an RV other than commit - 1 (" << events[first].name()
      << " rv " << events[first].rv() << ")";
}

// Fixture: a database (PgDatabaseTest) plus walwatch processes on it, each
// with its own slot and socket in the test's temporary directory.
class WalwatchTest : public PgDatabaseTest {
 protected:
  void SetUp() override {
    PgDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    char tmpl[] = "/tmp/walwatch-it.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmpdir_ = tmpl;
    AddCleanup([dir = tmpdir_] {
      std::error_code ec;
      // Kept after a failure, or with WALWATCH_TEST_KEEP_LOGS=1.
      const char* keep = std::getenv("WALWATCH_TEST_KEEP_LOGS");
      if (::testing::Test::HasFailure() || (keep && *keep == '1')) {
        std::cerr << "walwatch test files kept in " << dir << "\n";
        return;
      }
      std::filesystem::remove_all(dir, ec);
    });
  }

  std::string TempPath(const std::string& name) const {
    return tmpdir_ + "/" + name;
  }

  // Writes a kubeconfig for kubectl to reach walwatch's --tcp-listen on
  // 127.0.0.1:port, without credentials; returns its path.
  std::string WriteKubeconfig(int port) const {
    std::string path = TempPath("kubeconfig");
    std::ofstream out(path);
    out << "apiVersion: v1\nkind: Config\nclusters:\n- name: walwatch\n"
           "  cluster:\n    server: http://127.0.0.1:" << port << "\n"
           "contexts:\n- name: walwatch\n  context:\n    cluster: walwatch\n"
           "    user: walwatch\ncurrent-context: walwatch\nusers:\n"
           "- name: walwatch\n  user: {}\n";
    return path;
  }

  // Options for a walwatch on this test's database (slot and socket unique
  // per call).
  WalwatchOptions DefaultOptions() {
    int n = static_cast<int>(walwatches_.size());
    WalwatchOptions o;
    o.conninfo = Conninfo();
    o.slot = UniqueName("ww" + std::to_string(n));
    o.socket_path = TempPath("walwatch" + std::to_string(n) + ".sock");
    return o;
  }

  // Starts walwatch; it is stopped before the database is dropped.
  WalwatchProcess& Launch(WalwatchOptions options) {
    std::string log = options.socket_path + ".stderr";
    walwatches_.push_back(
        std::make_unique<WalwatchProcess>(std::move(options), log));
    WalwatchProcess* p = walwatches_.back().get();
    AddCleanup([p] { p->Stop(); });
    return *p;
  }

  // Seeds the catalog (a pod and a deployment in cluster "seed"), creates
  // the commit observer, starts walwatch and waits until it is ready.
  WalwatchProcess* StartWalwatch(WalwatchOptions options) {
    if (!seeded_) {
      InsertRow(db(), Pod("seed", "seed", "seed-pod"));
      InsertRow(db(), Deployment("seed", "seed", "seed-deploy"));
      seeded_ = true;
    }
    if (!observer_) {
      observer_ = std::make_unique<CommitObserver>(&db(), UniqueName("obs"));
    }
    WalwatchProcess& p = Launch(std::move(options));
    auto ready = p.WaitReady();
    if (!ready) {
      ADD_FAILURE() << ready.message();
      return nullptr;
    }
    // A transaction on another table that both slots decode, so that the
    // test's first transaction has a previous commit walwatch has seen too.
    db().Exec("CREATE TABLE IF NOT EXISTS walwatch_it_warmup (x int)");
    db().Exec("INSERT INTO walwatch_it_warmup VALUES (1)");
    return &p;
  }
  WalwatchProcess* StartWalwatch() { return StartWalwatch(DefaultOptions()); }

  CommitObserver& observer() { return *observer_; }

  // GET /walwatch/v1/freshrv: an RV at least as new as the database now.
  // 0 (and a test failure) if walwatch does not answer.
  uint64_t FreshRv(const WalwatchProcess& walwatch) {
    return FetchFreshRv(walwatch.socket_path());
  }

  // Opens a watch and checks the streaming response header. Without `rv`
  // the watch starts from now (a fresh RV), not from the initial state that
  // an unset resourceVersion asks for (watch_semantics_test covers that).
  ::testing::AssertionResult OpenWatch(WatchClient& watch,
                                       const WalwatchProcess& walwatch,
                                       const std::string& path,
                                       std::optional<uint64_t> rv = {}) {
    return OpenWatchOn(watch, walwatch.socket_path(), path, rv);
  }

 private:
  std::string tmpdir_;
  std::vector<std::unique_ptr<WalwatchProcess>> walwatches_;
  std::unique_ptr<CommitObserver> observer_;
  bool seeded_ = false;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_HARNESS_H_
