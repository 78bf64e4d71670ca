#include "cdc/model/wire_arena.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cdc/model/event.h"
#include "cdc/model/filter_fields.h"

namespace walwatch {
namespace {

constexpr size_t kSegment = WireArena::kSegmentBytes;
// The room a segment has for framed lines.
constexpr size_t kWireRoom = WireArena::kSegmentBytes - WireArena::kWireRegion;

// How many events whose lines are `wire_bytes` long fill a segment's wire
// region, framing included (their headers, of short names, take far less
// than the header region). Tests derive their counts of events and segments
// from it rather than from one segment size.
size_t FramesPerSegment(size_t wire_bytes) {
  return kWireRoom / (WireArena::FramePrefixBytes(wire_bytes) + wire_bytes +
                      WireArena::kFrameSuffixBytes);
}

std::unique_ptr<WireArena> NewArena() {
  std::string error;
  std::unique_ptr<WireArena> arena = WireArena::Create(&error);
  if (arena == nullptr) {
    // Every test here needs one; stop clearly rather than on a null arena.
    std::fprintf(stderr, "WireArena::Create failed: %s\n", error.c_str());
    std::abort();
  }
  return arena;
}

// An event named `name` holding `wire`, built as the EventBuilder builds
// one: allocated (in `arena` if it fits), then written through mutable_wire.
MutableEventPtr MakeEvent(WireArena* arena, std::string_view name,
                          std::string_view wire, size_t prev_wire_size = 0) {
  MutableEventPtr e = Event::Allocate(nullptr, nullptr, name, wire.size(),
                                      prev_wire_size, arena);
  if (!wire.empty()) std::memcpy(e->mutable_wire(), wire.data(), wire.size());
  return e;
}

// A line of `size` bytes that differs from event to event: `tag` repeated,
// ending in a newline as wire lines do.
std::string Line(size_t size, int tag) {
  std::string s(size, static_cast<char>('a' + tag % 26));
  if (size > 0) s.back() = '\n';
  if (size > 8) {
    const std::string id = std::to_string(tag);
    s.replace(0, id.size(), id);
  }
  return s;
}

// How HTTP chunked encoding frames `wire`.
std::string Chunk(std::string_view wire) {
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%zx", wire.size());
  return std::string(hex) + "\r\n" + std::string(wire) + "\r\n";
}

// `size` bytes of `fd` from `offset`, by pread(2).
std::string ReadFile(int fd, uint64_t offset, size_t size) {
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, &out[done], size - done,
                            static_cast<off_t>(offset + done));
    if (n <= 0) {
      ADD_FAILURE() << "pread at " << offset + done << ": "
                    << (n < 0 ? std::strerror(errno) : "end of file");
      return out.substr(0, done);
    }
    done += static_cast<size_t>(n);
  }
  return out;
}

Event::Frame FrameOf(const Event& e) {
  Event::Frame frame{};
  EXPECT_TRUE(e.GetFrame(&frame)) << "event " << e.name() << " on the heap";
  return frame;
}

std::string_view FrameBytes(const Event::Frame& frame) {
  return std::string_view(frame.data, frame.size);
}

// The index of the segment (in the arena's file) that holds `e`.
uint64_t SegmentOf(const Event& e) { return FrameOf(e).offset / kSegment; }

// Bytes of `fd`'s file that are allocated (resident, for a memfd).
int64_t AllocatedFileBytes(int fd) {
  struct stat st;
  EXPECT_EQ(fstat(fd, &st), 0) << std::strerror(errno);
  return static_cast<int64_t>(st.st_blocks) * 512;
}

// Proves that an arena event's line is framed as one HTTP chunk, the same
// bytes in the mapping and in the file, and that its name is kept.
TEST(WireArena, AnEventInTheArenaIsFramedAsAChunkInMemoryAndInTheFile) {
  auto arena = NewArena();
  const std::string wire = "{\"type\":\"ADDED\",\"object\":{}}\n";
  EventPtr e = MakeEvent(arena.get(), "pod-1", wire);

  Event::Frame frame;
  ASSERT_TRUE(e->GetFrame(&frame));
  EXPECT_EQ(e->name(), "pod-1");
  EXPECT_EQ(e->wire(), wire);
  EXPECT_EQ(FrameBytes(frame), Chunk(wire));
  EXPECT_EQ(FrameBytes(frame), "1d\r\n" + wire + "\r\n");
  EXPECT_EQ(frame.data + WireArena::FramePrefixBytes(wire.size()),
            e->wire().data());
  EXPECT_GE(frame.fd, 0);
  EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size), FrameBytes(frame));
}

// Proves that the hex size is lowercase and as long as it needs to be, for
// lines whose size takes several hex digits.
TEST(WireArena, ChunkSizesAreLowercaseHexOfTheLine) {
  auto arena = NewArena();
  for (size_t size : {size_t{1}, size_t{15}, size_t{16}, size_t{0xab},
                      size_t{0xfff}, size_t{0x1000}, size_t{0xbeef},
                      size_t{0x10000}, size_t{0xabcde}}) {
    const std::string wire = Line(size, static_cast<int>(size));
    EventPtr e = MakeEvent(arena.get(), "n", wire);
    const Event::Frame frame = FrameOf(*e);
    EXPECT_EQ(FrameBytes(frame), Chunk(wire)) << size;
    EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size), Chunk(wire))
        << size;
    EXPECT_EQ(e->wire(), wire);
  }
  EXPECT_EQ(WireArena::FramePrefixBytes(1), 3u);
  EXPECT_EQ(WireArena::FramePrefixBytes(15), 3u);
  EXPECT_EQ(WireArena::FramePrefixBytes(16), 4u);
  EXPECT_EQ(WireArena::FramePrefixBytes(0x10000), 7u);
}

