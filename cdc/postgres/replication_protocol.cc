#include "cdc/postgres/replication_protocol.h"

namespace walwatch {

namespace {

// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
constexpr int64_t kPgEpochOffsetMicros = 946684800LL * 1000000;

constexpr size_t kXLogDataHeader = 25;
constexpr size_t kKeepaliveSize = 18;
constexpr size_t kStatusUpdateSize = 34;

uint64_t ReadBe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void AppendBe64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

int64_t FromPgTime(uint64_t pg_micros) {
  return static_cast<int64_t>(pg_micros) + kPgEpochOffsetMicros;
}

uint64_t ToPgTime(int64_t unix_micros) {
  return static_cast<uint64_t>(unix_micros - kPgEpochOffsetMicros);
}

}  // namespace

bool ParseXLogData(std::string_view message, XLogData* out) {
  if (message.size() < kXLogDataHeader || message[0] != 'w') return false;
  out->data_start = ReadBe64(message.data() + 1);
  out->wal_end = ReadBe64(message.data() + 9);
  out->send_time_unix_us = FromPgTime(ReadBe64(message.data() + 17));
  out->payload = message.substr(kXLogDataHeader);
  return true;
}

bool ParsePrimaryKeepalive(std::string_view message, PrimaryKeepalive* out) {
  if (message.size() < kKeepaliveSize || message[0] != 'k') return false;
  out->wal_end = ReadBe64(message.data() + 1);
  out->send_time_unix_us = FromPgTime(ReadBe64(message.data() + 9));
  out->reply_requested = message[17] != 0;
  return true;
}

bool ParseStandbyStatusUpdate(std::string_view message,
                              StandbyStatusUpdate* out) {
  if (message.size() < kStatusUpdateSize || message[0] != 'r') return false;
  out->write = ReadBe64(message.data() + 1);
  out->flush = ReadBe64(message.data() + 9);
  out->apply = ReadBe64(message.data() + 17);
  out->send_time_unix_us = FromPgTime(ReadBe64(message.data() + 25));
  out->reply_requested = message[33] != 0;
  return true;
}

std::string EncodeXLogData(const XLogData& data) {
  std::string out(1, 'w');
  out.reserve(kXLogDataHeader + data.payload.size());
  AppendBe64(&out, data.data_start);
  AppendBe64(&out, data.wal_end);
  AppendBe64(&out, ToPgTime(data.send_time_unix_us));
  out.append(data.payload);
  return out;
}

std::string EncodePrimaryKeepalive(const PrimaryKeepalive& keepalive) {
  std::string out(1, 'k');
  AppendBe64(&out, keepalive.wal_end);
  AppendBe64(&out, ToPgTime(keepalive.send_time_unix_us));
  out.push_back(keepalive.reply_requested ? 1 : 0);
  return out;
}

std::string EncodeStandbyStatusUpdate(const StandbyStatusUpdate& update) {
  std::string out(1, 'r');
  AppendBe64(&out, update.write);
  AppendBe64(&out, update.flush);
  AppendBe64(&out, update.apply);
  AppendBe64(&out, ToPgTime(update.send_time_unix_us));
  out.push_back(update.reply_requested ? 1 : 0);
  return out;
}

}  // namespace walwatch
