// Real clients read walwatch's watch streams: curl over the Unix socket, and
// kubectl over loopback TCP (walwatch's --tcp-listen, or socat in front of
// the socket). Each receives the same bytes as the test's own client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"

namespace walwatch::itest {
namespace {


bool CanConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

::testing::AssertionResult WaitForPort(int port, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    if (CanConnect(port)) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ::testing::AssertionFailure()
         << "nothing listens on 127.0.0.1:" << port;
}

class ClientsTest : public WalwatchTest {
 protected:
  // Writes `names` as pods after a first row `before`, and returns, through
  // the test's own client, the lines it received for them; *start_rv is the
  // commit of `before`, which walwatch has processed when this returns.
  void WriteBefore(const WalwatchProcess& ww, uint64_t* start_rv) {
    ASSERT_TRUE(OpenWatch(reference_, ww, "/api/v1/pods"));
    InsertRow(db(), Pod("c1", "default", "before"));
    WatchEvent e;
    ASSERT_TRUE(reference_.NextEvent(&e, In(kEventWait)));
    ASSERT_EQ(e.name(), "before");
    *start_rv = e.rv();
  }
  void WriteRows(std::vector<std::string>* reference_lines) {
    for (std::string name : {"p1", "p2", "p3"}) {
      InsertRow(db(), Pod("c1", "default", name));
    }
    std::vector<WatchEvent> got;
    ASSERT_TRUE(ReadEvents(reference_, 3, &got, In(kEventWait)));
    for (const auto& e : got) reference_lines->push_back(e.raw);
  }
  // Reads `n` lines of the client's stdout and compares them to `want`.
  void ExpectLines(ChildProcess& client, const std::vector<std::string>& want) {
    auto deadline = In(kEventWait);
    for (size_t i = 0; i < want.size(); ++i) {
      auto line = client.ReadStdoutLine(deadline);
      ASSERT_TRUE(line.has_value())
          << "client printed " << i << " of " << want.size()
          << " lines; it is " << (client.Running() ? "running" : "gone")
          << "; its stderr:\n" << client.StderrText();
      EXPECT_EQ(*line, want[i]);
      auto event = nlohmann::json::parse(*line, nullptr, false);
      ASSERT_TRUE(event.is_object()) << *line;
      EXPECT_EQ(event.value("type", ""), "ADDED");
    }
  }

  // Starts the client `argv_from(start_rv)` on a watch from a first row's
  // commit, writes three rows, and checks that it prints exactly their
  // lines, as they come.
  void ExpectClientPrintsRows(
      const WalwatchProcess& ww,
      const std::function<std::vector<std::string>(uint64_t)>& argv_from,
      const std::string& stderr_name,
      std::vector<std::string> env = {}) {
    uint64_t start_rv = 0;
    ASSERT_NO_FATAL_FAILURE(WriteBefore(ww, &start_rv));
    ChildProcess client(
        {argv_from(start_rv), TempPath(stderr_name), true, std::move(env)});
    std::vector<std::string> want;
    ASSERT_NO_FATAL_FAILURE(WriteRows(&want));
    ExpectLines(client, want);
  }

  // kubectl get --raw on a watch path through 127.0.0.1:port.
  void ExpectKubectlReceives(const WalwatchProcess& ww, int port) {
    const std::string kubeconfig = WriteKubeconfig(port);
    ExpectClientPrintsRows(
        ww,
        [&](uint64_t start_rv) {
          return std::vector<std::string>{
              "kubectl", "--kubeconfig", kubeconfig, "--request-timeout",
              "60s", "get", "--raw",
              "/api/v1/pods?watch=1&timeoutSeconds=60&resourceVersion=" +
                  std::to_string(start_rv)};
        },
        "kubectl.stderr", {"HOME=" + TempPath(""), "KUBECONFIG="});
  }

