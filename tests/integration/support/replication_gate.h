// ReplicationGate: a TCP proxy on 127.0.0.1 (an ephemeral port) to
// PostgreSQL's Unix socket that holds the logical replication stream at an
// LSN, so that a test knows exactly how much WAL its client has received,
// however fast or slow the machine is.
//
// It reads the server's side of every proxied connection as protocol
// messages (a type byte and a 4-byte length). The first CopyData on a
// connection that carries XLogData ('w') with dataStart >= the hold LSN, or a
// primary keepalive ('k') with walEnd >= the hold LSN, is not forwarded, and
// neither is anything after it on that connection, until Release(). Every
// other message, and everything the client sends, passes unchanged. So a
// client such as walwatch has then seen no position at or past the hold LSN:
// the stream is paused, not cut, and nothing is dropped.
//
// The conninfo through it must say sslmode=disable gssencmode=disable: the
// proxy reads plain messages only (an SSL or GSS answer is a single byte).
//
// Thread safety: the public methods may be called from any thread; the
// forwarding runs on threads of its own (one acceptor, two per connection).
// The destructor ends every proxied connection.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_REPLICATION_GATE_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_REPLICATION_GATE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace walwatch::itest {

class ReplicationGate {
 public:
  // Listens at once; throws std::runtime_error if it cannot.
  ReplicationGate(std::string upstream_unix_socket, uint64_t hold_lsn);
  ~ReplicationGate();
  ReplicationGate(const ReplicationGate &) = delete;
  ReplicationGate &operator=(const ReplicationGate &) = delete;

  int port() const;
  // Waits until some connection holds a message at or past the hold LSN
  // (the client has received everything before it), or `timeout` passes.
  bool WaitHolding(std::chrono::milliseconds timeout);
  // The highest dataStart or walEnd forwarded on any connection so far
  // (0 if none): below the hold LSN until Release().
  uint64_t forwarded_lsn() const;
  // Forwards what is held and stops holding, for good.
  void Release();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_REPLICATION_GATE_H_
