// Positions in a MySQL/MariaDB binary log, the GTIDs that name transactions,
// and the resourceVersion proposed for them (issue 21).
//
// A binlog is a sequence of files "<base>.<NNNNNN>" (the number grows by one
// at each rotation) of events; an event's position is its byte offset in its
// file, and every event header carries the END position of the event
// ("log_pos"). A transaction's commit position is the end of its XID (or
// COMMIT, or DDL) event: reading again from there starts after it.
//
// resourceVersion: BinlogVersion = history * 10^16 + file number * 10^10 +
// position. Positions are 32-bit in the event header, so below 10^10, and
// file numbers below 10^6 (the six digits servers write), so the decimal
// reads back: 70000030000012345 is history 7, file .000003, byte 12345. It
// increases along commit order across rotation (a file's commits come after
// every commit of the files before it), and version - 1 lies strictly
// between a commit and the one before it (two commits are at least one event
// apart), which DESIGN.md's "earlier events of T carry c(T) - 1" needs.
//
// The history is the server's: its server_id modulo kBinlogHistories. A
// file and an offset name a position only in the binlog of the server that
// wrote it; after a failover another server's file N is another file N. The
// server_id is unique in a replication topology and the same for every
// walwatch replica that reads the server, so every RV of another server
// lies outside this server's range [BinlogHistoryFloor, BinlogHistoryCeiling]
// and is refused, by a walwatch that was running at the failover or one
// started after it. Servers whose ids agree modulo 1844 (ids that differ by
// a multiple of it), and a new binlog on the same server (RESET MASTER, a
// restore from a backup), share a range: only a running walwatch's history
// check tells those apart (binlog_recovery.cc).
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
inline constexpr uint64_t kBinlogVersionHistoryFactor =
    10'000'000'000'000'000ULL;
// The most histories whose versions fit a uint64 (18446744073709551615):
// 1843 * 10^16 + 999999 * 10^10 + 2^32 does, 1844 * 10^16 + ... does not.
inline constexpr uint64_t kBinlogHistories = 1844;
// The highest file number a version holds.
inline constexpr uint64_t kMaxBinlogVersionFile = 999'999;

// The history of the binlog a server with this server_id writes.
inline uint64_t BinlogHistory(uint64_t server_id) {
  return server_id % kBinlogHistories;
}
// The lowest and highest versions of `history` (< kBinlogHistories).
inline uint64_t BinlogHistoryFloor(uint64_t history) {
  return history * kBinlogVersionHistoryFactor;
}
inline uint64_t BinlogHistoryCeiling(uint64_t history) {
  return BinlogHistoryFloor(history) + kBinlogVersionHistoryFactor - 1;
}
// The history of a version, and the version with its history left out
// (file number * 10^10 + position).
inline uint64_t HistoryOfVersion(uint64_t version) {
  return version / kBinlogVersionHistoryFactor;
}
inline uint64_t PositionOfVersion(uint64_t version) {
  return version % kBinlogVersionHistoryFactor;
}

// history * 10^16 + file number * 10^10 + pos; nullopt if the file has no
// number, its number is above kMaxBinlogVersionFile, pos is not below
// 10^10, or history is not below kBinlogHistories. *why, if given, says
// which.
std::optional<uint64_t> BinlogVersion(uint64_t history,
                                      const BinlogPosition& position,
                                      std::string* why = nullptr);

// A version as log lines write it: the history, the file number (six
// digits, as the file names have it) and the offset, "7/000003:12345".
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
