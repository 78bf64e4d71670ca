// The optional allow-list of Unix socket peers. Anyone who can open the
// socket file (its mode, --socket-mode) can watch every row of the table, so
// deployments that share the socket's group with other processes can further
// restrict it to known user or group ids, checked with SO_PEERCRED when a
// connection is accepted.
// Thread safety: a PeerPolicy is immutable after parsing.
#ifndef WALWATCH_WATCHSERVER_PEER_CREDENTIALS_H_
#define WALWATCH_WATCHSERVER_PEER_CREDENTIALS_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace walwatch {

struct PeerPolicy {
  std::vector<uid_t> uids;  // empty and gids empty: everyone is allowed
  std::vector<gid_t> gids;

  bool restricted() const { return !uids.empty() || !gids.empty(); }
  // A peer is allowed if its uid or its primary gid is listed.
  bool Allows(uid_t uid, gid_t gid) const;
};

// Parses "1000,1001" (decimal ids; empty means none). Returns "" or why not.
std::string ParseIdList(std::string_view text, std::vector<uint32_t>* out);

// Reads the peer of the connected Unix socket `fd` with SO_PEERCRED.
// Returns false (and *error) if the kernel does not tell.
bool PeerCredentials(int fd, pid_t* pid, uid_t* uid, gid_t* gid,
                     std::string* error);

// Who is on the other end of connection `fd`, for the state readers'
// per-client share: "pid:N" for a Unix socket peer whose process walwatch
// can see; "uid:N" for one in another PID namespace (a container of the pod
// that does not share walwatch's: SO_PEERCRED gives pid 0 then), so such
// peers are told apart only by their uids; "tcp:ADDRESS" for a TCP peer,
// without its port (every connection has a port of its own, and the
// listener is loopback only: TCP clients are one client). "" if the kernel
// does not tell.
std::string PeerIdentity(int fd, bool tcp);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_PEER_CREDENTIALS_H_
