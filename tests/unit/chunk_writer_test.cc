// ChunkWriter (chunk_writer.h): a watch's bytes on the wire. Chunk framing
// byte for byte, events of the WireArena sent with sendfile(2) as the arena
// framed them, heap events and selector variants gathered between them, and
// which runs go which way.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/unit/support/http_server_fixture.h"
#include "tests/unit/support/arena_frames.h"
#include "tests/unit/support/sendfile_counter.h"

namespace walwatch::server_test {
namespace {

using namespace std::chrono_literals;

// The server fixture (tests/unit/support/http_server_fixture.h), under this
// file's name.
class ChunkWriterTest : public HttpServerTest {};

// ChunkWriter::kMinSendfileBytes: in a write of several pieces, a run of
// the arena's file shorter than this goes from memory, gathered with the
// other pieces into sendmsg; a write of one piece always goes with
// sendfile, however short.
constexpr size_t kMinSendfileBytes = 4096;

// The body of a raw HTTP response (after its header), decoded strictly.
std::optional<std::vector<std::string>> BodyChunks(const std::string& raw) {
  const size_t body_start = raw.find("\r\n\r\n");
  if (body_start == std::string::npos) return std::nullopt;
  return DecodeChunks(std::string_view(raw).substr(body_start + 4));
}

TEST_F(ChunkWriterTest, OneTransactionIsOneChunkWithExactFraming) {
  std::vector<EventPtr> events = AppendTxn(110, {{"a"}, {"b"}, {"c"}});
  StartServer();
  auto client = Connect();
  client->Get("/api/v1/pods?watch=true&resourceVersion=100&timeoutSeconds=1");
  std::optional<std::string> raw = client->ReadAllRaw();
  ASSERT_TRUE(raw);
  size_t body_start = raw->find("\r\n\r\n");
  ASSERT_NE(body_start, std::string::npos);
  std::string head = raw->substr(0, body_start + 2);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(head.find("Cache-Control: no-cache, private\r\n"),
            std::string::npos);

  std::string lines = std::string(events[0]->wire()) +
                      std::string(events[1]->wire()) +
                      std::string(events[2]->wire());
  char size[32];
  std::snprintf(size, sizeof size, "%zx", lines.size());
  std::string expected_body =
      std::string(size) + "\r\n" + lines + "\r\n0\r\n\r\n";
  EXPECT_EQ(raw->substr(body_start + 4), expected_body);
}

// The log's events go out as the arena framed them, through sendfile: one
// chunk per event holding its wire line byte for byte, whatever the length
// of its size line, across segments, and the body decodes strictly up to
// its last chunk. Another resource's events (configmaps) fill the first
// segment between the pods, so that the watch's write is two runs of the
// file, in two segments, each longer than kMinSendfileBytes, and under
// 100 KB in all (far less than the socket holds, so the write never waits
// and nothing is copied out): every byte goes with sendfile, once.
TEST_F(ChunkWriterTest, ArenaEventsGoOutAsTheirOwnChunksByteForByte) {
  std::vector<EventPtr> events;
  uint64_t lsn = 101;
  // Lines whose sizes take 2, 3 and 5 hex digits, in the first segment.
  for (size_t padding : {0, 1000, 65536}) {
    events.push_back(
        AppendArenaPod(lsn++, "pod-" + std::to_string(padding), padding));
  }
  ASSERT_GE(events.back()->wire().size(), size_t{0x10000});
  // Configmaps fill the rest of the first segment, and start the second.
  EventSpec filler;
  filler.resource = "configmaps";
  filler.kind = "ConfigMap";
  filler.padding = std::string(64 << 10, 'f');
  for (int i = 0; Arena()->segments_made() < 2; ++i) {
    ASSERT_LT(i, 100);
    filler.name = "cm-" + std::to_string(i);
    AppendTxn(lsn++, {filler}, Arena());
  }
  // Then a line whose size takes 4 hex digits, and a transaction of three:
  // consecutive chunks, one run with it, in the second segment.
  events.push_back(AppendArenaPod(lsn++, "pod-20000", 20000));
  for (EventPtr& event : AppendTxn(lsn++, {{"t1"}, {"t2"}, {"t3"}}, Arena())) {
    events.push_back(std::move(event));
  }
  size_t runs[2] = {0, 0};
  for (size_t i = 0; i < events.size(); ++i) {
    const uint64_t segment = i < 3 ? 0 : 1;
    ASSERT_EQ(SegmentOf(events[i]), segment) << i;
    if (i != 0 && i != 3) {
      ASSERT_TRUE(Adjacent(events[i - 1], events[i])) << i;
    }
    runs[segment] += FrameBytes(events[i]);
  }
  ASSERT_FALSE(Adjacent(events[2], events[3]));
  ASSERT_GE(runs[0], kMinSendfileBytes);
  ASSERT_GE(runs[1], kMinSendfileBytes);
  const size_t frame_bytes = runs[0] + runs[1];
  ASSERT_LT(frame_bytes, size_t{100} << 10);

  StartServer();
  const uint64_t sent_before = sendfile_counts.bytes;
  const uint64_t blocked_before = sendfile_counts.would_block;
  auto client = Connect();
  client->Get("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  std::optional<std::string> raw = client->ReadAllRaw();
  ASSERT_TRUE(raw);
  const size_t body_start = raw->find("\r\n\r\n");
  ASSERT_NE(body_start, std::string::npos);
  const std::string head = raw->substr(0, body_start + 2);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  std::optional<std::vector<std::string>> chunks = BodyChunks(*raw);
  ASSERT_TRUE(chunks) << "the body is not cleanly chunked";
  ASSERT_EQ(chunks->size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string& got = (*chunks)[i];
    ASSERT_TRUE(got == events[i]->wire())
        << "event " << i << ": " << got.size() << " bytes, want "
        << events[i]->wire().size();
  }
  // Every byte of those chunks went through sendfile, once; the write never
  // waited.
  EXPECT_EQ(sendfile_counts.would_block - blocked_before, 0u);
  EXPECT_EQ(sendfile_counts.bytes - sent_before, frame_bytes);
}

// One stream mixing the arena's events, events on the heap, and the
// variants a label selector makes of a MODIFIED whose labels changed (an
// ADDED or a DELETED line, made on the heap for the watch): writes
// interleave sendfile'd runs of the file with chunks gathered from memory,
// and each watch gets every line it should, in order, in a cleanly chunked
// body. Every write here is of several pieces, so a run of the file goes
// with sendfile only if it is kMinSendfileBytes or longer: a1 alone, and a4
// with s (adjacent, each too short alone); every other run is short and
// goes from memory with its neighbours.
TEST_F(ChunkWriterTest,
       ArenaHeapAndSelectorVariantEventsInterleaveInOneStream) {
  WireArena* arena = Arena();
  ASSERT_TRUE(arena);
  const LabelList web = {{"app", "web"}};
  const LabelList db = {{"app", "db"}};
  auto pod = [](const std::string& name, const LabelList& labels,
                size_t padding = 0) {
    EventSpec spec;
    spec.name = name;
    spec.labels = labels;
    spec.padding = std::string(padding, 'x');
    return spec;
  };
  // The line of a MODIFIED that enters the selection: it, as ADDED.
  auto added = [](const EventPtr& event) {
    std::string line = Line(event);
    const std::string modified = "{\"type\":\"MODIFIED\",";
    EXPECT_EQ(line.rfind(modified, 0), 0u) << line;
    return line.replace(0, modified.size(), "{\"type\":\"ADDED\",");
  };
  // One that leaves it: the previous object, as DELETED.
  auto deleted = [](const EventPtr& event) {
    std::string_view wire = event->prev_wire();
    EXPECT_FALSE(wire.empty());
    return std::string(wire.substr(0, wire.size() - 1));
  };

  // Appended before the watches start: read and written as one batch.
  EventPtr a1 = AppendBuilt(110, {{pod("a1", web, 5000), arena}})[0];
  std::vector<EventPtr> t120 = AppendBuilt(
      120, {{pod("h1", web)}, {pod("a2", web), arena}, {pod("h2", web)}});
  EventPtr p = AppendBuilt(130, {{pod("p", web), arena, db}})[0];  // enters
  std::vector<EventPtr> t140 =
      AppendBuilt(140, {{pod("a3", web), arena},
                        {pod("q", db), arena, web},  // leaves
                        {pod("h3", web)}});
  std::vector<EventPtr> t150 =
      AppendBuilt(150, {{pod("x", db), arena},           // never in
                        {pod("r", web), nullptr, db}});  // enters, on the heap
  const LabelList tier_a = {{"app", "web"}, {"tier", "a"}};
  const LabelList tier_b = {{"app", "web"}, {"tier", "b"}};
  std::vector<EventPtr> t160 = AppendBuilt(
      160,
      {{pod("a4", web, 2200), arena}, {pod("s", tier_b, 2200), arena, tier_a}});
  const std::vector<std::string> web_before = {
      Line(a1),       Line(t120[0]), Line(t120[1]),    Line(t120[2]),
      added(p),       Line(t140[0]), deleted(t140[1]), Line(t140[2]),
      added(t150[1]), Line(t160[0]), Line(t160[1])};
  const std::vector<std::string> all_before = {
      Line(a1),      Line(t120[0]), Line(t120[1]), Line(t120[2]),
      Line(p),       Line(t140[0]), Line(t140[1]), Line(t140[2]),
      Line(t150[0]), Line(t150[1]), Line(t160[0]), Line(t160[1])};

  StartServer();
  const uint64_t sent_before = sendfile_counts.bytes;
  auto web_watch = OpenWatch(
      "/api/v1/pods?watch=1&resourceVersion=100&labelSelector=app%3Dweb");
  ASSERT_TRUE(web_watch);
  auto all_watch = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(all_watch);
  for (const std::string& line : web_before) {
    ASSERT_EQ(web_watch->ReadLine(), line);
  }
  for (const std::string& line : all_before) {
    ASSERT_EQ(all_watch->ReadLine(), line);
  }

  // Appended while they watch: each transaction has an event on the heap,
  // so that whichever of them a write holds, it is of several pieces.
  std::vector<EventPtr> t170 =
      AppendBuilt(170, {{pod("h4", web)},
                        {pod("p", db), arena, web},  // p leaves
                        {pod("a5", web), arena}});
  std::vector<EventPtr> t180 =
      AppendBuilt(180, {{pod("q", web), arena, db},  // q enters
                        {pod("a6", web), arena},
                        {pod("h5", web)}});
  const std::vector<std::string> web_after = {Line(t170[0]), deleted(t170[1]),
                                              Line(t170[2]), added(t180[0]),
                                              Line(t180[1]), Line(t180[2])};
  const std::vector<std::string> all_after = {Line(t170[0]), Line(t170[1]),
                                              Line(t170[2]), Line(t180[0]),
                                              Line(t180[1]), Line(t180[2])};
  for (const std::string& line : web_after) {
    ASSERT_EQ(web_watch->ReadLine(), line);
  }
  for (const std::string& line : all_after) {
    ASSERT_EQ(all_watch->ReadLine(), line);
  }

  // The whole selection again, to its last chunk, decoded strictly.
  auto raw_watch = Connect();
  raw_watch->Get(
      "/api/v1/pods?watch=1&resourceVersion=100&labelSelector=app%3Dweb"
      "&timeoutSeconds=1");
  std::optional<std::string> raw = raw_watch->ReadAllRaw();
  ASSERT_TRUE(raw);
  std::optional<std::vector<std::string>> chunks = BodyChunks(*raw);
  ASSERT_TRUE(chunks) << "the body is not cleanly chunked";
  std::string body;
  for (const std::string& chunk : *chunks) body += chunk;
  std::string want;
  for (const std::vector<std::string>* lines : {&web_before, &web_after}) {
    for (const std::string& line : *lines) want += line + "\n";
  }
  EXPECT_EQ(body, want);

  // What went through sendfile: the runs of kMinSendfileBytes or more, in
  // each of the three watches (a1 alone, a4 with s). The short runs (a2; p,
  // a3 and q for all_watch; x; and every event appended later, runs of at
  // most four short lines) went from memory.
  EXPECT_GE(FrameBytes(a1), kMinSendfileBytes);
  EXPECT_TRUE(Adjacent(t160[0], t160[1]));
  EXPECT_LT(FrameBytes(t160[0]), kMinSendfileBytes);
  EXPECT_LT(FrameBytes(t160[1]), kMinSendfileBytes);
  EXPECT_GE(FrameBytes(t160[0]) + FrameBytes(t160[1]), kMinSendfileBytes);
  EXPECT_LT(FrameBytes(t170[1]) + FrameBytes(t170[2]) + FrameBytes(t180[0]) +
                FrameBytes(t180[1]),
            kMinSendfileBytes);
  EXPECT_LT(FrameBytes(p) + FrameBytes(t140[0]) + FrameBytes(t140[1]),
            kMinSendfileBytes);
  const uint64_t want_sent =
      3 * (FrameBytes(a1) + FrameBytes(t160[0]) + FrameBytes(t160[1]));
  EXPECT_TRUE(WaitFor([&] {
    return sendfile_counts.bytes - sent_before == want_sent;
  })) << sendfile_counts.bytes - sent_before
      << " bytes, want " << want_sent;
}

// A watch whose label selector takes every other event of the arena gets
// frames of which no two are adjacent: each is a run of its own, far
// shorter than kMinSendfileBytes. They go from memory, gathered into
// sendmsg (64 to a call), not one sendfile each; a watch of all of them gets
// the same stretch of the file as one run, through sendfile. Both bodies
// decode strictly, one chunk per event.
TEST_F(ChunkWriterTest, EveryOtherArenaEventGoesOutGatheredWithoutSendfile) {
  const LabelList web = {{"app", "web"}};
  const LabelList db = {{"app", "db"}};
  std::vector<EventPtr> all;
  std::vector<EventPtr> selected;
  size_t all_bytes = 0;
  // 200 pods, alternately web and db: one run of the file, 100 frames for
  // the web watch (more than a sendmsg's 64), 50 KB in all.
  for (int i = 0; i < 200; ++i) {
    EventSpec spec;
    spec.name = "pod-" + std::to_string(i);
    spec.labels = i % 2 == 0 ? web : db;
    all.push_back(AppendTxn(101 + i, {spec}, Arena()).front());
    if (i % 2 == 0) selected.push_back(all.back());
    ASSERT_LT(FrameBytes(all.back()), kMinSendfileBytes);
    if (i > 0) {
      ASSERT_TRUE(Adjacent(all[i - 1], all.back())) << i;
    }
    all_bytes += FrameBytes(all.back());
  }
  ASSERT_LT(all_bytes, size_t{64} << 10);

  StartServer();
  const uint64_t sent_before = sendfile_counts.bytes;
  auto web_watch = Connect();
  web_watch->Get(
      "/api/v1/pods?watch=1&resourceVersion=100&labelSelector=app%3Dweb"
      "&timeoutSeconds=1");
  auto all_watch = Connect();
  all_watch->Get("/api/v1/pods?watch=1&resourceVersion=100&timeoutSeconds=1");
  for (auto [client, events] : {std::pair{web_watch.get(), &selected},
                                std::pair{all_watch.get(), &all}}) {
    std::optional<std::string> raw = client->ReadAllRaw();
    ASSERT_TRUE(raw);
    std::optional<std::vector<std::string>> chunks = BodyChunks(*raw);
    ASSERT_TRUE(chunks) << "the body is not cleanly chunked";
    ASSERT_EQ(chunks->size(), events->size());
    for (size_t i = 0; i < events->size(); ++i) {
      ASSERT_EQ((*chunks)[i], (*events)[i]->wire()) << i;
    }
  }
  // Both streams have ended: every write is done. Only all_watch's run went
  // with sendfile.
  EXPECT_EQ(sendfile_counts.bytes - sent_before, all_bytes);
}

// A write of one piece always goes with sendfile, however short: a single
// short event, the only one a watch has to write, is one sendfile of its
// frame. Beside an event on the heap, the same short frame is one piece of
// several, and goes from memory with it.
TEST_F(ChunkWriterTest, ASingleShortArenaEventIsOneSendfile) {
  StartServer();
  auto client = OpenWatch("/api/v1/pods?watch=1&resourceVersion=100");
  ASSERT_TRUE(client);
  const uint64_t sent_before = sendfile_counts.bytes;
  const uint64_t calls_before = sendfile_counts.calls;
  EventPtr small = AppendArenaPod(101, "small");
  ASSERT_LT(FrameBytes(small), kMinSendfileBytes);
  EXPECT_EQ(client->ReadLine(), Line(small));
  EXPECT_TRUE(WaitFor([&] {
    return sendfile_counts.bytes - sent_before == FrameBytes(small);
  })) << sendfile_counts.bytes - sent_before
      << " bytes, want " << FrameBytes(small);
  EXPECT_EQ(sendfile_counts.calls - calls_before, 1u);

  // The same, with an event on the heap in its transaction: two pieces.
  EventSpec on_heap;
  on_heap.name = "heap";
  std::vector<EventPtr> mixed =
      AppendBuilt(102, {{EventSpec{"small-2"}, Arena()}, {on_heap}});
  ASSERT_GT(FrameBytes(mixed[0]), 0u);
  EXPECT_EQ(client->ReadLine(), Line(mixed[0]));
  EXPECT_EQ(client->ReadLine(), Line(mixed[1]));
  // And a short one alone again: sendfile.
  EventPtr last = AppendArenaPod(103, "small-3");
  EXPECT_EQ(client->ReadLine(), Line(last));
  EXPECT_TRUE(WaitFor([&] {
    return sendfile_counts.bytes - sent_before ==
           FrameBytes(small) + FrameBytes(last);
  })) << sendfile_counts.bytes - sent_before
      << " bytes, want " << FrameBytes(small) + FrameBytes(last);
  EXPECT_EQ(sendfile_counts.calls - calls_before, 2u);
}

}  // namespace
}  // namespace walwatch::server_test
