// Child processes for the integration tests: the walwatch binary under test
// (WALWATCH_BINARY), and clients such as curl and kubectl.
//
// Every child runs in its own process group and dies with the test process
// (PR_SET_PDEATHSIG). Stopping sends SIGTERM to the group, then SIGKILL
// after a bound. Nothing here sleeps for correctness: every wait is a poll of
// a condition against a deadline.
//
// Thread safety: an object is used by one thread at a time.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_WALWATCH_PROCESS_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_WALWATCH_PROCESS_H_

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace walwatch::itest {

using Clock = std::chrono::steady_clock;

// How a child ended.
struct ExitStatus {
  bool exited = false;    // exited normally (else killed by a signal)
  int exit_code = -1;     // when exited
  int signal = 0;         // when killed
  std::string Describe() const;
};

class ChildProcess {
 public:
  struct Options {
    std::vector<std::string> argv;   // argv[0] is the path (execvp)
    std::string stderr_path;         // required: stderr goes here
    bool pipe_stdout = false;        // else stdout goes to stderr_path too
    std::vector<std::string> env;    // extra NAME=VALUE entries
  };
  // Forks and execs; throws std::runtime_error if that fails.
  explicit ChildProcess(Options options);
  // Stop()s a child still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  // Waits until the child exits, or `timeout` passes (nullopt).
  std::optional<ExitStatus> WaitExit(std::chrono::milliseconds timeout);
  // SIGTERM to the group, wait `grace`, then SIGKILL. Returns how it ended.
  ExitStatus Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  void Kill(int signal);

  // With pipe_stdout: the next line of stdout (without '\n') before
  // `deadline`; nullopt on timeout or end of output.
  std::optional<std::string> ReadStdoutLine(Clock::time_point deadline);
  bool StdoutClosed() const { return stdout_eof_; }

  std::string StderrText() const;
  const std::string& stderr_path() const { return options_.stderr_path; }

 private:
  Options options_;
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
  int stdout_fd_ = -1;
  std::string stdout_buffer_;
  bool stdout_eof_ = false;
};

// Runs `argv` to completion (stdout and stderr captured together), killing
// it after `timeout`.
struct CommandResult : ExitStatus {
  std::string output;
};
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout);

// Runs `command` with /bin/sh -c (openssl, chmod, ...); fails the test with
// the command and its output unless it exits 0 within `timeout`.
void Shell(const std::string& command,
           std::chrono::milliseconds timeout = std::chrono::seconds(60));

// A test PKI in `dir` (openssl, keys unencrypted, valid two days): two
// self-signed CAs, ca and other-ca; server (by ca, CN=127.0.0.1, with the
// subjectAltName `san`, e.g. "IP:127.0.0.1"); client (by ca) and
// other-client (by other-ca), both CN=walwatch for clientAuth. Each as
// NAME.key, NAME.crt (and NAME.csr). Then runs `permissions` in `dir`: the
// servers' rules for who may read a key differ.
void MakeTestCertificates(const std::string& dir, const std::string& san,
                          const std::string& permissions);

struct WalwatchOptions {
  std::string conninfo;
  std::string slot;
  std::string socket_path;
  std::string max_log_bytes;   // e.g. "1Mi"; empty: walwatch's default
  std::string tcp_listen;      // e.g. "127.0.0.1:PORT"; empty: none
  // Prometheus listener; empty: not served (tests run walwatches in
  // parallel, and the default 127.0.0.1:9187 would clash).
  std::string metrics_address;
  std::string log_level = "debug";
  std::vector<std::string> extra_args;
};

class WalwatchProcess {
 public:
  // Starts WALWATCH_BINARY; stderr goes to `stderr_path`. On PostgreSQL (no
  // --source, or --source postgres, in extra_args) the environment chooses
  // the output plugin, as the version matrix's ctest entries set it
  // (tests/CMakeLists.txt): WALWATCH_TEST_PLUGIN (wal2json or pgoutput)
  // becomes --plugin, WALWATCH_TEST_PGOUTPUT_PROTOCOL --pgoutput-protocol,
  // each unless extra_args has that flag already. Unset: walwatch's
  // defaults. The PostgreSQL tests start walwatch here, on the shared
  // server and on a PgCluster alike (but ClaimsTest's run as another user,
  // which builds its own command line).
  WalwatchProcess(WalwatchOptions options, std::string stderr_path);
  // Stops it; if the current test has failed, prints its stderr.
  ~WalwatchProcess();

  // Polls GET /readyz on the socket until 200, the process exits, or
  // `timeout`. On failure the message carries walwatch's stderr.
  ::testing::AssertionResult WaitReady(
      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // For startup-error tests: waits for the process to exit.
  std::optional<ExitStatus> WaitExit(std::chrono::milliseconds timeout) {
    return child_.WaitExit(timeout);
  }
  ExitStatus Stop() { return child_.Stop(); }
  bool Running() { return child_.Running(); }
  pid_t pid() const { return child_.pid(); }

  const WalwatchOptions& options() const { return options_; }
  const std::string& socket_path() const { return options_.socket_path; }
  std::string StderrText() const { return child_.StderrText(); }
  // stderr parsed as JSON log lines; a line that is not JSON is returned as
  // {"unparsed": "<line>"}.
  std::vector<nlohmann::json> LogLines() const;
  // Prints stderr to the test log (on failure paths).
  void DumpStderr() const;

 private:
  static std::vector<std::string> Argv(const WalwatchOptions& options);
  WalwatchOptions options_;
  ChildProcess child_;
};

// For startup-error tests: `ww` exits non-zero within `bound`, every line
// of its stderr is a JSON log line, and exactly one of them is an error,
// which names each of `fix_words` (case-insensitive).
::testing::AssertionResult ExitsWithOneErrorNaming(
    WalwatchProcess& ww, const std::vector<std::string>& fix_words,
    std::chrono::seconds bound);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_WALWATCH_PROCESS_H_
