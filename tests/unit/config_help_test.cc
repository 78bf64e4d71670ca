// HelpText (watchserver/config.h, config_help.cc): walwatch --help.
#include "watchserver/config.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/support/parse_config.h"

namespace walwatch {
namespace {

TEST(ConfigHelp, MentionsEveryFlagWithDefaultAndEnv) {
  const std::string help = HelpText();
  const struct {
    const char* flag;
    const char* env;
    const char* default_text;
  } kFlags[] = {
      {"--source", "WALWATCH_SOURCE", "postgres"},
      {"--conninfo", "WALWATCH_CONNINFO", "empty"},
      {"--slot", "WALWATCH_SLOT", "walwatch"},
      {"--mapping", "WALWATCH_MAPPING",
       "built-in Clusterpedia resources mapping"},
      {"--status-interval", "WALWATCH_STATUS_INTERVAL", "1s"},
      {"--connect-timeout", "WALWATCH_CONNECT_TIMEOUT", "10s"},
      {"--mysql-conninfo", "WALWATCH_MYSQL_CONNINFO", "empty"},
      {"--server-id", "WALWATCH_SERVER_ID", "unset"},
      {"--server-id-from", "WALWATCH_SERVER_ID_FROM", "unset"},
      {"--socket", "WALWATCH_SOCKET", "/run/walwatch/walwatch.sock"},
      {"--socket-mode", "WALWATCH_SOCKET_MODE", "0660"},
      {"--kinds", "WALWATCH_KINDS", "empty"},
      {"--tcp-listen", "WALWATCH_TCP_LISTEN", "empty"},
      {"--http-threads", "WALWATCH_HTTP_THREADS", "1"},
      {"--too-large-rv-wait", "WALWATCH_TOO_LARGE_RV_WAIT", "3s"},
      {"--initial-state-stall-timeout", "WALWATCH_INITIAL_STATE_STALL_TIMEOUT",
       "20s"},
      {"--initial-state-min-rate", "WALWATCH_INITIAL_STATE_MIN_RATE", "1Mi"},
      {"--bookmark-interval", "WALWATCH_BOOKMARK_INTERVAL", "1m"},
      {"--max-log-bytes", "WALWATCH_MAX_LOG_BYTES", "256Mi"},
      {"--max-connection-buffer-bytes", "WALWATCH_MAX_CONNECTION_BUFFER_BYTES",
       "128Mi"},
      {"--log-level", "WALWATCH_LOG_LEVEL", "info"},
  };
  for (const auto& f : kFlags) {
    const size_t at = help.find(std::string("  ") + f.flag + " ");
    ASSERT_NE(at, std::string::npos) << f.flag;
    // The entry's "Default: ... Env: ..." line belongs to this flag.
    const size_t default_at = help.find("Default: ", at);
    ASSERT_NE(default_at, std::string::npos) << f.flag;
    const size_t line_end = help.find('\n', default_at);
    const std::string line = help.substr(default_at, line_end - default_at);
    EXPECT_EQ(line.rfind(std::string("Default: ") + f.default_text, 0), 0u)
        << line;
    EXPECT_NE(line.find(std::string("Env: ") + f.env + "."), std::string::npos)
        << line;
    // Every flag named in the table is accepted by the parser.
    EXPECT_EQ(ErrorFor({std::string(f.flag)}).find("unknown flag"),
              std::string::npos)
        << f.flag;
  }
  EXPECT_NE(help.find("--help"), std::string::npos);
}

TEST(ConfigHelp, GroupsFlagsUnderHeadings) {
  const std::string help = HelpText();
  const size_t pg = help.find("\nPostgreSQL:\n");
  const size_t serving = help.find("\nServing:\n");
  const size_t event_log = help.find("\nEvent log:\n");
  const size_t logging = help.find("\nLogging:\n");
  ASSERT_NE(pg, std::string::npos);
  ASSERT_NE(serving, std::string::npos);
  ASSERT_NE(event_log, std::string::npos);
  ASSERT_NE(logging, std::string::npos);
  const size_t mysql = help.find("\nMySQL/MariaDB (--source mysql):\n");
  ASSERT_NE(mysql, std::string::npos);
  EXPECT_LT(help.find("  --source "), pg);
  EXPECT_LT(pg, help.find("  --conninfo "));
  EXPECT_LT(help.find("  --connect-timeout "), mysql);
  EXPECT_LT(mysql, help.find("  --mysql-conninfo "));
  EXPECT_LT(help.find("  --server-id-from "), serving);
  EXPECT_LT(serving, help.find("--socket "));
  EXPECT_LT(help.find("--too-large-rv-wait"), event_log);
  EXPECT_LT(serving, help.find("--bookmark-interval"));
  EXPECT_LT(help.find("--bookmark-interval"), event_log);
  EXPECT_LT(event_log, help.find("--max-log-bytes"));
  EXPECT_LT(logging, help.find("--log-level"));
}

}  // namespace
}  // namespace walwatch
