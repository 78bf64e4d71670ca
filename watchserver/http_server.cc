#include "watchserver/http_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <exception>
#include <filesystem>
#include <utility>
#include <vector>

#include "cdc/base/clock.h"
#include "cdc/base/logging.h"
#include "watchserver/loopback_address.h"
#include "watchserver/http_session.h"
#include "watchserver/server_context.h"

namespace walwatch {

namespace net = boost::asio;
using Protocol = net::generic::stream_protocol;
// The generic protocol holds a Unix or a TCP socket, so one session type
// serves both listeners.
using Acceptor = net::basic_socket_acceptor<Protocol>;

namespace {

// After an accept error such as EMFILE, wait before accepting again rather
// than spinning on the same error.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

// Accepts connections on one listening socket (Unix or TCP) and starts an
// HttpSession, on a strand of its own, for each. Owns itself like a Beast
// listener: alive while an accept or a retry timer is pending.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& io, Acceptor acceptor, bool tcp,
           std::shared_ptr<ServerContext> context)
      : io_(io),
        acceptor_(std::move(acceptor)),
        tcp_(tcp),
        retry_timer_(acceptor_.get_executor()),
        context_(std::move(context)) {}

  void Run() {
    net::dispatch(acceptor_.get_executor(),
                  [self = shared_from_this()] { self->DoAccept(); });
  }

  // Any thread: stop accepting. Pending accepts complete with an error.
  void Stop() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      self->stopped_ = true;
      boost::system::error_code ignored;
      self->acceptor_.close(ignored);
      self->retry_timer_.cancel();
    });
  }

 private:
  void DoAccept() {
    if (stopped_) return;
    acceptor_.async_accept(
        net::make_strand(io_),
        [self = shared_from_this()](boost::system::error_code ec, auto socket) {
          try {
            self->OnAccept(ec, SessionSocket(std::move(socket)));
          } catch (const std::exception& e) {
            LogError("accepting a connection failed", {{"error", e.what()}});
            self->DoAccept();
          }
        });
  }

  void OnAccept(boost::system::error_code ec, SessionSocket socket) {
    if (stopped_ || ec == net::error::operation_aborted) return;
    if (ec) {
      LogWarn("accept failed", {{"error", ec.message()}});
      retry_timer_.expires_after(kAcceptRetryDelay);
      retry_timer_.async_wait(
          [self = shared_from_this()](boost::system::error_code wait_ec) {
            if (!wait_ec) self->DoAccept();
          });
      return;
    }
    if (tcp_) {
      // Events are written whole; do not hold the last segment back.
      boost::system::error_code ignored;
      socket.set_option(net::ip::tcp::no_delay(true), ignored);
    } else if (!PeerAllowed(socket)) {
      ++context_->refused_peer;
      return Drop(socket);
    }
    // Past the limit a connection is answered 429, by a session of its own
    // that lives at most a couple of seconds. Those sessions do not count
    // against the limit, and at most kMaxRefusing are open: past that a
    // connection is closed at once, so that refusals, too, hold only a few
    // of the descriptors kept for walwatch itself.
    const size_t limit = context_->options.max_connections;
    const size_t refusing = context_->refusing.load();
    const size_t open = context_->sessions.size();
    const bool refuse = limit != 0 && open - std::min(open, refusing) >= limit;
    if (refuse) {
      ++context_->refused_limit;
      if (Clock::now() - refused_logged_ >= kRefusalLogInterval) {
        refused_logged_ = Clock::now();
        LogWarn("too many connections: answering 429 (--max-connections)",
                {{"limit", static_cast<uint64_t>(limit)},
                 {"refused_total", context_->refused_limit.load()}});
      }
      if (refusing >= ServerContext::kMaxRefusing) return Drop(socket);
      ++context_->refusing;
    }
    std::string client = PeerIdentity(socket.native_handle(), tcp_);
    auto session = std::make_shared<HttpSession>(std::move(socket), context_,
                                                 std::move(client));
    if (refuse) session->Refuse(TooManyConnectionsStatus(limit));
    session->Start();
    DoAccept();
  }

  // Closes a connection refused without an answer, and accepts the next.
  void Drop(SessionSocket& socket) {
    boost::system::error_code ignored;
    socket.close(ignored);
    DoAccept();
  }

  // The Unix socket's allow-list (HttpServerOptions::peers), by the peer's
  // credentials as the kernel gives them (SO_PEERCRED).
  bool PeerAllowed(SessionSocket& socket) const {
    const PeerPolicy& peers = context_->options.peers;
    if (!peers.restricted()) return true;
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string error;
    if (!PeerCredentials(socket.native_handle(), &pid, &uid, &gid, &error)) {
      LogWarn("refusing a connection whose peer is unknown",
              {{"error", error}});
      return false;
    }
    if (peers.Allows(uid, gid)) return true;
    LogWarn("refusing a connection from a peer not on the allow-list",
            {{"pid", static_cast<int64_t>(pid)},
             {"uid", static_cast<uint64_t>(uid)},
             {"gid", static_cast<uint64_t>(gid)}});
    return false;
  }

  net::io_context& io_;
  Acceptor acceptor_;  // on its own strand
  const bool tcp_;
  net::steady_timer retry_timer_;
  const std::shared_ptr<ServerContext> context_;
  bool stopped_ = false;  // on the acceptor's strand
  // Refusals past the limit are logged at most once per interval.
  static constexpr auto kRefusalLogInterval = std::chrono::seconds(10);
  Clock::time_point refused_logged_;  // on the acceptor's strand
};

