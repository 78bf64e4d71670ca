#include "tests/integration/support/walwatch_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "tests/integration/support/watch_client.h"

extern char** environ;

namespace walwatch::itest {

std::string ExitStatus::Describe() const {
  if (exited) return "exit code " + std::to_string(exit_code);
  if (signal) return std::string("killed by signal ") + strsignal(signal);
  return "still running";
}

namespace {

ExitStatus FromWaitStatus(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) {
    s.exited = true;
    s.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  }
  return s;
}

}  // namespace

ChildProcess::ChildProcess(Options options) : options_(std::move(options)) {
  if (options_.argv.empty()) throw std::runtime_error("ChildProcess: no argv");
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& a : options_.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) env_storage.emplace_back(*e);
  for (const auto& e : options_.env) env_storage.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  int err_fd = open(options_.stderr_path.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    throw std::runtime_error("cannot create " + options_.stderr_path + ": " +
                             strerror(errno));
  }
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int out_pipe[2] = {-1, -1};
  if (options_.pipe_stdout && pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(err_fd);
    close(null_fd);
    throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(err_fd);
    close(null_fd);
    throw std::runtime_error(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(null_fd, 0);
    dup2(options_.pipe_stdout ? out_pipe[1] : err_fd, 1);
    dup2(err_fd, 2);
    close_range(3, ~0U, 0);
    execvpe(argv[0], argv.data(), envp.data());
    const char msg[] = "exec failed\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  pid_ = pid;
  // Also from the parent, so a signal sent right away reaches the group.
  setpgid(pid_, pid_);
  close(err_fd);
  close(null_fd);
  if (options_.pipe_stdout) {
    close(out_pipe[1]);
    stdout_fd_ = out_pipe[0];
  }
}

ChildProcess::~ChildProcess() {
  Stop();
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

bool ChildProcess::Running() {
  if (status_) return false;
  int status;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = FromWaitStatus(status);
    return false;
  }
  return true;
}

std::optional<ExitStatus> ChildProcess::WaitExit(
    std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Running()) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

void ChildProcess::Kill(int signal) {
  if (pid_ > 0) kill(-pid_, signal);
}

ExitStatus ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (Running()) {
    Kill(SIGTERM);
    if (!WaitExit(grace)) {
      Kill(SIGKILL);
      WaitExit(std::chrono::seconds(10));
    }
  }
  // Anything the child left in its group goes too.
  if (pid_ > 0) kill(-pid_, SIGKILL);
  return status_.value_or(ExitStatus{});
}

std::optional<std::string> ChildProcess::ReadStdoutLine(
    Clock::time_point deadline) {
  if (stdout_fd_ < 0) throw std::logic_error("stdout is not piped");
  for (;;) {
    auto nl = stdout_buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = stdout_buffer_.substr(0, nl);
      stdout_buffer_.erase(0, nl + 1);
      return line;
    }
    if (stdout_eof_) return std::nullopt;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char buf[65536];
    ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      stdout_eof_ = true;
      continue;
    }
    stdout_buffer_.append(buf, static_cast<size_t>(n));
  }
}

std::string ChildProcess::StderrText() const {
  std::ifstream in(options_.stderr_path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout) {
  char path[] = "/tmp/walwatch-cmd.XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  close(fd);
  CommandResult result;
  {
    ChildProcess child({argv, path, false, {}});
    auto status = child.WaitExit(timeout);
    if (status) {
      static_cast<ExitStatus&>(result) = *status;
    } else {
      static_cast<ExitStatus&>(result) = child.Stop();
      result.output = "(timed out after " +
                      std::to_string(timeout.count()) + " ms)\n";
    }
    result.output += child.StderrText();
  }
  unlink(path);
  return result;
}

void Shell(const std::string& command, std::chrono::milliseconds timeout) {
  CommandResult r = RunCommand({"/bin/sh", "-c", command}, timeout);
  ASSERT_TRUE(r.exited && r.exit_code == 0)
      << command << ": " << r.Describe() << "\n"
      << r.output;
}

void MakeTestCertificates(const std::string& dir, const std::string& san,
                          const std::string& permissions) {
  Shell("set -e; cd " + dir +
        "; openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
        "-subj '/CN=walwatch test CA' -keyout ca.key -out ca.crt"
        "; openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
        "-subj '/CN=walwatch other CA' -keyout other-ca.key -out other-ca.crt"
        "; printf 'subjectAltName=" +
        san +
        "\\n' > san.cnf"
        "; printf 'extendedKeyUsage=clientAuth\\n' > client.cnf"
        "; sign() { openssl req -newkey rsa:2048 -nodes -subj \"$3\" "
        "-keyout $2.key -out $2.csr"
        "; openssl x509 -req -in $2.csr -CA $1.crt -CAkey $1.key "
        "-CAcreateserial -days 2 -extfile $4 -out $2.crt; }"
        "; sign ca server /CN=127.0.0.1 san.cnf"
        "; sign ca client /CN=walwatch client.cnf"
        "; sign other-ca other-client /CN=walwatch client.cnf; " +
        permissions);
}

// ---------------------------------------------------------------------------
// WalwatchProcess

namespace {

// The value of --NAME in `args` ("--NAME V" or "--NAME=V"); nullopt if absent.
std::optional<std::string> FlagValue(const std::vector<std::string>& args,
                                     const std::string& name) {
  const std::string flag = "--" + name;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) return i + 1 < args.size() ? args[i + 1] : "";
    if (args[i].rfind(flag + "=", 0) == 0) {
      return args[i].substr(flag.size() + 1);
    }
  }
  return std::nullopt;
}

