#include "cdc/mysql/binlog_monitor.h"

#include <algorithm>

#include "cdc/base/logging.h"
#include "cdc/base/stop_signal.h"
#include "cdc/mysql/binlog_reader.h"
#include "cdc/mysql/mysql_checks.h"
#include "cdc/mysql/stop_interrupter.h"

namespace walwatch::mysql {

BinlogMonitor::BinlogMonitor(BinlogMonitorOptions options)
    : options_(std::move(options)),
      stop_signal_(std::make_unique<StopSignal>()),
      interrupter_(std::make_unique<StopInterrupter>(stop_signal_.get())) {}

BinlogMonitor::~BinlogMonitor() { Stop(); }

void BinlogMonitor::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void BinlogMonitor::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  stop_signal_->Raise();
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

uint64_t BinlogMonitor::LagBytes(uint64_t decoded) const {
  if (decoded == 0) return 0;
  MutexLock lock(&mu_);
  // Another server's position (the stream has not followed a failover
  // yet) is no offset in this server's files.
  if (end_.file.empty() || HistoryOfVersion(decoded) != history_) return 0;
  // The decoded position's file name: the server's base name and its number.
  const uint64_t at = PositionOfVersion(decoded);
  const size_t dot = end_.file.rfind('.');
  std::string number = std::to_string(at / kBinlogVersionFileFactor);
  const size_t digits = end_.file.size() - dot - 1;
  if (number.size() < digits) number.insert(0, digits - number.size(), '0');
  const BinlogPosition from{end_.file.substr(0, dot + 1) + number,
                            at % kBinlogVersionFileFactor};
  return BinlogBytesBetween(files_, from, end_);
}

uint64_t BinlogMonitor::highest_server_position(uint64_t history) const {
  MutexLock lock(&mu_);
  auto it = highest_.find(history);
  return it == highest_.end() ? 0 : it->second;
}

std::vector<ServerMonitor::Gauge> BinlogMonitor::Gauges() const {
  std::vector<Gauge> gauges;
  gauges.push_back(
      {"walwatch_binlog_retention_seconds",
       "How long the server keeps its binlog: binlog_expire_logs_seconds, "
       "else expire_logs_days x 86400; 0: never purged automatically; -1: "
       "not read yet. Polled every few seconds.",
       "", "", [this] { return static_cast<double>(retention_seconds()); }});
  const double window = static_cast<double>(options_.replay_window.count());
  gauges.push_back(
      {"walwatch_replay_window_seconds",
       "--replay-window: how far back walwatch reads the binlog again after "
       "a restart, which binlog retention must cover.",
       "", "", [window] { return window; }});
  return gauges;
}

bool BinlogMonitor::PollOnce(MysqlConnection* conn) {
  BinlogPosition end;
  std::vector<BinlogFile> files;
  uint64_t retention = 0;
  uint64_t server_id = 0;
  {
    StopInterrupter::Scope interruptible(interrupter_.get(),
                                         [conn] { conn->Interrupt(); });
    if (!conn->connected()) {
      MysqlConnParams params = options_.conn;
      params.read_timeout_s = 10;
      if (std::string err = conn->Connect(params); !err.empty()) {
        LogWarn("binlog monitor cannot connect", {{"error", err}});
        return false;
      }
    }
    // The server first: a failover between the two reads would give the
    // new server's end a history one poll late, never the old one's.
    std::string err = ReadServerId(conn, &server_id);
    if (err.empty()) {
      BinlogStatus s = ReadBinlogEnd(conn, &end);
      err = s.ok() ? ListBinlogFiles(conn, &files) : s.message;
    }
    if (err.empty()) {
      std::string setting;
      err = ReadBinlogRetention(conn, &retention, &setting);
    }
    if (!err.empty()) {
      if (!warned_) {
        LogWarn("binlog monitor poll failed", {{"error", err}});
        warned_ = true;
      }
      conn->Close();
      return false;
    }
  }
  warned_ = false;
  retention_seconds_ = static_cast<int64_t>(retention);
  const uint64_t history = BinlogHistory(server_id);
  const std::optional<uint64_t> version = BinlogVersion(history, end);
  MutexLock lock(&mu_);
  end_ = end;
  files_ = std::move(files);
  history_ = history;
  if (version) {
    server_position_ = *version;
    uint64_t& highest = highest_[history];
    highest = std::max(highest, *version);
  }
  return true;
}

void BinlogMonitor::Loop() {
  MysqlConnection conn;
  for (;;) {
    PollOnce(&conn);
    MutexLock lock(&mu_);
    if (cv_.WaitFor(&lock, options_.interval, [this]() REQUIRES(mu_) { return stop_; })) {
      return;
    }
  }
}

}  // namespace walwatch::mysql