// Proves that an event without an arena is on the heap, with no frame, and
// still holds its name and line.
TEST(WireArena, AHeapEventHasNoFrame) {
  EventPtr e = MakeEvent(nullptr, "pod-1", "line\n");
  Event::Frame frame;
  EXPECT_FALSE(e->GetFrame(&frame));
  EXPECT_EQ(e->name(), "pod-1");
  EXPECT_EQ(e->wire(), "line\n");

  Event::Strings strings;
  strings.name = "pod-2";
  EventPtr made = Event::Make(strings, "line\n");
  EXPECT_FALSE(made->GetFrame(&frame));
}

// Proves that events allocated one after the other are consecutive chunks,
// in memory and in the file, so that a run of them is one sendfile: one
// pread of the run's range gives exactly their chunks, in order.
TEST(WireArena, ConsecutiveEventsAreConsecutiveChunksInTheFile) {
  auto arena = NewArena();
  std::vector<EventPtr> events;
  std::string expected;
  for (int i = 0; i < 50; ++i) {
    const std::string wire = Line(100 + i * 37, i);
    events.push_back(MakeEvent(arena.get(), "pod-" + std::to_string(i), wire));
    expected += Chunk(wire);
  }
  for (size_t i = 1; i < events.size(); ++i) {
    const Event::Frame prev = FrameOf(*events[i - 1]);
    const Event::Frame next = FrameOf(*events[i]);
    EXPECT_EQ(next.offset, prev.offset + prev.size) << i;
    EXPECT_EQ(next.data, prev.data + prev.size) << i;
    EXPECT_EQ(next.fd, prev.fd) << i;
  }
  const Event::Frame first = FrameOf(*events.front());
  const Event::Frame last = FrameOf(*events.back());
  EXPECT_EQ(ReadFile(first.fd, first.offset,
                     last.offset + last.size - first.offset),
            expected);
  EXPECT_EQ(std::string_view(first.data, last.data + last.size - first.data),
            expected);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(events[i]->name(), "pod-" + std::to_string(i));
  }
}

// Proves that an event's file offset is where its mapping is: frames in
// later segments are at their segment's offset plus their place in it, in
// the wire region, and the file holds the same bytes as the mapping.
TEST(WireArena, FrameOffsetsFollowTheirSegmentsInTheFile) {
  auto arena = NewArena();
  std::vector<EventPtr> events;
  // 64 KiB lines: three segments and a half of them fill 4.
  const size_t per_segment = FramesPerSegment(64 << 10);
  ASSERT_GE(per_segment, 2u);
  const size_t count = 3 * per_segment + per_segment / 2;
  for (size_t i = 0; i < count; ++i) {
    events.push_back(
        MakeEvent(arena.get(), "n", Line(64 << 10, static_cast<int>(i))));
  }
  std::map<uint64_t, size_t> segments;  // events in each
  for (size_t i = 0; i < events.size(); ++i) {
    const Event::Frame frame = FrameOf(*events[i]);
    const uint64_t in_segment = frame.offset % kSegment;
    EXPECT_EQ(in_segment, reinterpret_cast<uintptr_t>(frame.data) % kSegment)
        << i;
    EXPECT_GE(in_segment, WireArena::kWireRegion) << i;
    EXPECT_LE(in_segment + frame.size, kSegment) << i;
    EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size),
              Chunk(Line(64 << 10, static_cast<int>(i))))
        << i;
    ++segments[frame.offset / kSegment];
  }
  EXPECT_EQ(segments.size(), 4u);
  EXPECT_EQ(arena->segments_made(), 4u);
  // Each full segment holds as many as its wire region has room for.
  for (uint64_t s = 0; s < 3; ++s) EXPECT_EQ(segments[s], per_segment) << s;
  EXPECT_EQ(segments[3], per_segment / 2);
  // A new segment starts its lines at the start of its wire region.
  for (size_t i = 1; i < events.size(); ++i) {
    if (SegmentOf(*events[i]) != SegmentOf(*events[i - 1])) {
      EXPECT_EQ(FrameOf(*events[i]).offset % kSegment, WireArena::kWireRegion);
    }
  }
}

// Proves that an empty line is not put in the arena (an empty chunk would
// end the HTTP body), and that the heap event works.
TEST(WireArena, AnEmptyWireStaysOnTheHeap) {
  auto arena = NewArena();
  EventPtr e = MakeEvent(arena.get(), "empty", "");
  Event::Frame frame;
  EXPECT_FALSE(e->GetFrame(&frame));
  EXPECT_EQ(e->name(), "empty");
  EXPECT_EQ(e->wire(), "");
  EXPECT_EQ(arena->segments_made(), 0u);
}

// Proves that a line that does not fit a segment's wire region, framing
// included, goes to the heap and works there, while the largest line that
// fits goes to the arena.
TEST(WireArena, AWireTooLargeForASegmentStaysOnTheHeap) {
  auto arena = NewArena();
  // The largest line whose chunk fills the wire region exactly.
  const size_t largest =
      kWireRoom - WireArena::kFrameSuffixBytes -
      WireArena::FramePrefixBytes(kWireRoom);
  ASSERT_EQ(WireArena::FramePrefixBytes(largest),
            WireArena::FramePrefixBytes(kWireRoom));

  for (size_t size : {kWireRoom + 1, kWireRoom, largest + 1}) {
    const std::string wire = Line(size, 7);
    EventPtr e = MakeEvent(arena.get(), "big", wire);
    Event::Frame frame;
    EXPECT_FALSE(e->GetFrame(&frame)) << size;
    EXPECT_EQ(e->wire(), wire) << size;
    EXPECT_EQ(e->name(), "big");
  }

  const std::string wire = Line(largest, 8);
  EventPtr fits = MakeEvent(arena.get(), "fits", wire);
  const Event::Frame frame = FrameOf(*fits);
  EXPECT_EQ(frame.size, kWireRoom);
  EXPECT_EQ(frame.offset % kSegment, WireArena::kWireRegion);
  EXPECT_EQ(FrameBytes(frame), Chunk(wire));
  EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size), Chunk(wire));
}

