// `make run DB=mariadb`'s writer under walwatch: tests/tools/demo_writer
// writes to MariaDB as Clusterpedia's collector does on MySQL (GORM's mysql
// dialect as prepared statements: INSERTs, six-key UPDATEs, JSON_SET event
// recording, re-creations with a new uid, a cluster's removal then its
// re-list, deletions) while three watchers, one per resource it writes,
// apply what walwatch streams. At the end each watcher holds exactly the
// rows of its resource: the same objects, uids and member RVs, nothing lost,
// doubled or left over.
#include <gtest/gtest.h>

#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/integration/support/mariadb_walwatch.h"

namespace walwatch::itest {
namespace {

constexpr char kSentinel[] = "zz-demo-sentinel";

// What one watcher holds, by (cluster, namespace, name).
struct Held {
  std::string uid, member_rv;
  nlohmann::json object;  // as stored: walwatch's RV and annotation undone
};
using Key = std::tuple<std::string, std::string, std::string>;
using State = std::map<Key, Held>;

// Applies a watch's events until the sentinel's ADDED; fails on an event
// that contradicts what the watcher holds (a doubled ADDED, a MODIFIED or
// DELETED of an absent object, a MODIFIED that changes the uid) or an RV
// that goes back.
::testing::AssertionResult Follow(WatchClient& watch, State* state,
                                  Clock::time_point deadline) {
  uint64_t last_rv = 0;
  for (size_t n = 0;; ++n) {
    WatchEvent e;
    auto r = watch.NextEvent(&e, deadline);
    if (!r) return r << " (after " << n << " events)";
    if (e.rv() < last_rv) {
      return ::testing::AssertionFailure()
             << "RV went back from " << last_rv << ": " << e.raw;
    }
    last_rv = e.rv();
    if (e.name() == kSentinel && e.type == "ADDED") {
      return ::testing::AssertionSuccess();
    }
    nlohmann::json object = e.object;
    auto& metadata = object["metadata"];
    auto& annotations = metadata["annotations"];
    Key key{annotations.value("shadow.clusterpedia.io/cluster-name", ""),
            e.ns(), e.name()};
    Held held{metadata.value("uid", ""), e.member_rv(), {}};
    metadata["resourceVersion"] = held.member_rv;
    annotations.erase(kMemberRvAnnotation);
    held.object = std::move(object);
    auto it = state->find(key);
    if (e.type == "ADDED") {
      if (it != state->end())
        return ::testing::AssertionFailure() << "ADDED twice: " << e.raw;
      state->emplace(key, std::move(held));
    } else if (e.type == "MODIFIED") {
      if (it == state->end() || it->second.uid != held.uid) {
        return ::testing::AssertionFailure()
               << "MODIFIED of an object not held: " << e.raw;
      }
      it->second = std::move(held);
    } else if (e.type == "DELETED") {
      if (it == state->end())
        return ::testing::AssertionFailure() << "DELETED, not held: " << e.raw;
      state->erase(it);
    } else {
      return ::testing::AssertionFailure() << "unexpected event: " << e.raw;
    }
  }
}

class MariaDbDemoWriterTest : public MariaDbWalwatchTest {
 protected:
  // The rows of one resource, as a watcher should hold them.
  State TableState(const std::string& group, const std::string& resource) {
    mysql::MysqlRows rows;
    std::string err = writer().conn().Query(
        "SELECT `cluster`, `namespace`, `name`, `uid`, `resource_version`, "
        "`object` FROM `resources` WHERE `group` = " +
            writer().conn().Quote(group) +
            " AND `resource` = " + writer().conn().Quote(resource) +
            " AND `name` <> '" + kSentinel + "'",
        &rows);
    EXPECT_EQ(err, "");
    State state;
    for (const auto& row : rows.rows) {
      Key key{*row[0], *row[1], *row[2]};
      state[key] = Held{*row[3], *row[4], nlohmann::json::parse(*row[5])};
    }
    return state;
  }
};

std::string Describe(const Key& key) {
  return std::get<0>(key) + "/" + std::get<1>(key) + "/" + std::get<2>(key);
}

// The first difference between what a watcher holds and the table.
std::string Difference(const State& watched, const State& table) {
  for (const auto& [key, row] : table) {
    auto it = watched.find(key);
    if (it == watched.end()) return "missing at the watcher: " + Describe(key);
    if (it->second.uid != row.uid || it->second.member_rv != row.member_rv ||
        it->second.object != row.object) {
      return Describe(key) + " differs: watcher uid " + it->second.uid +
             " rv " + it->second.member_rv + " " +
             it->second.object.dump().substr(0, 300) + "; table uid " +
             row.uid + " rv " + row.member_rv + " " +
             row.object.dump().substr(0, 300);
    }
  }
  for (const auto& [key, held] : watched) {
    if (table.count(key) == 0)
      return "left over at the watcher: " + Describe(key);
  }
  return "";
}

TEST_F(MariaDbDemoWriterTest, WatchersEndEqualToTheTableAfterDemoWrites) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  struct Watched {
    std::string path, group, resource;
    WatchClient watch;
    State state;
    ::testing::AssertionResult followed = ::testing::AssertionSuccess();
  };
  Watched watched[3];
  watched[0].path = "/api/v1/pods";
  watched[0].resource = "pods";
  watched[1].path = "/apis/apps/v1/deployments";
  watched[1].group = "apps";
  watched[1].resource = "deployments";
  watched[2].path = "/api/v1/configmaps";
  watched[2].resource = "configmaps";
  for (Watched& w : watched) ASSERT_TRUE(OpenWatch(w.watch, *ww, w.path));

