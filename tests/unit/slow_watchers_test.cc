// Slow watchers (DESIGN.md, "Watchers"): a write that waits on its
// client's full socket continues exactly where the socket filled, copies
// its rest out of the arena (ChunkWriter::Spill) so that the log may evict
// it, counts what it sent; a backlog past the bound ends with 410, a client
// that leaves mid-write ends only its own session, and Stop() does not wait
// for a client that stopped reading.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"
#include "tests/unit/support/arena_frames.h"
#include "tests/unit/support/sendfile_counter.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class SlowWatcherTest : public HttpServerTest {};
// Keeps 2,000 events of 8 KiB and more.
class SlowWatcherLargeLogTest : public HttpServerTestWithLog<size_t{64} << 20> {
};
// Keeps about 120 events of 8 KiB.
class SlowWatcherSmallLogTest : public HttpServerTestWithLog<size_t{1} << 20> {
};

// A client that stops reading fills its socket mid-chunk. When it reads
// again, the session continues the chunk exactly where the socket filled:
// every line arrives whole and in order.
TEST_F(SlowWatcherTest, AClientThatStopsReadingGetsEveryByteWhenItReadsAgain) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  std::vector<EventPtr> events = AppendLargePods(400);  // ~1.6 MB
  // Full: the unread bytes stop growing, with most of the events unsent.
  size_t unread = 0;
  ASSERT_TRUE(WaitFor([&] {
    size_t now = client->Unread();
    bool full = now == unread && now > 64 * 1024;
    unread = now;
    return full;
  }));
  ASSERT_LT(unread, 400u * kLargePodBytes / 2);
  for (const EventPtr& event : events) {
    ASSERT_EQ(client->ReadLine(), Line(event));
  }
}

TEST_F(SlowWatcherTest, ABacklogPastTheBoundEndsWith410AndSkipsNothing) {
  options_.max_backlog_bytes = 64 * 1024;
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  // Far more than the socket buffers and the bound, while the client does
  // not read; the log (8 MiB) keeps all of it.
  std::vector<EventPtr> events = AppendLargePods(400);
  size_t received = 0;
  std::optional<std::string> line;
  while ((line = client->ReadLine())) {
    if (ParseLine(*line).type == "ERROR") break;
    ASSERT_LT(received, events.size());
    ASSERT_EQ(*line, Line(events[received])) << "event skipped";
    ++received;
  }
  ASSERT_TRUE(line);
  EXPECT_LT(received, events.size());
  nlohmann::json error = nlohmann::json::parse(*line);
  EXPECT_EQ(error["type"], "ERROR");
  EXPECT_EQ(error["object"]["code"], 410);
  EXPECT_EQ(error["object"]["reason"], "Expired");
  std::string message = error["object"]["message"];
  EXPECT_NE(message.find("fell too far behind"), std::string::npos) << message;
  EXPECT_NE(message.find("(limit 65536); relist"), std::string::npos)
      << message;
  EXPECT_EQ(client->ReadLine(), std::nullopt);
  EXPECT_TRUE(client->body_done());
  EXPECT_TRUE(
      WaitFor([&] { return Terminated(metrics.Scrape(), "backlog") == 1; }));
}

TEST_F(SlowWatcherTest, StopClosesAClientThatStoppedReading) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1");
  ASSERT_TRUE(client);
  // Far more than the socket buffers hold, never read by the client.
  std::string padding(60 * 1024, 'x');
  for (int i = 0; i < 14; ++i)
    AppendPod(110 + i, "pod-" + std::to_string(i) + padding);
  auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_TRUE(
      WaitFor([&] { return server_->active_sessions() == 0; }, 10000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 6s);
}