// The version matrix's choice of output plugin (tests/CMakeLists.txt):
// WALWATCH_TEST_PLUGIN -> --plugin, WALWATCH_TEST_PGOUTPUT_PROTOCOL ->
// --pgoutput-protocol, for a walwatch on PostgreSQL whose test did not
// choose them itself.
void AddMatrixFlags(const WalwatchOptions& o, std::vector<std::string>* argv) {
  auto source = FlagValue(o.extra_args, "source");
  if (source && *source != "postgres") return;
  const std::pair<const char*, const char*> flags[] = {
      {"WALWATCH_TEST_PLUGIN", "plugin"},
      {"WALWATCH_TEST_PGOUTPUT_PROTOCOL", "pgoutput-protocol"}};
  for (const auto& [env, flag] : flags) {
    const char* value = std::getenv(env);
    if (!value || !*value || FlagValue(o.extra_args, flag)) continue;
    argv->insert(argv->end(), {std::string("--") + flag, value});
  }
}

}  // namespace

std::vector<std::string> WalwatchProcess::Argv(const WalwatchOptions& o) {
  std::vector<std::string> argv = {WALWATCH_BINARY, "--conninfo", o.conninfo,
                                   "--slot", o.slot, "--socket",
                                   o.socket_path};
  AddMatrixFlags(o, &argv);
  if (!o.max_log_bytes.empty()) {
    argv.insert(argv.end(), {"--max-log-bytes", o.max_log_bytes});
  }
  if (!o.tcp_listen.empty()) {
    argv.insert(argv.end(), {"--tcp-listen", o.tcp_listen});
  }
  argv.insert(argv.end(), {"--metrics-address", o.metrics_address});
  if (!o.log_level.empty()) {
    argv.insert(argv.end(), {"--log-level", o.log_level});
  }
  argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
  return argv;
}

WalwatchProcess::WalwatchProcess(WalwatchOptions options,
                                 std::string stderr_path)
    : options_(std::move(options)),
      child_({Argv(options_), std::move(stderr_path), false, {}}) {}

WalwatchProcess::~WalwatchProcess() {
  auto status = child_.Stop();
  if (::testing::Test::HasFailure()) {
    std::cerr << "walwatch (pid " << child_.pid() << ") ended: "
              << status.Describe() << "\n";
    DumpStderr();
  }
}

::testing::AssertionResult WalwatchProcess::WaitReady(
    std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string last;
  for (;;) {
    if (!child_.Running()) {
      auto status = child_.WaitExit(std::chrono::milliseconds(0));
      return ::testing::AssertionFailure()
             << "walwatch exited before it was ready ("
             << (status ? status->Describe() : "?") << "); stderr:\n"
             << StderrText();
    }
    auto response = HttpGet(options_.socket_path, "/readyz",
                            Clock::now() + std::chrono::seconds(2));
    if (response.ok && response.status == 200) {
      return ::testing::AssertionSuccess();
    }
    last = response.ok ? "HTTP " + std::to_string(response.status) + " " +
                             response.body
                       : response.error;
    if (Clock::now() >= deadline) {
      return ::testing::AssertionFailure()
             << "walwatch not ready after " << timeout.count()
             << " ms (last /readyz: " << last << "); stderr:\n"
             << StderrText();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<nlohmann::json> WalwatchProcess::LogLines() const {
  std::vector<nlohmann::json> lines;
  std::istringstream in(StderrText());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      lines.push_back({{"unparsed", line}});
    } else {
      lines.push_back(std::move(parsed));
    }
  }
  return lines;
}

void WalwatchProcess::DumpStderr() const {
  std::string text = StderrText();
  constexpr size_t kMax = 20000;
  if (text.size() > kMax) {
    text = "...(" + std::to_string(text.size() - kMax) + " bytes cut)...\n" +
           text.substr(text.size() - kMax);
  }
  std::cerr << "---- walwatch stderr (" << child_.stderr_path() << ") ----\n"
            << text << "---- end of walwatch stderr ----\n";
}

::testing::AssertionResult ExitsWithOneErrorNaming(
    WalwatchProcess& ww, const std::vector<std::string>& fix_words,
    std::chrono::seconds bound) {
  auto status = ww.WaitExit(bound);
  if (!status) {
    return ::testing::AssertionFailure()
           << "walwatch still running after " << bound.count()
           << " s; it must exit at startup. stderr:\n" << ww.StderrText();
  }
  if (!status->exited || status->exit_code == 0) {
    return ::testing::AssertionFailure()
           << "walwatch ended with " << status->Describe();
  }
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(
                          static_cast<unsigned char>(c)));
    return s;
  };
  std::vector<std::string> errors;
  for (const auto& line : ww.LogLines()) {
    if (line.contains("unparsed")) {
      return ::testing::AssertionFailure()
             << "stderr line is not a JSON log line: " << line["unparsed"];
    }
    if (line.value("level", "") == "error") errors.push_back(line.dump());
  }
  if (errors.size() != 1) {
    return ::testing::AssertionFailure()
           << "want one clear error line, got " << errors.size()
           << "; stderr:\n" << ww.StderrText();
  }
  for (const std::string& w : fix_words) {
    if (lower(errors[0]).find(lower(w)) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "the error line does not name the fix ('" << w
             << "'): " << errors[0];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace walwatch::itest