// Opens, binds and listens; returns "" or a one-line error naming `what`.
std::string Listen(Acceptor* acceptor, const Protocol::endpoint& endpoint,
                   bool reuse_address, const char* what) {
  boost::system::error_code ec;
  acceptor->open(endpoint.protocol(), ec);
  if (!ec && reuse_address) {
    acceptor->set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) acceptor->bind(endpoint, ec);
  if (ec) return std::string("cannot bind ") + what + ": " + ec.message();
  return "";
}

// The endpoint of `text` (loopback_address.h), or "" and an error.
std::string ParseLoopback(const std::string& text,
                          net::ip::tcp::endpoint* out) {
  std::string host;
  uint16_t port = 0;
  if (!ParseLoopbackAddress(text, &host, &port)) {
    return "tcp_listen \"" + text +
           "\": expected a loopback address and port such as 127.0.0.1:8080 "
           "or [::1]:8080 (walwatch has no authentication; use the Unix "
           "socket)";
  }
  *out = net::ip::tcp::endpoint(net::ip::make_address(host), port);
  return "";
}

// A socket file left by a previous run is removed; a live one (something
// accepts on it) or a file that is not a socket is an error.
std::string RemoveStaleSocket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return "";
    return "cannot stat socket path " + path + ": " + std::strerror(errno);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return "socket path " + path + " exists and is not a socket";
  }
  net::io_context probe_io;
  net::local::stream_protocol::socket probe(probe_io);
  boost::system::error_code ec;
  probe.connect(net::local::stream_protocol::endpoint(path), ec);
  if (!ec) return "socket path " + path + " is in use by another process";
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return "cannot remove stale socket " + path + ": " + std::strerror(errno);
  }
  return "";
}

}  // namespace

struct HttpServer::Impl {
  Impl(net::io_context& io, std::shared_ptr<ServerContext> context)
      : io(io), context(std::move(context)) {}

  net::io_context& io;
  const std::shared_ptr<ServerContext> context;
  std::vector<std::shared_ptr<Listener>> listeners;
  bool started = false;
  bool stopped = false;
  bool socket_file_created = false;
};

HttpServer::HttpServer(net::io_context& io, EventLog& log,
                       ResourceCatalog& catalog, HttpServerOptions options,
                       std::function<std::string()> ready)
    : impl_(std::make_unique<Impl>(
          io, std::make_shared<ServerContext>(log, catalog, std::move(options),
                                              std::move(ready)))) {}

HttpServer::~HttpServer() { Stop(); }

