// ReplicationConnection is one logical replication connection in CopyBoth
// mode, after START_REPLICATION: the byte pipe under the PostgreSQL source,
// which reads wal2json's messages from it and writes its status updates to
// it. ReplicationConnector opens them. LibpqReplicationConnector is the real
// one; the replication loop's unit tests play a walsender instead
// (tests/unit/fake_walsender.h), so that the loop, the source and the
// protocol run without PostgreSQL.
//
// Threads: a connector and the connections it opens are used by one thread,
// the replication thread. Ownership: the source owns both.
#ifndef WALWATCH_CDC_POSTGRES_REPLICATION_CONNECTION_H_
#define WALWATCH_CDC_POSTGRES_REPLICATION_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <string_view>

#include "cdc/base/stop_signal.h"

namespace walwatch {

class ReplicationConnection {
 public:
  virtual ~ReplicationConnection() = default;

  enum class ReadStatus {
    kMessage,     // *message holds one whole CopyData message
    kWouldBlock,  // nothing whole is buffered: poll socket(), ConsumeInput
    kEnd,         // the stream ended or the connection failed: *error
  };
  // Takes the next message without waiting. *message stays valid until the
  // next Read or the connection's end.
  virtual ReadStatus Read(std::string_view* message, std::string* error) = 0;
  // Reads what the socket holds into the connection's buffer, after poll
  // said it is readable. False with *error if the connection failed.
  virtual bool ConsumeInput(std::string* error) = 0;
  // Sends one CopyData message, and flushes it. False with *error (the
  // connection's own message) if it could not.
  virtual bool Write(std::string_view message, std::string* error) = 0;
  // The descriptor to poll for input.
  virtual int socket() const = 0;
  // The walsender's process id on the server; 0 if there is none to ask
  // about (pg_stat_activity).
  virtual int backend_pid() const = 0;
};

// What START_REPLICATION asks the output plugin for.
struct StreamFormat {
  // wal2json (format-version 2, only `table`'s changes) or pgoutput
  // (`publication`, text tuples, no logical messages, no two-phase).
  bool pgoutput = false;
  std::string table;        // "schema.table"
  std::string publication;  // pgoutput
  // pgoutput's protocol version; 0: the highest the server offers (1 before
  // PostgreSQL 14, 2 on 14, 3 on 15, 4 from 16). From 2 on the server
  // streams large transactions before their commit; on 4 in parallel mode,
  // whose aborts carry their position.
  int pgoutput_protocol = 0;
};

// The protocol version `format` asks of a server of `server_version`
// (PQserverVersion's number), and the value of its streaming option ("" for
// none).
int PgoutputProtocolFor(const StreamFormat& format, int server_version);

// Where timeline `tli` ended in a timeline history file's `content` (lines
// "parentTLI<TAB>switchpoint<TAB>reason"); 0 if the file does not name it.
uint64_t TimelineEnd(std::string_view content, uint32_t tli);
const char* PgoutputStreamingFor(int protocol);

class ReplicationConnector {
 public:
  virtual ~ReplicationConnector() = default;

  struct Started {
    std::unique_ptr<ReplicationConnection> connection;  // null on failure
    std::string error;                                  // when null
    // The server answered START_REPLICATION (with an error): it says
    // something about the slot. Not when the connection itself failed.
    bool answered = false;
    std::string sqlstate;  // of that answer ("" if none)
    // The slot's confirmed_flush_lsn, read just before START_REPLICATION
    // (0 if it could not be read): where the server resumes.
    uint64_t slot_confirmed_flush = 0;
    // pgoutput: the protocol version asked for (0 for wal2json).
    int protocol = 0;
    // The server's timeline (IDENTIFY_SYSTEM; 0 if it could not be read),
    // and, when it is not `previous_timeline`, where `previous_timeline`
    // ended in the server's history (TIMELINE_HISTORY): WAL before it is
    // the same on both timelines, WAL from it on is not. 0 if unknown.
    uint32_t timeline = 0;
    uint64_t previous_timeline_end = 0;
  };
  // Opens a replication connection, reads the slot's confirmed position and
  // starts streaming `slot` in `format`, from the slot's confirmed
  // position. Blocks for at most the connect timeout plus two receive
  // timeouts; ends early once `stop` is raised.
  // `previous_timeline`: the timeline of the last connection (0: none).
  virtual Started Start(const std::string& slot, const StreamFormat& format,
                        uint32_t previous_timeline, const StopSignal& stop) = 0;
};

// The connector to a real server, over libpq.
class LibpqReplicationConnector final : public ReplicationConnector {
 public:
  // `conninfo` as ConnectPg takes it; START_REPLICATION, and the query
  // before it, may go `receive_timeout` unanswered.
  LibpqReplicationConnector(std::string conninfo, int connect_timeout_seconds,
                            std::chrono::milliseconds receive_timeout);

  Started Start(const std::string& slot, const StreamFormat& format,
                uint32_t previous_timeline, const StopSignal& stop) override;

 private:
  const std::string conninfo_;
  const int connect_timeout_seconds_;
  const std::chrono::milliseconds receive_timeout_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_REPLICATION_CONNECTION_H_
