#include "cdc/base/mutex.h"
#include "watchserver/ops_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cdc/base/logging.h"
#include "watchserver/metrics.h"
#include "watchserver/request_parser.h"

namespace walwatch {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// The port is reachable from the whole cluster (the manifests bind
// 0.0.0.0 for Prometheus), so what one connection may cost is bounded:
// requests are GETs with a small header and no body, and only so many
// connections are served at once (Prometheus and the kubelet's probes use
// a handful); the others are closed as they come.
constexpr size_t kMaxConnections = 64;
constexpr uint32_t kMaxHeaderBytes = 8 * 1024;
constexpr auto kIdleTimeout = std::chrono::seconds(30);
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

class OpsSession;

// The open sessions, so that Stop can close those a keep-alive client
// would hold open (a scraper on one connection would otherwise keep the
// process from exiting).
struct Sessions {
  Mutex mu;
  std::unordered_map<OpsSession*, std::weak_ptr<OpsSession>> open GUARDED_BY(mu);
  bool stopped GUARDED_BY(mu) = false;
};

class OpsSession : public std::enable_shared_from_this<OpsSession> {
 public:
  OpsSession(tcp::socket socket, Metrics& metrics,
             const std::function<std::string()>& ready,
             std::shared_ptr<Sessions> sessions)
      : stream_(std::move(socket)),
        metrics_(metrics),
        ready_(ready),
        sessions_(std::move(sessions)) {}
  ~OpsSession() {
    MutexLock lock(&sessions_->mu);
    sessions_->open.erase(this);
  }

  // False (and the connection dropped) when the server has stopped or
  // serves kMaxConnections already.
  bool Start() {
    {
      MutexLock lock(&sessions_->mu);
      if (sessions_->stopped || sessions_->open.size() >= kMaxConnections) {
        return false;
      }
      sessions_->open.emplace(this, weak_from_this());
    }
    DoRead();
    return true;
  }

  // From any thread: ends the connection, whatever it is doing.
  void Close() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      self->stream_.close();
    });
  }

 private:
  void DoRead() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec,
                                                 size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    // Closed, timed out, stopped, or malformed (a body, which an empty_body
    // refuses as it begins, or a header over 8 KiB): just drop it.
    if (ec) return;
    request_ = parser_->release();
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(request_.version());
    res->keep_alive(request_.keep_alive());
    res->set(http::field::server, "walwatch");
    std::string target(request_.target());
    target = target.substr(0, target.find('?'));
    if (request_.method() != http::verb::get &&
        request_.method() != http::verb::head) {
      res->result(http::status::method_not_allowed);
      res->set(http::field::content_type, "text/plain");
      res->body() = "only GET\n";
    } else if (target == "/metrics") {
      res->result(http::status::ok);
      res->set(http::field::content_type, "text/plain; version=0.0.4");
      res->body() = metrics_.Scrape();
    } else if (target == "/healthz" || target == "/livez") {
      res->result(http::status::ok);
      res->set(http::field::content_type, "text/plain");
      res->body() = "ok\n";
    } else if (target == "/readyz") {
      std::string why = ready_();
      res->result(why.empty() ? http::status::ok
                              : http::status::service_unavailable);
      res->set(http::field::content_type, "text/plain");
      res->body() = why.empty() ? "ok\n" : why + "\n";
    } else {
      res->result(http::status::not_found);
      res->set(http::field::content_type, "text/plain");
      res->body() = "not found\n";
    }
    res->prepare_payload();
    if (request_.method() == http::verb::head) {
      // The header says how long the body would be; a HEAD answer has none.
      const size_t length = res->body().size();
      res->body().clear();
      res->content_length(length);
    }
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec,
                                                       size_t) {
                        if (ec || !res->keep_alive()) {
                          beast::error_code ignored;
                          self->stream_.socket().shutdown(
                              tcp::socket::shutdown_send, ignored);
                          return;
                        }
                        self->DoRead();
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser<http::empty_body>> parser_;
  http::request<http::empty_body> request_;
  Metrics& metrics_;
  std::function<std::string()> ready_;
  const std::shared_ptr<Sessions> sessions_;
};

}  // namespace

struct OpsServer::Impl : std::enable_shared_from_this<OpsServer::Impl> {
  Impl(asio::io_context& io, Metrics& m, std::function<std::string()> r)
      : io(io),
        acceptor(asio::make_strand(io)),
        retry_timer(acceptor.get_executor()),
        metrics(m),
        ready(std::move(r)) {}

  void Accept() {
    acceptor.async_accept(
        asio::make_strand(io),
        [self = shared_from_this()](beast::error_code ec, tcp::socket s) {
          if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) {
            return;
          }
          if (ec) {
            // Out of file descriptors, say: retrying at once would spin
            // until one is freed.
            self->retry_timer.expires_after(kAcceptRetryDelay);
            self->retry_timer.async_wait([self](beast::error_code wait_ec) {
              if (!wait_ec) self->Accept();
            });
            return;
          }
          auto session = std::make_shared<OpsSession>(
              std::move(s), self->metrics, self->ready, self->sessions);
          session->Start();  // closes the socket itself if refused
          self->Accept();
        });
  }

  asio::io_context& io;
  tcp::acceptor acceptor;
  asio::steady_timer retry_timer;
  Metrics& metrics;
  std::function<std::string()> ready;
  const std::shared_ptr<Sessions> sessions = std::make_shared<Sessions>();
};

OpsServer::OpsServer(asio::io_context& io, Metrics& metrics,
                     std::function<std::string()> ready)
    : impl_(std::make_shared<Impl>(io, metrics, std::move(ready))) {}

OpsServer::~OpsServer() { Stop(); }

std::string OpsServer::Start(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return "--metrics-address " + address + ": expected HOST:PORT";
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  beast::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) return "--metrics-address " + address + ": bad host " + host;
  unsigned long port = 0;
  try {
    port = std::stoul(address.substr(colon + 1));
  } catch (...) {
    port = 70000;
  }
  if (port > 65535) return "--metrics-address " + address + ": bad port";
  tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return "cannot listen on --metrics-address " + address + ": " +
           ec.message();
  }
  impl_->Accept();
  LogInfo("serving metrics and health", {{"address", address}});
  return "";
}

void OpsServer::Stop() {
  auto impl = impl_;
  asio::post(impl->acceptor.get_executor(), [impl] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->retry_timer.cancel();
  });
  std::vector<std::shared_ptr<OpsSession>> open;
  {
    MutexLock lock(&impl->sessions->mu);
    impl->sessions->stopped = true;
    for (auto& [raw, weak] : impl->sessions->open) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
  }
  for (auto& session : open) session->Close();
}

unsigned short OpsServer::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

}  // namespace walwatch
