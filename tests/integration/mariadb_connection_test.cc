// walwatch --source mysql as an operator connects it, against a real
// MariaDB: the password in --mysql-conninfo never appears in anything
// walwatch writes (a start, a wrong password, a server that does not
// answer), and TLS does what README's "MySQL/MariaDB prerequisites" says.
// The TLS tests run a private server with a CA and a server certificate the
// test makes with openssl: ssl-mode=VERIFY_IDENTITY connects, streams, and
// the server reports every session of walwatch's as encrypted; a wrong CA,
// and REQUIRED against the shared server (which offers no TLS), stop
// walwatch at startup with one line that names the fix. Client
// certificates: an account created REQUIRE SUBJECT ... AND ISSUER ... takes
// walwatch with ssl-cert/ssl-key signed by the CA, and refuses it without,
// or with another CA's; each fault is one line. TLS on the Unix socket:
// MariaDB 10.11 negotiates it there as on TCP, and Connector/C 3.3's
// VERIFY_IDENTITY checks the certificate for the name localhost.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/mariadb.h"
#include "tests/integration/support/mariadb_walwatch.h"
#include "tests/integration/support/walwatch_process.h"

namespace walwatch::itest {
namespace {

// Startup errors and the wait for a server that does not answer.
constexpr std::chrono::seconds kStartupBound{60};

// A password that no other text of walwatch's output could hold.
constexpr char kPassword[] = "Tq7-heron-Vw3-Kp9";

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The test's name, lower case, for its database and account.
std::string TestName() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return Lower(std::string(info->test_suite_name()) + "_" + info->name());
}

class MariaDbConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/walwatch-myconn.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmpdir_ = tmpl;
    // A private server (as the mysql user) reads its certificates here.
    chmod(tmpdir_.c_str(), 0755);
    user_ = "ww_conn_" + std::to_string(getpid());
  }

  void TearDown() override {
    for (auto& w : walwatches_) w->Stop();
    walwatches_.clear();
    if (server_ != nullptr && !private_) {
      RootExec(*server_, "DROP USER IF EXISTS '" + user_ +
                             "'@'%';\nDROP DATABASE IF EXISTS " +
                             mysql::QuoteIdentifier(db_));
    }
    private_.reset();
    if (HasFailure()) {
      std::cerr << "test files kept in " << tmpdir_ << "\n";
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(tmpdir_, ec);
  }

  // The test's server: the shared one, or a private one started with
  // `extra` (PrivateMariaDb); a database of the test's own on it with
  // Clusterpedia's table, and an account for walwatch with kPassword and
  // roles.sql's grants.
  void UseSharedServer() { ASSERT_NO_FATAL_FAILURE(UseServer(&TestMariaDb())); }
  void UsePrivateServer(const std::string& extra) {
    private_ = std::make_unique<PrivateMariaDb>(extra);
    ASSERT_NO_FATAL_FAILURE(UseServer(&private_->server()));
  }

  // host, port, user, password and database of the test's account; `more`
  // appended.
  std::string Conninfo(const std::string& password,
                       const std::string& more = "") const {
    return "host=127.0.0.1 port=" + std::to_string(server_->port) +
           " user=" + user_ + " password=" + password + " database=" + db_ +
           (more.empty() ? "" : " " + more);
  }

  WalwatchProcess& Launch(const std::string& conninfo) {
    WalwatchOptions o;
    o.socket_path =
        tmpdir_ + "/ww" + std::to_string(walwatches_.size()) + ".sock";
    o.slot = "walwatch";  // not read: --source mysql
    o.extra_args = {"--source",
                    "mysql",
                    "--mysql-conninfo",
                    conninfo,
                    "--server-id-from",
                    ("wwc-" + TestName()).substr(0, 56) + "-" +
                        std::to_string(walwatches_.size()),
                    "--replay-window",
                    "0s"};
    std::string log = o.socket_path + ".stderr";
    walwatches_.push_back(
        std::make_unique<WalwatchProcess>(std::move(o), std::move(log)));
    return *walwatches_.back();
  }

  // walwatch must exit non-zero within the bound, write only JSON log
  // lines, and exactly one error line, which holds every one of
  // `fix_words` (case-insensitive).
  void ExpectStartupError(WalwatchProcess& ww,
                          const std::vector<std::string>& fix_words) {
    EXPECT_TRUE(ExitsWithOneErrorNaming(ww, fix_words, kStartupBound));
  }

  // Sets the REQUIRE clause of the test's account (REQUIRE SSL, ...).
  void RequireOnAccount(const std::string& require) {
    ASSERT_EQ(
        RootExec(*server_, "ALTER USER '" + user_ + "'@'%' REQUIRE " + require),
        "");
  }

  // As Conninfo, on the server's Unix socket (host=localhost, the
  // socket's path).
  std::string SocketConninfo(const std::string& password,
                             const std::string& more = "") const {
    return "host=localhost socket=" + server_->socket + " user=" + user_ +
           " password=" + password + " database=" + db_ +
           (more.empty() ? "" : " " + more);
  }

  const MariaDbServer& server() const { return *server_; }
  const std::string& database() const { return db_; }
  const std::string& user() const { return user_; }
  std::string TempPath(const std::string& name) const {
    return tmpdir_ + "/" + name;
  }

 private:
  void UseServer(const MariaDbServer* server) {
    server_ = server;
    db_ = ("c_" + TestName()).substr(0, 64);
    ASSERT_EQ(CreateClusterpediaDatabase(*server_, db_), "");
    const std::string account = "'" + user_ + "'@'%'";
    ASSERT_EQ(RootExec(*server_,
                       "DROP USER IF EXISTS " + account + ";\nCREATE USER " +
                           account + " IDENTIFIED BY '" + kPassword +
                           "';\nGRANT REPLICATION SLAVE, REPLICATION "
                           "CLIENT ON *.* TO " +
                           account + ";\nGRANT SELECT ON " +
                           mysql::QuoteIdentifier(db_) + ".* TO " + account),
              "");
  }

  std::string tmpdir_;
  std::unique_ptr<PrivateMariaDb> private_;
  const MariaDbServer* server_ = nullptr;
  std::string db_;
  std::string user_;
  std::vector<std::unique_ptr<WalwatchProcess>> walwatches_;
};

