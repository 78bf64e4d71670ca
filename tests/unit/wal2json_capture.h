// Test helper for the cdc unit tests: tests/data/wal2json_v2_capture.jsonl,
// real wal2json 2.5 output (format-version 2, include-xids, include-lsn,
// include-timestamp, include-types 0, add-tables public.resources) captured
// from PostgreSQL 15: INSERT (746), UPDATE (747), events-only UPDATE (748),
// an empty B/C pair (749), UPDATE to a TOASTed object (750), UPDATE with the
// TOASTed object omitted from columns (751), INSERT+DELETE (752), DELETE of
// the full old row (753), TRUNCATE (754).
#ifndef WALWATCH_TESTS_UNIT_WAL2JSON_CAPTURE_H_
#define WALWATCH_TESTS_UNIT_WAL2JSON_CAPTURE_H_

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace walwatch {
namespace testing_capture {

// The capture's lines, without their '\n' (wal2json sends none).
// Line n of the file is element n-1.
inline std::vector<std::string> ReadCaptureLines() {
  std::ifstream in(std::string(WALWATCH_SOURCE_DIR) +
                   "/tests/data/wal2json_v2_capture.jsonl");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Replaces the first occurrence of `from` after `after` in `s`; returns
// false (leaving `s`) if there is none.
inline bool ReplaceFirst(std::string* s, const std::string& from,
                         const std::string& to, const std::string& after = "") {
  size_t start = 0;
  if (!after.empty()) {
    start = s->find(after);
    if (start == std::string::npos) return false;
  }
  size_t pos = s->find(from, start);
  if (pos == std::string::npos) return false;
  s->replace(pos, from.size(), to);
  return true;
}

// Capture facts used by several tests: commit LSNs (B/C "lsn") in decimal.
inline constexpr uint64_t kCommit746 = 22381936;  // 0/1558570 INSERT p1
inline constexpr uint64_t kCommit747 = 22382768;  // 0/15588B0 UPDATE p1
inline constexpr uint64_t kCommit748 = 22383608;  // 0/1558BF8 events only
inline constexpr uint64_t kCommit749 = 22383720;  // 0/1558C68 empty B/C
inline constexpr uint64_t kCommit750 = 22396880;  // 0/155BFD0 p1 made big
inline constexpr uint64_t kCommit751 = 22408896;  // 0/155EEC0 TOAST omitted
inline constexpr uint64_t kCommit752 = 22409392;  // 0/155F0B0 INSERT+DELETE
inline constexpr uint64_t kCommit753 = 22421584;  // 0/1562050 DELETE p1
inline constexpr uint64_t kCommit754 = 22425392;  // 0/1562F30 TRUNCATE

}  // namespace testing_capture
}  // namespace walwatch

#endif  // WALWATCH_TESTS_UNIT_WAL2JSON_CAPTURE_H_
