#include "tests/support/watch_http_client.h"

#include <sys/ioctl.h>

#include <boost/asio/error.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <utility>
#include <vector>

#include "tests/support/response_parser.h"

namespace walwatch::test_support {

namespace net = boost::asio;
using Protocol = net::generic::stream_protocol;

struct WatchHttpClient::Impl {
  // The parser's callback: body data is kept until taken as lines.
  struct KeepBody {
    std::string* body;
    void operator()(std::string_view data) const { body->append(data); }
  };

  explicit Impl(const Protocol::endpoint& endpoint) {
    socket.connect(endpoint, connect_error);
  }

  // Runs `initiate`'s operation until it completes or `deadline` passes;
  // then it is cancelled, and the result is timed_out unless it completed
  // meanwhile.
  template <class Initiate>
  ErrorCode Run(Initiate&& initiate, Clock::time_point deadline,
                size_t* bytes = nullptr) {
    std::optional<ErrorCode> result;
    size_t transferred = 0;
    initiate([&](ErrorCode ec, size_t n) {
      result = ec;
      transferred = n;
    });
    io.restart();
    while (!result && Clock::now() < deadline) {
      if (io.run_one_until(deadline) == 0 && io.stopped()) break;
    }
    if (!result) {
      ErrorCode ignored;
      socket.cancel(ignored);
      io.restart();
      while (!result && io.run_one() > 0) {
      }
      if (!result || *result == net::error::operation_aborted) {
        return net::error::timed_out;
      }
    }
    if (bytes != nullptr) *bytes = transferred;
    return *result;
  }

  // One read into `received`.
  ErrorCode ReadSome(Clock::time_point deadline) {
    size_t n = 0;
    ErrorCode ec = Run(
        [&](auto handler) {
          socket.async_read_some(net::buffer(scratch), std::move(handler));
        },
        deadline, &n);
    received.append(scratch.data(), n);
    return ec;
  }

  // Parses what was received; what the parser cannot take yet stays.
  ErrorCode Parse() {
    ErrorCode ec;
    const size_t used = parser->Parse(received, &ec);
    received.erase(0, used);
    return ec;
  }

  // Reads and parses until `ready` holds. At the end of the connection the
  // response must be complete.
  template <class Ready>
  ErrorCode ParseUntil(Ready ready, Clock::time_point deadline) {
    for (;;) {
      if (ErrorCode ec = Parse()) return ec;
      if (ready()) return {};
      ErrorCode ec = ReadSome(deadline);
      if (ec == net::error::eof) {
        ErrorCode at_end;
        parser->ParseEof(&at_end);
        if (!at_end && ready()) return {};
        return net::error::eof;
      }
      if (ec) return ec;
    }
  }

  bool Fail(ErrorCode ec) {
    last_error = ec;
    return false;
  }