// Every line of walwatch's stderr, searched for `secret`.
::testing::AssertionResult NeverShows(const WalwatchProcess& ww,
                                      const std::string& secret) {
  const std::string text = ww.StderrText();
  if (text.empty()) {
    return ::testing::AssertionFailure() << "walwatch wrote nothing at all";
  }
  size_t at = text.find(secret);
  if (at == std::string::npos) return ::testing::AssertionSuccess();
  size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return ::testing::AssertionFailure()
         << "walwatch's stderr shows a secret in: "
         << text.substr(begin, text.find('\n', at) - begin);
}

// --- The password ------------------------------------------------------------

TEST_F(MariaDbConnectionTest, AStartLogsTheConninfoWithThePasswordMasked) {
  ASSERT_NO_FATAL_FAILURE(UseSharedServer());
  WalwatchProcess& ww = Launch(Conninfo(kPassword));
  ASSERT_TRUE(ww.WaitReady(kStartupBound));
  // The account works end to end: an insert arrives.
  BinlogWriter writer(server(), database());
  WatchClient watch;
  ASSERT_TRUE(OpenWatchOn(watch, ww.socket_path(), "/api/v1/pods", {}));
  const uint64_t c = writer.Insert(Pod("c1", "default", "p1"));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "ADDED"));
  EXPECT_EQ(e.rv(), c);
  EXPECT_EQ(ww.Stop().Describe(), "exit code 0");

  bool shown = false;
  for (const auto& line : ww.LogLines()) {
    if (line.value("msg", "") != "starting walwatch") continue;
    EXPECT_EQ(line["config"].value("mysql-conninfo", ""), Conninfo("********"));
    shown = true;
  }
  EXPECT_TRUE(shown) << "no startup line shows the configuration; stderr:\n"
                     << ww.StderrText();
  EXPECT_TRUE(NeverShows(ww, kPassword));
}

TEST_F(MariaDbConnectionTest, AWrongPasswordIsOneLineWithoutIt) {
  ASSERT_NO_FATAL_FAILURE(UseSharedServer());
  const std::string wrong = "Zr4-osprey-Hb8-Lm2";
  WalwatchProcess& ww = Launch(Conninfo(wrong));
  ASSERT_NO_FATAL_FAILURE(ExpectStartupError(
      ww, {"access denied", user(), "password", "--mysql-conninfo"}));
  EXPECT_TRUE(NeverShows(ww, wrong));
}

