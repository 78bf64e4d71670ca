// Where the tests' events lie in their WireArena: the frame (the line as
// one chunk) of an event built there, its segment, and whether two frames
// are one run of the arena's file, which the server sends as one piece.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_ARENA_FRAMES_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_ARENA_FRAMES_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "cdc/model/event.h"
#include "cdc/model/wire_arena.h"

namespace walwatch::server_test {

// Bytes of an arena event's frame (its line as one chunk); 0 on the heap.
inline size_t FrameBytes(const EventPtr& event) {
  Event::Frame frame;
  return event->GetFrame(&frame) ? frame.size : 0;
}

// The segment of the arena's file that holds `event`: its offset in the
// file over the segment size (the arena here never frees a segment before
// the test has made all of its events, so none is used again).
inline uint64_t SegmentOf(const EventPtr& event) {
  Event::Frame frame;
  EXPECT_TRUE(event->GetFrame(&frame)) << "on the heap";
  return frame.offset / WireArena::kSegmentBytes;
}

// Whether `b`'s frame follows `a`'s in the arena's file and mapping: written
// one after the other, they are one run of the file, one piece.
inline bool Adjacent(const EventPtr& a, const EventPtr& b) {
  Event::Frame fa, fb;
  return a->GetFrame(&fa) && b->GetFrame(&fb) && fa.fd == fb.fd &&
         fa.offset + fa.size == fb.offset && fa.data + fa.size == fb.data;
}

}  // namespace walwatch::server_test

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_ARENA_FRAMES_H_