std::string HttpServer::Start() {
  if (impl_->started) return "HttpServer already started";
  if (impl_->stopped) return "HttpServer already stopped";
  struct sigaction pipe_action {};
  if (sigaction(SIGPIPE, nullptr, &pipe_action) == 0 &&
      pipe_action.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  const HttpServerOptions& options = impl_->context->options;
  const std::string& path = options.socket_path;
  if (path.empty()) return "socket_path is required";
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return "socket path " + path + " is longer than " +
           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
  }
  net::ip::tcp::endpoint tcp_endpoint;
  if (!options.tcp_listen.empty()) {
    std::string error = ParseLoopback(options.tcp_listen, &tcp_endpoint);
    if (!error.empty()) return error;
    if (options.peers.restricted()) {
      // TCP carries no peer credentials: it would bypass the allow-list.
      return "tcp_listen cannot be combined with a peer allow-list "
             "(allow-uids/allow-gids): TCP connections carry no peer "
             "credentials";
    }
  }
  // The socket's directory: created (0750, so only the owner and its group
  // reach the socket) when missing, as under a fresh emptyDir or /run.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (std::filesystem::create_directories(dir, ec)) {
      std::filesystem::permissions(dir, std::filesystem::perms(0750), ec);
    }
    if (ec) {
      return "cannot create the socket directory " + dir.string() + ": " +
             ec.message();
    }
  }
  if (std::string error = RemoveStaleSocket(path); !error.empty()) {
    return error;
  }

  std::vector<Acceptor> acceptors;
  acceptors.emplace_back(net::make_strand(impl_->io));
  std::string error =
      Listen(&acceptors.back(),
             Protocol::endpoint(net::local::stream_protocol::endpoint(path)),
             /*reuse_address=*/false, path.c_str());
  if (!error.empty()) return error;
  impl_->socket_file_created = true;
  boost::system::error_code ec;
  if (chmod(path.c_str(), static_cast<mode_t>(options.socket_mode)) != 0) {
    error = "cannot chmod socket " + path + ": " + std::strerror(errno);
  }
  if (error.empty()) {
    acceptors.back().listen(net::socket_base::max_listen_connections, ec);
    if (ec) error = "cannot listen on " + path + ": " + ec.message();
  }
  if (error.empty() && !options.tcp_listen.empty()) {
    acceptors.emplace_back(net::make_strand(impl_->io));
    error = Listen(&acceptors.back(), Protocol::endpoint(tcp_endpoint),
                   /*reuse_address=*/true, options.tcp_listen.c_str());
    if (error.empty()) {
      acceptors.back().listen(net::socket_base::max_listen_connections, ec);
      if (ec)
        error = "cannot listen on " + options.tcp_listen + ": " + ec.message();
    }
  }
  if (!error.empty()) {
    unlink(path.c_str());
    impl_->socket_file_created = false;
    return error;
  }

  impl_->started = true;
  for (size_t i = 0; i < acceptors.size(); ++i) {
    // acceptors[0] is the Unix socket, acceptors[1] the TCP one.
    impl_->listeners.push_back(std::make_shared<Listener>(
        impl_->io, std::move(acceptors[i]), /*tcp=*/i == 1, impl_->context));
    impl_->listeners.back()->Run();
  }
  LogInfo("serving watches", {{"socket", path}, {"tcp", options.tcp_listen}});
  return "";
}

void HttpServer::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  for (const std::shared_ptr<Listener>& listener : impl_->listeners) {
    listener->Stop();
  }
  impl_->listeners.clear();
  // Sessions registered from now on end at once (SessionRegistry::Add).
  for (const std::shared_ptr<Session>& session :
       impl_->context->sessions.BeginStop()) {
    session->Shutdown();
  }
  if (impl_->socket_file_created) {
    unlink(impl_->context->options.socket_path.c_str());
    impl_->socket_file_created = false;
  }
}

size_t HttpServer::active_sessions() const {
  return impl_->context->sessions.size();
}

HttpServer::Refused HttpServer::connections_refused() const {
  return {impl_->context->refused_limit.load(),
          impl_->context->refused_peer.load()};
}

size_t HttpServer::connection_buffer_bytes() const {
  return impl_->context->buffer_budget.used();
}

HttpServer::BufferRefusals HttpServer::connection_buffer_refusals() const {
  return {impl_->context->buffer_refused_request.load(),
          impl_->context->buffer_refused_watch.load()};
}

void RunHandlers(boost::asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      LogError("an exception escaped an HTTP handler; serving goes on",
               {{"error", e.what()}});
    }
  }
}

}  // namespace walwatch