// Proves that a name too large for a segment's header region sends the event
// to the heap, where it keeps its name and line.
TEST(WireArena, ANameTooLargeForTheHeaderRegionStaysOnTheHeap) {
  auto arena = NewArena();
  const std::string name(WireArena::kWireRegion, 'n');
  EventPtr e = MakeEvent(arena.get(), name, "line\n");
  Event::Frame frame;
  EXPECT_FALSE(e->GetFrame(&frame));
  EXPECT_EQ(e->name(), name);
  EXPECT_EQ(e->wire(), "line\n");
}

// Proves that events that fall back to the heap take no room in the arena:
// the arena events around them are still adjacent chunks.
TEST(WireArena, HeapFallbacksLeaveTheArenaEventsAdjacent) {
  auto arena = NewArena();
  EventPtr a = MakeEvent(arena.get(), "a", "first\n");
  EventPtr empty = MakeEvent(arena.get(), "empty", "");
  EventPtr huge = MakeEvent(arena.get(), "huge", Line(kWireRoom, 1));
  EventPtr b = MakeEvent(arena.get(), "b", "second\n");
  const Event::Frame fa = FrameOf(*a);
  const Event::Frame fb = FrameOf(*b);
  EXPECT_EQ(fb.offset, fa.offset + fa.size);
  EXPECT_EQ(fb.data, fa.data + fa.size);
  EXPECT_EQ(ReadFile(fa.fd, fa.offset, fa.size + fb.size),
            Chunk("first\n") + Chunk("second\n"));
  EXPECT_EQ(arena->segments_made(), 1u);
}

// Proves that WireArena::Allocate rounds headers up to 8 bytes, aligns them,
// and frames the line, and that each block is matched by one Release.
TEST(WireArena, AllocateAlignsHeadersAndFramesLines) {
  auto arena = NewArena();
  WireArena::Block a, b, c;
  ASSERT_TRUE(arena->Allocate(13, 3, &a));
  ASSERT_TRUE(arena->Allocate(1, 20, &b));
  ASSERT_TRUE(arena->Allocate(8, 1, &c));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.header) % 8, 0u);
  EXPECT_EQ(static_cast<char*>(b.header), static_cast<char*>(a.header) + 16);
  EXPECT_EQ(static_cast<char*>(c.header), static_cast<char*>(b.header) + 8);
  std::memcpy(a.wire, "abc", 3);
  EXPECT_EQ(std::string_view(a.wire - 3, 3 + 3 + 2), "3\r\nabc\r\n");
  EXPECT_EQ(std::string_view(b.wire - 4, 2), "14");
  EXPECT_EQ(b.wire, a.wire + 3 + 2 + 4);
  const WireArena::FilePosition pos = WireArena::Locate(a.wire);
  EXPECT_EQ(ReadFile(pos.fd, pos.offset - 3, 8), "3\r\nabc\r\n");

  WireArena::Block none;
  EXPECT_FALSE(arena->Allocate(8, 0, &none));
  EXPECT_FALSE(arena->Allocate(WireArena::kWireRegion, 1, &none));

  EXPECT_EQ(arena->live_segments(), 1u);
  WireArena::Release(a.header);
  WireArena::Release(b.header);
  WireArena::Release(c.header);
  EXPECT_EQ(arena->live_segments(), 1u);
}

// Proves that full segments are replaced, that every segment with a live
// event stays, and that once the events are gone only the current segment
// is left.
TEST(WireArena, FullSegmentsStayUntilTheirLastEventGoes) {
  auto arena = NewArena();
  EXPECT_EQ(arena->segments_made(), 0u);
  EXPECT_EQ(arena->live_segments(), 0u);
  std::vector<EventPtr> events;
  // Five segments and a half: 6 segments.
  const size_t per_segment = FramesPerSegment(64 << 10);
  for (size_t i = 0; i < 5 * per_segment + per_segment / 2; ++i) {
    events.push_back(
        MakeEvent(arena.get(), "n", Line(64 << 10, static_cast<int>(i))));
  }
  EXPECT_EQ(arena->segments_made(), 6u);
  EXPECT_EQ(arena->live_segments(), 6u);
  EXPECT_EQ(SegmentOf(*events.back()), 5u);

  // Dropping all but the last event of each segment frees none of them.
  std::vector<EventPtr> last_of_segment;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i + 1 == events.size() ||
        SegmentOf(*events[i]) != SegmentOf(*events[i + 1])) {
      last_of_segment.push_back(events[i]);
    }
  }
  ASSERT_EQ(last_of_segment.size(), 6u);
  events.clear();
  EXPECT_EQ(arena->live_segments(), 6u);
  for (size_t i = 0; i < last_of_segment.size(); ++i) {
    const Event::Frame frame = FrameOf(*last_of_segment[i]);
    EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size),
              FrameBytes(frame));
  }

  // Each last event frees its segment, but the current one stays.
  for (size_t i = 0; i < 5; ++i) {
    last_of_segment[i].reset();
    EXPECT_EQ(arena->live_segments(), 6u - i - 1);
  }
  last_of_segment.back().reset();
  EXPECT_EQ(arena->live_segments(), 1u);
  EXPECT_EQ(arena->segments_made(), 6u);

  // The current segment still takes events.
  EventPtr more = MakeEvent(arena.get(), "more", "line\n");
  EXPECT_EQ(SegmentOf(*more), 5u);
  EXPECT_EQ(arena->segments_made(), 6u);
}

// Proves that a full header region also starts a new segment: long names
// fill it before the lines fill theirs.
TEST(WireArena, AFullHeaderRegionStartsANewSegment) {
  auto arena = NewArena();
  const std::string name(4000, 'n');
  const size_t header = (sizeof(Event) + name.size() + 7) / 8 * 8;
  // Headers start after the segment's own 64-byte header.
  const size_t per_segment = (WireArena::kWireRegion - 64) / header;
  ASSERT_GE(per_segment, 2u);
  std::vector<EventPtr> events;
  for (size_t i = 0; i < per_segment + 1; ++i) {
    events.push_back(
        MakeEvent(arena.get(), name, Line(100, static_cast<int>(i))));
  }
  EXPECT_EQ(SegmentOf(*events[per_segment - 1]), 0u);
  EXPECT_EQ(SegmentOf(*events[per_segment]), 1u);
  EXPECT_EQ(arena->segments_made(), 2u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]->name(), name) << i;
    EXPECT_EQ(FrameBytes(FrameOf(*events[i])),
              Chunk(Line(100, static_cast<int>(i))))
        << i;
  }
  events.clear();
  EXPECT_EQ(arena->live_segments(), 1u);
}

