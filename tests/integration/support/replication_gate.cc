#include "tests/integration/support/replication_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace walwatch::itest {
namespace {

uint32_t ReadBe32(const char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint64_t ReadBe64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

bool WriteAll(int fd, const char *data, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads what is there (blocking for at least one byte); false on EOF/error.
bool ReadSome(int fd, std::string *buffer) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer->append(buf, static_cast<size_t>(n));
    return true;
  }
}

int ConnectUnix(const std::string &path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

struct ReplicationGate::Impl {
  struct Connection {
    int client = -1;
    int upstream = -1;
    std::thread to_server;
    std::thread to_client;
  };

  std::string upstream_path;
  uint64_t hold_lsn = 0;
  int listen_fd = -1;
  int port = 0;
  std::thread acceptor;
  std::atomic<uint64_t> forwarded{0};

  std::mutex mu;
  std::condition_variable cv;
  bool released = false;                                 // GUARDED_BY(mu)
  bool holding = false;                                  // GUARDED_BY(mu)
  bool stopping = false;                                 // GUARDED_BY(mu)
  std::vector<std::unique_ptr<Connection>> connections;  // GUARDED_BY(mu)

  static void EndConnection(Connection *c) {
    shutdown(c->client, SHUT_RDWR);
    shutdown(c->upstream, SHUT_RDWR);
  }

  void Accept() {
    for (;;) {
      int client = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) {
          if (client >= 0) close(client);
          return;
        }
      }
      if (client < 0) continue;
      int upstream = ConnectUnix(upstream_path);
      if (upstream < 0) {
        close(client);
        continue;
      }
      auto c = std::make_unique<Connection>();
      c->client = client;
      c->upstream = upstream;
      Connection *raw = c.get();
      std::lock_guard<std::mutex> lock(mu);
      connections.push_back(std::move(c));
      raw->to_server = std::thread([raw] {
        std::string buffer;
        while (ReadSome(raw->client, &buffer)) {
          if (!WriteAll(raw->upstream, buffer.data(), buffer.size())) break;
          buffer.clear();
        }
        EndConnection(raw);
      });
      raw->to_client = std::thread([this, raw] {
        ForwardToClient(raw);
        EndConnection(raw);
      });
    }
  }

  // Blocks while the gate is closed; false if the gate is being destroyed.
  bool WaitForRelease() {
    std::unique_lock<std::mutex> lock(mu);
    if (!released) {
      holding = true;
      cv.notify_all();
      cv.wait(lock, [this] { return released || stopping; });
    }
    return !stopping;
  }

  void ForwardToClient(Connection *c) {
    std::string buffer;
    bool framed = true;  // false: not the protocol we know; pass bytes on
    while (ReadSome(c->upstream, &buffer)) {
      size_t sent = 0;  // buffer[0, sent) is written
      size_t at = 0;    // start of the next message to look at
      uint64_t max_lsn = 0;
      while (framed && buffer.size() - at >= 5) {
        const uint32_t length = ReadBe32(buffer.data() + at + 1);
        if (length < 4) {
          framed = false;
          break;
        }
        if (buffer.size() - at < 1 + size_t{length}) break;
        const char *m = buffer.data() + at;
        // CopyData carrying XLogData or a primary keepalive: 'd', length,
        // then 'w' or 'k' and a position (dataStart or walEnd).
        if (m[0] == 'd' && length >= 4 + 1 + 8 &&
            (m[5] == 'w' || m[5] == 'k')) {
          const uint64_t lsn = ReadBe64(m + 6);
          if (lsn >= hold_lsn) {
            if (!WriteAll(c->client, buffer.data() + sent, at - sent)) return;
            sent = at;
            Forwarded(max_lsn);
            if (!WaitForRelease()) return;
          }
          max_lsn = std::max(max_lsn, lsn);
        }
        at += 1 + size_t{length};
      }
      const size_t end = framed ? at : buffer.size();
      if (!WriteAll(c->client, buffer.data() + sent, end - sent)) return;
      Forwarded(max_lsn);
      buffer.erase(0, end);
    }
  }

  void Forwarded(uint64_t lsn) {
    uint64_t seen = forwarded.load();
    while (lsn > seen && !forwarded.compare_exchange_weak(seen, lsn)) {
    }
  }
};

ReplicationGate::ReplicationGate(std::string upstream_unix_socket,
                                 uint64_t hold_lsn)
    : impl_(std::make_unique<Impl>()) {
  impl_->upstream_path = std::move(upstream_unix_socket);
  impl_->hold_lsn = hold_lsn;
  impl_->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (impl_->listen_fd < 0 ||
      bind(impl_->listen_fd, reinterpret_cast<sockaddr *>(&addr),
           sizeof addr) != 0 ||
      listen(impl_->listen_fd, 64) != 0 ||
      getsockname(impl_->listen_fd, reinterpret_cast<sockaddr *>(&addr),
                  &len) != 0) {
    std::string why = std::strerror(errno);
    if (impl_->listen_fd >= 0) close(impl_->listen_fd);
    throw std::runtime_error("ReplicationGate: cannot listen: " + why);
  }
  impl_->port = ntohs(addr.sin_port);
  impl_->acceptor = std::thread([impl = impl_.get()] { impl->Accept(); });
}

ReplicationGate::~ReplicationGate() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  // Wakes the blocked accept() (Linux returns EINVAL from it).
  shutdown(impl_->listen_fd, SHUT_RDWR);
  impl_->acceptor.join();
  close(impl_->listen_fd);
  // The acceptor is gone: the list no longer changes.
  for (auto &c : impl_->connections) Impl::EndConnection(c.get());
  for (auto &c : impl_->connections) {
    c->to_server.join();
    c->to_client.join();
    close(c->client);
    close(c->upstream);
  }
}

int ReplicationGate::port() const { return impl_->port; }

bool ReplicationGate::WaitHolding(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [this] { return impl_->holding; });
}

uint64_t ReplicationGate::forwarded_lsn() const {
  return impl_->forwarded.load();
}

void ReplicationGate::Release() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->released = true;
  }
  impl_->cv.notify_all();
}

}  // namespace walwatch::itest
