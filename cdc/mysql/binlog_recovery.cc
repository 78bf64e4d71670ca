// MariaDbSource's reconnects: before the stream opens again where it left
// off, the server must still have the history walwatch read there. If the
// binlog was purged before walwatch read it, what it held is lost (a Gap:
// every watcher relists). If the server's binlog is another history (a
// failover to another server, whose files and offsets are its own; a server
// restored from a backup; a binlog cut short by a crash), positions of the
// old one say nothing of the new one (a HistoryReset, with a fence over
// what the old one may have served).
#include <algorithm>
#include <string>

#include "cdc/base/logging.h"
#include "cdc/mysql/mariadb_source.h"
#include "cdc/replication_stream.h"

namespace walwatch::mysql {

namespace {

// The name of a binlog file without its number: "mariadb-bin".
std::string BaseName(const std::string& file) {
  const size_t dot = file.rfind('.');
  return dot == std::string::npos ? file : file.substr(0, dot);
}

}  // namespace

ChangeSource::Reconnected MariaDbSource::Reconnect(ChangeReceiver* receiver,
                                                   std::string* error) {
  MysqlConnection conn;
  if (std::string err = Connect(&conn); !err.empty()) {
    *error = err;
    return Reconnected::kFailed;
  }
  History history = History::kSame;
  std::string why;
  if (std::string err = CheckHistory(&conn, &history, &why); !err.empty()) {
    *error = err;
    return Reconnected::kFailed;
  }
  std::string err;
  switch (history) {
    case History::kSame:
      break;
    case History::kPurged:
      err = ContinueAfterPurge(&conn, receiver);
      break;
    case History::kOther:
      err = ContinueInNewHistory(&conn, receiver, why);
      break;
  }
  if (!err.empty()) {
    *error = err;
    return Reconnected::kFailed;
  }
  conn.Close();
  BinlogStatus s = StartStreaming(resume_);
  if (!s.ok()) {
    *error = std::string(BinlogErrorKindName(s.kind)) + ": " + s.message;
    return Reconnected::kFailed;
  }
  return Reconnected::kOpen;
}

void MariaDbSource::Recover(ChangeReceiver* receiver,
                            const std::string& error) {
  // Nothing to repair on the server: the next Reconnect looks at the
  // history again (a purge, a position the server does not have), and
  // reports what it finds there.
}

std::string MariaDbSource::CheckHistory(MysqlConnection* conn, History* history,
                                        std::string* why) {
  *history = History::kSame;
  if (no_position_) {
    *history = History::kOther;
    *why = "the server has no event at " + resume_.ToString();
    return "";
  }
  uint64_t server_id = 0;
  if (std::string err = ReadServerId(conn, &server_id); !err.empty()) {
    return err;
  }
  if (server_id != source_server_id_) {
    // Another server, whose file and offset numbers are its own.
    *history = History::kOther;
    *why = "another server (server_id " + std::to_string(server_id) + ", was " +
           std::to_string(source_server_id_) + ")";
    return "";
  }
  if (!mariadb_) {
    std::optional<std::string> uuid;
    if (std::string err = conn->QueryValue("SELECT @@server_uuid", &uuid);
        !err.empty()) {
      return "cannot read server_uuid: " + err;
    }
    if (uuid.value_or("") != server_uuid_) {
      *history = History::kOther;
      *why = "another server (server_uuid " + uuid.value_or("") + ", was " +
             server_uuid_ + ")";
      return "";
    }
  }
  std::vector<BinlogFile> files;
  if (std::string err = ListBinlogFiles(conn, &files); !err.empty()) {
    return "cannot list the binlog files (SHOW BINARY LOGS): " + err;
  }
  if (files.empty()) return "the server lists no binlog files";
  const auto listed =
      std::find_if(files.begin(), files.end(),
                   [&](const BinlogFile& f) { return f.name == resume_.file; });
  if (listed == files.end()) {
    const std::optional<uint64_t> ours = BinlogFileNumber(resume_.file);
    const std::optional<uint64_t> oldest = BinlogFileNumber(files[0].name);
    if (ours && oldest && *ours < *oldest &&
        BaseName(resume_.file) == BaseName(files[0].name)) {
      *history = History::kPurged;
      return "";
    }
    *history = History::kOther;
    *why = "the server has no binlog file " + resume_.file + " (it keeps " +
           files.front().name + " to " + files.back().name + ")";
    return "";
  }
  if (resume_.pos > listed->size) {
    *history = History::kOther;
    *why = "binlog file " + resume_.file + " ends at " +
           std::to_string(listed->size) + ", before " +
           std::to_string(resume_.pos) + " (cut short by a crash?)";
    return "";
  }
  if (!mariadb_ || !gtid_state_) return "";
  std::optional<GtidState> state;
  if (std::string err = ReadGtidState(conn, resume_, &state); !err.empty()) {
    return err;
  }
  if (!state) {
    *history = History::kOther;
    *why = "the server has no event boundary at " + resume_.ToString();
  } else if (*state != *gtid_state_) {
    *history = History::kOther;
    *why = "the GTID state at " + resume_.ToString() + " is \"" +
           state->ToString() + "\" where walwatch read \"" +
           gtid_state_->ToString() + "\"";
  }
  return "";
}

std::string MariaDbSource::ContinueAfterPurge(MysqlConnection* conn,
                                              ChangeReceiver* receiver) {
  std::vector<BinlogFile> files;
  if (std::string err = ListBinlogFiles(conn, &files); !err.empty()) {
    return "cannot list the binlog files (SHOW BINARY LOGS): " + err;
  }
  if (files.empty()) return "the server lists no binlog files";
  const BinlogPosition start{files[0].name, 4};
  if (std::string err = RecordHistory(conn, start); !err.empty()) return err;
  std::string why;
  const std::optional<uint64_t> gap = BinlogVersion(history(), start, &why);
  if (!gap) return why;
  LogError(
      "the binlog walwatch had not read yet was purged (PURGE BINARY "
      "LOGS, or the server's retention: binlog_expire_logs_seconds); "
      "what it held is lost, and every watcher must relist",
      {{"resume_at", resume_.ToString()},
       {"oldest_kept", start.file},
       {"resume_after", FormatBinlogVersion(*gap)}});
  receiver->Gap(std::max(*gap, receiver->served_rv() + 1));
  resume_ = start;
  return "";
}

std::string MariaDbSource::ContinueInNewHistory(MysqlConnection* conn,
                                                ChangeReceiver* receiver,
                                                const std::string& why) {
  BinlogPosition end;
  if (BinlogStatus s = ReadBinlogEnd(conn, &end); !s.ok()) return s.message;
  const uint64_t old_history = history();
  if (std::string err = RecordHistory(conn, end); !err.empty()) return err;
  std::string bad;
  const std::optional<uint64_t> new_floor = BinlogVersion(history(), end, &bad);
  if (!new_floor) return bad;
  // Another replica may have served up to the old server's end (as last
  // polled), and the old server may have written past even that, into a
  // new file: the fence reaches the end of the file after the highest file
  // and offset seen, placed in the new server's range.
  uint64_t seen = 0;
  for (uint64_t v :
       {receiver->served_rv(), received_,
        highest_server_position_ ? highest_server_position_(old_history)
                                 : uint64_t{0}}) {
    if (HistoryOfVersion(v) == old_history) {
      seen = std::max(seen, PositionOfVersion(v));
    }
  }
  const uint64_t fence_hi =
      BinlogHistoryFloor(history()) +
      (seen / kBinlogVersionFileFactor + 2) * kBinlogVersionFileFactor - 1;
  // The same server_id: one range, and any RV in the fence may be the old
  // server's. Another: the old server's RVs lie in its own range, which
  // the new floor and ceiling refuse, and only a handoff can still bring
  // its files and offsets into the new range (a list read on the old
  // server, handed over through a connection to the new one, gets the new
  // server's history): handoff_fence.h.
  const bool same_range = history() == old_history;
  LogError(
      "the server's binlog is not the history walwatch read (" + why +
          "): a failover to another server, a server restored from a "
          "backup, or a binlog cut short by a crash; every watcher must "
          "relist, and " +
          (same_range ? "resourceVersions in the fence are refused from now on"
                      : "the old server's resourceVersions (another server_id, "
                        "another range) and handoffs of lists in the fence are "
                        "refused from now on"),
      {{"resume_at", resume_.ToString()},
       {"new_position", end.ToString()},
       {"served_up_to", FormatBinlogVersion(receiver->served_rv())},
       {"fence_from", FormatBinlogVersion(*new_floor + 1)},
       {"fence_to", FormatBinlogVersion(fence_hi)}});
  if (same_range && *new_floor < fence_hi) {
    LogWarn(
        "the server's binlog positions lie inside the fence: watches "
        "that resume from its new resourceVersions get 410 until it "
        "writes past the fence (fix: FLUSH BINARY LOGS until its binlog "
        "file number passes the fence's)",
        {{"fence_to", FormatBinlogVersion(fence_hi)}});
  }
  handoff_fence_.Set(*new_floor, fence_hi);
  receiver->HistoryReset(*new_floor, same_range ? fence_hi : 0,
                         BinlogHistoryCeiling(history()));
  resume_ = end;
  received_ = 0;
  return "";
}

}  // namespace walwatch::mysql