// Proves that the file is closed with the last of the arena and its events.
TEST(WireArena, TheFileIsClosedWithTheArenaOnceItsEventsAreGone) {
  auto arena = NewArena();
  std::vector<EventPtr> events;
  for (int i = 0; i < 120; ++i) {
    events.push_back(MakeEvent(arena.get(), "n", Line(64 << 10, i)));
  }
  const int fd = FrameOf(*events.front()).fd;
  ASSERT_GE(fcntl(fd, F_GETFD), 0);
  events.clear();
  EXPECT_EQ(arena->live_segments(), 1u);
  ASSERT_GE(fcntl(fd, F_GETFD), 0);
  // Nothing opens a file between here and the check.
  arena.reset();
  errno = 0;
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

// Proves that a segment whose events are all gone gives its pages back: its
// range of the file holds no data any more, and the file's allocated bytes
// drop by (about) the segment's.
TEST(WireArena, AReleasedSegmentIsPunchedOutOfTheFile) {
  auto arena = NewArena();
  std::vector<EventPtr> first, second;
  for (int i = 0; arena->segments_made() < 2 || second.empty(); ++i) {
    ASSERT_LT(i, 1000);
    EventPtr e = MakeEvent(arena.get(), "n", Line(64 << 10, i));
    (SegmentOf(*e) == 0 ? first : second).push_back(std::move(e));
  }
  ASSERT_EQ(first.size(), FramesPerSegment(64 << 10));
  const Event::Frame frame = FrameOf(*first.front());
  EXPECT_EQ(frame.offset / kSegment, 0u);
  const int fd = dup(frame.fd);
  ASSERT_GE(fd, 0) << std::strerror(errno);

  EXPECT_EQ(lseek(fd, 0, SEEK_DATA), 0);
  const int64_t before = AllocatedFileBytes(fd);
  EXPECT_GE(before, static_cast<int64_t>(first.size()) * (64 << 10));

  const size_t first_lines = first.size();
  first.clear();
  EXPECT_EQ(arena->live_segments(), 1u);
  // The first segment's range is a hole: the first data is the second's.
  const off_t data = lseek(fd, 0, SEEK_DATA);
  EXPECT_GE(data, static_cast<off_t>(kSegment));
  EXPECT_EQ(lseek(fd, static_cast<off_t>(kSegment) - 1, SEEK_HOLE),
            static_cast<off_t>(kSegment) - 1);
  const int64_t after = AllocatedFileBytes(fd);
  EXPECT_LE(after,
            before - static_cast<int64_t>(first_lines * (64 << 10)));
  // The second segment's bytes are untouched.
  for (size_t i = 0; i < second.size(); ++i) {
    const Event::Frame f = FrameOf(*second[i]);
    EXPECT_EQ(ReadFile(fd, f.offset, f.size), FrameBytes(f));
  }
  close(fd);
}

// Lowers the soft limit on file sizes (which a memfd obeys) for its scope,
// with SIGXFSZ at its default action and not blocked in this thread: were
// the arena to grow its file past the limit, the signal would end the
// process. The limit, the action and the mask are restored after.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    action_saved_ = sigaction(SIGXFSZ, &default_action, &old_action_) == 0;
    sigset_t xfsz;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    mask_saved_ = pthread_sigmask(SIG_UNBLOCK, &xfsz, &old_mask_) == 0;
    limit_saved_ = getrlimit(RLIMIT_FSIZE, &old_) == 0;
    rlimit lowered = old_;
    lowered.rlim_cur = bytes;
    lowered_ = limit_saved_ &&
               (old_.rlim_max == RLIM_INFINITY || bytes <= old_.rlim_max) &&
               setrlimit(RLIMIT_FSIZE, &lowered) == 0;
  }
  ~FileSizeLimit() { Lift(); }
  // The limit is lowered, and SIGXFSZ at its default action, unblocked.
  bool ok() const { return lowered_ && action_saved_ && mask_saved_; }
  void Lift() {
    if (lowered_) setrlimit(RLIMIT_FSIZE, &old_);
    lowered_ = false;
    if (mask_saved_) pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    mask_saved_ = false;
    if (action_saved_) sigaction(SIGXFSZ, &old_action_, nullptr);
    action_saved_ = false;
  }

 private:
  rlimit old_{};
  bool limit_saved_ = false;
  bool lowered_ = false;
  struct sigaction old_action_ {};
  bool action_saved_ = false;
  sigset_t old_mask_{};
  bool mask_saved_ = false;
};

// SIGXFSZ's disposition now: SIG_DFL, SIG_IGN or a handler.
void (*SigxfszHandler())(int) {
  struct sigaction action {};
  sigaction(SIGXFSZ, nullptr, &action);
  return action.sa_handler;
}