  net::io_context io;
  Protocol::socket socket{io};
  ErrorCode connect_error;
  ErrorCode last_error;
  std::vector<char> scratch = std::vector<char>(64 * 1024);
  std::string received;  // read, not parsed yet
  std::optional<ResponseParser<KeepBody>> parser;
  std::string body;       // the body's data so far
  size_t line_start = 0;  // of body: what came before is taken as lines
};

WatchHttpClient::WatchHttpClient(const std::string& socket_path)
    : impl_(std::make_unique<Impl>(Protocol::endpoint(
          net::local::stream_protocol::endpoint(socket_path)))) {}

WatchHttpClient::WatchHttpClient(const std::string& address, uint16_t port)
    : impl_(std::make_unique<Impl>(Protocol::endpoint(
          net::ip::tcp::endpoint(net::ip::make_address(address), port)))) {}

WatchHttpClient::~WatchHttpClient() = default;

bool WatchHttpClient::connected() const { return !impl_->connect_error; }

WatchHttpClient::ErrorCode WatchHttpClient::connect_error() const {
  return impl_->connect_error;
}

bool WatchHttpClient::SendRaw(const std::string& bytes) {
  ErrorCode ec;
  net::write(impl_->socket, net::buffer(bytes), ec);
  return ec ? impl_->Fail(ec) : true;
}

bool WatchHttpClient::Get(const std::string& target) {
  return SendRaw(GetRequestBytes(target));
}

bool WatchHttpClient::ReadHeader(Clock::time_point deadline) {
  Impl& c = *impl_;
  c.last_error = {};
  c.body.clear();
  c.line_start = 0;
  c.parser.emplace(Impl::KeepBody{&c.body});
  ErrorCode ec =
      c.ParseUntil([&] { return c.parser->header_done(); }, deadline);
  return ec ? c.Fail(ec) : true;
}

bool WatchHttpClient::ReadBody(Clock::time_point deadline) {
  Impl& c = *impl_;
  c.last_error = {};
  if (!c.parser || !c.parser->header_done()) {
    return c.Fail(net::error::not_connected);
  }
  ErrorCode ec = c.ParseUntil([&] { return c.parser->done(); }, deadline);
  return ec ? c.Fail(ec) : true;
}

bool WatchHttpClient::ReadResponse(Clock::time_point deadline) {
  return ReadHeader(deadline) && ReadBody(deadline);
}

unsigned WatchHttpClient::status() const {
  return impl_->parser ? impl_->parser->status() : 0;
}

std::string WatchHttpClient::header(std::string_view name) const {
  return impl_->parser ? impl_->parser->header(name) : std::string();
}

bool WatchHttpClient::chunked() const {
  return impl_->parser && impl_->parser->chunked();
}

std::string_view WatchHttpClient::body() const {
  return std::string_view(impl_->body).substr(impl_->line_start);
}

nlohmann::json WatchHttpClient::BodyJson() const {
  return nlohmann::json::parse(std::string(body()), nullptr, false);
}

WatchHttpClient::Next WatchHttpClient::NextLine(std::string* line,
                                                Clock::time_point deadline) {
  Impl& c = *impl_;
  c.last_error = {};
  for (;;) {
    const size_t newline = c.body.find('\n', c.line_start);
    if (newline != std::string::npos) {
      line->assign(c.body, c.line_start, newline - c.line_start);
      c.line_start = newline + 1;
      // Forget what was taken, now and then: a stream may run for long.
      if (c.line_start == c.body.size()) {
        c.body.clear();
        c.line_start = 0;
      } else if (c.line_start > (size_t{1} << 16)) {
        c.body.erase(0, c.line_start);
        c.line_start = 0;
      }
      return Next::kLine;
    }
    if (!c.parser || !c.parser->header_done()) {
      c.Fail(net::error::not_connected);
      return Next::kError;
    }
    if (c.parser->done()) return Next::kEnd;
    ErrorCode ec = c.ReadSome(deadline);
    if (ec == net::error::timed_out) {
      c.Fail(ec);
      return Next::kTimeout;
    }
    if (ec == net::error::eof) {
      ErrorCode at_end;
      c.parser->ParseEof(&at_end);
      if (!at_end && c.parser->done()) continue;
    }
    if (!ec) ec = c.Parse();
    if (ec) {
      c.Fail(ec);
      return Next::kError;
    }
  }
}

std::optional<std::string> WatchHttpClient::ReadLine(
    Clock::time_point deadline) {
  std::string line;
  if (NextLine(&line, deadline) != Next::kLine) return std::nullopt;
  return line;
}

bool WatchHttpClient::body_done() const {
  return impl_->parser && impl_->parser->done();
}

WatchHttpClient::ErrorCode WatchHttpClient::last_error() const {
  return impl_->last_error;
}

size_t WatchHttpClient::Unread() {
  int n = 0;
  if (::ioctl(impl_->socket.native_handle(), FIONREAD, &n) != 0) return 0;
  return static_cast<size_t>(n);
}

bool WatchHttpClient::ReadEof(Clock::time_point deadline) {
  Impl& c = *impl_;
  c.last_error = {};
  if (!c.received.empty()) return false;
  ErrorCode ec = c.ReadSome(deadline);
  if (ec != net::error::eof) c.Fail(ec);
  return ec == net::error::eof;
}

std::optional<std::string> WatchHttpClient::ReadAllRaw(
    Clock::time_point deadline) {
  Impl& c = *impl_;
  c.last_error = {};
  for (;;) {
    ErrorCode ec = c.ReadSome(deadline);
    if (ec == net::error::eof) return std::exchange(c.received, {});
    if (ec) {
      c.Fail(ec);
      return std::nullopt;
    }
  }
}

void WatchHttpClient::Close() {
  ErrorCode ignored;
  impl_->socket.shutdown(Protocol::socket::shutdown_both, ignored);
  impl_->socket.close(ignored);
}

void WatchHttpClient::ShutdownReceive() {
  ErrorCode ignored;
  impl_->socket.shutdown(Protocol::socket::shutdown_receive, ignored);
}

}  // namespace walwatch::test_support
