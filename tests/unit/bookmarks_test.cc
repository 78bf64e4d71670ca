// Bookmarks: periodic ones at the current RV, never past an unsent event
// nor back, one just before the timeout, none during the initial state, and
// the kind they carry.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class BookmarksTest : public HttpServerTest {};

TEST_F(BookmarksTest, IdleBookmarksFollowTheCurrentRv) {
  options_.bookmark_interval = 50ms;
  StartServer();
  auto client = OpenWatch(
      "/api/v1/pods?watch=1&resourceVersion=100&allowWatchBookmarks=1");
  ASSERT_TRUE(client);
  std::optional<uint64_t> rv = ReadBookmark(client.get());
  ASSERT_TRUE(rv);
  EXPECT_EQ(*rv, 100u);
  // Keepalives and other tables' transactions move the current RV.
  log_.AdvanceCurrentRv(200);
  uint64_t last = *rv;
  for (int i = 0; i < 200 && last < 200; ++i) {
    rv = ReadBookmark(client.get());
    ASSERT_TRUE(rv);
    EXPECT_GE(*rv, last);
    last = *rv;
  }
  EXPECT_EQ(last, 200u);
}

TEST_F(BookmarksTest, BookmarksWithoutAllowWatchBookmarksAreNotSent) {
  options_.bookmark_interval = 20ms;
  StartServer();
  auto client =
      OpenWatch("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  ASSERT_TRUE(client);
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  EXPECT_EQ(client->ReadLine(), std::nullopt);  // timeout: no bookmark
  EXPECT_TRUE(client->body_done());
}

TEST_F(BookmarksTest, BookmarksNeverPassAnUnsentEventAndNeverGoBack) {
  // One event per write, and a bookmark due at nearly every turn: bookmarks
  // land between the writes of a long stream.
  options_.bookmark_interval = 1ms;
  options_.max_write_bytes = 200;
  // Events the watch filters out (another namespace) between its own.
  constexpr int kEvents = 3000;
  std::vector<uint64_t> own;
  for (int i = 0; i < kEvents; ++i) {
    uint64_t commit = 101 + i;
    if (i % 3 == 2) {
      AppendPod(commit, "other-" + std::to_string(i), "ns2");
    } else {
      AppendPod(commit, "own-" + std::to_string(i), "ns1");
      own.push_back(commit);
    }
  }
  StartServer();
  auto client = OpenWatch(
      "/api/v1/namespaces/ns1/"
      "pods?watch=1&resourceVersion=100&allowWatchBookmarks=true");
  ASSERT_TRUE(client);
  size_t next = 0;  // index in `own` of the next event expected
  uint64_t last_rv = 100;
  int bookmarks = 0;
  while (next < own.size()) {
    std::optional<std::string> line = client->ReadLine();
    ASSERT_TRUE(line);
    Parsed p = ParseLine(*line);
    ASSERT_GE(p.rv, last_rv) << *line;
    last_rv = p.rv;
    if (p.type == "BOOKMARK") {
      ++bookmarks;
      // Resuming from it delivers exactly the events not received yet.
      ASSERT_LT(p.rv, own[next]) << *line;
      EventLog::SeekResult seek = log_.Seek(p.rv);
      ASSERT_EQ(seek.status, EventLog::SeekStatus::kOk);
      std::vector<EventPtr> rest;
      log_.Read(seek.seq, 3, &rest);
      size_t k = 0;
      while (k < rest.size() && rest[k]->ns() != "ns1") ++k;
      ASSERT_LT(k, rest.size());
      ASSERT_EQ(rest[k]->rv, own[next]) << *line;
      continue;
    }
    ASSERT_EQ(p.type, "ADDED") << *line;
    ASSERT_EQ(p.rv, own[next]) << *line;
    ++next;
  }
  EXPECT_GT(bookmarks, 0);
  // Past its last event, the watch's bookmarks reach the current RV, past
  // the events it filtered out.
  const uint64_t current = 100 + kEvents;
  uint64_t rv = 0;
  for (int i = 0; i < 1000 && rv < current; ++i) {
    std::optional<uint64_t> b = ReadBookmark(client.get());
    ASSERT_TRUE(b);
    EXPECT_GE(*b, last_rv);
    rv = *b;
  }
  EXPECT_EQ(rv, current);
}

TEST_F(BookmarksTest, BookmarkJustBeforeTheTimeout) {
  options_.bookmark_interval = 60000ms;
  StartServer();
  auto client = OpenWatch(
      "/api/v1/pods?watch=1&resourceVersion=100&allowWatchBookmarks=true&"
      "timeoutSeconds=1");
  ASSERT_TRUE(client);
  EventPtr a = AppendPod(110, "a");
  EXPECT_EQ(client->ReadLine(), Line(a));
  log_.AdvanceCurrentRv(115);
  EXPECT_EQ(client->ReadLine(), BookmarkLine(115));
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_FALSE(client->last_error()) << client->last_error().message();
  EXPECT_TRUE(client->body_done());
}

TEST_F(BookmarksTest, NoPeriodicBookmarkDuringTheInitialState) {
  options_.bookmark_interval = 1ms;
  state_.set_manual(true);
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&allowWatchBookmarks=true");
  std::shared_ptr<InitialStateStream> stream = state_.WaitForStream();
  ASSERT_TRUE(stream);
  stream->Ready(kFloorRv);
  ASSERT_TRUE(client->ReadHeader());
  for (int i = 0; i < 20; ++i) {
    EventPtr object = StatePod("p" + std::to_string(i), kFloorRv);
    ASSERT_TRUE(stream->Push({object}));
    ASSERT_EQ(client->ReadLine(), Line(object));
  }
  stream->Finish();
  // No end bookmark for a plain watch; periodic ones from now on.
  std::optional<uint64_t> rv = ReadBookmark(client.get());
  ASSERT_TRUE(rv);
  EXPECT_EQ(*rv, kFloorRv);
}

TEST_F(BookmarksTest, ABookmarkTakesTheKindOfTheFirstRowSeen) {
  StartServer();
  auto client = Connect();
  client->Get(
      "/apis/example.com/v1/foobars?watch=1&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&"
      "timeoutSeconds=3");
  ASSERT_TRUE(client->ReadHeader());
  EXPECT_EQ(client->status(), 200u);
  // Guessed: a lower-case plural cannot say where the words of a kind
  // begin.
  EXPECT_EQ(client->ReadLine(),
            BookmarkLine(kFloorRv, "Foobar", "example.com/v1", true));
  // The resource's first row arrives; the next bookmark (the final one, at
  // timeoutSeconds) carries the table's kind.
  catalog_.Add({"example.com", "v1", "foobars"}, "FooBar");
  EXPECT_EQ(client->ReadLine(),
            BookmarkLine(kFloorRv, "FooBar", "example.com/v1"));
}

}  // namespace
}  // namespace walwatch::server_test
