// IdleSocketEnded, on a socket pair standing for a database connection
// kept idle: what the peer leaves on it says whether it ended.
#include "cdc/base/idle_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace walwatch {
namespace {

class IdleSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
  }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int mine() const { return fds_[0]; }
  void PeerWrites() { ASSERT_EQ(write(fds_[1], "E", 1), 1); }
  void PeerCloses() {
    close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

TEST_F(IdleSocketTest, NothingWaitingIsStillOpen) {
  EXPECT_FALSE(IdleSocketEnded(mine()));
}

// A server ending a session sends its message, then closes.
TEST_F(IdleSocketTest, AMessageWaitingIsTheEnd) {
  PeerWrites();
  EXPECT_TRUE(IdleSocketEnded(mine()));
}

TEST_F(IdleSocketTest, TheEndOfTheStreamIsTheEnd) {
  PeerCloses();
  EXPECT_TRUE(IdleSocketEnded(mine()));
}

TEST_F(IdleSocketTest, AMessageThenTheEndIsTheEnd) {
  PeerWrites();
  PeerCloses();
  EXPECT_TRUE(IdleSocketEnded(mine()));
}

TEST(IdleSocket, NoSocketIsEnded) { EXPECT_TRUE(IdleSocketEnded(-1)); }

}  // namespace
}  // namespace walwatch