  // Read while the writer writes, as a reflector does.
  const auto deadline = In(std::chrono::seconds(240));
  std::vector<std::thread> readers;
  for (Watched& w : watched) {
    readers.emplace_back(
        [&w, deadline] { w.followed = Follow(w.watch, &w.state, deadline); });
  }

  // The seed gives every kind of write, a cluster's removal included.
  ChildProcess::Options writer_options;
  writer_options.argv = {
      DEMO_WRITER_BINARY,
      "--mysql-conninfo",
      "socket=" + server().socket + " user=root database=" + database(),
      "--count",
      "400",
      "--rate",
      "0",
      "--clusters",
      "2",
      "--seed",
      "21"};
  writer_options.stderr_path = TempPath("demo_writer.log");
  ChildProcess writer_process(writer_options);
  // No ASSERT until the readers are joined: they end at the sentinels,
  // which are written whatever the writer did.
  auto exit = writer_process.WaitExit(std::chrono::seconds(180));
  EXPECT_TRUE(exit.has_value()) << "demo_writer did not finish";
  if (!exit) writer_process.Stop();
  EXPECT_TRUE(exit && exit->exited && exit->exit_code == 0)
      << (exit ? exit->Describe() : "") << "\n"
      << writer_process.StderrText();
  const std::string log = writer_process.StderrText();
  for (const char* shape : {"\nINSERT ", "\nUPDATE ", "\nEVENT ", "\nDELETE ",
                            "\nRECREATE ", "\nDELETE-CLUSTER "}) {
    EXPECT_NE(log.find(shape), std::string::npos)
        << "the writer made no " << shape + 1 << " write:\n"
        << log;
  }

  // One sentinel per resource, after every write: a watcher that has it has
  // everything before it.
  Resource pod = Pod("c1", "default", kSentinel);
  pod.uid = "uid-sentinel-pod";  // uid is varchar(36)
  Resource deployment = Deployment("c1", "default", kSentinel);
  deployment.uid = "uid-sentinel-deployment";
  Resource configmap = Pod("c1", "default", kSentinel);
  configmap.resource = "configmaps";
  configmap.kind = "ConfigMap";
  configmap.uid = "uid-sentinel-configmap";
  try {
    writer().Transaction({InsertSql(database(), pod),
                          InsertSql(database(), deployment),
                          InsertSql(database(), configmap)});
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();  // the readers end at their deadline
  }
  for (std::thread& t : readers) t.join();

  for (Watched& w : watched) {
    SCOPED_TRACE(w.path);
    ASSERT_TRUE(w.followed);
    State table = TableState(w.group, w.resource);
    EXPECT_FALSE(table.empty()) << "the writer left no " << w.resource;
    EXPECT_EQ(Difference(w.state, table), "");
  }
}

}  // namespace
}  // namespace walwatch::itest
