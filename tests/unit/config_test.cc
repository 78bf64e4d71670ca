#include "watchserver/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/unit/support/parse_config.h"
#include "watchserver/config_values.h"

namespace walwatch {
namespace {

using std::chrono::milliseconds;

TEST(Config, Defaults) {
  Parsed p = Parse({});
  ASSERT_EQ(p.error, "");
  const Config& c = p.config;
  EXPECT_EQ(c.conninfo, "");
  EXPECT_EQ(c.slot, "walwatch");
  EXPECT_EQ(c.mapping_path, "");
  EXPECT_EQ(c.status_interval, milliseconds(1000));
  EXPECT_EQ(c.connect_timeout, milliseconds(10000));
  EXPECT_EQ(c.socket_path, "/run/walwatch/walwatch.sock");
  EXPECT_EQ(c.socket_mode, 0660u);
  EXPECT_EQ(c.tcp_listen, "");
  EXPECT_EQ(c.http_threads, 1);
  EXPECT_EQ(c.too_large_rv_wait, milliseconds(3000));
  EXPECT_EQ(c.bookmark_interval, milliseconds(60000));
  EXPECT_EQ(c.max_log_bytes, size_t{256} * 1024 * 1024);
  EXPECT_EQ(c.log_level, LogLevel::kInfo);
  EXPECT_FALSE(c.help);
}

TEST(Config, DefaultsMatchStructInitializers) {
  Config out;
  out.slot = "changed";
  ASSERT_EQ(ParseConfig(0, nullptr, nullptr, &out), "");
  EXPECT_EQ(ConfigToJson(out), ConfigToJson(Config{}));
}

TEST(Config, DefaultJson) {
  EXPECT_EQ(ConfigToJson(Config{}),
            "{\"source\":\"postgres\","
            "\"conninfo\":\"\",\"slot\":\"walwatch\",\"slot-from\":\"\","
            "\"plugin\":\"wal2json\",\"publication\":\"\","
            "\"pgoutput-protocol\":\"auto\",\"slot-failover\":false,"
            "\"mapping\":\"\","
            "\"status-interval\":\"1s\",\"replication-timeout\":\"1m\","
            "\"connect-timeout\":\"10s\","
            "\"mysql-conninfo\":\"\",\"server-id\":\"\","
            "\"server-id-from\":\"\","
            "\"socket\":\"/run/walwatch/walwatch.sock\","
            "\"socket-mode\":\"0660\",\"kinds\":\"\","
            "\"allow-uids\":\"\",\"allow-gids\":\"\","
            "\"tcp-listen\":\"\","
            "\"http-threads\":1,\"too-large-rv-wait\":\"3s\","
            "\"initial-state-timeout\":\"5m\","
            "\"initial-state-stall-timeout\":\"20s\","
            "\"initial-state-min-rate\":\"1Mi\","
            "\"bookmark-interval\":\"1m\",\"wake-interval\":\"auto\","
            "\"sendfile\":true,"
            "\"max-watcher-backlog\":\"128Mi\",\"max-connections\":\"auto\","
            "\"max-connection-buffer-bytes\":\"128Mi\","
            "\"metrics-address\":\"127.0.0.1:9187\","
            "\"ready-max-lag\":\"16Mi\",\"state-workers\":4,"
            "\"retained-wal-warn\":\"1Gi\",\"replay-window\":\"10m\","
            "\"replay-window-bytes\":\"512Mi\","
            "\"max-log-bytes\":\"256Mi\",\"log-level\":\"info\"}");
}

TEST(Config, BothFlagSyntaxes) {
  Parsed spaced = Parse({"--slot", "a_1", "--max-log-bytes", "1Gi",
                         "--log-level", "debug", "--http-threads", "8"});
  Parsed joined = Parse({"--slot=a_1", "--max-log-bytes=1Gi",
                         "--log-level=debug", "--http-threads=8"});
  for (const Parsed* p : {&spaced, &joined}) {
    ASSERT_EQ(p->error, "");
    EXPECT_EQ(p->config.slot, "a_1");
    EXPECT_EQ(p->config.max_log_bytes, size_t{1} << 30);
    EXPECT_EQ(p->config.log_level, LogLevel::kDebug);
    EXPECT_EQ(p->config.http_threads, 8);
  }
}

TEST(Config, EqualsFormKeepsLaterEqualsSigns) {
  Parsed p = Parse({"--conninfo=host=db port=5433"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.conninfo, "host=db port=5433");
}

TEST(Config, EmptyValueWithEqualsForm) {
  Parsed p = Parse({"--tcp-listen="}, {"WALWATCH_TCP_LISTEN=127.0.0.1:8080"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.tcp_listen, "");
}

TEST(Config, LastFlagWins) {
  Parsed p = Parse({"--slot=a", "--slot", "b"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.slot, "b");
}

TEST(Config, EnvSetsFlag) {
  Parsed p = Parse(
      {}, {"WALWATCH_MAX_LOG_BYTES=512Mi", "WALWATCH_SLOT=envslot",
           "WALWATCH_TOO_LARGE_RV_WAIT=5s", "WALWATCH_CONNINFO=host=envhost"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.max_log_bytes, size_t{512} << 20);
  EXPECT_EQ(p.config.slot, "envslot");
  EXPECT_EQ(p.config.too_large_rv_wait, milliseconds(5000));
  EXPECT_EQ(p.config.conninfo, "host=envhost");
}

TEST(Config, FlagWinsOverEnv) {
  Parsed p = Parse({"--slot", "flagslot", "--max-log-bytes=2Mi"},
                   {"WALWATCH_SLOT=envslot", "WALWATCH_MAX_LOG_BYTES=512Mi",
                    "WALWATCH_LOG_LEVEL=warn"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.slot, "flagslot");
  EXPECT_EQ(p.config.max_log_bytes, size_t{2} << 20);
  EXPECT_EQ(p.config.log_level, LogLevel::kWarn);  // No flag: env applies.
}

// --slot and --slot-from name the same slot: either on the command line
// wins over both variables (an envFrom with WALWATCH_SLOT must not make
// every replica share one slot).
TEST(Config, SlotFlagsWinOverBothSlotVariables) {
  const std::vector<std::string> env = {"WALWATCH_SLOT=envslot",
                                        "WALWATCH_SLOT_FROM=env-from"};
  Parsed from = Parse({"--slot-from", "walwatch_pod-0"}, env);
  ASSERT_EQ(from.error, "");
  EXPECT_EQ(from.config.slot, "walwatch_pod_0");
  Parsed slot = Parse({"--slot", "flagslot"}, env);
  ASSERT_EQ(slot.error, "");
  EXPECT_EQ(slot.config.slot, "flagslot");
  // Both in the environment: --slot-from's replaces --slot's, as on the
  // command line.
  Parsed both = Parse({}, env);
  ASSERT_EQ(both.error, "");
  EXPECT_EQ(both.config.slot, "env_from");
}

TEST(Config, SourceIsPostgresOrMysql) {
  EXPECT_EQ(Parse({}).config.source, Config::Source::kPostgres);
  Parsed p = Parse({"--source", "mysql"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.source, Config::Source::kMysql);
  EXPECT_EQ(Parse({"--source=mariadb"}).config.source, Config::Source::kMysql);
  EXPECT_EQ(Parse({}, {"WALWATCH_SOURCE=mysql"}).config.source,
            Config::Source::kMysql);
  EXPECT_EQ(
      Parse({"--source=postgres"}, {"WALWATCH_SOURCE=mysql"}).config.source,
      Config::Source::kPostgres);
  EXPECT_NE(Parse({"--source", "oracle"}).error.find("postgres or mysql"),
            std::string::npos);
}

// The MySQL connection string is kept as given for main to check (an error
// here would quote its password), and logged with the password masked.
TEST(Config, MysqlConninfoIsMaskedInTheLog) {
  Parsed p = Parse(
      {"--mysql-conninfo", "host=db user=w password='s3 cret' database=cp"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.mysql_conninfo,
            "host=db user=w password='s3 cret' database=cp");
  const std::string json = ConfigToJson(p.config);
  EXPECT_EQ(json.find("s3 cret"), std::string::npos) << json;
  EXPECT_NE(json.find("password=********"), std::string::npos) << json;
}

// --server-id and --server-id-from set the same id: either on the command
// line wins over both variables, as --slot and --slot-from do.
TEST(Config, ServerIdFlagsWinOverBothVariables) {
  const std::vector<std::string> env = {"WALWATCH_SERVER_ID=7",
                                        "WALWATCH_SERVER_ID_FROM=env-pod"};
  Parsed from = Parse({"--server-id-from", "walwatch-pod-0"}, env);
  ASSERT_EQ(from.error, "");
  EXPECT_EQ(from.config.server_id_from, "walwatch-pod-0");
  EXPECT_EQ(from.config.server_id, 0u);
  Parsed id = Parse({"--server-id", "42"}, env);
  ASSERT_EQ(id.error, "");
  EXPECT_EQ(id.config.server_id, 42u);
  EXPECT_EQ(id.config.server_id_from, "");
  Parsed none = Parse({});
  EXPECT_EQ(none.config.server_id, 0u);
  EXPECT_EQ(none.config.server_id_from, "");
  for (const char* bad : {"0", "4294967296", "-1", "x"}) {
    EXPECT_NE(Parse({"--server-id", bad}).error, "") << bad;
  }
  EXPECT_NE(Parse({"--server-id-from", std::string(61, 'a')}).error, "");
}

TEST(Config, BadEnvIgnoredWhenFlagGiven) {
  Parsed p = Parse({"--max-log-bytes=2Mi"}, {"WALWATCH_MAX_LOG_BYTES=lots"});
  EXPECT_EQ(p.error, "");
}

TEST(Config, EmptyEnvCountsAsUnset) {
  Parsed p = Parse({}, {"WALWATCH_SLOT=", "WALWATCH_STATUS_INTERVAL="});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.slot, "walwatch");
}

TEST(Config, UnknownWalwatchEnvIgnored) {
  // Kubernetes injects these for a Service named walwatch.
  Parsed p = Parse({}, {"WALWATCH_PORT=tcp://10.0.0.1:80",
                        "WALWATCH_SERVICE_HOST=10.0.0.1", "WALWATCH_HELP=1"});
  ASSERT_EQ(p.error, "");
  EXPECT_FALSE(p.config.help);
}

TEST(Config, FirstEnvEntryWins) {
  Parsed p = Parse({}, {"WALWATCH_SLOT=first", "WALWATCH_SLOT=second"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.slot, "first");
}

TEST(Config, EnvNameMustMatchExactly) {
  Parsed p =
      Parse({}, {"WALWATCH_SLOTX=nope", "walwatch_slot=nope", "WALWATCH_SLOT"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.slot, "walwatch");
}

TEST(Config, BadEnvValueNamesVariableAndFlag) {
  EXPECT_EQ(ErrorFor({}, {"WALWATCH_MAX_LOG_BYTES=lots"}),
            "invalid value \"lots\" for WALWATCH_MAX_LOG_BYTES "
            "(--max-log-bytes): expected a size such as 256Mi");
}

TEST(Config, Durations) {
  const struct {
    const char* text;
    int64_t ms;
  } kCases[] = {
      {"500ms", 500},     {"30s", 30000},
      {"10m", 600000},    {"1h", 3600000},
      {"1h30m", 5400000}, {"45", 45000},
      {"0", 0},           {"0s", 0},
      {"1s500ms", 1500},  {"2h0m5s", 7205000},
      {"007s", 7000},     {"1h1m1s1ms", 3661001},
  };
  for (const auto& c : kCases) {
    Parsed p = Parse({"--too-large-rv-wait", c.text});
    ASSERT_EQ(p.error, "") << c.text;
    EXPECT_EQ(p.config.too_large_rv_wait, milliseconds(c.ms)) << c.text;
  }
}

TEST(Config, BadDurations) {
  for (const char* bad : {"", "abc", "10x", "1.5s", "-1s", "+1s", "1m1h",
                          "1s1s", "1h30", "s", "ms", "1 s", " 1s", "1S", "1d",
                          "99999999999999999999", "9999999999999999h", "1e3"}) {
    EXPECT_EQ(ErrorFor({std::string("--too-large-rv-wait=") + bad}),
              std::string("invalid value \"") + bad +
                  "\" for --too-large-rv-wait: expected a duration such as "
                  "30s, 500ms or 1h30m")
        << bad;
  }
}

TEST(Config, StatusIntervalRange) {
  EXPECT_EQ(Parse({"--status-interval=29s999ms"}).config.status_interval,
            milliseconds(29999));
  EXPECT_EQ(Parse({"--status-interval=1ms"}).config.status_interval,
            milliseconds(1));
  for (const char* bad : {"0", "0s", "30s", "1m"}) {
    EXPECT_EQ(ErrorFor({"--status-interval", bad}),
              std::string("invalid value \"") + bad +
                  "\" for --status-interval: must be more than 0 and less "
                  "than 30s");
  }
}

TEST(Config, ConnectTimeoutAtLeastOneSecond) {
  EXPECT_EQ(Parse({"--connect-timeout=1s"}).config.connect_timeout,
            milliseconds(1000));
  EXPECT_EQ(ErrorFor({"--connect-timeout=500ms"}),
            "invalid value \"500ms\" for --connect-timeout: must be at least "
            "1s");
}

TEST(Config, InitialStateStallTimeoutIsOffOrAtLeastOneSecond) {
  EXPECT_EQ(Config{}.initial_state_stall_timeout, milliseconds(20000));
  EXPECT_EQ(Parse({"--initial-state-stall-timeout=0"})
                .config.initial_state_stall_timeout,
            milliseconds(0));
  EXPECT_EQ(Parse({"--initial-state-stall-timeout", "1s"})
                .config.initial_state_stall_timeout,
            milliseconds(1000));
  Parsed env = Parse({}, {"WALWATCH_INITIAL_STATE_STALL_TIMEOUT=2m"});
  ASSERT_EQ(env.error, "");
  EXPECT_EQ(env.config.initial_state_stall_timeout, milliseconds(120000));
  EXPECT_EQ(ErrorFor({"--initial-state-stall-timeout=999ms"}),
            "invalid value \"999ms\" for --initial-state-stall-timeout: must "
            "be 0 (no limit) or at least 1s");
  EXPECT_EQ(ErrorFor({"--initial-state-stall-timeout=soon"}),
            "invalid value \"soon\" for --initial-state-stall-timeout: "
            "expected a duration such as 30s, 500ms or 1h30m");
}

TEST(Config, InitialStateMinRateIsASize) {
  EXPECT_EQ(Config{}.initial_state_min_rate, uint64_t{1} << 20);
  EXPECT_EQ(Parse({"--initial-state-min-rate=0"}).config.initial_state_min_rate,
            0u);
  EXPECT_EQ(
      Parse({"--initial-state-min-rate", "64Ki"}).config.initial_state_min_rate,
      uint64_t{65536});
  Parsed env = Parse({}, {"WALWATCH_INITIAL_STATE_MIN_RATE=10M"});
  ASSERT_EQ(env.error, "");
  EXPECT_EQ(env.config.initial_state_min_rate, uint64_t{10000000});
  EXPECT_EQ(ErrorFor({"--initial-state-min-rate=fast"}),
            "invalid value \"fast\" for --initial-state-min-rate: expected a "
            "size such as 1Mi");
  EXPECT_EQ(ErrorFor({"--initial-state-min-rate=-1"}),
            "invalid value \"-1\" for --initial-state-min-rate: expected a "
            "size such as 1Mi");
}

TEST(Config, BookmarkInterval) {
  EXPECT_EQ(Parse({"--bookmark-interval=1s"}).config.bookmark_interval,
            milliseconds(1000));
  EXPECT_EQ(Parse({"--bookmark-interval", "1m30s"}).config.bookmark_interval,
            milliseconds(90000));
  Parsed env = Parse({}, {"WALWATCH_BOOKMARK_INTERVAL=5s"});
  ASSERT_EQ(env.error, "");
  EXPECT_EQ(env.config.bookmark_interval, milliseconds(5000));
  EXPECT_EQ(Parse({"--bookmark-interval=2s"}, {"WALWATCH_BOOKMARK_INTERVAL=5s"})
                .config.bookmark_interval,
            milliseconds(2000));
  // Shorter would have every bookmark-watching session write several times
  // a second for nothing: the current RV moves about once a second.
  for (const char* bad : {"0", "999ms", "500ms"}) {
    EXPECT_EQ(ErrorFor({"--bookmark-interval", bad}),
              std::string("invalid value \"") + bad +
                  "\" for --bookmark-interval: must be at least 1s");
  }
  EXPECT_EQ(ErrorFor({"--bookmark-interval=soon"}),
            "invalid value \"soon\" for --bookmark-interval: expected a "
            "duration such as 30s, 500ms or 1h30m");
  EXPECT_EQ(ErrorFor({}, {"WALWATCH_BOOKMARK_INTERVAL=10ms"}),
            "invalid value \"10ms\" for WALWATCH_BOOKMARK_INTERVAL "
            "(--bookmark-interval): must be at least 1s");
}

TEST(Config, Sizes) {
  const struct {
    const char* text;
    uint64_t bytes;
  } kCases[] = {
      {"256Mi", uint64_t{256} << 20},
      {"1Gi", uint64_t{1} << 30},
      {"2048Ki", uint64_t{2} << 20},
      {"1Ti", uint64_t{1} << 40},
      {"100M", 100000000},
      {"1G", 1000000000},
      {"2T", 2000000000000},
      {"5000k", 5000000},
      {"5000K", 5000000},
      {"1048576", 1048576},
  };
  for (const auto& c : kCases) {
    Parsed p = Parse({"--max-log-bytes", c.text});
    ASSERT_EQ(p.error, "") << c.text;
    EXPECT_EQ(p.config.max_log_bytes, c.bytes) << c.text;
  }
}

TEST(Config, BadSizes) {
  for (const char* bad :
       {"", "lots", "256MB", "256mi", "1.5Gi", "Mi", "-1", "1 Mi", "1Mi ",
        "1KiB", "99999999999999999999", "17179869184Gi"}) {
    EXPECT_EQ(ErrorFor({std::string("--max-log-bytes=") + bad}),
              std::string("invalid value \"") + bad +
                  "\" for --max-log-bytes: expected a size such as 256Mi")
        << bad;
  }
}

TEST(Config, MaxLogBytesMinimum) {
  EXPECT_EQ(Parse({"--max-log-bytes=1Mi"}).config.max_log_bytes, 1u << 20);
  EXPECT_EQ(ErrorFor({"--max-log-bytes", "512Ki"}),
            "invalid value \"512Ki\" for --max-log-bytes: must be at least "
            "1Mi");
  EXPECT_EQ(ErrorFor({"--max-log-bytes", "1M"}),
            "invalid value \"1M\" for --max-log-bytes: must be at least 1Mi");
}

TEST(Config, SizeAndDurationRoundTripThroughJson) {
  Parsed p = Parse({"--max-log-bytes=1000000000", "--status-interval=1500ms",
                    "--too-large-rv-wait=5400"});
  ASSERT_EQ(p.error, "");
  const std::string json = ConfigToJson(p.config);
  EXPECT_NE(json.find("\"max-log-bytes\":\"1G\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"status-interval\":\"1s500ms\""), std::string::npos);
  EXPECT_NE(json.find("\"too-large-rv-wait\":\"1h30m\""), std::string::npos);
}

TEST(Config, Slot) {
  EXPECT_EQ(Parse({"--slot", std::string(63, 'a')}).error, "");
  EXPECT_EQ(Parse({"--slot", "walwatch_2"}).error, "");
  for (const std::string& bad :
       {std::string(), std::string(64, 'a'), std::string("Walwatch"),
        std::string("wal-watch"), std::string("wal watch")}) {
    EXPECT_EQ(ErrorFor({"--slot=" + bad}),
              "invalid value \"" + bad +
                  "\" for --slot: expected 1 to 63 characters from a-z, 0-9 "
                  "and _");
  }
}

TEST(Config, SocketMode) {
  EXPECT_EQ(Parse({"--socket-mode", "0600"}).config.socket_mode, 0600u);
  EXPECT_EQ(Parse({"--socket-mode", "666"}).config.socket_mode, 0666u);
  for (const char* bad : {"", "0680", "rw-rw----", "017777", "0x1b6"}) {
    EXPECT_EQ(ErrorFor({std::string("--socket-mode=") + bad}),
              std::string("invalid value \"") + bad +
                  "\" for --socket-mode: expected an octal file mode such as "
                  "0660");
  }
}

TEST(Config, SocketPathFitsSunPath) {
  EXPECT_EQ(Parse({"--socket", "/tmp/" + std::string(102, 's')}).error, "");
  const std::string too_long = "/tmp/" + std::string(103, 's');
  EXPECT_EQ(ErrorFor({"--socket", too_long}),
            "invalid value \"" + too_long +
                "\" for --socket: expected a path of 1 to 107 bytes");
}

TEST(Config, TcpListenLoopbackOnly) {
  Parsed v4 = Parse({"--tcp-listen", "127.0.0.1:8080"});
  ASSERT_EQ(v4.error, "");
  EXPECT_EQ(v4.config.tcp_listen, "127.0.0.1:8080");
  EXPECT_EQ(v4.config.tcp_listen_address, "127.0.0.1");
  EXPECT_EQ(v4.config.tcp_listen_port, 8080);
  Parsed v6 = Parse({"--tcp-listen=[::1]:65535"});
  ASSERT_EQ(v6.error, "");
  EXPECT_EQ(v6.config.tcp_listen_address, "::1");
  EXPECT_EQ(v6.config.tcp_listen_port, 65535);
  EXPECT_EQ(Parse({"--tcp-listen=127.1.2.3:1"}).error, "");
  for (const char* bad :
       {"0.0.0.0:8080", "10.0.0.1:8080", "localhost:8080", "127.0.0.1",
        "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "[::]:8080", "::1:8080",
        "127.0.0.1:80x", ":8080"}) {
    EXPECT_EQ(ErrorFor({std::string("--tcp-listen=") + bad}),
              std::string("invalid value \"") + bad +
                  "\" for --tcp-listen: expected a loopback address and port "
                  "such as 127.0.0.1:8080");
  }
}

TEST(Config, HttpThreadsRange) {
  EXPECT_EQ(Parse({"--http-threads=1"}).config.http_threads, 1);
  EXPECT_EQ(Parse({"--http-threads=64"}).config.http_threads, 64);
  for (const char* bad : {"0", "65", "-1", "two", ""}) {
    EXPECT_EQ(ErrorFor({std::string("--http-threads=") + bad}),
              std::string("invalid value \"") + bad +
                  "\" for --http-threads: expected an integer from 1 to 64");
  }
}

TEST(Config, LogLevel) {
  EXPECT_EQ(Parse({"--log-level=error"}).config.log_level, LogLevel::kError);
  EXPECT_EQ(ErrorFor({"--log-level=INFO"}),
            "invalid value \"INFO\" for --log-level: expected one of debug, "
            "info, warn, error");
}

TEST(Config, UnknownFlag) {
  EXPECT_EQ(ErrorFor({"--nope"}), "unknown flag --nope (see --help)");
  EXPECT_EQ(ErrorFor({"--nope=1"}), "unknown flag --nope (see --help)");
  EXPECT_EQ(ErrorFor({"--slot=a", "--max-log-byte", "1Gi"}),
            "unknown flag --max-log-byte (see --help)");
  EXPECT_EQ(ErrorFor({"-slot"}), "unknown flag -slot (see --help)");
  EXPECT_EQ(ErrorFor({"--bad\nname"}),
            "unknown flag --\"bad\\nname\" (see --help)");
}

TEST(Config, PositionalArgumentRejected) {
  EXPECT_EQ(ErrorFor({"serve"}),
            "unexpected argument \"serve\": walwatch takes only flags (see "
            "--help)");
  EXPECT_EQ(ErrorFor({"--slot", "a", "b"}),
            "unexpected argument \"b\": walwatch takes only flags (see "
            "--help)");
}

TEST(Config, MissingValue) {
  EXPECT_EQ(ErrorFor({"--slot"}), "flag --slot needs a value");
  EXPECT_EQ(ErrorFor({"--conninfo", "--slot=a"}),
            "flag --conninfo needs a value");
}

TEST(Config, ErrorValueIsEscapedToOneLine) {
  EXPECT_EQ(ErrorFor({"--http-threads", "1\n2"}),
            "invalid value \"1\\n2\" for --http-threads: expected an integer "
            "from 1 to 64");
}

TEST(Config, HelpFlag) {
  EXPECT_TRUE(Parse({"--help"}).config.help);
  EXPECT_TRUE(Parse({"-h"}).config.help);
  EXPECT_TRUE(Parse({"--help=true"}).config.help);
  // --help stops parsing: whatever follows, and the environment, is unread.
  Parsed p = Parse({"--help", "--nope", "--max-log-bytes=x"},
                   {"WALWATCH_MAX_LOG_BYTES=x"});
  EXPECT_EQ(p.error, "");
  EXPECT_TRUE(p.config.help);
  Parsed off = Parse({"--help=false", "--slot=a"});
  EXPECT_EQ(off.error, "");
  EXPECT_FALSE(off.config.help);
  EXPECT_EQ(off.config.slot, "a");
  EXPECT_EQ(ErrorFor({"--help=maybe"}),
            "invalid value \"maybe\" for --help: expected true or false");
  // A boolean takes its value only after '='.
  EXPECT_EQ(ErrorFor({"--help=false", "false"}),
            "unexpected argument \"false\": walwatch takes only flags (see "
            "--help)");
}

TEST(Config, SendfileIsABooleanOnByDefault) {
  EXPECT_TRUE(Parse({}).config.sendfile);
  EXPECT_FALSE(Parse({"--sendfile=false"}).config.sendfile);
  EXPECT_FALSE(Parse({}, {"WALWATCH_SENDFILE=false"}).config.sendfile);
  EXPECT_TRUE(
      Parse({"--sendfile"}, {"WALWATCH_SENDFILE=false"}).config.sendfile);
  EXPECT_EQ(ErrorFor({"--sendfile=maybe"}),
            "invalid value \"maybe\" for --sendfile: expected true or false");
}

TEST(Config, WakeIntervalIsAutoOrADurationUpToOneSecond) {
  // The default: a hold that grows with the wake, at most 10ms.
  EXPECT_TRUE(Parse({}).config.wake_interval_auto);
  EXPECT_EQ(Parse({}).config.wake_interval, std::chrono::milliseconds(10));
  const Config fixed = Parse({"--wake-interval=5ms"}).config;
  EXPECT_FALSE(fixed.wake_interval_auto);
  EXPECT_EQ(fixed.wake_interval, std::chrono::milliseconds(5));
  const Config off = Parse({"--wake-interval=0"}).config;
  EXPECT_FALSE(off.wake_interval_auto);
  EXPECT_EQ(off.wake_interval, std::chrono::milliseconds(0));
  EXPECT_EQ(Parse({}, {"WALWATCH_WAKE_INTERVAL=1s"}).config.wake_interval,
            std::chrono::seconds(1));
  // The flag beats the environment, whichever form either takes.
  const Config back = Parse({"--wake-interval=auto"},
                            {"WALWATCH_WAKE_INTERVAL=1s"})
                          .config;
  EXPECT_TRUE(back.wake_interval_auto);
  EXPECT_EQ(back.wake_interval, std::chrono::milliseconds(10));
  EXPECT_EQ(ErrorFor({"--wake-interval=2s"}),
            "invalid value \"2s\" for --wake-interval: must be at most 1s");
  EXPECT_EQ(ErrorFor({"--wake-interval=soon"}),
            "invalid value \"soon\" for --wake-interval: expected auto or a "
            "duration such as 5ms");
}

TEST(Config, MaxConnectionsIsAutoOrACount) {
  EXPECT_EQ(Parse({}).config.max_connections, 0u);  // auto
  EXPECT_EQ(Parse({"--max-connections=500"}).config.max_connections, 500u);
  EXPECT_EQ(Parse({}, {"WALWATCH_MAX_CONNECTIONS=7"}).config.max_connections,
            7u);
  EXPECT_EQ(Parse({"--max-connections=auto"}, {"WALWATCH_MAX_CONNECTIONS=7"})
                .config.max_connections,
            0u);
  for (const char* bad : {"0", "-1", "1000001", "many", ""}) {
    EXPECT_EQ(ErrorFor({std::string("--max-connections=") + bad}),
              std::string("invalid value \"") + bad +
                  "\" for --max-connections: expected auto or an integer "
                  "from 1 to 1000000")
        << bad;
  }
}

TEST(Config, MaxConnectionBufferBytesIsASizeOfAtLeast4Mi) {
  EXPECT_EQ(Parse({}).config.max_connection_buffer_bytes, size_t{128} << 20);
  EXPECT_EQ(Parse({"--max-connection-buffer-bytes=1Gi"})
                .config.max_connection_buffer_bytes,
            size_t{1} << 30);
  EXPECT_EQ(Parse({}, {"WALWATCH_MAX_CONNECTION_BUFFER_BYTES=4194304"})
                .config.max_connection_buffer_bytes,
            size_t{4} << 20);
  EXPECT_EQ(Parse({"--max-connection-buffer-bytes=64Mi"},
                  {"WALWATCH_MAX_CONNECTION_BUFFER_BYTES=1Gi"})
                .config.max_connection_buffer_bytes,
            size_t{64} << 20);
  for (const char* small : {"0", "1Mi", "4194303"}) {
    EXPECT_EQ(ErrorFor({std::string("--max-connection-buffer-bytes=") + small}),
              std::string("invalid value \"") + small +
                  "\" for --max-connection-buffer-bytes: must be at least 4Mi")
        << small;
  }
  for (const char* bad : {"-1", "lots", "", "12Xi"}) {
    EXPECT_EQ(ErrorFor({std::string("--max-connection-buffer-bytes=") + bad}),
              std::string("invalid value \"") + bad +
                  "\" for --max-connection-buffer-bytes: expected a size such "
                  "as 128Mi")
        << bad;
  }
}

TEST(Config, JsonRedactsConninfo) {
  for (const char* conninfo :
       {"host=db password=hunter2", "postgresql://u:hunter2@db/x"}) {
    Parsed p = Parse({"--conninfo", conninfo});
    ASSERT_EQ(p.error, "");
    EXPECT_EQ(p.config.conninfo, conninfo);  // Only the display is redacted.
    const std::string json = ConfigToJson(p.config);
    EXPECT_EQ(json.find("hunter2"), std::string::npos) << json;
    EXPECT_NE(json.find("********"), std::string::npos) << json;
  }
}

TEST(Config, JsonEscapesValues) {
  Parsed p = Parse({"--mapping", "/etc/a \"b\"\\c.json"});
  ASSERT_EQ(p.error, "");
  EXPECT_NE(
      ConfigToJson(p.config).find("\"mapping\":\"/etc/a \\\"b\\\"\\\\c.json\""),
      std::string::npos);
}

TEST(Config, SlotFromMakesAValidName) {
  Parsed p = Parse({"--slot-from", "walwatch_Clusterpedia-APIServer-0"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.slot, "walwatch_clusterpedia_apiserver_0");
  // The startup log shows both what was given and the name made of it.
  EXPECT_NE(ConfigToJson(p.config).find(
                "\"slot\":\"walwatch_clusterpedia_apiserver_0\","
                "\"slot-from\":\"walwatch_Clusterpedia-APIServer-0\""),
            std::string::npos)
      << ConfigToJson(p.config);
  std::string long_a = "walwatch_" + std::string(60, 'a') + "-1";
  std::string long_b = "walwatch_" + std::string(60, 'a') + "-2";
  std::string a = SlotNameFrom(long_a), b = SlotNameFrom(long_b);
  EXPECT_EQ(a.size(), 63u);
  EXPECT_NE(a, b);  // the hash keeps long names that share a prefix apart
  for (char c : a) {
    EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
}

TEST(Config, PluginPublicationProtocolAndFailover) {
  Parsed p = Parse({"--plugin", "pgoutput", "--publication", "ww_pub",
                    "--pgoutput-protocol", "2", "--slot-failover"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.config.plugin, Config::Plugin::kPgoutput);
  EXPECT_EQ(p.config.publication, "ww_pub");
  EXPECT_EQ(p.config.pgoutput_protocol, 2);
  EXPECT_TRUE(p.config.slot_failover);
  EXPECT_EQ(Parse({"--pgoutput-protocol", "auto"}).config.pgoutput_protocol, 0);
  EXPECT_EQ(Parse({}, {"WALWATCH_PLUGIN=pgoutput"}).config.plugin,
            Config::Plugin::kPgoutput);

  EXPECT_NE(Parse({"--plugin", "test_decoding"}).error.find(
                "expected wal2json or pgoutput"),
            std::string::npos);
  for (const char* bad : {"0", "5", "12", "", "v4"}) {
    EXPECT_NE(Parse({"--pgoutput-protocol", bad}).error.find(
                  "expected auto or 1 to 4"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(Parse({"--publication", std::string(64, 'p')}).error.find(
                "expected 1 to 63 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace walwatch
