#include "tests/integration/support/watch_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/error.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "tests/support/watch_http_client.h"

namespace walwatch::itest {

using test_support::WatchHttpClient;

namespace {

std::string Shorten(std::string_view s, size_t max = 2000) {
  return s.size() <= max ? std::string(s)
                         : std::string(s.substr(0, max)) + "...(" +
                               std::to_string(s.size()) + " bytes)";
}

bool TimedOut(const WatchHttpClient& client) {
  return client.last_error() == boost::asio::error::timed_out;
}

}  // namespace

// ---------------------------------------------------------------------------

namespace {

// GET `target` on `client`'s connection, named `where` in errors.
HttpResponse Get(WatchHttpClient& client, const std::string& where,
                 const std::string& target, Clock::time_point deadline) {
  HttpResponse out;
  if (!client.connected()) {
    out.error = "connect " + where + ": " + client.connect_error().message();
    return out;
  }
  if (!client.Get(target)) {
    out.error = "write request: " + client.last_error().message();
    return out;
  }
  if (!client.ReadResponse(deadline)) {
    out.error = TimedOut(client)
                    ? "timed out reading the response to GET " + target
                    : "reading the response to GET " + target + ": " +
                          client.last_error().message();
    return out;
  }
  out.ok = true;
  out.status = static_cast<int>(client.status());
  out.content_type = client.header("Content-Type");
  out.chunked = client.chunked();
  out.body = std::string(client.body());
  return out;
}

}  // namespace

HttpResponse HttpGet(const std::string& socket_path, const std::string& target,
                     Clock::time_point deadline) {
  WatchHttpClient client(socket_path);
  return Get(client, socket_path, target, deadline);
}

HttpResponse HttpGetTcp(int port, const std::string& target,
                        Clock::time_point deadline) {
  WatchHttpClient client("127.0.0.1", static_cast<uint16_t>(port));
  return Get(client, "127.0.0.1:" + std::to_string(port), target, deadline);
}

std::string ScrapeMetrics(int port, Clock::time_point deadline) {
  HttpResponse r = HttpGetTcp(port, "/metrics", deadline);
  return r.status == 200 ? std::move(r.body) : std::string();
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string WatchTarget(const std::string& path,
                        std::optional<uint64_t> resource_version) {
  std::string t = path + "?watch=1";
  if (resource_version)
    t += "&resourceVersion=" + std::to_string(*resource_version);
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

WatchClient::WatchClient() = default;
WatchClient::~WatchClient() = default;

::testing::AssertionResult WatchClient::OpenState(
    const std::string& socket_path, const std::string& target,
    Clock::time_point deadline) {
  for (;;) {
    auto opened = Open(socket_path, target, deadline);
    if (!opened || status_ != 410 ||
        body_.find("cannot be handed off exactly yet") == std::string::npos ||
        Clock::now() >= deadline) {
      return opened;
    }
  }
}

::testing::AssertionResult WatchClient::Open(const std::string& socket_path,
                                             const std::string& target,
                                             Clock::time_point deadline) {
  target_ = target;
  client_ = std::make_unique<WatchHttpClient>(socket_path);
  if (!client_->connected()) {
    return ::testing::AssertionFailure() << "connect " << socket_path << ": "
                                         << client_->connect_error().message();
  }
  if (!client_->Get(target)) {
    return ::testing::AssertionFailure()
           << "write request: " << client_->last_error().message();
  }
  if (!client_->ReadHeader(deadline)) {
    if (TimedOut(*client_)) {
      return ::testing::AssertionFailure() << "no response header for GET "
                                           << target << " before the deadline";
    }
    return ::testing::AssertionFailure()
           << "reading the response header for GET " << target << ": "
           << client_->last_error().message();
  }
  status_ = static_cast<int>(client_->status());
  content_type_ = client_->header("Content-Type");
  chunked_ = client_->chunked();
  if (status_ == 200) return ::testing::AssertionSuccess();

  // Not a stream: read the whole body.
  if (!client_->ReadBody(deadline)) {
    if (TimedOut(*client_)) {
      return ::testing::AssertionFailure()
             << "HTTP " << status_ << " body for GET " << target
             << " not complete before the deadline; got: "
             << Shorten(client_->body());
    }
    return ::testing::AssertionFailure()
           << "reading the HTTP " << status_ << " body for GET " << target
           << ": " << client_->last_error().message();
  }
  body_ = std::string(client_->body());
  return ::testing::AssertionSuccess();
}

WatchClient::Result WatchClient::Next(WatchEvent* event,
                                      Clock::time_point deadline) {
  error_.clear();
  if (!client_) {
    error_ = "watch not open";
    return Result::kError;
  }
  const WatchHttpClient::Next next = client_->NextLine(&event->raw, deadline);
  pending_ = std::string(client_->body());
  switch (next) {
    case WatchHttpClient::Next::kLine: {
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
    case WatchHttpClient::Next::kEnd:
      if (!pending_.empty()) {
        error_ = "stream ended inside an event: " + Shorten(pending_);
        return Result::kError;
      }
      return Result::kEnd;
    case WatchHttpClient::Next::kTimeout:
      return Result::kTimeout;
    case WatchHttpClient::Next::kError:
      break;
  }
  if (client_->last_error() == boost::asio::error::eof) {
    error_ = "the server closed the connection without the final chunk";
  } else {
    error_ = "reading the stream: " + client_->last_error().message();
  }
  if (!pending_.empty()) error_ += "; partial line: " + Shorten(pending_);
  return Result::kError;
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
  return ::testing::AssertionFailure() << "watch " << target_ << ": " << error_;
}

::testing::AssertionResult WatchClient::ExpectEnd(Clock::time_point deadline) {
  WatchEvent event;
  switch (Next(&event, deadline)) {
    case Result::kEnd:
      return ::testing::AssertionSuccess();
    case Result::kEvent:
      return ::testing::AssertionFailure()
             << "watch " << target_
             << ": expected the end of the stream, got event "
             << Shorten(event.raw);
    case Result::kTimeout:
      return ::testing::AssertionFailure()
             << "watch " << target_
             << ": the stream did not end before the deadline";
    case Result::kError:
      break;
  }
  return ::testing::AssertionFailure() << "watch " << target_ << ": " << error_;
}

}  // namespace walwatch::itest
