// Positions in a MySQL/MariaDB binary log, the GTIDs that name transactions,
// and the resourceVersion proposed for them (issue 21).
//
// A binlog is a sequence of files "<base>.<NNNNNN>" (the number grows by one
// at each rotation) of events; an event's position is its byte offset in its
// file, and every event header carries the END position of the event
// ("log_pos"). A transaction's commit position is the end of its XID (or
// COMMIT, or DDL) event: reading again from there starts after it.
//
// Proposed resourceVersion: BinlogVersion = file number * 10^10 + position.
// Positions are 32-bit in the event header, so below 10^10, and the decimal
// reads back as the position: 30000012345 is file .000003 at byte 12345. It
// increases along commit order across rotation (a file's commits come after
// every commit of the files before it), and version - 1 lies strictly
// between a commit and the one before it (two commits are at least one event
// apart), which DESIGN.md's "earlier events of T carry c(T) - 1" needs.
#ifndef WALWATCH_CDC_MYSQL_BINLOG_POSITION_H_
#define WALWATCH_CDC_MYSQL_BINLOG_POSITION_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walwatch::mysql {

struct BinlogPosition {
  std::string file;  // "mariadb-bin.000003"
  uint64_t pos = 0;  // byte offset; 4 is the first event of a file

  bool operator==(const BinlogPosition& o) const {
    return pos == o.pos && file == o.file;
  }
  bool operator!=(const BinlogPosition& o) const { return !(*this == o); }
  std::string ToString() const;  // "mariadb-bin.000003:12345"
};

// The number after the file name's last '.': "mariadb-bin.000003" -> 3.
// nullopt without one (or beyond 10^9 files).
std::optional<uint64_t> BinlogFileNumber(std::string_view file);

inline constexpr uint64_t kBinlogVersionFileFactor = 10'000'000'000ULL;

// file number * 10^10 + pos; nullopt if the file has no number or pos is
// not below 10^10.
std::optional<uint64_t> BinlogVersion(const BinlogPosition& position);

// A version as log lines write it: the file number (six digits, as the
// file names have it) and the offset, "000003:12345".
std::string FormatBinlogVersion(uint64_t version);

// The global transaction ID of a transaction. MariaDB: domain-server-seq
// (sequence numbers grow within a domain, across failover too); MySQL:
// source UUID and sequence number.
struct Gtid {
  enum class Flavor : uint8_t { kNone, kMariaDb, kMySql };
  Flavor flavor = Flavor::kNone;
  uint32_t domain_id = 0;  // MariaDB
  uint32_t server_id = 0;  // MariaDB: the server that first wrote it
  std::array<uint8_t, 16> source_uuid{};  // MySQL
  uint64_t sequence = 0;

  bool operator==(const Gtid& o) const {
    return flavor == o.flavor && domain_id == o.domain_id &&
           server_id == o.server_id && source_uuid == o.source_uuid &&
           sequence == o.sequence;
  }
  bool operator!=(const Gtid& o) const { return !(*this == o); }
  // "0-1-25", "3e11fa47-71ca-11e1-9e33-c80aa9429562:23", or "" for kNone.
  std::string ToString() const;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_BINLOG_POSITION_H_