// Proves that when no new segment can be made (the file cannot grow: its
// size limit), events go to the heap and work, the full segment's events are
// unharmed, and the arena takes events again once the file can grow. The
// arena checks the limit before it grows the file, so SIGXFSZ is never
// raised: with the signal at its default action, which ends the process
// (core dump), the process lives on. A child proves that first, so that a
// regression fails this test (killed by signal 25) rather than the binary.
TEST(WireArena, WhenTheFileCannotGrowEventsGoToTheHeap) {
  const size_t per_segment = FramesPerSegment(64 << 10);
  {
    FileSizeLimit probe(kSegment);
    if (!probe.ok()) GTEST_SKIP() << "cannot lower RLIMIT_FSIZE";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EXIT(
      {
        FileSizeLimit limit(kSegment);  // room for the first segment only
        if (!limit.ok() || SigxfszHandler() != SIG_DFL) std::_Exit(2);
        auto arena = NewArena();
        std::vector<EventPtr> events;
        // The first segment full, and one event more: past the limit.
        for (size_t i = 0; i <= per_segment; ++i) {
          events.push_back(MakeEvent(arena.get(), "n",
                                     Line(64 << 10, static_cast<int>(i))));
        }
        Event::Frame frame;
        std::_Exit(events.back()->GetFrame(&frame) ? 3 : 0);
      },
      ::testing::ExitedWithCode(0), "");

  auto arena = NewArena();
  std::vector<EventPtr> events;
  {
    FileSizeLimit limit(kSegment);  // room for the first segment only
    ASSERT_TRUE(limit.ok());
    ASSERT_EQ(SigxfszHandler(), SIG_DFL);
    // Fill the first segment's wire region.
    for (size_t i = 0; i < per_segment; ++i) {
      events.push_back(
          MakeEvent(arena.get(), "n", Line(64 << 10, static_cast<int>(i))));
      ASSERT_EQ(SegmentOf(*events.back()), 0u);
    }
    // The next segment would pass the limit: the file stays as it is.
    for (size_t i = per_segment; i < per_segment + 3; ++i) {
      const std::string wire = Line(64 << 10, static_cast<int>(i));
      EventPtr e = MakeEvent(arena.get(), "heap", wire);
      Event::Frame frame;
      EXPECT_FALSE(e->GetFrame(&frame)) << i;
      EXPECT_EQ(e->wire(), wire);
      EXPECT_EQ(e->name(), "heap");
    }
    EXPECT_EQ(arena->segments_made(), 1u);
    EXPECT_EQ(arena->live_segments(), 1u);  // the full one, no longer current
    struct stat st;
    ASSERT_EQ(fstat(FrameOf(*events.front()).fd, &st), 0);
    EXPECT_EQ(static_cast<size_t>(st.st_size), kSegment);
  }
  // The process lived on; the limit and SIGXFSZ are as they were.
  for (size_t i = 0; i < events.size(); ++i) {
    const Event::Frame frame = FrameOf(*events[i]);
    EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size),
              Chunk(Line(64 << 10, static_cast<int>(i))));
  }
  // The arena tries again after kHeapEventsAfterFailure events on the heap:
  // the first of the three above failed, the other two counted down.
  EventPtr again;
  size_t on_heap = 0;
  for (; on_heap <= WireArena::kHeapEventsAfterFailure; ++on_heap) {
    again = MakeEvent(arena.get(), "again", "line\n");
    Event::Frame frame;
    if (again->GetFrame(&frame)) break;
  }
  EXPECT_EQ(on_heap, WireArena::kHeapEventsAfterFailure - 2);
  EXPECT_EQ(SegmentOf(*again), 1u);
  EXPECT_EQ(FrameBytes(FrameOf(*again)), Chunk("line\n"));
  EXPECT_EQ(arena->segments_made(), 2u);
  EXPECT_EQ(arena->live_segments(), 2u);
  events.clear();
  EXPECT_EQ(arena->live_segments(), 1u);
}

// Proves that the file-size limit stops only the file's growth: a range a
// freed segment left is used again without growing the file, even past a
// limit lowered below the file's size since.
TEST(WireArena, AFreedRangeIsUsedAgainPastTheFileSizeLimit) {
  const size_t per_segment = FramesPerSegment(64 << 10);
  auto arena = NewArena();
  std::vector<EventPtr> segments[3];
  for (int i = 0; segments[2].empty(); ++i) {
    ASSERT_LT(i, static_cast<int>(3 * per_segment));
    EventPtr e = MakeEvent(arena.get(), "n", Line(64 << 10, i));
    segments[SegmentOf(*e)].push_back(std::move(e));
  }
  ASSERT_EQ(segments[0].size(), per_segment);
  const int fd = FrameOf(*segments[0].front()).fd;
  segments[1].clear();  // the middle segment goes: its range is free
  EXPECT_EQ(arena->live_segments(), 2u);

  FileSizeLimit limit(kSegment);  // below the file's size: it cannot grow
  if (!limit.ok()) GTEST_SKIP() << "cannot lower RLIMIT_FSIZE";
  // Filling the current segment, the next one takes the middle's range.
  std::vector<EventPtr>& current = segments[2];
  for (int i = 1000;; ++i) {
    ASSERT_LT(i, 1000 + static_cast<int>(per_segment) + 1);
    EventPtr e = MakeEvent(arena.get(), "m", Line(64 << 10, i));
    Event::Frame frame;
    ASSERT_TRUE(e->GetFrame(&frame)) << "event " << i << " on the heap";
    current.push_back(std::move(e));
    if (frame.offset / kSegment != 2) break;
  }
  const Event::Frame frame = FrameOf(*current.back());
  EXPECT_EQ(frame.fd, fd);
  EXPECT_EQ(frame.offset, kSegment + WireArena::kWireRegion);
  const std::string chunk =
      Chunk(Line(64 << 10, 1000 + static_cast<int>(current.size()) - 2));
  EXPECT_EQ(FrameBytes(frame), chunk);
  EXPECT_EQ(ReadFile(fd, frame.offset, frame.size), chunk);
  EXPECT_EQ(arena->segments_made(), 4u);
  EXPECT_EQ(arena->live_segments(), 3u);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 3 * kSegment);
  // The other segments' bytes are untouched.
  for (const std::vector<EventPtr>* events : {&segments[0], &segments[2]}) {
    for (const EventPtr& e : *events) {
      const Event::Frame f = FrameOf(*e);
      EXPECT_EQ(ReadFile(fd, f.offset, f.size), FrameBytes(f));
    }
  }
}

