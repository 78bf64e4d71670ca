// walwatch on PostgreSQL over TLS with a client certificate, as README's
// PostgreSQL prerequisites offer it: a private cluster with ssl = on and
// pg_hba.conf's `hostssl ... cert` for the walwatch role, certificates made
// by openssl. sslmode=verify-full with sslrootcert, sslcert and sslkey
// streams an insert to a watcher, and the server lists every session of
// walwatch's (the walsender too) as TLS with the certificate's subject.
// Without the certificate, or with one of another CA, walwatch stops at
// startup with one line that names the fix.
//
// TCP: PostgreSQL has no TLS on its Unix socket. libpq skips TLS there
// whatever sslmode says (verify-full included) and connects in the clear,
// and pg_hba.conf's hostssl lines never match a `local` connection; walwatch
// warns of such a conninfo at startup (the last test).
#include <gtest/gtest.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/pg_cluster.h"

namespace walwatch::itest {
namespace {

constexpr std::chrono::seconds kStartupBound{30};

class PgTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/walwatch-pgtls.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // The server (as the postgres user) reads its certificates here.
    chmod(dir_.c_str(), 0755);
  }

  void TearDown() override {
    walwatches_.clear();
    cluster_.reset();
    if (HasFailure()) {
      std::cerr << "test files kept in " << dir_ << "\n";
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Certificates (ca.crt signs server.crt, for 127.0.0.1, and client.crt,
  // /CN=walwatch; other-ca.crt signs other-client.crt, /CN=walwatch too),
  // then a cluster on 127.0.0.1 with TLS from them, ssl_ca_file the
  // clients' CA, where the walwatch role may log in only over TLS with a
  // certificate (`cert`), and a database `cp` with Clusterpedia's table.
  void StartTlsCluster() {
    // libpq and the server refuse a key others may read.
    ASSERT_NO_FATAL_FAILURE(MakeTestCertificates(
        dir_, "IP:127.0.0.1", "chmod 644 *.crt; chmod 600 *.key"));
    if (geteuid() == 0) {
      struct passwd* pw = getpwnam("postgres");
      ASSERT_NE(pw, nullptr) << "running as root but no postgres user";
      ASSERT_EQ(chown(Path("server.key").c_str(), pw->pw_uid, pw->pw_gid), 0);
    }
    port_ = FreeLoopbackPort();
    ASSERT_NE(port_, 0);
    PgCluster::Options options;
    options.settings = {
        "listen_addresses = '127.0.0.1'",
        "port = " + std::to_string(port_),
        "ssl = on",
        "ssl_cert_file = '" + Path("server.crt") + "'",
        "ssl_key_file = '" + Path("server.key") + "'",
        "ssl_ca_file = '" + Path("ca.crt") + "'",
    };
    options.hba = {"local all all trust",
                   "hostssl all walwatch 127.0.0.1/32 cert"};
    cluster_ = std::make_unique<PgCluster>(options);
    PgConnection admin(AdminConninfo("postgres"));
    admin.Exec("CREATE ROLE walwatch LOGIN REPLICATION");
    admin.Exec("CREATE DATABASE cp");
    db_ = std::make_unique<PgConnection>(AdminConninfo("cp"));
    db_->Exec(ReadFileOrThrow(std::string(WALWATCH_SOURCE_DIR) +
                              "/schema/clusterpedia.sql"));
    db_->Exec("GRANT SELECT ON resources TO walwatch");
  }

  // The superuser on the cluster's Unix socket (trusted).
  std::string AdminConninfo(const std::string& dbname) const {
    return "host=" + cluster_->dir() + " port=" + std::to_string(port_) +
           " dbname=" + dbname + " user=postgres";
  }

  // The walwatch role over TCP, verify-full against ca.crt; `more` appended.
  std::string Conninfo(const std::string& more) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) +
           " dbname=cp user=walwatch sslmode=verify-full sslrootcert=" +
           Path("ca.crt") + (more.empty() ? "" : " " + more);
  }

  WalwatchProcess& Launch(const std::string& conninfo) {
    const std::string n = std::to_string(walwatches_.size());
    WalwatchOptions o;
    o.conninfo = conninfo;
    o.slot = "walwatch_tls" + n;
    o.socket_path = Path("ww" + n + ".sock");
    walwatches_.push_back(std::make_unique<WalwatchProcess>(
        std::move(o), Path("ww" + n + ".stderr")));
    return *walwatches_.back();
  }

  PgConnection& db() { return *db_; }

 private:
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<PgCluster> cluster_;
  std::unique_ptr<PgConnection> db_;
  std::vector<std::unique_ptr<WalwatchProcess>> walwatches_;
};

// No line of the private key's body (its base64) in walwatch's output.
::testing::AssertionResult NeverShowsKey(const WalwatchProcess& ww,
                                         const std::string& key_path) {
  const std::string text = ww.StderrText();
  std::ifstream in(key_path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 40 || line.find("-----") != std::string::npos) continue;
    ++lines;
    if (text.find(line) != std::string::npos) {
      return ::testing::AssertionFailure()
             << "walwatch's stderr shows a line of " << key_path;
    }
  }
  if (lines == 0) {
    return ::testing::AssertionFailure() << "no PEM body in " << key_path;
  }
  return ::testing::AssertionSuccess();
}

