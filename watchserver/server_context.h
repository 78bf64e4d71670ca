// What HttpServer's listeners and the sessions of its connections share
// (ServerContext), and the sessions alive now, which Stop() ends
// (SessionRegistry).
//
// A connection is served by one session at a time: an HttpSession reads its
// requests and answers them, and for a watch hands the connection over to a
// WatchStream, which takes the HttpSession's place in the registry.
//
// Ownership: ServerContext is held by shared_ptr (HttpServer, its listeners
// and every session), so that a session finishing after HttpServer is gone
// never dangles; `log` and `catalog` are kept alive by HttpServer's caller
// (see http_server.h). The registry holds weak_ptrs only.
// Thread safety: SessionRegistry and the atomics may be used from any
// thread; the rest is not changed after construction.
//
// No Asio or Beast here: the sessions' I/O types are in strand_session.h.
#ifndef WALWATCH_WATCHSERVER_SERVER_CONTEXT_H_
#define WALWATCH_WATCHSERVER_SERVER_CONTEXT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cdc/base/mutex.h"
#include "cdc/base/thread_annotations.h"
#include "watchserver/connection_budget.h"
#include "watchserver/http_server_options.h"

namespace walwatch {

class EventLog;
class ResourceCatalog;

// One connection's session, as the registry sees it.
class Session {
 public:
  virtual ~Session() = default;
  // Any thread: ends the session soon (each session says how).
  virtual void Shutdown() = 0;
};

// The live sessions, so that Stop() can end them: one per connection.
// Thread safety: all methods may be called from any thread.
class SessionRegistry {
 public:
  // Records `session`. Returns false once BeginStop() has run: the caller
  // must then end the session at once.
  bool Add(const std::shared_ptr<Session>& session);
  // Records `next` in the place of `previous`, which hands its connection
  // over to it. Returns false once BeginStop() has run: `next` is recorded
  // all the same, but BeginStop's caller has not seen it, so the caller must
  // shut it down.
  bool Replace(const Session* previous, const std::shared_ptr<Session>& next);
  // Called by a session's destructor.
  void Remove(const Session* session);
  // From now on Add() refuses; returns the sessions still alive.
  std::vector<std::shared_ptr<Session>> BeginStop();
  size_t size() const;

 private:
  mutable Mutex mu_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::unordered_map<const Session*, std::weak_ptr<Session>> sessions_
      GUARDED_BY(mu_);
};

struct ServerContext {
  ServerContext(EventLog& log, ResourceCatalog& catalog,
                HttpServerOptions options, std::function<std::string()> ready)
      : log(log),
        catalog(catalog),
        options(std::move(options)),
        ready(std::move(ready)),
        buffer_budget(this->options.max_connection_buffer_bytes) {}

  EventLog& log;
  ResourceCatalog& catalog;
  const HttpServerOptions options;
  const std::function<std::string()> ready;  // "" or why not ready
  SessionRegistry sessions;
  // HttpServer::connections_refused().
  std::atomic<uint64_t> refused_limit{0};
  std::atomic<uint64_t> refused_peer{0};
  // Refused sessions still answering (HttpSession::Refuse): they do not
  // count against max_connections, and at most kMaxRefusing are open.
  std::atomic<size_t> refusing{0};
  static constexpr size_t kMaxRefusing = 16;
  // Request buffers and spilled writes of every session (connection_budget.h),
  // and its refusals (HttpServer::connection_buffer_refusals).
  ConnectionBudget buffer_budget;
  std::atomic<uint64_t> buffer_refused_request{0};
  std::atomic<uint64_t> buffer_refused_watch{0};
};

// Logs that the connection buffer budget refused an allocation, at most
// once per 10 s for the whole process; `limit` is the budget.
void LogBufferBudgetRefusal(const char* what, size_t limit);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_SERVER_CONTEXT_H_
