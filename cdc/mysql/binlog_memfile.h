// BinlogMemFile: a binlog's bytes (the magic number, then events, as a
// binlog file holds them) put where Connector/C's file mode can read them,
// so that BinlogReader::OpenBytes can take events from memory through the
// same parsing a server's stream gets.
//
// What walwatch must write itself: Connector/C 3.3 (3.3.20 here) reads a
// file's events wrong. Its file reader reads 20 bytes for the 19-byte event
// header, keeps 19 of them, and reads the rest of the event after the 20th:
// every event loses its 20th byte and takes the next event's first. The
// file written here therefore carries one byte of padding after each event
// header when the library is found to do that (a probe, once per process,
// on a one-event file), and none for a library that reads files right.
//
// The framing is checked first, as the protocol's packets would give it: an
// event shorter than its header, or longer than the bytes left, is an error.
//
// Thread safety: one thread at a time; the probe is once per process.
#ifndef WALWATCH_CDC_MYSQL_BINLOG_MEMFILE_H_
#define WALWATCH_CDC_MYSQL_BINLOG_MEMFILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace walwatch::mysql {

class BinlogMemFile {
 public:
  BinlogMemFile() = default;
  ~BinlogMemFile();
  BinlogMemFile(const BinlogMemFile&) = delete;
  BinlogMemFile& operator=(const BinlogMemFile&) = delete;

  // Checks `binlog` and writes it to an anonymous file (memfd). Returns ""
  // or one line (a missing magic number, an event that does not fit, or the
  // system's error).
  std::string Create(std::string_view binlog);

  // The file's name for Connector/C (/proc/self/fd/N); valid until the
  // object goes.
  const std::string& path() const { return path_; }
  // The events in it.
  size_t events() const { return events_; }
  // The type of event `index` (from 0), or -1 past the last: what an
  // event Connector/C refused was.
  int event_type(size_t index) const {
    return index < types_.size() ? types_[index] : -1;
  }

 private:
  int fd_ = -1;
  std::string path_;
  size_t events_ = 0;
  std::vector<uint8_t> types_;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_BINLOG_MEMFILE_H_