// A server that does not answer is waited for at startup (retried with
// backoff, each attempt logged): the password is in none of those lines,
// nor in the shutdown's.
TEST_F(MariaDbConnectionTest, AServerThatDoesNotAnswerIsWaitedForWithoutIt) {
  ASSERT_NO_FATAL_FAILURE(UseSharedServer());
  const int port = FreeLoopbackPort();  // nothing listens there
  ASSERT_NE(port, 0);
  WalwatchProcess& ww =
      Launch("host=127.0.0.1 port=" + std::to_string(port) + " user=" + user() +
             " password=" + kPassword + " database=" + database());
  const auto deadline = Clock::now() + kStartupBound;
  int retries = 0;
  while (Clock::now() < deadline && retries < 2 && ww.Running()) {
    retries = 0;
    for (const auto& line : ww.LogLines()) {
      if (line.value("level", "") == "warn" &&
          line.value("msg", "").find("does not answer") != std::string::npos) {
        ++retries;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(retries, 2) << "walwatch did not log two attempts; stderr:\n"
                        << ww.StderrText();
  EXPECT_EQ(ww.Stop().Describe(), "exit code 0");
  EXPECT_NE(ww.StderrText().find("127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << "the lines name the server walwatch waits for";
  EXPECT_TRUE(NeverShows(ww, kPassword));
}

// --- TLS ---------------------------------------------------------------------

class MariaDbTlsTest : public MariaDbConnectionTest {
 protected:
  // In the test's directory: ca.crt (a CA), server.crt and server.key
  // (signed by it, for 127.0.0.1 and localhost), client.crt and client.key
  // (signed by it, /CN=walwatch), other-ca.crt (another CA) and
  // other-client.crt and .key (signed by that one, /CN=walwatch too). Then
  // a private server with TLS from them (its ssl-ca: the clients' CA it
  // trusts), and performance_schema for the sessions' status.
  void StartTlsServer() {
    const std::string d = TempPath("");
    // The server runs as the mysql user: it must read its key.
    ASSERT_NO_FATAL_FAILURE(MakeTestCertificates(
        d, "IP:127.0.0.1,DNS:localhost", "chmod 644 *"));
    ASSERT_NO_FATAL_FAILURE(UsePrivateServer(
        "ssl-ca=" + d + "ca.crt;ssl-cert=" + d + "server.crt;ssl-key=" + d +
        "server.key;performance_schema=ON"));
  }

  // A walwatch on each of `conninfos`, each ready, and a pod `name`
  // inserted now reaches a watch of each, as ADDED at its commit.
  // *launched: the walwatches, in order.
  void LaunchEachAndDeliver(const std::vector<std::string>& conninfos,
                            const std::string& name,
                            std::vector<WalwatchProcess*>* launched);
};

// Per session of the account: its command, the host the server sees
// ("localhost" on the Unix socket, "127.0.0.1:port" on TCP under
// skip-name-resolve) and its Ssl_cipher status.
struct Session {
  std::string command;
  std::string host;
  std::string cipher;
};
std::vector<Session> SessionsOf(const MariaDbServer& server,
                                const std::string& user) {
  mysql::MysqlConnection conn;
  std::vector<Session> out;
  if (std::string err = conn.Connect(server.Root()); !err.empty()) {
    ADD_FAILURE() << err;
    return out;
  }
  mysql::MysqlRows rows;
  std::string err = conn.Query(
      "SELECT t.PROCESSLIST_COMMAND, t.PROCESSLIST_HOST, "
      "COALESCE(s.VARIABLE_VALUE, '') FROM "
      "performance_schema.threads t LEFT JOIN "
      "performance_schema.status_by_thread s ON s.THREAD_ID = t.THREAD_ID "
      "AND s.VARIABLE_NAME = 'Ssl_cipher' WHERE t.PROCESSLIST_USER = " +
          conn.Quote(user),
      &rows);
  if (!err.empty()) {
    ADD_FAILURE() << err;
    return out;
  }
  for (const auto& r : rows.rows) {
    out.push_back(
        {r[0].value_or("(null)"), r[1].value_or("(null)"), r[2].value_or("")});
  }
  return out;
}

// Each watch's next event is the row inserted at commit c, as ADDED.
void ExpectAddedAt(std::initializer_list<WatchClient*> watches, uint64_t c,
                   const std::string& name) {
  for (WatchClient* watch : watches) {
    WatchEvent e;
    ASSERT_TRUE(watch->NextEvent(&e, In(kEventWait)));
    EXPECT_TRUE(WireStartsWith(e, "ADDED"));
    EXPECT_EQ(e.rv(), c);
    EXPECT_EQ(e.object["metadata"].value("name", ""), name);
  }
}

void MariaDbTlsTest::LaunchEachAndDeliver(
    const std::vector<std::string>& conninfos, const std::string& name,
    std::vector<WalwatchProcess*>* launched) {
  for (const std::string& conninfo : conninfos) {
    launched->push_back(&Launch(conninfo));
  }
  for (WalwatchProcess* ww : *launched) {
    ASSERT_TRUE(ww->WaitReady(kStartupBound));
  }
  BinlogWriter writer(server(), database());
  std::vector<WatchClient> watches(launched->size());
  for (size_t i = 0; i < watches.size(); ++i) {
    ASSERT_TRUE(OpenWatchOn(watches[i], (*launched)[i]->socket_path(),
                            "/api/v1/pods", {}));
  }
  const uint64_t c = writer.Insert(Pod("c1", "default", name));
  for (WatchClient& watch : watches) {
    ASSERT_NO_FATAL_FAILURE(ExpectAddedAt({&watch}, c, name));
  }
}

// The server's view of the account's sessions: at least `streams` binlog
// streams (one per walwatch), every session encrypted, and, where `host`
// is given, every one from that host.
void ExpectSessionsEncrypted(const MariaDbServer& server,
                             const std::string& user, long streams,
                             const std::string& host = "") {
  std::vector<Session> sessions = SessionsOf(server, user);
  EXPECT_GE(std::count_if(sessions.begin(), sessions.end(),
                          [](auto& s) { return s.command == "Binlog Dump"; }),
            streams)
      << "want a binlog stream of each walwatch on the server";
  for (const Session& s : sessions) {
    if (!host.empty()) {
      EXPECT_EQ(s.host, host) << "a session of walwatch's (" << s.command
                              << ") is not from " << host;
    }
    EXPECT_NE(s.cipher, "")
        << "a session of walwatch's (" << s.command << ") is not encrypted";
  }
}

// VERIFY_IDENTITY, and REQUIRED (encrypted, the certificate unchecked):
// both connect, both stream, and the server lists every session of
// walwatch's as encrypted.
TEST_F(MariaDbTlsTest, VerifyIdentityAndRequiredStreamEncrypted) {
  ASSERT_NO_FATAL_FAILURE(StartTlsServer());
  std::vector<WalwatchProcess*> ww;
  ASSERT_NO_FATAL_FAILURE(LaunchEachAndDeliver(
      {Conninfo(kPassword,
                "ssl-mode=VERIFY_IDENTITY ssl-ca=" + TempPath("ca.crt")),
       Conninfo(kPassword, "ssl-mode=REQUIRED")},
      "over-tls", &ww));

  // The server's view: walwatch's sessions (a binlog stream of each at
  // least), each encrypted.
  ExpectSessionsEncrypted(server(), user(), 2);
  for (WalwatchProcess* w : ww) EXPECT_TRUE(NeverShows(*w, kPassword));
}

TEST_F(MariaDbTlsTest, VerifyIdentityWithAnotherCaIsOneLineNamingTheFix) {
  ASSERT_NO_FATAL_FAILURE(StartTlsServer());
  WalwatchProcess& ww =
      Launch(Conninfo(kPassword, "ssl-mode=VERIFY_IDENTITY ssl-ca=" +
                                     TempPath("other-ca.crt")));
  ASSERT_NO_FATAL_FAILURE(ExpectStartupError(
      ww, {"certificate", "fix", "ssl-ca", "--mysql-conninfo"}));
  EXPECT_TRUE(NeverShows(ww, kPassword));
}

// Connector/C alone does not refuse plaintext here: without verification
// it connects in the clear when the server offers no TLS (mysql_conn.cc
// checks).
TEST_F(MariaDbTlsTest, RequiredAgainstAServerWithoutTlsIsOneLine) {
  ASSERT_NO_FATAL_FAILURE(UseSharedServer());
  mysql::MysqlConnection conn;
  ASSERT_EQ(conn.Connect(server().Root()), "");
  std::optional<std::string> have_ssl;
  ASSERT_EQ(conn.QueryValue("SELECT @@have_ssl", &have_ssl), "");
  ASSERT_NE(have_ssl.value_or(""), "YES")
      << "precondition: the shared server must offer no TLS";
  WalwatchProcess& ww = Launch(Conninfo(kPassword, "ssl-mode=REQUIRED"));
  ASSERT_NO_FATAL_FAILURE(
      ExpectStartupError(ww, {"TLS", "ssl-mode", "fix", "--mysql-conninfo"}));
  EXPECT_TRUE(NeverShows(ww, kPassword));
}

// --- Client certificates -------------------------------------------------

// The lines of a PEM file's body (its base64), for searching output.
std::vector<std::string> PemBody(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.size() >= 40 && line.find("-----") == std::string::npos) {
      lines.push_back(line);
    }
  }
  EXPECT_FALSE(lines.empty()) << "no PEM body in " << path;
  return lines;
}

// Neither the password nor any line of the private key's body in
// walwatch's output.
::testing::AssertionResult NeverShowsSecrets(const WalwatchProcess& ww,
                                             const std::string& key_path) {
  if (auto r = NeverShows(ww, kPassword); !r) return r;
  for (const std::string& line : PemBody(key_path)) {
    if (auto r = NeverShows(ww, line); !r) return r;
  }
  return ::testing::AssertionSuccess();
}

// The account requires a certificate of the test's CA for /CN=walwatch:
// walwatch with one connects, streams, and the server lists its sessions
// as encrypted (the login alone shows that the server took the
// certificate: REQUIRE SUBJECT refuses anything else).
TEST_F(MariaDbTlsTest, AClientCertificateLogsInWhereTheAccountRequiresIt) {
  ASSERT_NO_FATAL_FAILURE(StartTlsServer());
  ASSERT_NO_FATAL_FAILURE(RequireOnAccount(
      "SUBJECT '/CN=walwatch' AND ISSUER '/CN=walwatch test CA'"));
  WalwatchProcess& ww = Launch(Conninfo(
      kPassword, "ssl-mode=VERIFY_IDENTITY ssl-ca=" + TempPath("ca.crt") +
                     " ssl-cert=" + TempPath("client.crt") +
                     " ssl-key=" + TempPath("client.key")));
  ASSERT_TRUE(ww.WaitReady(kStartupBound));
  BinlogWriter writer(server(), database());
  WatchClient watch;
  ASSERT_TRUE(OpenWatchOn(watch, ww.socket_path(), "/api/v1/pods", {}));
  const uint64_t c = writer.Insert(Pod("c1", "default", "by-certificate"));
  ASSERT_NO_FATAL_FAILURE(ExpectAddedAt({&watch}, c, "by-certificate"));
  ExpectSessionsEncrypted(server(), user(), 1);
  EXPECT_EQ(ww.Stop().Describe(), "exit code 0");
  EXPECT_TRUE(NeverShowsSecrets(ww, TempPath("client.key")));
}

// Each way a client certificate can be wrong stops walwatch at startup
// with one line that names the fix, and shows neither the password nor the
// key.
TEST_F(MariaDbTlsTest, AClientCertificateFaultIsOneLineNamingTheFix) {
  ASSERT_NO_FATAL_FAILURE(StartTlsServer());
  ASSERT_NO_FATAL_FAILURE(RequireOnAccount(
      "SUBJECT '/CN=walwatch' AND ISSUER '/CN=walwatch test CA'"));
  ASSERT_EQ(mkdir(TempPath("a-directory").c_str(), 0755), 0);
  const std::string verify =
      "ssl-mode=VERIFY_IDENTITY ssl-ca=" + TempPath("ca.crt");
  const struct {
    const char* name;
    std::string tls;
    std::vector<std::string> fix_words;
  } kCases[] = {
      // The server says "Access denied", as for a wrong password.
      {"no client certificate",
       verify,
       {"access denied", "password", "REQUIRE X509", "ssl-cert", "ssl-key",
        "fix", "--mysql-conninfo"}},
      // Refused by the server: its alert, or (TLS 1.3) the connection it
      // closes right after the handshake; either line names the fix.
      {"a certificate of another CA",
       verify + " ssl-cert=" + TempPath("other-client.crt") +
           " ssl-key=" + TempPath("other-client.key"),
       {"client certificate", "ssl-cert", "CA the server trusts", "ssl_ca",
        "fix", "--mysql-conninfo"}},
      {"a missing key",
       verify + " ssl-cert=" + TempPath("client.crt") +
           " ssl-key=" + TempPath("missing.key"),
       {"ssl-key", TempPath("missing.key"), "No such file", "fix",
        "--mysql-conninfo"}},
      {"a missing certificate",
       verify + " ssl-cert=" + TempPath("missing.crt") +
           " ssl-key=" + TempPath("client.key"),
       {"ssl-cert", TempPath("missing.crt"), "No such file", "fix",
        "--mysql-conninfo"}},
      {"a directory as the key",
       verify + " ssl-cert=" + TempPath("client.crt") +
           " ssl-key=" + TempPath("a-directory"),
       {"ssl-key", "not a regular file", "fix", "--mysql-conninfo"}},
      {"the key of another certificate",
       verify + " ssl-cert=" + TempPath("client.crt") +
           " ssl-key=" + TempPath("other-client.key"),
       {"ssl-key", "private key of the certificate in ssl-cert", "fix",
        "--mysql-conninfo"}},
      // Connector/C reads no certificate without TLS.
      {"a certificate without ssl-mode",
       "ssl-cert=" + TempPath("client.crt") +
           " ssl-key=" + TempPath("client.key"),
       {"ssl-mode=REQUIRED", "ssl-cert", "--mysql-conninfo"}},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    WalwatchProcess& ww = Launch(Conninfo(kPassword, c.tls));
    ASSERT_NO_FATAL_FAILURE(ExpectStartupError(ww, c.fix_words));
    EXPECT_TRUE(NeverShowsSecrets(ww, TempPath("client.key")));
    EXPECT_TRUE(NeverShowsSecrets(ww, TempPath("other-client.key")));
  }
}

// --- TLS on the Unix socket ----------------------------------------------

// host=localhost (or no host) is the Unix socket. MariaDB 10.11 negotiates
// TLS there as on TCP, and Connector/C 3.3 verifies the certificate there
// too, for the name "localhost" (mysql_conninfo.h). The server's view
// proves it, not walwatch's: the account is created REQUIRE SSL, and
// performance_schema lists walwatch's sessions on host localhost, each with
// a cipher. Without ssl-mode the same account is refused; against a
// certificate that does not name localhost, VERIFY_IDENTITY on the socket
// stops walwatch with one line that says so.
TEST_F(MariaDbTlsTest, TlsOnTheUnixSocketIsNegotiatedAndVerified) {
  ASSERT_NO_FATAL_FAILURE(StartTlsServer());
  ASSERT_NO_FATAL_FAILURE(RequireOnAccount("SSL"));
  std::vector<WalwatchProcess*> ww;
  ASSERT_NO_FATAL_FAILURE(LaunchEachAndDeliver(
      {SocketConninfo(kPassword,
                      "ssl-mode=VERIFY_IDENTITY ssl-ca=" + TempPath("ca.crt")),
       SocketConninfo(kPassword, "ssl-mode=REQUIRED")},
      "over-the-socket", &ww));
  // "localhost": the socket (on TCP the server sees 127.0.0.1:port).
  ExpectSessionsEncrypted(server(), user(), 2, "localhost");

  // The account takes nothing but TLS, on the socket too.
  WalwatchProcess& plain = Launch(SocketConninfo(kPassword));
  ASSERT_NO_FATAL_FAILURE(ExpectStartupError(
      plain, {"access denied", "REQUIRE SSL", "ssl-mode", "fix"}));

  // A certificate for 127.0.0.1 alone (signed by the same CA): the socket's
  // name, localhost, is not in it. The server reloads it (FLUSH SSL).
  ASSERT_NO_FATAL_FAILURE(
      Shell("set -e; cd " + TempPath("") +
            "; printf 'subjectAltName=IP:127.0.0.1\\n' > ip-only.cnf"
            "; openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key "
            "-CAcreateserial -days 2 -extfile ip-only.cnf -out server.crt"
            "; chmod 644 server.crt"));
  ASSERT_EQ(RootExec(server(), "FLUSH SSL"), "");
  WalwatchProcess& misnamed = Launch(SocketConninfo(
      kPassword, "ssl-mode=VERIFY_IDENTITY ssl-ca=" + TempPath("ca.crt")));
  ASSERT_NO_FATAL_FAILURE(
      ExpectStartupError(misnamed, {"certificate", "does not name localhost",
                                    "Unix socket", "fix", "--mysql-conninfo"}));
  // The same certificate over TCP to 127.0.0.1, the name it has: accepted.
  WalwatchProcess& tcp = Launch(Conninfo(
      kPassword, "ssl-mode=VERIFY_IDENTITY ssl-ca=" + TempPath("ca.crt")));
  ASSERT_TRUE(tcp.WaitReady(kStartupBound));
  ww.insert(ww.end(), {&plain, &misnamed, &tcp});
  for (WalwatchProcess* w : ww) EXPECT_TRUE(NeverShows(*w, kPassword));
}

}  // namespace
}  // namespace walwatch::itest