  WatchClient reference_;
};

TEST_F(ClientsTest, CurlOverUnixSocket) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  ExpectClientPrintsRows(
      *ww,
      [&](uint64_t start_rv) {
        return std::vector<std::string>{
            "curl", "-sSN", "--max-time", "60", "--unix-socket",
            ww->socket_path(),
            "http://localhost/api/v1/pods?watch=1&timeoutSeconds=60&"
            "resourceVersion=" +
                std::to_string(start_rv)};
      },
      "curl.stderr");
}

// walwatch's own client prints each event as it arrives: a quiet stream's
// few hundred bytes must not wait for a full read buffer.
TEST_F(ClientsTest, WalwatchWatchPrintsEventsAsTheyArrive) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  ExpectClientPrintsRows(
      *ww,
      [&](uint64_t start_rv) {
        return std::vector<std::string>{
            WALWATCH_BINARY, "watch", "/api/v1/pods", "--socket",
            ww->socket_path(), "--rv", std::to_string(start_rv), "-o", "json"};
      },
      "walwatch-watch.stderr");
}

// A Status answer is reported as such, with its code and reason.
TEST_F(ClientsTest, WalwatchWatchReportsAStatusAnswer) {
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  // Not a resource path (a namespace's own path): 404.
  CommandResult r = RunCommand({WALWATCH_BINARY, "watch",
                                "/api/v1/namespaces/default",
                                "--socket", ww->socket_path()},
                               std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: 404 NotFound: "), std::string::npos)
      << r.output;
}

// walwatch slots: list, a dry run, then the drop, of slots with this test's
// own prefix (the server's other slots belong to tests running beside it).
TEST_F(ClientsTest, WalwatchSlotsListsAndDropsInactiveSlots) {
  const std::string prefix = UniqueName("slotcli");
  const std::string slot = prefix + "_gone_pod";
  db().Exec("SELECT pg_create_logical_replication_slot('" + slot +
            "', 'wal2json')");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {WALWATCH_BINARY, "slots"});
    return RunCommand(args, std::chrono::seconds(30));
  };
  auto drop = [&](bool dry_run) {
    std::vector<std::string> args = {"drop", "--inactive-for", "0s",
                                     "--conninfo", Conninfo(), "--prefix",
                                     prefix};
    if (dry_run) args.push_back("--dry-run");
    return run(args);
  };
  auto slots_named = [&] {
    return db().QueryValue(
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" +
        slot + "'");
  };
  CommandResult list =
      run({"list", "--conninfo", Conninfo(), "--prefix", prefix});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find(slot), std::string::npos) << list.output;

  CommandResult dry = drop(/*dry_run=*/true);
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("would drop " + slot), std::string::npos)
      << dry.output;
  EXPECT_EQ(slots_named(), "1");

  CommandResult dropped = drop(/*dry_run=*/false);
  EXPECT_EQ(dropped.exit_code, 0) << dropped.output;
  EXPECT_NE(dropped.output.find("dropped " + slot), std::string::npos)
      << dropped.output;
  EXPECT_EQ(slots_named(), "0");

  // Nothing left: the dry run says so too, rather than print nothing.
  CommandResult none = drop(/*dry_run=*/true);
  EXPECT_EQ(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("no inactive slot with prefix"), std::string::npos)
      << none.output;

  CommandResult help = run({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_EQ(help.output.rfind("usage: walwatch slots", 0), 0u) << help.output;
}

TEST_F(ClientsTest, KubectlOverTcpListen) {
  if (!OnPath("kubectl")) GTEST_SKIP() << kNoKubectl;
  int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  auto options = DefaultOptions();
  options.tcp_listen = "127.0.0.1:" + std::to_string(port);
  auto* ww = StartWalwatch(options);
  ASSERT_NE(ww, nullptr);
  ASSERT_TRUE(WaitForPort(port, In(kEventWait)));
  ExpectKubectlReceives(*ww, port);
}

TEST_F(ClientsTest, KubectlThroughSocat) {
  if (!OnPath("kubectl")) GTEST_SKIP() << kNoKubectl;
  auto* ww = StartWalwatch();
  ASSERT_NE(ww, nullptr);
  int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  ChildProcess socat({{"socat",
                       "TCP-LISTEN:" + std::to_string(port) +
                           ",bind=127.0.0.1,reuseaddr,fork",
                       "UNIX-CONNECT:" + ww->socket_path()},
                      TempPath("socat.stderr"),
                      false,
                      {}});
  ASSERT_TRUE(WaitForPort(port, In(kEventWait))) << socat.StderrText();
  ExpectKubectlReceives(*ww, port);
}

}  // namespace
}  // namespace walwatch::itest
