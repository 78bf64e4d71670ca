#include "cdc/mysql/binlog_memfile.h"

#include <mysql.h>
#include <sys/mman.h>
#include <unistd.h>
// After mysql.h, whose types it uses without including it.
#include <mariadb_rpl.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace walwatch::mysql {

namespace {

constexpr size_t kEventHeaderSize = 19;
constexpr std::string_view kMagic(
    "\xfe"
    "bin",
    4);

uint32_t Le32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) |
         (static_cast<uint32_t>(u[3]) << 24);
}

// An anonymous file holding `bytes`; -1 (errno set) on failure.
int MemFile(std::string_view bytes) {
  int fd = memfd_create("walwatch-binlog", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = errno;
      close(fd);
      errno = saved;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

// Whether Connector/C's file reader drops each event's 20th byte: it reads
// a file of one STOP event of 23 bytes (the header and 4 more) written as a
// binlog file holds it, and reads it right only if it does not.
bool LibraryNeedsPadding() {
  static const bool needs = [] {
    std::string file(kMagic);
    char event[23] = {};
    event[4] = STOP_EVENT;
    event[9] = sizeof(event);                          // length
    event[13] = static_cast<char>(4 + sizeof(event));  // next position
    file.append(event, sizeof(event));
    int fd = MemFile(file);
    if (fd < 0) return true;
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    bool right = false;
    MARIADB_RPL* rpl = mariadb_rpl_init(nullptr);
    if (rpl != nullptr) {
      mariadb_rpl_optionsv(rpl, MARIADB_RPL_FILENAME, path.c_str(), size_t{0});
      if (mariadb_rpl_open(rpl) == 0) {
        MARIADB_RPL_EVENT* e = mariadb_rpl_fetch(rpl, nullptr);
        right = e != nullptr && e->event_type == STOP_EVENT &&
                e->raw_data_size == sizeof(event);
        mariadb_free_rpl_event(e);
      }
      mariadb_rpl_close(rpl);
    }
    close(fd);
    return !right;
  }();
  return needs;
}

}  // namespace

BinlogMemFile::~BinlogMemFile() {
  if (fd_ >= 0) close(fd_);
}

std::string BinlogMemFile::Create(std::string_view binlog) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  path_.clear();
  events_ = 0;
  types_.clear();
  if (binlog.substr(0, kMagic.size()) != kMagic)
    return "not a binlog: no magic number";
  const bool pad = LibraryNeedsPadding();
  std::string file(kMagic);
  file.reserve(binlog.size() + binlog.size() / kEventHeaderSize + 1);
  size_t events = 0;
  std::vector<uint8_t> types;
  for (size_t at = kMagic.size(); at < binlog.size();) {
    const size_t left = binlog.size() - at;
    if (left < kEventHeaderSize) {
      return "the binlog event at byte " + std::to_string(at) +
             " is cut off in its header (" + std::to_string(left) +
             " bytes left)";
    }
    const uint32_t length = Le32(binlog.data() + at + 9);
    if (length < kEventHeaderSize || length > left) {
      return "the binlog event at byte " + std::to_string(at) + " has length " +
             std::to_string(length) + ", with " + std::to_string(left) +
             " bytes left";
    }
    types.push_back(static_cast<uint8_t>(binlog[at + 4]));
    file.append(binlog.substr(at, kEventHeaderSize));
    if (pad) file.push_back('\0');  // the byte Connector/C skips
    file.append(
        binlog.substr(at + kEventHeaderSize, length - kEventHeaderSize));
    at += length;
    ++events;
  }
  fd_ = MemFile(file);
  if (fd_ < 0) {
    return std::string("cannot hold the binlog in memory: ") +
           std::strerror(errno);
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
  events_ = events;
  types_ = std::move(types);
  return "";
}

}  // namespace walwatch::mysql
