// The CopyBoth messages of PostgreSQL's streaming replication protocol that
// walwatch reads and writes (FACTS.md, "Replication protocol"): from the
// server, XLogData ('w' + int64 dataStart + int64 walEnd + int64 sendTime +
// payload, a 25-byte header) and the primary keepalive ('k' + int64 walEnd +
// int64 sendTime + byte replyRequested); to it, the standby status update
// ('r' + int64 write + int64 flush + int64 apply + int64 sendTime + byte
// replyRequested, 34 bytes). Big-endian; times in microseconds since
// 2000-01-01. Both directions are here, so that tests can play the server.
//
// Thread safety: pure functions; any thread.
#ifndef WALWATCH_CDC_POSTGRES_REPLICATION_PROTOCOL_H_
#define WALWATCH_CDC_POSTGRES_REPLICATION_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace walwatch {

struct XLogData {
  uint64_t data_start = 0;
  uint64_t wal_end = 0;
  int64_t send_time_unix_us = 0;
  std::string_view payload;  // into the message parsed
};

struct PrimaryKeepalive {
  uint64_t wal_end = 0;
  int64_t send_time_unix_us = 0;
  bool reply_requested = false;
};

struct StandbyStatusUpdate {
  uint64_t write = 0;
  uint64_t flush = 0;  // 0: invalid, the slot does not move
  uint64_t apply = 0;
  int64_t send_time_unix_us = 0;
  bool reply_requested = false;
};

// The message's type: its first byte ('w', 'k', 'r'), or 0 if empty.
inline char ReplicationMessageType(std::string_view message) {
  return message.empty() ? 0 : message[0];
}

// False if `message` is not one of its type or is too short.
bool ParseXLogData(std::string_view message, XLogData* out);
bool ParsePrimaryKeepalive(std::string_view message, PrimaryKeepalive* out);
bool ParseStandbyStatusUpdate(std::string_view message,
                              StandbyStatusUpdate* out);

std::string EncodeXLogData(const XLogData& data);
std::string EncodePrimaryKeepalive(const PrimaryKeepalive& keepalive);
std::string EncodeStandbyStatusUpdate(const StandbyStatusUpdate& update);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_REPLICATION_PROTOCOL_H_
