#include "watchserver/peer_credentials.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace walwatch {

bool PeerPolicy::Allows(uid_t uid, gid_t gid) const {
  if (!restricted()) return true;
  return std::find(uids.begin(), uids.end(), uid) != uids.end() ||
         std::find(gids.begin(), gids.end(), gid) != gids.end();
}

std::string ParseIdList(std::string_view text, std::vector<uint32_t>* out) {
  std::vector<uint32_t> ids;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (item.empty() || item.size() > 10) {
      return "expected comma-separated numeric ids such as 1000,1001";
    }
    uint64_t v = 0;
    for (char c : item) {
      if (c < '0' || c > '9') {
        return "expected comma-separated numeric ids such as 1000,1001";
      }
      v = v * 10 + (c - '0');
    }
    if (v > UINT32_MAX - 1) return "id out of range";
    ids.push_back(static_cast<uint32_t>(v));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return "trailing comma";
  }
  *out = std::move(ids);
  return "";
}

bool PeerCredentials(int fd, pid_t* pid, uid_t* uid, gid_t* gid,
                     std::string* error) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    *error = std::string("SO_PEERCRED: ") + std::strerror(errno);
    return false;
  }
  *pid = cred.pid;
  *uid = cred.uid;
  *gid = cred.gid;
  return true;
}

std::string PeerIdentity(int fd, bool tcp) {
  if (!tcp) {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string error;
    if (!PeerCredentials(fd, &pid, &uid, &gid, &error)) return "";
    if (pid > 0) return "pid:" + std::to_string(pid);
    return "uid:" + std::to_string(uid);
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return "";
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* ip = nullptr;
  if (addr.ss_family == AF_INET) {
    ip = &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr;
  } else if (addr.ss_family == AF_INET6) {
    ip = &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr;
  }
  if (ip == nullptr || !inet_ntop(addr.ss_family, ip, text, sizeof(text))) {
    return "";
  }
  return std::string("tcp:") + text;
}

}  // namespace walwatch
