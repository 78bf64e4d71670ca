#include "cdc/mysql/binlog_position.h"

namespace walwatch::mysql {

std::string BinlogPosition::ToString() const {
  return file + ":" + std::to_string(pos);
}

std::optional<uint64_t> BinlogFileNumber(std::string_view file) {
  size_t dot = file.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == file.size())
    return std::nullopt;
  std::string_view digits = file.substr(dot + 1);
  if (digits.size() > 9) return std::nullopt;
  uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

std::optional<uint64_t> BinlogVersion(uint64_t history,
                                      const BinlogPosition& position,
                                      std::string* why) {
  std::string reason;
  const std::optional<uint64_t> n = BinlogFileNumber(position.file);
  if (!n) {
    reason = "binlog file " + position.file + " has no number";
  } else if (*n > kMaxBinlogVersionFile) {
    reason = "binlog file " + position.file +
             " is numbered past what walwatch's resourceVersions hold (" +
             std::to_string(kMaxBinlogVersionFile) +
             "); the server's binlog numbering must start again (RESET "
             "MASTER, after every watcher's client can relist)";
  } else if (position.pos >= kBinlogVersionFileFactor) {
    reason = "binlog position " + position.ToString() + " is past 10^10";
  } else if (history >= kBinlogHistories) {
    reason = "binlog history " + std::to_string(history) + " is not below " +
             std::to_string(kBinlogHistories);
  } else {
    return BinlogHistoryFloor(history) + *n * kBinlogVersionFileFactor +
           position.pos;
  }
  if (why != nullptr) *why = reason;
  return std::nullopt;
}

std::string FormatBinlogVersion(uint64_t version) {
  const uint64_t at = PositionOfVersion(version);
  std::string file = std::to_string(at / kBinlogVersionFileFactor);
  if (file.size() < 6) file.insert(0, 6 - file.size(), '0');
  return std::to_string(HistoryOfVersion(version)) + "/" + file + ":" +
         std::to_string(at % kBinlogVersionFileFactor);
}

std::string Gtid::ToString() const {
  switch (flavor) {
    case Flavor::kNone:
      return "";
    case Flavor::kMariaDb:
      return std::to_string(domain_id) + "-" + std::to_string(server_id) + "-" +
             std::to_string(sequence);
    case Flavor::kMySql: {
      static const char kHex[] = "0123456789abcdef";
      std::string out;
      for (size_t i = 0; i < source_uuid.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        out += kHex[source_uuid[i] >> 4];
        out += kHex[source_uuid[i] & 0xf];
      }
      return out + ":" + std::to_string(sequence);
    }
  }
  return "";
}

}  // namespace walwatch::mysql