// A connected pair of sockets, [0] to write and [1] to read: a Unix stream
// pair or a TCP connection on the loopback.
bool SocketPair(bool tcp, int fds[2]) {
  if (!tcp) return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0;
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bool ok = bind(listener, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
            listen(listener, 1) == 0 &&
            getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) ==
                0;
  fds[0] = ok ? socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
  ok = ok && fds[0] >= 0 &&
       connect(fds[0], reinterpret_cast<sockaddr*>(&addr), len) == 0;
  fds[1] = ok ? accept4(listener, nullptr, nullptr, SOCK_CLOEXEC) : -1;
  close(listener);
  if (fds[1] >= 0) return true;
  if (fds[0] >= 0) close(fds[0]);
  return false;
}

// Reads exactly `size` bytes from `fd`.
std::string ReadSocket(int fd, size_t size) {
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, &out[done], size - done);
    if (n <= 0) {
      ADD_FAILURE() << "read: " << (n < 0 ? std::strerror(errno) : "eof");
      return out.substr(0, done);
    }
    done += static_cast<size_t>(n);
  }
  return out;
}

// Proves what watch sessions rely on: a run of frames goes into a socket
// with one sendfile of the arena's file, and the bytes a socket holds are
// the ones sent even after their events, their segment (punched out) and the
// arena are all gone.
TEST(WireArena, SentFramesSurviveTheirSegment) {
  for (bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "tcp" : "unix");
    int sockets[2];
    if (!SocketPair(tcp, sockets)) {
      ASSERT_TRUE(tcp) << "socketpair: " << std::strerror(errno);
      GTEST_SKIP() << "no TCP on the loopback: " << std::strerror(errno);
    }
    auto arena = NewArena();
    std::vector<EventPtr> events;
    std::string expected;
    for (int i = 0; i < 20; ++i) {
      const std::string wire = Line(1000 + i, i);
      events.push_back(MakeEvent(arena.get(), "n", wire));
      expected += Chunk(wire);
    }
    const Event::Frame first = FrameOf(*events.front());
    const Event::Frame last = FrameOf(*events.back());
    off_t offset = static_cast<off_t>(first.offset);
    ssize_t sent = sendfile(sockets[0], first.fd, &offset, expected.size());
    ASSERT_EQ(sent, static_cast<ssize_t>(expected.size()))
        << std::strerror(errno);
    EXPECT_EQ(static_cast<uint64_t>(offset), last.offset + last.size);

    const int fd = dup(first.fd);
    ASSERT_GE(fd, 0);
    events.clear();
    arena.reset();  // the segment is released, and punched out
    errno = 0;
    EXPECT_EQ(lseek(fd, 0, SEEK_DATA), -1);  // no data left in the file
    EXPECT_EQ(errno, ENXIO);
    close(fd);

    EXPECT_EQ(ReadSocket(sockets[1], expected.size()), expected);
    close(sockets[0]);
    close(sockets[1]);
  }
}

// Proves that events may outlive the arena: their lines stay readable, in
// memory and in the file, which stays open until the last of them goes.
TEST(WireArena, EventsMayOutliveTheArena) {
  auto arena = NewArena();
  std::vector<EventPtr> events;
  std::vector<std::string> chunks;
  // Two segments and a half: 3 segments.
  const size_t per_segment = FramesPerSegment(64 << 10);
  for (size_t i = 0; i < 2 * per_segment + per_segment / 2; ++i) {
    const std::string wire = Line(64 << 10, static_cast<int>(i));
    events.push_back(MakeEvent(arena.get(), "pod-" + std::to_string(i), wire));
    chunks.push_back(Chunk(wire));
  }
  EXPECT_EQ(arena->segments_made(), 3u);
  const int fd = FrameOf(*events.front()).fd;
  arena.reset();

  ASSERT_GE(fcntl(fd, F_GETFD), 0);
  for (size_t i = 0; i < events.size(); ++i) {
    const Event::Frame frame = FrameOf(*events[i]);
    EXPECT_EQ(frame.fd, fd);
    EXPECT_EQ(FrameBytes(frame), chunks[i]) << i;
    EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size), chunks[i]) << i;
    EXPECT_EQ(events[i]->name(), "pod-" + std::to_string(i));
  }
  // Releasing them in an order that is neither allocation nor reverse.
  for (size_t i = 0; i < events.size(); i += 2) events[i].reset();
  ASSERT_GE(fcntl(fd, F_GETFD), 0);
  for (size_t i = 1; i < events.size(); i += 2) {
    EXPECT_EQ(ReadFile(fd, FrameOf(*events[i]).offset, chunks[i].size()),
              chunks[i])
        << i;
  }
  for (size_t i = events.size(); i-- > 0;) events[i].reset();
  errno = 0;
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

// Proves that events may be released from several threads at once, racing
// for the last event of each segment, while the others still read theirs:
// each segment is freed exactly once, after its last event.
TEST(WireArena, EventsMayBeReleasedFromManyThreads) {
  constexpr int kThreads = 4;
  auto arena = NewArena();
  std::vector<std::vector<EventPtr>> shares(kThreads);
  std::vector<std::vector<std::string>> chunks(kThreads);
  // 16 KiB lines, eight segments and a half of them: 9 segments.
  const size_t per_segment = FramesPerSegment(16 << 10);
  const int count = static_cast<int>(8 * per_segment + per_segment / 2);
  for (int i = 0; i < count; ++i) {
    const std::string wire = Line(16 << 10, i);
    shares[i % kThreads].push_back(MakeEvent(arena.get(), "n", wire));
    chunks[i % kThreads].push_back(Chunk(wire));
  }
  EXPECT_EQ(arena->segments_made(), 9u);

  std::atomic<int> ready{0};
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      std::vector<EventPtr>& mine = shares[t];
      for (size_t i = 0; i < mine.size(); ++i) {
        Event::Frame frame;
        if (!mine[i]->GetFrame(&frame) ||
            FrameBytes(frame) != chunks[t][i]) {
          mismatches.fetch_add(1);
        }
        mine[i].reset();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(arena->live_segments(), 1u);

  // Each freed once, each range is free once: the next eight segments take
  // the eight ranges, one each, and the file does not grow. A range freed
  // twice would be two segments at once, the later overwriting the earlier.
  const int fd = FrameOf(*MakeEvent(arena.get(), "n", "line\n")).fd;
  std::vector<EventPtr> more;
  std::vector<std::string> more_chunks;
  for (int i = 0; arena->segments_made() < 17; ++i) {
    ASSERT_LT(i, count + 2 * static_cast<int>(per_segment));
    const std::string wire = Line(16 << 10, 5000 + i);
    more.push_back(MakeEvent(arena.get(), "m", wire));
    more_chunks.push_back(Chunk(wire));
  }
  EXPECT_EQ(arena->segments_made(), 17u);
  std::set<uint64_t> ranges;
  for (size_t i = 0; i < more.size(); ++i) {
    const Event::Frame frame = FrameOf(*more[i]);
    ranges.insert(frame.offset / kSegment);
    ASSERT_EQ(ReadFile(frame.fd, frame.offset, frame.size), more_chunks[i])
        << i;
  }
  EXPECT_EQ(ranges.size(), 9u);
  EXPECT_EQ(arena->live_segments(), 9u);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 9 * kSegment);
}

