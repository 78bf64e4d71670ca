// What a server keeps of its binlog, and what walwatch derives from it:
//   * the files (SHOW BINARY LOGS), and the bytes between two positions
//     across them (the replication lag in bytes: positions in different
//     files are 10^10 apart as resourceVersions, not as bytes);
//   * where a replay window starts after a restart of walwatch (MySQL has
//     no slot to remember it): the newest file that began before the
//     window's age, within its bytes;
//   * MariaDB's GTID state at a position (BINLOG_GTID_POS), the last GTID of
//     each replication domain: it names the history a position belongs to,
//     so that a reconnect can tell the server it reads from still has the
//     history walwatch served.
//
// Thread safety: plain values and functions; a connection is used by the
// calling thread only.
#ifndef WALWATCH_CDC_MYSQL_BINLOG_FILES_H_
#define WALWATCH_CDC_MYSQL_BINLOG_FILES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/mysql/binlog_position.h"
#include "cdc/mysql/mysql_conn.h"

namespace walwatch::mysql {

struct BinlogFile {
  std::string name;   // "mariadb-bin.000003"
  uint64_t size = 0;  // bytes
};

// SHOW BINARY LOGS, oldest first. Returns "" or the error.
std::string ListBinlogFiles(MysqlConnection* conn,
                            std::vector<BinlogFile>* out);

// Bytes of binlog from `from` to `to` across `files` (SHOW BINARY LOGS):
// the rest of from's file, the files between, and to's offset. 0 if `to` is
// not after `from`, or a file between them is not listed.
uint64_t BinlogBytesBetween(const std::vector<BinlogFile>& files,
                            const BinlogPosition& from,
                            const BinlogPosition& to);

// The file a replay window starts at: the newest of `files` (oldest first,
// not empty) that began at or before `since` (Unix seconds), so that every
// transaction committed since lies in it or after it; but none whose bytes
// from its start to the binlog's end pass `max_bytes` (the newest file is
// always taken). `started(file, &time)` reads when a file began, or
// returns false (a file purged meanwhile: then the window starts after
// it). Files are asked newest first, and no further back than needed.
std::string ChooseReplayStartFile(
    const std::vector<BinlogFile>& files, int64_t since, uint64_t max_bytes,
    const std::function<bool(const std::string& file, int64_t* started)>&
        started);

// MariaDB's GTID state at a binlog position: for each replication domain,
// the last GTID ("0-1-25") at or before it.
class GtidState {
 public:
  // Parses BINLOG_GTID_POS()'s text ("0-1-25,1-2-7"; "" for none). False
  // for anything else.
  static bool Parse(std::string_view text, GtidState* out);

  // A transaction with `gtid` (MariaDB's) passed.
  void Advance(const Gtid& gtid);
  bool operator==(const GtidState& o) const { return last_ == o.last_; }
  bool operator!=(const GtidState& o) const { return !(*this == o); }
  // "0-1-25,1-2-7", domains in order; "" for none.
  std::string ToString() const;

 private:
  std::map<uint32_t, Gtid> last_;  // by domain
};

// SELECT BINLOG_GTID_POS(file, pos): the state at `at`, or nullopt (with ""
// returned) when the server has no event boundary there or no such file.
std::string ReadGtidState(MysqlConnection* conn, const BinlogPosition& at,
                          std::optional<GtidState>* out);

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_BINLOG_FILES_H_