// A watcher that reads nothing while 2,000 events of 8 KiB (16 MB, many
// times what its socket holds, well under the backlog bound and read long
// before the write-stall timeout) go into the log, then reads. Each write
// starts with sendfile, which fills the socket, sends part of a piece and is
// refused; the write then copies its unsent rest out of the arena
// (ChunkWriter::Spill) and sends that as the client makes room
// (ChunkWriter::AwaitWritable). Every event arrives once, in order, whole; part
// of the arena's bytes went with sendfile, the rest from the copies; and once
// the client keeps up, a write goes all with sendfile again.
TEST_F(SlowWatcherLargeLogTest,
       ASlowReaderOfManyMegabytesGetsEveryArenaEventOnceInOrder) {
  // Writes of up to 2 MB (a read's 256 events), many socketfuls each: the
  // socket fills long before one is done, and the write waits for it again
  // (ChunkWriter::AwaitWritable).
  options_.max_write_bytes = size_t{4} << 20;
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  const uint64_t sent_before = sendfile_counts.bytes;
  const uint64_t short_before = sendfile_counts.short_writes;
  const uint64_t blocked_before = sendfile_counts.would_block;
  std::vector<EventPtr> events;
  size_t wire_bytes = 0;
  size_t frame_bytes = 0;
  for (int i = 0; i < 2000; ++i) {
    events.push_back(AppendArenaPod(101 + i, "pod-" + std::to_string(i), 8000));
    wire_bytes += events.back()->wire().size();
    frame_bytes += FrameBytes(events.back());
  }
  ASSERT_GT(wire_bytes, size_t{15} << 20);
  ASSERT_EQ(log_.GetStats().events, events.size());
  ASSERT_LT(log_.GetStats().bytes, options_.max_backlog_bytes);

  const size_t unread = WaitUntilFull(client.get());
  ASSERT_GT(unread, 0u) << "the socket never filled";
  ASSERT_LT(unread, wire_bytes / 8);
  for (size_t i = 0; i < events.size(); ++i) {
    std::optional<std::string> line = client->ReadLine();
    ASSERT_TRUE(line) << "event " << i << ": "
                      << client->last_error().message();
    ASSERT_TRUE(*line == Line(events[i]))
        << "event " << i << " differs: " << line->size() << " bytes, want "
        << Line(events[i]).size();
  }
  // Every byte of those events has been sent (the client read them all):
  // some with sendfile, which was cut short and refused, and the rest of
  // the writes that waited from their copies.
  const uint64_t sent = sendfile_counts.bytes - sent_before;
  EXPECT_GT(sent, 0u);
  EXPECT_LT(sent, frame_bytes);
  EXPECT_GT(sendfile_counts.short_writes - short_before, 0u);
  EXPECT_GT(sendfile_counts.would_block - blocked_before, 0u);

  // Nothing twice: the next line is the next event's, a write of its own,
  // all with sendfile.
  EventPtr after = AppendArenaPod(3000, "after");
  EXPECT_EQ(client->ReadLine(), Line(after));
  EXPECT_EQ(server_->active_sessions(), 1u);
  EXPECT_TRUE(WaitFor([&] {
    return sendfile_counts.bytes - sent_before == sent + FrameBytes(after);
  })) << sendfile_counts.bytes - sent_before - sent
      << " bytes, want " << FrameBytes(after);
}