// Proves that ranges freed on other threads while the arena makes segments
// are used again safely: the allocating thread hands its events to
// releasing threads, which check each one's bytes (in memory and in the
// file) before they let it go. No range is taken while an event still lives
// in it, and the file stays as large as the few segments alive at once
// while many times more are made.
TEST(WireArena, RangesFreedOnOtherThreadsAreUsedAgainSafely) {
  constexpr int kReleasers = 3;
  const size_t per_segment = FramesPerSegment(16 << 10);
  const int count = static_cast<int>(30 * per_segment);
  auto arena = NewArena();
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<int, EventPtr>> queue;  // GUARDED_BY(mu)
  bool done = false;                           // GUARDED_BY(mu)
  std::atomic<int> released{0};
  std::atomic<int> mismatches{0};
  int fd = -1;
  std::vector<std::thread> threads;
  for (int t = 0; t < kReleasers; ++t) {
    threads.emplace_back([&] {
      while (true) {
        std::pair<int, EventPtr> item;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done || !queue.empty(); });
          if (queue.empty()) return;
          item = std::move(queue.front());
          queue.pop_front();
        }
        const std::string chunk = Chunk(Line(16 << 10, item.first));
        Event::Frame frame;
        if (!item.second->GetFrame(&frame) || FrameBytes(frame) != chunk) {
          mismatches.fetch_add(1);
        } else {
          std::string file(frame.size, '\0');
          if (pread(frame.fd, &file[0], frame.size,
                    static_cast<off_t>(frame.offset)) !=
                  static_cast<ssize_t>(frame.size) ||
              file != chunk) {
            mismatches.fetch_add(1);
          }
        }
        item.second.reset();
        released.fetch_add(1);
      }
    });
  }
  // At most a segment's worth of events alive: those queued, the latest
  // made, span two segments; each releaser holds one more, maybe older.
  for (int i = 0; i < count; ++i) {
    while (i - released.load() >= static_cast<int>(per_segment)) {
      std::this_thread::yield();
    }
    EventPtr e = MakeEvent(arena.get(), "n", Line(16 << 10, i));
    if (i == 0) fd = FrameOf(*e).fd;
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.emplace_back(i, std::move(e));
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(released.load(), count);
  EXPECT_EQ(arena->live_segments(), 1u);
  EXPECT_GE(arena->segments_made(), 30u);
  // Two segments of the queue's, one per releaser, and the one being made.
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_LE(static_cast<size_t>(st.st_size), (3 + kReleasers) * kSegment);
}

// Proves that several threads may allocate at once (Allocate locks): every
// event gets a frame of its own, holding its own bytes.
TEST(WireArena, SeveralThreadsMayAllocate) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  auto arena = NewArena();
  std::vector<std::vector<EventPtr>> made(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        made[t].push_back(
            MakeEvent(arena.get(), "n", Line(8 << 10, t * kPerThread + i)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint64_t> offsets;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const Event::Frame frame = FrameOf(*made[t][i]);
      EXPECT_TRUE(offsets.insert(frame.offset).second);
      EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size),
                Chunk(Line(8 << 10, t * kPerThread + i)));
    }
  }
  made.clear();
  EXPECT_EQ(arena->live_segments(), 1u);
}

// Proves MemoryBytes' formula for an arena event: the header and name
// rounded up to 8, the framed line, and the log's 16 bytes of slots.
TEST(WireArena, MemoryBytesOfAnArenaEventIsItsHeaderFrameAndLogSlots) {
  auto arena = NewArena();
  for (const std::string& name : {std::string(""), std::string("p"),
                                  std::string("pod-12345")}) {
    for (size_t size : {size_t{1}, size_t{100}, size_t{1024}, size_t{70000}}) {
      EventPtr e = MakeEvent(arena.get(), name, Line(size, 3));
      const Event::Frame frame = FrameOf(*e);
      const size_t header = (sizeof(Event) + name.size() + 7) / 8 * 8;
      EXPECT_EQ(frame.size, WireArena::FramePrefixBytes(size) + size + 2);
      EXPECT_EQ(e->MemoryBytes(), header + frame.size + 16)
          << name << " " << size;
    }
  }
  // The numbers, once: a 72-byte header with "pod-1" (80), "400\r\n" and
  // "\r\n" around 1024 bytes (1031), 16 for the log.
  EventPtr e = MakeEvent(arena.get(), "pod-1", Line(1024, 1));
  EXPECT_EQ(e->MemoryBytes(), 80u + 1031u + 16u);
}

// Proves that moving the log's events into the arena costs no memory: an
// arena event of a 1 KiB line costs no more than the same on the heap.
TEST(WireArena, AnArenaEventCostsNoMoreThanTheSameEventOnTheHeap) {
  auto arena = NewArena();
  for (size_t name_size = 0; name_size < 40; ++name_size) {
    const std::string name(name_size, 'n');
    const std::string wire = Line(1024, 1);
    EventPtr in_arena = MakeEvent(arena.get(), name, wire);
    EventPtr on_heap = MakeEvent(nullptr, name, wire);
    Event::Frame frame;
    ASSERT_TRUE(in_arena->GetFrame(&frame));
    ASSERT_FALSE(on_heap->GetFrame(&frame));
    EXPECT_LE(in_arena->MemoryBytes(), on_heap->MemoryBytes()) << name_size;
    EXPECT_EQ(on_heap->MemoryBytes(),
              sizeof(Event) + name_size + 1024 + 16 + 16);
  }
}

