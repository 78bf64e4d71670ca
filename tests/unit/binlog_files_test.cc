// What walwatch derives from a server's binlog files: the bytes between two
// positions, where a replay window starts, MariaDB's GTID state, and how
// positions are written.
#include "cdc/mysql/binlog_files.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace walwatch::mysql {
namespace {

const std::vector<BinlogFile> kFiles = {
    {"bin.000003", 1000}, {"bin.000004", 2000}, {"bin.000005", 500}};

TEST(BinlogFiles, BytesBetweenPositionsAcrossFiles) {
  EXPECT_EQ(
      BinlogBytesBetween(kFiles, {"bin.000005", 100}, {"bin.000005", 450}),
      350u);
  EXPECT_EQ(
      BinlogBytesBetween(kFiles, {"bin.000005", 450}, {"bin.000005", 100}), 0u);
  // The rest of 000003, all of 000004, 120 bytes of 000005.
  EXPECT_EQ(
      BinlogBytesBetween(kFiles, {"bin.000003", 400}, {"bin.000005", 120}),
      600u + 2000u + 120u);
  // A file between them is not listed (purged): unknown, 0.
  EXPECT_EQ(BinlogBytesBetween(kFiles, {"bin.000001", 4}, {"bin.000005", 120}),
            0u);
  EXPECT_EQ(BinlogBytesBetween(kFiles, {"bin", 4}, {"bin.000005", 120}), 0u);
}

// The window starts at the newest file that began at or before `since`, but
// no further back than its bytes allow; files are asked newest first, and no
// further back than needed.
TEST(BinlogFiles, TheReplayWindowStartsAtAFile) {
  const std::map<std::string, int64_t> began = {
      {"bin.000003", 100}, {"bin.000004", 200}, {"bin.000005", 300}};
  std::vector<std::string> asked;
  auto started = [&](const std::string& f, int64_t* t) {
    asked.push_back(f);
    *t = began.at(f);
    return true;
  };
  EXPECT_EQ(ChooseReplayStartFile(kFiles, 250, 1 << 20, started), "bin.000004");
  EXPECT_EQ(asked, (std::vector<std::string>{"bin.000005", "bin.000004"}));
  asked.clear();
  EXPECT_EQ(ChooseReplayStartFile(kFiles, 300, 1 << 20, started), "bin.000005");
  EXPECT_EQ(asked.size(), 1u);
  // Older than every file: the oldest.
  EXPECT_EQ(ChooseReplayStartFile(kFiles, 50, 1 << 20, started), "bin.000003");
  // Bytes: 000005 and 000004 make 2500, 000003 would pass 3000.
  EXPECT_EQ(ChooseReplayStartFile(kFiles, 50, 3000, started), "bin.000004");
  // The newest file is read whole whatever its size.
  EXPECT_EQ(ChooseReplayStartFile(kFiles, 50, 10, started), "bin.000005");
  // A file that cannot be read (purged meanwhile): the window starts after.
  EXPECT_EQ(ChooseReplayStartFile(kFiles, 50, 1 << 20,
                                  [&](const std::string& f, int64_t* t) {
                                    if (f == "bin.000003") return false;
                                    *t = began.at(f);
                                    return true;
                                  }),
            "bin.000004");
}

TEST(BinlogFiles, GtidStateParsesAdvancesAndCompares) {
  GtidState empty, a, b;
  ASSERT_TRUE(GtidState::Parse("", &empty));
  EXPECT_EQ(empty.ToString(), "");
  ASSERT_TRUE(GtidState::Parse("1-2-7,0-1-25", &a));
  EXPECT_EQ(a.ToString(), "0-1-25,1-2-7");
  ASSERT_TRUE(GtidState::Parse("0-1-25", &b));
  EXPECT_NE(a, b);
  Gtid g;
  g.flavor = Gtid::Flavor::kMariaDb;
  g.domain_id = 1;
  g.server_id = 2;
  g.sequence = 7;
  b.Advance(g);
  EXPECT_EQ(a, b);
  g.sequence = 8;
  b.Advance(g);
  EXPECT_EQ(b.ToString(), "0-1-25,1-2-8");
  for (const char* bad :
       {"0-1", "0-1-x", "a-1-2", "0-1-2,", "0-1-2,0-1-3", "0-1-2;1-1-1"}) {
    GtidState s;
    EXPECT_FALSE(GtidState::Parse(bad, &s)) << bad;
  }
}

TEST(BinlogFiles, VersionsAreWrittenAsHistoryFileAndOffset) {
  EXPECT_EQ(FormatBinlogVersion(30000012345u), "0/000003:12345");
  EXPECT_EQ(FormatBinlogVersion(70000030000012345u), "7/000003:12345");
  EXPECT_EQ(FormatBinlogVersion(*BinlogVersion(1843, {"b.999999", 4})),
            "1843/999999:4");
}

}  // namespace
}  // namespace walwatch::mysql
