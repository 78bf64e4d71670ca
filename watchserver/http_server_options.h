// HttpServerOptions: how HttpServer serves watches. Its own header so that
// what the sessions share (server_context.h) needs nothing of HttpServer.
//
// A plain struct, copied into the server when it is made; immutable from
// then on, so any thread may read it.
#ifndef WALWATCH_WATCHSERVER_HTTP_SERVER_OPTIONS_H_
#define WALWATCH_WATCHSERVER_HTTP_SERVER_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "watchserver/peer_credentials.h"

namespace walwatch {

class Metrics;
class StateSource;

struct HttpServerOptions {
  std::string socket_path;       // required
  unsigned socket_mode = 0660;   // permission bits of the socket file
  // Unix socket peers allowed by uid/gid (SO_PEERCRED); unrestricted if
  // empty. A refused connection is closed and logged.
  PeerPolicy peers;
  // Optional "127.0.0.1:PORT" or "[::1]:PORT" (loopback only, by
  // loopback_address.h's rule; port 0: any free one) for clients that cannot
  // speak to a Unix socket. Empty: no TCP listener.
  std::string tcp_listen;
  // How long a watch with a resourceVersion newer than walwatch has seen
  // waits for it before answering 504 (the apiserver waits 3 s).
  std::chrono::milliseconds too_large_rv_wait{3000};
  // Most bytes of events gathered into one socket write.
  size_t max_write_bytes = 256 * 1024;
  // Bound on the request line and header fields together; larger requests
  // get 431. 1 MiB, as kube-apiserver (Go's http.DefaultMaxHeaderBytes):
  // a long set-based label selector it serves must not fail here. The
  // buffer grows only as far as a request needs, and gives back what a
  // large one took (HttpSession::OnReadRequest).
  size_t max_header_bytes = size_t{1} << 20;
  // A watcher whose unsent bytes (events from its cursor to the log's tail)
  // pass this ends with 410 Expired: a slow watcher never holds events
  // hostage and never skips any silently.
  size_t max_backlog_bytes = size_t{64} << 20;
  // With allowWatchBookmarks=true, a watch gets a BOOKMARK about this often
  // (each interval shortened by up to 5% at random, so that watches opened
  // together spread out), and one just before its timeout ends it. The
  // apiserver sends one about every minute.
  std::chrono::milliseconds bookmark_interval{60000};
  // Bytes of initial state queued between the reader and one watch.
  size_t max_initial_state_queue_bytes = size_t{4} << 20;
  // How long the state reader may wait for a slow client before the watch
  // ends with 410 (InitialStateStream); zero: no limit.
  std::chrono::milliseconds initial_state_timeout{std::chrono::minutes(5)};
  // How long the state reader waits on a full queue (the client took none
  // of it meanwhile) before it gives its worker and snapshot back and the
  // watch ends with 410; zero: no limit.
  std::chrono::milliseconds initial_state_stall_timeout{
      std::chrono::seconds(20)};
  // Bytes per second a client must take of its initial state, over each
  // stall timeout that the reader waits on its full queue; zero: any
  // progress at all will do.
  uint64_t initial_state_min_rate = uint64_t{1} << 20;
  // Initial state, list handoffs and fresh RVs. Not owned; may be null (then
  // those requests get 503).
  StateSource* state = nullptr;
  // Not owned; may be null.
  Metrics* metrics = nullptr;
  // Most connections open at once over both listeners; 0: no limit. A
  // connection past it gets its request answered 429 TooManyRequests
  // (Retry-After: 1), and is closed.
  size_t max_connections = 0;
  // Most bytes all connections together may hold in request buffers (the
  // bytes of requests being read, and their parsed header fields) and in
  // spilled writes of watchers that stopped reading (up to max_write_bytes
  // each); 0: no limit, only counted. A request that needs more is answered
  // 429 TooManyRequests (Retry-After: 1) and its connection closed; a
  // watcher whose write would spill past it is ended as a slow watcher
  // (WatchEndReason::kBacklog), its connection closed.
  size_t max_connection_buffer_bytes = size_t{128} << 20;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_HTTP_SERVER_OPTIONS_H_
