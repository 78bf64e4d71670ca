// WireArena is where the replication thread puts the events it builds for the
// log, so that the watch sessions can send their bytes with sendfile(2).
//
// Why: at 1,000 watchers of one resource, most of walwatch's time went into
// the kernel copying every event into every watcher's socket, and into
// allocating and charging the pages for those copies (BENCHMARKS.md). Bytes
// that live in a memfd instead go into a socket as references to the file's
// pages: nothing is copied or allocated per watcher, and the client frees
// nothing but the references.
//
// Layout: one memfd, mapped in segments of kSegmentBytes (2 MiB) at addresses
// aligned to kSegmentBytes, so that any byte of a segment finds the segment's header
// (its first bytes) by masking its address. Each segment holds event headers
// (with their names) from the front and framed wire lines from kWireRegion
// on: each line is laid out as one HTTP chunk, "<hex size>\r\n<line>\r\n",
// so that consecutive events of the log are consecutive chunks in the file
// and a run of them goes out in one sendfile. A segment is used by one
// allocating thread at a time and never rewritten.
//
// Lifetime: a segment counts the events in it that are still alive (plus one
// while it is the arena's current segment). When the count falls to zero, on
// whichever thread frees the last event, the segment is unmapped and its range
// of the file punched out (FALLOC_FL_PUNCH_HOLE), which returns the pages to
// the system. Pages that sockets still hold leave the file but stay alive in
// the kernel, with the bytes they were sent with, until the client has read
// them. The range is then reused by a later segment, which gets new pages, so
// the file is only as large as the most segments ever alive at once. The
// file itself is shared by the arena and its segments, and closed with the
// last of them, so events may outlive the arena.
//
// Memory: only pages written are resident, so a segment's unused room costs
// address space only. A segment whose events were evicted stays until its
// last event goes: the log's bound holds give or take two segments (the
// oldest, partly evicted, and the current one). Sessions hold events only
// while a write goes straight into a socket; a write that has to wait is
// copied out of the arena first (watch_stream.cc), so a slow client pins no
// segment. Pages already sent stay alive in the sockets until read, as a
// copy would.
//
// Thread safety: Allocate is for one thread at a time (the replication
// thread); it locks, so that tests may allocate from several. Release and
// Locate are safe from any thread.
#ifndef WALWATCH_CDC_MODEL_WIRE_ARENA_H_
#define WALWATCH_CDC_MODEL_WIRE_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cdc/base/mutex.h"

namespace walwatch {

class WireArena {
 public:
  static constexpr size_t kSegmentBytes = size_t{2} << 20;
  // Where a segment's wire region starts; headers fill the room before it.
  static constexpr size_t kWireRegion = size_t{256} << 10;
  // After a segment could not be made (the file cannot grow: a file-size
  // limit (RLIMIT_FSIZE, checked first: going past it would raise SIGXFSZ),
  // memory), this many events go to the heap before the next try,
  // so that a lasting failure costs one system call per that many events,
  // and one warning.
  static constexpr uint64_t kHeapEventsAfterFailure = 1024;

  // A new arena on a memfd, or null (and *error says why) if the system
  // offers none: callers then keep events on the heap.
  static std::unique_ptr<WireArena> Create(std::string* error);
  ~WireArena();
  WireArena(const WireArena&) = delete;
  WireArena& operator=(const WireArena&) = delete;

  // Room for an event: `header_bytes` (rounded up to 8) from the header
  // region, and `wire_bytes` of line framed as a chunk in the wire region
  // (lines of up to ~1.7 MiB; larger ones go on the heap).
  struct Block {
    void* header = nullptr;  // aligned to 8
    char* wire = nullptr;    // the line's first byte; the framing is written
  };
  // False if the line is empty or too large for a segment, or no segment
  // could be made: the caller puts the event on the heap. Each successful
  // Allocate must be matched by one Release(header).
  bool Allocate(size_t header_bytes, size_t wire_bytes, Block* out);

  // The event whose header is at `header` is gone.
  static void Release(const void* header);

  // Where the byte `p` of a block lives in the arena's file.
  struct FilePosition {
    int fd;
    uint64_t offset;
  };
  static FilePosition Locate(const char* p);

  // The chunk framing around a line of `wire_bytes`: "<hex>\r\n" before it,
  // "\r\n" after it.
  static size_t FramePrefixBytes(size_t wire_bytes);
  static constexpr size_t kFrameSuffixBytes = 2;

  // For tests and metrics: segments mapped now (including the current one),
  // and every segment ever made.
  size_t live_segments() const;
  uint64_t segments_made() const;

 private:
  struct File;
  struct Segment;
  explicit WireArena(File* file);
  // A new current segment, the old one released. False if none could be made.
  bool NewSegmentLocked() REQUIRES(mu_);
  static void ReleaseSegment(Segment* segment);

  mutable Mutex mu_;
  File* const file_;  // one reference held by the arena
  Segment* current_ GUARDED_BY(mu_) = nullptr;  // holds one reference
  size_t header_used_ GUARDED_BY(mu_) = 0;  // offsets in current_
  size_t wire_used_ GUARDED_BY(mu_) = 0;
  uint64_t next_offset_ GUARDED_BY(mu_) = 0;  // of the next segment
  uint64_t segments_made_ GUARDED_BY(mu_) = 0;
  uint64_t heap_before_retry_ GUARDED_BY(mu_) = 0;
  bool failing_ GUARDED_BY(mu_) = false;  // the last try failed (warned)
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_MODEL_WIRE_ARENA_H_
