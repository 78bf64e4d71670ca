// OpsServer serves what operators scrape and probe, over plain HTTP/1.1 on a
// TCP address (--metrics-address, default 127.0.0.1:9187):
//   GET /metrics   Prometheus text format (Metrics::Scrape)
//   GET /healthz   200 while the process runs
//   GET /livez     same as /healthz
//   GET /readyz    200 when `ready` says so, else 503 with its reason
// Anything else gets 404. Boost.Beast over Asio.
//
// The port may be reachable from the whole cluster, so a connection costs
// little: a request with a body or a header over 8 KiB is dropped, an idle
// connection is closed after 30 s, and past 64 open connections new ones
// are closed as they come. Stop() closes the open ones too, so that a
// keep-alive scraper does not hold the process after SIGTERM.
//
// Ownership: the caller owns the io_context and the Metrics, and keeps them
// alive until Stop() has returned and the io_context has stopped.
#ifndef WALWATCH_WATCHSERVER_OPS_SERVER_H_
#define WALWATCH_WATCHSERVER_OPS_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

namespace walwatch {

class Metrics;

class OpsServer {
 public:
  // `ready` returns "" when ready, else why not (the 503 body).
  OpsServer(boost::asio::io_context& io, Metrics& metrics,
            std::function<std::string()> ready);
  ~OpsServer();

  // "HOST:PORT" with a numeric host ("127.0.0.1:9187", "0.0.0.0:9187",
  // "[::]:9187"). Returns "" or a one-line error.
  std::string Start(const std::string& address);
  void Stop();
  // The bound port (useful with port 0).
  unsigned short port() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_OPS_SERVER_H_
