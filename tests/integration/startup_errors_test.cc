// A misconfigured database stops walwatch at startup: a non-zero exit
// within a bound, and an error log line that says what to fix.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/support/harness.h"
#include "tests/integration/support/pg_cluster.h"

namespace walwatch::itest {
namespace {

constexpr std::chrono::seconds kStartupBound{30};

class StartupErrorsTest : public WalwatchTest {
 protected:
  // Starts walwatch with `options` and expects it to fail: exit code != 0
  // within the bound, every stderr line a JSON log line, and exactly one
  // error line that mentions every one of `fix_words` (case-insensitive).
  void ExpectStartupError(WalwatchOptions options,
                          const std::vector<std::string>& fix_words) {
    WalwatchProcess& ww = Launch(std::move(options));
    EXPECT_TRUE(ExitsWithOneErrorNaming(ww, fix_words, kStartupBound));
  }

  bool ServerHasSetting(const std::string& name) {
    return db().QueryValue(
               "SELECT count(*) FROM pg_settings WHERE name = $1", {name}) ==
           "1";
  }
};

TEST_F(StartupErrorsTest, ReplicaIdentityDefault) {
  db().Exec("ALTER TABLE resources REPLICA IDENTITY DEFAULT");
  ExpectStartupError(DefaultOptions(), {"replica identity", "full"});
}

// A --kinds file walwatch cannot use stops it with one line naming the file
// and the fault, never a crash and never a start with some kinds missing.
TEST_F(StartupErrorsTest, BadKindsFile) {
  const struct {
    const char* name;
    const char* text;  // nullptr: the file does not exist
    std::vector<std::string> words;
  } kCases[] = {
      {"missing.json", nullptr, {"--kinds", "missing.json", "cannot read"}},
      {"broken.json", "[{\"group\": ", {"--kinds", "broken.json", "not valid JSON"}},
      {"typo.json",
       R"([{"group":"example.com","version":"v1","resource":"widgets",)"
       R"("Kind":"Widget"}])",
       {"--kinds", "typo.json", "entry 0", "unknown key", "Kind"}},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    std::string path = TempPath(c.name);
    if (c.text) std::ofstream(path) << c.text;
    WalwatchOptions options = DefaultOptions();
    options.extra_args = {"--kinds", path};
    ExpectStartupError(options, c.words);
  }
}

class StartupErrorsNoSchemaTest : public StartupErrorsTest {
 protected:
  bool ApplySchema() const override { return false; }
};

TEST_F(StartupErrorsNoSchemaTest, TableMissing) {
  ExpectStartupError(DefaultOptions(), {"resources"});
}

TEST_F(StartupErrorsTest, WrongPassword) {
  // The sandbox (tests/tools/pg-sandbox.sh) has role walwatch_pw with a
  // password, required over 127.0.0.1. Check that it answers a wrong
  // password with a password failure, so the test is about the password.
  std::string conninfo = "host=127.0.0.1 port=" + server().port +
                         " dbname=" + dbname() +
                         " user=walwatch_pw password=wrong";
  try {
    PgConnection probe(conninfo);
    FAIL() << "precondition: the sandbox accepted a wrong password for "
              "walwatch_pw over 127.0.0.1 (pg-sandbox.sh must require one)";
  } catch (const PgError& e) {
    ASSERT_NE(std::string(e.what()).find("password authentication failed"),
              std::string::npos)
        << "precondition: pg-sandbox.sh must create role walwatch_pw with a "
           "password, checked over 127.0.0.1; got: "
        << e.what();
  }
  auto options = DefaultOptions();
  options.conninfo = conninfo;
  ExpectStartupError(options, {"password"});
}

// Reachable only on a server with the output_plugin_libraries setting
// (README: servers that restrict output plugins). Without it nothing makes
// a server refuse an installed plugin with "may not be used as an output
// plugin": no other setting or role restricts output plugins, and walwatch
// has no option to ask for a plugin by another name (a name the server
// cannot load gives "could not access file": Wal2jsonMissing below). So on
// such a server the test is skipped, and says which server it ran on.
TEST_F(StartupErrorsTest, Wal2jsonNotAllowed) {
  if (!ServerHasSetting("output_plugin_libraries")) {
    GTEST_SKIP() << "PostgreSQL " << db().QueryValue("SHOW server_version")
                 << " has no output_plugin_libraries setting: it allows "
                    "every installed output plugin, so walwatch cannot be "
                    "refused wal2json here";
  }
  db().Exec("ALTER DATABASE \"" + dbname() +
            "\" SET output_plugin_libraries = 'pgoutput,test_decoding'");
  ExpectStartupError(DefaultOptions(), {"wal2json", "output_plugin_libraries"});
}

TEST_F(StartupErrorsTest, Wal2jsonMissing) {
  // wal2json cannot be uninstalled for one test; a database whose library
  // path holds nothing makes it just as unloadable for walwatch's walsender.
  db().Exec("ALTER DATABASE \"" + dbname() +
            "\" SET dynamic_library_path = '/nonexistent-walwatch-it'");
  ExpectStartupError(DefaultOptions(), {"wal2json", "install"});
}

TEST_F(StartupErrorsTest, WalLevelNotLogical) {
  // wal_level is per server: a second, tiny cluster with wal_level=replica.
  // (It lists the output plugins itself where the server knows the setting.)
  PgCluster::Options replica;
  replica.settings = {"wal_level = replica", "max_wal_senders = 4"};
  PgCluster scratch(replica);
  {
    PgConnection admin(scratch.Conninfo("postgres"));
    admin.Exec("CREATE DATABASE walwatch");
    PgConnection conn(scratch.Conninfo("walwatch"));
    conn.Exec(ReadFileOrThrow(SchemaPath()));
  }
  auto options = DefaultOptions();
  options.conninfo = scratch.Conninfo("walwatch");
  ExpectStartupError(options, {"wal_level", "logical"});
}

}  // namespace
}  // namespace walwatch::itest
