#include "cdc/model/wire_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <new>
#include <vector>

#include "cdc/base/logging.h"

namespace walwatch {

// The memfd, shared by the arena and every segment made from it.
struct WireArena::File {
  explicit File(int fd) : fd(fd) {}
  ~File() { close(fd); }
  void Ref() { refs.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  const int fd;
  std::atomic<uint32_t> refs{1};
  std::atomic<size_t> live_segments{0};
  // Ranges of the file whose segment is gone (punched out), for the next
  // segments: the file stays as large as the most segments ever alive.
  Mutex mu;
  std::vector<uint64_t> free_offsets GUARDED_BY(mu);
};

// A segment's header, in its own first bytes (found by masking an address).
struct WireArena::Segment {
  File* file;
  uint64_t file_offset;
  // Events alive in the segment, plus one while it is the arena's current.
  std::atomic<uint64_t> live{1};
};

namespace {

constexpr size_t kHeaderRegionStart = 64;  // after the Segment header
static_assert(sizeof(void*) == 8, "the arena assumes 64-bit addresses");

// A segment-aligned mapping of `size` bytes of `fd` at `offset`, or null.
char* MapAligned(int fd, uint64_t offset, size_t size) {
  // Reserve twice the size, then map the file over its aligned middle and
  // give back the rest.
  void* reserve = mmap(nullptr, 2 * size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserve == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(reserve);
  const uintptr_t aligned = (start + size - 1) & ~(uintptr_t{size} - 1);
  void* mapped = mmap(reinterpret_cast<void*>(aligned), size,
                      PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                      static_cast<off_t>(offset));
  if (mapped == MAP_FAILED) {
    // Only the outer parts are surely still the reservation: an older kernel
    // may have unmapped the middle already, and another thread may have
    // mapped something there since. A middle left reserved is address space
    // lost on a rare failure, not memory.
    if (aligned > start) munmap(reserve, aligned - start);
    const uintptr_t end = aligned + size;
    if (start + 2 * size > end) {
      munmap(reinterpret_cast<void*>(end), start + 2 * size - end);
    }
    return nullptr;
  }
  if (aligned > start) munmap(reserve, aligned - start);
  const uintptr_t end = aligned + size;
  if (start + 2 * size > end) {
    munmap(reinterpret_cast<void*>(end), start + 2 * size - end);
  }
  return static_cast<char*>(mapped);
}

size_t HexDigits(size_t n) {
  size_t digits = 1;
  while (n >>= 4) ++digits;
  return digits;
}

}  // namespace

std::unique_ptr<WireArena> WireArena::Create(std::string* error) {
  int fd = memfd_create("walwatch-events", MFD_CLOEXEC);
  if (fd < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return nullptr;
  }
  // Every sendfile would otherwise update the file's access time: ~2 % of
  // walwatch's time at 1,000 watchers (perf). The owner may set it; if not,
  // the cost is all that is lost.
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NOATIME);
  return std::unique_ptr<WireArena>(new WireArena(new File(fd)));
}

WireArena::WireArena(File* file) : file_(file) {}

WireArena::~WireArena() {
  if (current_ != nullptr) ReleaseSegment(current_);
  file_->Unref();
}

size_t WireArena::FramePrefixBytes(size_t wire_bytes) {
  return HexDigits(wire_bytes) + 2;
}

bool WireArena::NewSegmentLocked() {
  if (current_ != nullptr) {
    ReleaseSegment(current_);
    current_ = nullptr;
  }
  if (heap_before_retry_ > 0) {
    --heap_before_retry_;
    return false;
  }
  // A range a gone segment left, or a new one at the end of the file.
  uint64_t offset = next_offset_;
  bool reused = false;
  {
    MutexLock lock(&file_->mu);
    if (!file_->free_offsets.empty()) {
      offset = file_->free_offsets.back();
      file_->free_offsets.pop_back();
      reused = true;
    }
  }
  const char* failed = nullptr;
  char* base = nullptr;
  rlimit file_size{};
  if (!reused && getrlimit(RLIMIT_FSIZE, &file_size) == 0 &&
      file_size.rlim_cur != RLIM_INFINITY &&
      offset + kSegmentBytes > file_size.rlim_cur) {
    // ftruncate past the limit would raise SIGXFSZ, which kills.
    errno = EFBIG;
    failed = "the file-size limit (RLIMIT_FSIZE) stops the event file; "
             "events go on the heap for now";
  } else if (!reused && ftruncate(file_->fd, static_cast<off_t>(
                                                 offset + kSegmentBytes)) != 0) {
    failed = "cannot grow the event file; events go on the heap for now";
  } else if ((base = MapAligned(file_->fd, offset, kSegmentBytes)) ==
             nullptr) {
    failed = "cannot map the event file; events go on the heap for now";
  }
  if (failed != nullptr) {
    // Nothing of the range was mapped or written: the next try uses it.
    const int error = errno;
    if (reused) {
      MutexLock lock(&file_->mu);
      file_->free_offsets.push_back(offset);
    }
    if (!failing_) {
      LogWarn(failed, {{"error", std::strerror(error)}});
      failing_ = true;
    }
    heap_before_retry_ = kHeapEventsAfterFailure;
    return false;
  }
  if (failing_) {
    LogInfo("the event file grows again; events go into it");
    failing_ = false;
  }
  if (!reused) next_offset_ += kSegmentBytes;
  ++segments_made_;
  file_->Ref();
  file_->live_segments.fetch_add(1, std::memory_order_relaxed);
  current_ = new (base) Segment{file_, offset};
  header_used_ = kHeaderRegionStart;
  wire_used_ = kWireRegion;
  return true;
}

bool WireArena::Allocate(size_t header_bytes, size_t wire_bytes, Block* out) {
  header_bytes = (header_bytes + 7) & ~size_t{7};
  const size_t prefix = FramePrefixBytes(wire_bytes);
  const size_t framed = prefix + wire_bytes + kFrameSuffixBytes;
  if (wire_bytes == 0 || header_bytes > kWireRegion - kHeaderRegionStart ||
      framed > kSegmentBytes - kWireRegion) {
    return false;
  }
  MutexLock lock(&mu_);
  if (current_ == nullptr || header_used_ + header_bytes > kWireRegion ||
      wire_used_ + framed > kSegmentBytes) {
    if (!NewSegmentLocked()) return false;
  }
  char* base = reinterpret_cast<char*>(current_);
  out->header = base + header_used_;
  header_used_ += header_bytes;
  char* frame = base + wire_used_;
  wire_used_ += framed;
  char* end = std::to_chars(frame, frame + prefix, wire_bytes, 16).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out->wire = end;
  out->wire[wire_bytes] = '\r';
  out->wire[wire_bytes + 1] = '\n';
  current_->live.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void WireArena::Release(const void* header) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(header);
  ReleaseSegment(
      reinterpret_cast<Segment*>(p & ~(uintptr_t{kSegmentBytes} - 1)));
}

void WireArena::ReleaseSegment(Segment* segment) {
  if (segment->live.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  File* file = segment->file;
  const uint64_t offset = segment->file_offset;
  munmap(segment, kSegmentBytes);
  // The pages leave the file; those a socket still holds live on there,
  // with their bytes. The range is then free for a new segment, which gets
  // new pages: what a socket holds is never rewritten.
  if (fallocate(file->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                static_cast<off_t>(offset), kSegmentBytes) != 0) {
    // Without the punch the pages stay in the file and may still be in a
    // socket: the range must not be used again.
    LogWarn("cannot free a segment of the event file",
            {{"error", std::strerror(errno)}});
  } else {
    MutexLock lock(&file->mu);
    file->free_offsets.push_back(offset);
  }
  file->live_segments.fetch_sub(1, std::memory_order_relaxed);
  file->Unref();
}

WireArena::FilePosition WireArena::Locate(const char* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = address & ~(uintptr_t{kSegmentBytes} - 1);
  const Segment* segment = reinterpret_cast<const Segment*>(base);
  return {segment->file->fd, segment->file_offset + (address - base)};
}

size_t WireArena::live_segments() const {
  return file_->live_segments.load(std::memory_order_relaxed);
}

uint64_t WireArena::segments_made() const {
  MutexLock lock(&mu_);
  return segments_made_;
}

}  // namespace walwatch