// Proves that an event with a previous state goes to the arena while its
// previous state stays on the heap, writable, and is counted in MemoryBytes.
TEST(WireArena, APreviousStateStaysOnTheHeapAndIsWritable) {
  auto arena = NewArena();
  const LabelList old_labels = {{"app", "old"}};
  FilterFields::Values values;
  values.labels = &old_labels;
  const std::string wire = "{\"type\":\"MODIFIED\",\"object\":{}}\n";
  const std::string prev = "{\"type\":\"DELETED\",\"object\":{\"old\":1}}\n";
  MutableEventPtr e =
      Event::Allocate(nullptr, FilterFields::Make(values), "pod-1",
                      wire.size(), prev.size(), arena.get());
  std::memcpy(e->mutable_wire(), wire.data(), wire.size());
  std::memcpy(e->mutable_prev_wire(), prev.data(), prev.size());
  EventPtr shared = std::move(e);

  const Event::Frame frame = FrameOf(*shared);
  EXPECT_EQ(FrameBytes(frame), Chunk(wire));
  EXPECT_EQ(ReadFile(frame.fd, frame.offset, frame.size), Chunk(wire));
  EXPECT_EQ(shared->wire(), wire);
  EXPECT_EQ(shared->prev_wire(), prev);
  EXPECT_EQ(shared->name(), "pod-1");
  ASSERT_NE(shared->prev_fields(), nullptr);
  EXPECT_EQ(shared->prev_labels().ToList(), old_labels);
  // The previous state is not in the segment (nor anywhere in the arena's
  // mapping of it).
  const uintptr_t segment =
      reinterpret_cast<uintptr_t>(frame.data) & ~(uintptr_t{kSegment} - 1);
  const uintptr_t at = reinterpret_cast<uintptr_t>(shared->prev_wire().data());
  EXPECT_FALSE(at >= segment && at < segment + kSegment);

  const size_t header = (sizeof(Event) + 5 + 7) / 8 * 8;
  EXPECT_EQ(shared->MemoryBytes(),
            header + frame.size + 16 + sizeof(Event) + prev.size() + 16);

  // The next event still follows this one's chunk.
  EventPtr next = MakeEvent(arena.get(), "pod-2", "next\n");
  EXPECT_EQ(FrameOf(*next).offset, frame.offset + frame.size);
  shared.reset();
  next.reset();
  EXPECT_EQ(arena->live_segments(), 1u);
}

// Proves that a freed segment's range is used again, with new pages: bytes a
// socket still holds from the old segment are not rewritten by the new one,
// and the file grows no larger than the most segments alive at once.
TEST(WireArena, AReusedRangeGetsNewPagesAndSentBytesKeepTheirs) {
  int sockets[2];
  ASSERT_TRUE(SocketPair(false, sockets)) << std::strerror(errno);
  auto arena = NewArena();
  std::vector<EventPtr> first_segment;
  EventPtr next;  // the first event of segment 1, the current one after
  for (int i = 0; !next; ++i) {
    EventPtr e = MakeEvent(arena.get(), "n", Line(64 << 10, i));
    if (SegmentOf(*e) == 0) {
      first_segment.push_back(std::move(e));
    } else {
      next = std::move(e);
    }
  }
  const Event::Frame sent_frame = FrameOf(*first_segment.front());
  const std::string expected(FrameBytes(sent_frame));
  off_t offset = static_cast<off_t>(sent_frame.offset);
  ASSERT_EQ(sendfile(sockets[0], sent_frame.fd, &offset, sent_frame.size),
            static_cast<ssize_t>(sent_frame.size))
      << std::strerror(errno);
  first_segment.clear();  // segment 0 is freed: its range is free again

  // Fill segment 1; the segment after it takes segment 0's range.
  std::vector<EventPtr> later{next};
  for (int i = 1000; SegmentOf(*later.back()) == 1; ++i) {
    later.push_back(MakeEvent(arena.get(), "m", Line(64 << 10, i)));
  }
  EXPECT_EQ(SegmentOf(*later.back()), 0u);
  EXPECT_EQ(FrameOf(*later.back()).offset, sent_frame.offset);
  EXPECT_EQ(arena->segments_made(), 3u);
  struct stat st;
  ASSERT_EQ(fstat(sent_frame.fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 2 * kSegment);

  // The socket still has the old segment's bytes, not the new ones.
  EXPECT_EQ(ReadSocket(sockets[1], expected.size()), expected);
  // The new segment's own bytes, in its mapping and in the file.
  const Event::Frame reused = FrameOf(*later.back());
  const std::string new_chunk =
      Chunk(Line(64 << 10, 1000 + static_cast<int>(later.size()) - 2));
  ASSERT_NE(new_chunk, expected);
  EXPECT_EQ(FrameBytes(reused), new_chunk);
  EXPECT_EQ(ReadFile(reused.fd, reused.offset, reused.size), new_chunk);
  close(sockets[0]);
  close(sockets[1]);
}

// Sending from the file does not update its access time: every sendfile
// would otherwise write the inode (O_NOATIME).
TEST(WireArena, TheFileIsOpenWithoutAccessTimes) {
  auto arena = NewArena();
  EventPtr e = MakeEvent(arena.get(), "n", "line\n");
  Event::Frame frame;
  ASSERT_TRUE(e->GetFrame(&frame));
  const int flags = fcntl(frame.fd, F_GETFL);
  ASSERT_GE(flags, 0);
  EXPECT_NE(flags & O_NOATIME, 0);
}

}  // namespace
}  // namespace walwatch
