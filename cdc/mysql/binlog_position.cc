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

std::optional<uint64_t> BinlogVersion(const BinlogPosition& position) {
  std::optional<uint64_t> n = BinlogFileNumber(position.file);
  if (!n || position.pos >= kBinlogVersionFileFactor) return std::nullopt;
  return *n * kBinlogVersionFileFactor + position.pos;
}

std::string FormatBinlogVersion(uint64_t version) {
  std::string file = std::to_string(version / kBinlogVersionFileFactor);
  if (file.size() < 6) file.insert(0, 6 - file.size(), '0');
  return file + ":" + std::to_string(version % kBinlogVersionFileFactor);
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
