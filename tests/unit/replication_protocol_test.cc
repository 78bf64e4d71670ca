#include "cdc/postgres/replication_connection.h"
#include "cdc/postgres/replication_protocol.h"

#include <string>

#include <gtest/gtest.h>

namespace walwatch {
namespace {

// Bytes as FACTS.md lays them out: big-endian, times since 2000-01-01.
TEST(ReplicationProtocol, AStatusUpdateIs34BytesBigEndian) {
  StandbyStatusUpdate u;
  u.write = 0x0102030405060708;
  u.flush = 0x1558570;
  u.apply = 0x1558570;
  u.send_time_unix_us = 946684800LL * 1000000 + 0x42;  // 2000-01-01 + 0x42
  u.reply_requested = true;
  const std::string m = EncodeStandbyStatusUpdate(u);
  ASSERT_EQ(m.size(), 34u);
  EXPECT_EQ(m[0], 'r');
  EXPECT_EQ(m.substr(1, 8), std::string("\x01\x02\x03\x04\x05\x06\x07\x08"));
  EXPECT_EQ(m.substr(9, 8), std::string("\0\0\0\0\x01\x55\x85\x70", 8));
  EXPECT_EQ(m.substr(25, 8), std::string("\0\0\0\0\0\0\0\x42", 8));
  EXPECT_EQ(m[33], 1);
  StandbyStatusUpdate back;
  ASSERT_TRUE(ParseStandbyStatusUpdate(m, &back));
  EXPECT_EQ(back.write, u.write);
  EXPECT_EQ(back.flush, u.flush);
  EXPECT_EQ(back.apply, u.apply);
  EXPECT_EQ(back.send_time_unix_us, u.send_time_unix_us);
  EXPECT_TRUE(back.reply_requested);
}

TEST(ReplicationProtocol, XLogDataCarriesItsPositionsAndPayload) {
  XLogData d;
  d.data_start = 0x1558288;
  d.wal_end = 0x16B374D848;
  d.send_time_unix_us = 1800000000LL * 1000000;
  d.payload = R"({"action":"B"})";
  const std::string m = EncodeXLogData(d);
  ASSERT_EQ(m.size(), 25 + d.payload.size());
  XLogData back;
  ASSERT_TRUE(ParseXLogData(m, &back));
  EXPECT_EQ(back.data_start, d.data_start);
  EXPECT_EQ(back.wal_end, d.wal_end);
  EXPECT_EQ(back.send_time_unix_us, d.send_time_unix_us);
  EXPECT_EQ(back.payload, d.payload);
  // The header alone is a message with an empty payload; shorter is not.
  EXPECT_TRUE(ParseXLogData(m.substr(0, 25), &back));
  EXPECT_EQ(back.payload, "");
  EXPECT_FALSE(ParseXLogData(m.substr(0, 24), &back));
  EXPECT_FALSE(ParseXLogData("k" + m.substr(1), &back));
}

TEST(ReplicationProtocol, AKeepaliveSaysWhetherItWantsAReply) {
  for (bool reply : {false, true}) {
    PrimaryKeepalive k{0x1562080, 0, reply};
    const std::string m = EncodePrimaryKeepalive(k);
    ASSERT_EQ(m.size(), 18u);
    EXPECT_EQ(ReplicationMessageType(m), 'k');
    PrimaryKeepalive back;
    ASSERT_TRUE(ParsePrimaryKeepalive(m, &back));
    EXPECT_EQ(back.wal_end, k.wal_end);
    EXPECT_EQ(back.reply_requested, reply);
    EXPECT_FALSE(ParsePrimaryKeepalive(m.substr(0, 17), &back));
  }
  EXPECT_EQ(ReplicationMessageType(""), 0);
}

}  // namespace
}  // namespace walwatch

namespace walwatch {
namespace {

// A promoted standby's history file: where each earlier timeline ended.
TEST(TimelineEnd, FindsWhereATimelineEndedInTheHistory) {
  const std::string history =
      "1\t0/3000158\tno recovery target specified\n"
      "\n"
      "2\t0/50000A0\tno recovery target specified\n";
  EXPECT_EQ(TimelineEnd(history, 1), 0x3000158u);
  EXPECT_EQ(TimelineEnd(history, 2), 0x50000A0u);
  EXPECT_EQ(TimelineEnd(history, 3), 0u);  // not in it: unknown
  EXPECT_EQ(TimelineEnd("", 1), 0u);
  // "11" is not "1"; a bad LSN is unknown, never a crash.
  EXPECT_EQ(TimelineEnd("11\t0/10\tx\n", 1), 0u);
  EXPECT_EQ(TimelineEnd("1\tnot-an-lsn\tx\n", 1), 0u);
  EXPECT_EQ(TimelineEnd("1\t0/20", 1), 0x20u);  // no reason, no newline
}

}  // namespace
}  // namespace walwatch