// A write that waits on its client is copied out of the arena and lets go of
// its events (ChunkWriter::Spill), so WatchStream::OnWriteEvents counts it from
// what it took as the write began (ChunkWriter::batch_stats): a transaction of 100 events of 8 KiB, of all three types,
// committed while the watch runs, is one write (max_write_bytes 4 MiB) that
// fills the socket and waits; once the client has read it, every event is
// counted by type, and the write's commit-to-write is observed once.
TEST_F(SlowWatcherTest, EventsSentCountsAWriteThatWaitedOnItsClient) {
  options_.metrics = &metrics_;
  options_.max_write_bytes = size_t{4} << 20;
  StartServer();
  // From the log's current RV: what is appended next is live.
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  const uint64_t blocked_before = sendfile_counts.would_block;
  std::vector<EventSpec> specs;
  const EventType kTypes[] = {EventType::kAdded, EventType::kModified,
                              EventType::kDeleted};
  for (int i = 0; i < 100; ++i) {
    EventSpec spec;
    spec.name = "pod-" + std::to_string(i);
    spec.padding = std::string(8000, 'x');
    // 50 ADDED, 30 MODIFIED, 20 DELETED.
    spec.type = kTypes[i < 50 ? 0 : i < 80 ? 1 : 2];
    specs.push_back(spec);
  }
  std::vector<EventPtr> events = AppendTxn(101, specs, Arena());
  const size_t unread = WaitUntilFull(client.get());
  ASSERT_GT(unread, 0u) << "the socket never filled";
  ASSERT_LT(unread, 100u * 8000 / 2);
  EXPECT_GT(sendfile_counts.would_block - blocked_before, 0u);
  // Nothing counted while the write waits.
  EXPECT_EQ(
      Sample(metrics_.Scrape(), "walwatch_events_sent_total{type=\"ADDED\"}"),
      0);
  for (const EventPtr& event : events) {
    ASSERT_EQ(client->ReadLine(), Line(event));
  }
  std::string scrape;
  EXPECT_TRUE(WaitFor([&] {
    scrape = metrics_.Scrape();
    return Sample(scrape, "walwatch_commit_to_write_seconds_count") == 1;
  })) << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"ADDED\"}"), 50)
      << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"MODIFIED\"}"), 30)
      << scrape;
  EXPECT_EQ(Sample(scrape, "walwatch_events_sent_total{type=\"DELETED\"}"), 20)
      << scrape;
}

// sendfile has no MSG_NOSIGNAL: writing to a client that left raises
// SIGPIPE, which ends a process that does not ignore it, and
// HttpServer::Start ignores it if nothing handles it. A client that leaves
// while a large arena write waits on its full socket ends its own session
// only (that write's rest was copied out of the arena, and goes with
// sendmsg, MSG_NOSIGNAL); so does one that stops receiving while its watch
// waits for the log, whose next write, one arena event, is a sendfile into
// a socket that refuses it (EPIPE, and SIGPIPE). The server serves on.
TEST_F(SlowWatcherTest,
       AClientLeavingDuringABlockedSendfileEndsOnlyItsSession) {
  // As when walwatch starts: SIGPIPE at its default.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &default_action, nullptr), 0);
  Metrics& metrics = metrics_;
  options_.metrics = &metrics;
  StartServer();
  struct sigaction action {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_IGN);

  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  size_t wire_bytes = 0;
  for (int i = 0; i < 200; ++i) {
    EventPtr event = AppendArenaPod(101 + i, "pod-" + std::to_string(i), 8000);
    wire_bytes += event->wire().size();
  }
  const size_t unread = WaitUntilFull(client.get());
  ASSERT_GT(unread, 0u) << "the socket never filled";
  ASSERT_LT(unread, wire_bytes / 2);
  client->Close();
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  EXPECT_TRUE(WaitFor(
      [&] { return Terminated(metrics.Scrape(), "client_closed") == 1; }));

  // A client that no longer receives, on a watch that is up to date (the
  // pods above went in at RVs 101 to 300).
  auto deaf = OpenWatch("/api/v1/pods?watch=1&resourceVersion=300");
  ASSERT_TRUE(deaf);
  deaf->ShutdownReceive();
  const uint64_t broken_before = sendfile_counts.broken_pipe;
  AppendArenaPod(500, "refused");
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  EXPECT_TRUE(WaitFor(
      [&] { return Terminated(metrics.Scrape(), "client_closed") == 2; }));
  EXPECT_EQ(sendfile_counts.broken_pipe - broken_before, 1u);

  // The server goes on: a new watch gets the next arena event.
  auto next = OpenWatch("/api/v1/pods?watch=1&resourceVersion=500");
  ASSERT_TRUE(next);
  EventPtr after = AppendArenaPod(600, "after");
  EXPECT_EQ(next->ReadLine(), Line(after));
}