TEST_F(PgTlsTest, AClientCertificateStreamsOverVerifiedTls) {
  ASSERT_NO_FATAL_FAILURE(StartTlsCluster());
  WalwatchProcess& ww = Launch(Conninfo("sslcert=" + Path("client.crt") +
                                        " sslkey=" + Path("client.key")));
  ASSERT_TRUE(ww.WaitReady(kStartupBound));
  WatchClient watch;
  ASSERT_TRUE(OpenWatchOn(watch, ww.socket_path(), "/api/v1/pods", {}));
  InsertRow(db(), Pod("c1", "default", "by-certificate"));
  WatchEvent e;
  ASSERT_TRUE(watch.NextEvent(&e, In(kEventWait)));
  EXPECT_TRUE(WireStartsWith(e, "ADDED"));
  EXPECT_EQ(e.object["metadata"].value("name", ""), "by-certificate");

  // The server's view: walwatch's sessions, its walsender among them, each
  // over TLS with the client certificate's subject.
  auto sessions = db().Query(
      "SELECT a.backend_type, s.ssl::text, COALESCE(s.client_dn, '') FROM "
      "pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = "
      "'walwatch'");
  EXPECT_GE(std::count_if(sessions.begin(), sessions.end(),
                          [](const PgRow& r) { return r[0] == "walsender"; }),
            1)
      << "want walwatch's walsender on the server";
  for (const PgRow& r : sessions) {
    EXPECT_EQ(r[1].value_or(""), "true")
        << "a session of walwatch's (" << r[0].value_or("")
        << ") is not over TLS";
    EXPECT_EQ(r[2].value_or(""), "/CN=walwatch")
        << "a session of walwatch's (" << r[0].value_or("")
        << ") shows no client certificate";
  }
  EXPECT_EQ(ww.Stop().Describe(), "exit code 0");
  EXPECT_TRUE(NeverShowsKey(ww, Path("client.key")));
}

// Each stops walwatch within the bound, not after the startup wait for a
// server that does not answer (libpq reports a refused certificate without
// the server's ping answered), with one line that names the fix.
TEST_F(PgTlsTest, AMissingOrForeignClientCertificateIsOneLine) {
  ASSERT_NO_FATAL_FAILURE(StartTlsCluster());
  const struct {
    const char* name;
    std::string tls;
    std::vector<std::string> fix_words;
  } kCases[] = {
      {"no client certificate",
       "",
       {"requires a valid client certificate", "sslcert", "sslkey", "fix",
        "--conninfo"}},
      {"a certificate of another CA",
       "sslcert=" + Path("other-client.crt") +
           " sslkey=" + Path("other-client.key"),
       {"refused walwatch's client certificate", "sslcert", "ssl_ca_file",
        "fix", "--conninfo"}},
      {"the key of another certificate",
       "sslcert=" + Path("client.crt") + " sslkey=" + Path("other-client.key"),
       {"private key", "sslkey", "sslcert", "fix", "--conninfo"}},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    WalwatchProcess& ww = Launch(Conninfo(c.tls));
    EXPECT_TRUE(ExitsWithOneErrorNaming(ww, c.fix_words, kStartupBound));
    EXPECT_TRUE(NeverShowsKey(ww, Path("client.key")));
    EXPECT_TRUE(NeverShowsKey(ww, Path("other-client.key")));
  }
}

// sslmode=verify-full on the Unix socket: libpq connects in the clear (the
// server's pg_stat_ssl says so), and walwatch says so at startup rather
// than let the conninfo pass for an encrypted one.
TEST_F(PgTlsTest, SslmodeOnTheUnixSocketIsWarnedOfAsUnencrypted) {
  ASSERT_NO_FATAL_FAILURE(StartTlsCluster());
  WalwatchProcess& ww =
      Launch(AdminConninfo("cp") +
             " sslmode=verify-full sslrootcert=" + Path("ca.crt"));
  ASSERT_TRUE(ww.WaitReady(kStartupBound));
  auto sessions = db().Query(
      "SELECT a.backend_type, s.ssl::text FROM pg_stat_activity a JOIN "
      "pg_stat_ssl s USING (pid) WHERE a.backend_type = 'walsender'");
  ASSERT_FALSE(sessions.empty()) << "want walwatch's walsender on the server";
  for (const PgRow& r : sessions) {
    EXPECT_EQ(r[1].value_or(""), "false")
        << "precondition: libpq used TLS on the Unix socket";
  }
  int warnings = 0;
  for (const auto& line : ww.LogLines()) {
    const std::string msg = line.value("msg", "");
    if (line.value("level", "") == "warn" &&
        msg.find("sslmode=verify-full has no effect on a Unix socket") !=
            std::string::npos &&
        msg.find("unencrypted") != std::string::npos) {
      ++warnings;
    }
  }
  EXPECT_GE(warnings, 1) << "no warning of the unencrypted socket; stderr:\n"
                         << ww.StderrText();
  EXPECT_EQ(ww.Stop().Describe(), "exit code 0");
}

}  // namespace
}  // namespace walwatch::itest
