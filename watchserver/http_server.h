// HttpServer serves the Kubernetes watch protocol over HTTP/1.1 (Boost.Beast)
// on a Unix socket, and optionally on a loopback TCP address for tools such
// as kubectl. Each connection is read by an HttpSession (http_session.h),
// which answers its requests and hands a watch's connection to a WatchStream
// (watch_stream.h); see watchserver/PROTOCOL.md.
//
// Ownership: the caller owns the io_context, the EventLog and the
// ResourceCatalog, and keeps them alive until Stop() has returned and the
// io_context has stopped running.
// Thread safety: Start() and Stop() are called from one thread (main); the
// sessions run on strands of the io_context, which may run on many threads.
#ifndef WALWATCH_WATCHSERVER_HTTP_SERVER_H_
#define WALWATCH_WATCHSERVER_HTTP_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "watchserver/http_server_options.h"

namespace walwatch {

class EventLog;
class ResourceCatalog;

class HttpServer {
 public:
  // `ready` answers /readyz: "" when ready (streaming and caught up), else
  // why not, which becomes the 503's body. Null: always ready.
  HttpServer(boost::asio::io_context& io, EventLog& log,
             ResourceCatalog& catalog, HttpServerOptions options,
             std::function<std::string()> ready);
  ~HttpServer();

  // Removes a stale socket file, binds, sets the mode, starts accepting.
  // Returns an empty string on success, or a one-line error. SIGPIPE is
  // ignored from then on, unless the process handles it already: watch
  // sessions sendfile(2), which has no MSG_NOSIGNAL, so a client that went
  // away would otherwise end the process.
  std::string Start();

  // Stops accepting, ends every stream with the final chunk, closes idle
  // connections and removes the socket file. Safe to call twice.
  void Stop();

  size_t active_sessions() const;
  // Connections refused so far: past max_connections (answered 429), and
  // by the Unix socket's peer allow-list (closed).
  struct Refused {
    uint64_t limit;
    uint64_t peer;
  };
  Refused connections_refused() const;
  // Bytes the connection buffer budget counts now
  // (max_connection_buffer_bytes), and the allocations it refused: of a
  // request (answered 429) and of a stalled watcher's write (ended).
  size_t connection_buffer_bytes() const;
  struct BufferRefusals {
    uint64_t request;
    uint64_t watch;
  };
  BufferRefusals connection_buffer_refusals() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// io.run() for the threads serving HTTP, until `io` is out of work. An
// exception out of a handler (a bug, or a library that throws where it
// should report) unwinds that handler and what it held, its connection
// with it, and is logged; the other handlers go on. Ending the process
// would drop every watch at once and make every client relist.
void RunHandlers(boost::asio::io_context& io);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_HTTP_SERVER_H_