// A watch whose write waits on a full socket pins no segment of the arena:
// the write's unsent rest was copied out (ChunkWriter::Spill) and its events
// let go. So while two watches are blocked mid-write, once the log has evicted
// every event of the arena, only the arena's current segment is left. Each
// watch, reading on, then gets every event of its writes, whole and in
// order, and 410 Expired: its cursor fell out of the log meanwhile.
TEST_F(SlowWatcherSmallLogTest,
       ArenaSegmentsAreFreedOnceEvictedWhileWatchesAreBlocked) {
  WireArena* arena = Arena();
  ASSERT_TRUE(arena);
  // 100 events of 8 KiB, all in the first segment and all in the log. The
  // test keeps their lines, not them.
  std::vector<std::string> first;
  for (int i = 0; i < 100; ++i) {
    EventPtr event = AppendArenaPod(101 + i, "pod-" + std::to_string(i), 8000);
    ASSERT_EQ(SegmentOf(event), 0u);
    first.push_back(Line(event));
  }
  ASSERT_EQ(log_.GetStats().events, first.size());
  StartServer();
  auto one = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(one);
  auto two = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(two);
  // Each session's write waits on a full socket.
  size_t full[2];
  for (int c = 0; c < 2; ++c) {
    full[c] = WaitUntilFull(c == 0 ? one.get() : two.get());
    ASSERT_GT(full[c], 0u) << "the socket never filled";
    ASSERT_LT(full[c], 100u * 8000 / 2);
  }

  // Far past the log's bound: 8 MB more of the arena (several segments
  // more), then 1.6 MB on the heap, which evicts every event of the arena.
  for (int i = 0; i < 1000; ++i) {
    AppendArenaPod(201 + i, "more-" + std::to_string(i), 8000);
  }
  EXPECT_GE(arena->segments_made(), 3u);
  for (int i = 0; i < 200; ++i) {
    EventSpec spec;
    spec.name = "heap-" + std::to_string(i);
    spec.padding = std::string(8000, 'x');
    AppendTxn(1201 + i, {spec});
  }
  ASSERT_GT(log_.GetStats().oldest_rv, 1200u);  // no arena event left
  // Only the current segment is left, while both writes still wait: the
  // servers have sent nothing more, and both sessions are there.
  EXPECT_TRUE(WaitFor([&] { return arena->live_segments() == 1; }))
      << arena->live_segments() << " segments live";
  EXPECT_EQ(one->Unread(), full[0]);
  EXPECT_EQ(two->Unread(), full[1]);
  EXPECT_EQ(server_->active_sessions(), 2u);

  // Reading on, each watcher gets what its socket and its writes held, in
  // order and whole, up to the end of the write that waited, then 410: the
  // next read found its cursor evicted. The status names the last event
  // sent, so the write that waited arrived complete.
  for (TestClient* client : {one.get(), two.get()}) {
    size_t received = 0;
    std::optional<std::string> line;
    while ((line = client->ReadLine())) {
      if (ParseLine(*line).type == "ERROR") break;
      ASSERT_LT(received, first.size());
      ASSERT_TRUE(*line == first[received])
          << "event " << received << " differs: " << line->size()
          << " bytes, want " << first[received].size();
      ++received;
    }
    ASSERT_TRUE(line) << "no 410 after " << received << " events";
    EXPECT_GT(received, 0u);
    EXPECT_LT(received, first.size());
    const nlohmann::json error = nlohmann::json::parse(*line);
    EXPECT_EQ(error["object"]["code"], 410);
    EXPECT_EQ(error["object"]["reason"], "Expired");
    EXPECT_EQ(error["object"]["message"],
              "too old resource version: " + std::to_string(100 + received) +
                  " (" + std::to_string(log_.floor_rv()) + ")");
    EXPECT_EQ(client->ReadLine(), std::nullopt);
    EXPECT_TRUE(client->body_done());
  }
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
  EXPECT_EQ(arena->live_segments(), 1u);
}

}  // namespace
}  // namespace walwatch::server_test
