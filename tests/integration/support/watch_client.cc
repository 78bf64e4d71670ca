#include "tests/integration/support/watch_client.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace walwatch::itest {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using UnixSocket = net::local::stream_protocol::socket;

namespace {

// Runs `ioc` until `done` or `deadline`. On the deadline, cancels the
// socket's operations and drains their handlers; returns false.
bool RunUntil(net::io_context& ioc, UnixSocket& socket, const bool& done,
              Clock::time_point deadline) {
  ioc.restart();
  while (!done && Clock::now() < deadline) {
    if (ioc.run_one_until(deadline) == 0 && ioc.stopped()) break;
  }
  if (done) return true;
  beast::error_code ignored;
  socket.cancel(ignored);
  ioc.restart();
  while (!done && ioc.run_one() > 0) {
  }
  return false;
}

std::string Shorten(const std::string& s, size_t max = 2000) {
  return s.size() <= max ? s : s.substr(0, max) + "...(" +
                                   std::to_string(s.size()) + " bytes)";
}

http::request<http::empty_body> MakeRequest(const std::string& target) {
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::user_agent, "walwatch-integration-test");
  req.set(http::field::accept, "application/json");
  return req;
}

}  // namespace

// ---------------------------------------------------------------------------

HttpResponse HttpGet(const std::string& socket_path, const std::string& target,
                     Clock::time_point deadline) {
  HttpResponse out;
  net::io_context ioc;
  UnixSocket socket(ioc);
  beast::error_code ec;
  socket.connect(net::local::stream_protocol::endpoint(socket_path), ec);
  if (ec) {
    out.error = "connect " + socket_path + ": " + ec.message();
    return out;
  }
  auto req = MakeRequest(target);
  http::write(socket, req, ec);
  if (ec) {
    out.error = "write request: " + ec.message();
    return out;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  bool done = false;
  http::async_read(socket, buffer, parser,
                   [&](beast::error_code e, size_t) {
                     ec = e;
                     done = true;
                   });
  if (!RunUntil(ioc, socket, done, deadline)) {
    out.error = "timed out reading the response to GET " + target;
    return out;
  }
  if (ec) {
    out.error = "reading the response to GET " + target + ": " + ec.message();
    return out;
  }
  const auto& res = parser.get();
  out.ok = true;
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[http::field::content_type]);
  out.chunked = res.chunked();
  out.body = res.body();
  return out;
}

std::string WatchTarget(const std::string& path,
                        std::optional<uint64_t> resource_version) {
  std::string t = path + "?watch=1";
  if (resource_version) t += "&resourceVersion=" + std::to_string(*resource_version);
  return t;
}

// ---------------------------------------------------------------------------
// WatchEvent

uint64_t WatchEvent::rv() const {
  try {
    const auto& v = object.at("metadata").at("resourceVersion");
    if (!v.is_string()) return 0;
    const std::string& s = v.get_ref<const std::string&>();
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) {
      return 0;
    }
    return std::stoull(s);
  } catch (const std::exception&) {
    return 0;
  }
}

std::string WatchEvent::name() const {
  return object.value("/metadata/name"_json_pointer, std::string());
}

std::string WatchEvent::ns() const {
  return object.value("/metadata/namespace"_json_pointer, std::string());
}

std::string WatchEvent::member_rv() const {
  auto ann = object.value("/metadata/annotations"_json_pointer,
                          nlohmann::json::object());
  return ann.value("walwatch.clusterpedia.io/member-resource-version",
                   std::string());
}

// ---------------------------------------------------------------------------
// WatchClient

struct WatchClient::Impl {
  net::io_context ioc;
  UnixSocket socket{ioc};
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
  // Must outlive the parser: Beast keeps a reference to it.
  std::function<size_t(uint64_t, beast::string_view, beast::error_code&)>
      on_chunk_body;

  // One read_some of the parser within the deadline. nullopt on timeout.
  std::optional<beast::error_code> ReadSome(Clock::time_point deadline) {
    bool done = false;
    beast::error_code ec;
    http::async_read_some(socket, buffer, *parser,
                          [&](beast::error_code e, size_t) {
                            ec = e;
                            done = true;
                          });
    if (!RunUntil(ioc, socket, done, deadline)) return std::nullopt;
    return ec;
  }
};

WatchClient::WatchClient() : impl_(std::make_unique<Impl>()) {}
WatchClient::~WatchClient() = default;

