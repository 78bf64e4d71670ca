#include "watchserver/loopback_address.h"

#include <gtest/gtest.h>

#include <string>

namespace walwatch {
namespace {

TEST(LoopbackAddress, AcceptsIpv4LoopbackAndBracketedIpv6Loopback) {
  struct Case {
    const char* text;
    const char* host;
    uint16_t port;
  };
  for (const Case& c : {Case{"127.0.0.1:8080", "127.0.0.1", 8080},
                        Case{"127.1.2.3:1", "127.1.2.3", 1},
                        Case{"127.255.255.255:65535", "127.255.255.255", 65535},
                        Case{"[::1]:8080", "::1", 8080},
                        Case{"[::1]:65535", "::1", 65535},
                        Case{"127.0.0.1:0", "127.0.0.1", 0}}) {
    std::string host;
    uint16_t port = 1;
    ASSERT_TRUE(ParseLoopbackAddress(c.text, &host, &port)) << c.text;
    EXPECT_EQ(host, c.host) << c.text;
    EXPECT_EQ(port, c.port) << c.text;
  }
}

TEST(LoopbackAddress, RefusesEverythingElse) {
  for (const char* bad : {
           // Not loopback.
           "0.0.0.0:8080", "10.0.0.1:8080", "128.0.0.1:8080", "[::]:8080",
           "[::ffff:127.0.0.1]:8080",
           // Names, and loopback spelled other than the rule's two forms.
           "localhost:8080", "[localhost]:8080", "[0:0:0:0:0:0:0:1]:8080",
           "[::1%lo]:8080", "127.1:8080", "[127.0.0.1]:8080",
           // IPv6 without brackets is ambiguous: "::1:8080" is an address.
           "::1:8080", "::1",
           // The port: missing, empty, not decimal, out of range.
           "127.0.0.1", "127.0.0.1:", "[::1]", "[::1]:", "[::1]8080",
           "127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:80x",
           "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1: 80",
           // No host at all.
           ":8080", "", ":"}) {
    std::string host = "unchanged";
    uint16_t port = 7;
    EXPECT_FALSE(ParseLoopbackAddress(bad, &host, &port)) << bad;
    EXPECT_EQ(host, "unchanged") << bad;
    EXPECT_EQ(port, 7) << bad;
  }
}

}  // namespace
}  // namespace walwatch