::testing::AssertionResult WatchClient::Open(const std::string& socket_path,
                                             const std::string& target,
                                             Clock::time_point deadline) {
  target_ = target;
  beast::error_code ec;
  impl_->socket.connect(net::local::stream_protocol::endpoint(socket_path),
                        ec);
  if (ec) {
    return ::testing::AssertionFailure()
           << "connect " << socket_path << ": " << ec.message();
  }
  auto req = MakeRequest(target);
  http::write(impl_->socket, req, ec);
  if (ec) {
    return ::testing::AssertionFailure() << "write request: " << ec.message();
  }

  impl_->parser.emplace();
  // Not boost::none: Boost 1.74 compares a Content-Length against the
  // optional itself, and every length is "greater" than none.
  impl_->parser->body_limit(std::numeric_limits<std::uint64_t>::max());
  impl_->on_chunk_body = [this](uint64_t /*remain*/, beast::string_view body,
                                beast::error_code& /*ec*/) {
    pending_.append(body.data(), body.size());
    return body.size();
  };
  impl_->parser->on_chunk_body(impl_->on_chunk_body);

  bool done = false;
  http::async_read_header(impl_->socket, impl_->buffer, *impl_->parser,
                          [&](beast::error_code e, size_t) {
                            ec = e;
                            done = true;
                          });
  if (!RunUntil(impl_->ioc, impl_->socket, done, deadline)) {
    return ::testing::AssertionFailure()
           << "no response header for GET " << target << " before the deadline";
  }
  if (ec) {
    return ::testing::AssertionFailure()
           << "reading the response header for GET " << target << ": "
           << ec.message();
  }
  const auto& res = impl_->parser->get();
  status_ = static_cast<int>(res.result_int());
  content_type_ = std::string(res[http::field::content_type]);
  chunked_ = impl_->parser->chunked();
  if (status_ == 200) return ::testing::AssertionSuccess();

  // Not a stream: read the whole body.
  while (!impl_->parser->is_done()) {
    auto r = impl_->ReadSome(deadline);
    if (!r) {
      return ::testing::AssertionFailure()
             << "HTTP " << status_ << " body for GET " << target
             << " not complete before the deadline; got: " << Shorten(pending_);
    }
    if (*r) {
      return ::testing::AssertionFailure()
             << "reading the HTTP " << status_ << " body for GET " << target
             << ": " << r->message();
    }
  }
  body_ = impl_->parser->get().body() + pending_;
  pending_.clear();
  return ::testing::AssertionSuccess();
}

WatchClient::Result WatchClient::Next(WatchEvent* event,
                                      Clock::time_point deadline) {
  error_.clear();
  for (;;) {
    // A 200 body without chunked framing lands in the parser's body.
    if (impl_->parser && !impl_->parser->get().body().empty()) {
      pending_ += impl_->parser->get().body();
      impl_->parser->get().body().clear();
    }
    auto nl = pending_.find('\n');
    if (nl != std::string::npos) {
      event->raw = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      auto parsed = nlohmann::json::parse(event->raw, nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object() ||
          !parsed.contains("type") || !parsed["type"].is_string() ||
          !parsed.contains("object") || !parsed["object"].is_object()) {
        error_ = "not a watch event line: " + Shorten(event->raw);
        return Result::kError;
      }
      event->type = parsed["type"].get<std::string>();
      event->object = std::move(parsed["object"]);
      return Result::kEvent;
    }
    if (!impl_->parser) {
      error_ = "watch not open";
      return Result::kError;
    }
    if (impl_->parser->is_done()) {
      if (!pending_.empty()) {
        error_ = "stream ended inside an event: " + Shorten(pending_);
        return Result::kError;
      }
      return Result::kEnd;
    }
    auto r = impl_->ReadSome(deadline);
    if (!r) return Result::kTimeout;
    if (*r) {
      if (*r == http::error::end_of_stream || *r == net::error::eof) {
        error_ = "the server closed the connection without the final chunk";
      } else {
        error_ = "reading the stream: " + r->message();
      }
      if (!pending_.empty()) error_ += "; partial line: " + Shorten(pending_);
      return Result::kError;
    }
  }
}

::testing::AssertionResult WatchClient::NextEvent(WatchEvent* event,
                                                  Clock::time_point deadline) {
  switch (Next(event, deadline)) {
    case Result::kEvent:
      return ::testing::AssertionSuccess();
    case Result::kEnd:
      return ::testing::AssertionFailure()
             << "watch " << target_ << ": stream ended; expected an event";
    case Result::kTimeout:
      return ::testing::AssertionFailure()
             << "watch " << target_ << ": no event before the deadline"
             << (pending_.empty() ? "" : "; partial: " + Shorten(pending_));
    case Result::kError:
      break;
  }
  return ::testing::AssertionFailure()
         << "watch " << target_ << ": " << error_;
}

::testing::AssertionResult WatchClient::ExpectEnd(Clock::time_point deadline) {
  WatchEvent event;
  switch (Next(&event, deadline)) {
    case Result::kEnd:
      return ::testing::AssertionSuccess();
    case Result::kEvent:
      return ::testing::AssertionFailure()
             << "watch " << target_
             << ": expected the end of the stream, got event " << Shorten(event.raw);
    case Result::kTimeout:
      return ::testing::AssertionFailure()
             << "watch " << target_ << ": the stream did not end before the deadline";
    case Result::kError:
      break;
  }
  return ::testing::AssertionFailure()
         << "watch " << target_ << ": " << error_;
}

}  // namespace walwatch::itest
