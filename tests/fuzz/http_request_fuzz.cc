// Fuzz target: the bytes a client sends on a walwatch connection, taken the
// way HttpSession takes them, without sockets.
//
// The input is the byte stream of one connection. It is read with Beast's
// http::read into the session's RequestParser<string_body> (Beast's
// request_parser; request_parser.h) with the server's limits
// (header_limit = HttpServerOptions::max_header_bytes, body_limit 8 KiB, a
// flat_buffer of the session's size); each request that parses goes through
// ParseRequest, then WatchFilter::Create for a watch, and its error, if any,
// through StatusJson, as HttpSession::HandleRequest does. Pipelined requests
// are read one after another from the same buffer, as on a keep-alive
// connection.
//
// The stream is read twice: in one piece, and in short reads of 1 to 16
// bytes (the length depends on the input), and both reads must yield the
// same requests (and fail at the same request, if one does).
//
// Checked: error codes and reasons are the documented ones; error messages
// carry no control characters and their Status bodies are valid one-line
// JSON; a route's fields are what the path and query say; a watch filter
// with no selectors selects an event of the watch's own resource and scope;
// a handoff's snapshot parses (or it is in the binlog form).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "cdc/model/event.h"
#include "cdc/model/state_source.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/unit/support/test_event.h"
#include "watchserver/event_log.h"
#include "watchserver/http_server.h"
#include "watchserver/k8s_status.h"
#include "watchserver/request_parser.h"
#include "watchserver/watch_filter.h"
#include "watchserver/watch_request.h"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

using walwatch::fuzz::Escaped;
using walwatch::fuzz::HasNoControlBytes;

// HttpSession's limits (watchserver/http_session.cc, http_server_options.h).
const size_t kMaxHeaderBytes = walwatch::HttpServerOptions().max_header_bytes;
constexpr size_t kMaxRequestBodyBytes = 8 * 1024;
const size_t kBufferBytes = kMaxHeaderBytes + kMaxRequestBodyBytes + 4096;
// Requests read from one connection before the target gives up.
constexpr int kMaxRequestsPerConnection = 8;

// A SyncReadStream over the fuzz input: reads at most `chunk` bytes at a
// time, then end of file.
class InputStream {
 public:
  using executor_type = net::any_io_executor;

  InputStream(std::string_view data, size_t chunk)
      : data_(data), chunk_(chunk) {}

  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers,
                   boost::system::error_code& ec) {
    if (data_.empty()) {
      ec = net::error::eof;
      return 0;
    }
    ec = {};
    size_t room = net::buffer_size(buffers);
    size_t n = std::min({room, chunk_, data_.size()});
    n = net::buffer_copy(buffers, net::buffer(data_.data(), n));
    data_.remove_prefix(n);
    return n;
  }
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    return read_some(buffers, ec);
  }

 private:
  std::string_view data_;
  size_t chunk_;
};

// What one read of a request gave: the request, or the error that ended the
// connection.
struct ReadOutcome {
  boost::system::error_code ec;
  std::string method, target, body;
  unsigned version = 0;
  bool keep_alive = false;

  // Errors compare equal whatever their kind: with fewer bytes at hand
  // Beast may stop at a different problem (a partial message rather than a
  // bad value), and the connection ends either way.
  bool operator==(const ReadOutcome& o) const {
    if (ec || o.ec) return bool(ec) == bool(o.ec);
    return method == o.method && target == o.target && body == o.body &&
           version == o.version && keep_alive == o.keep_alive;
  }
};

std::string Describe(const ReadOutcome& r) {
  if (r.ec) return "error " + r.ec.message();
  return "request " + Escaped(r.method) + " " + Escaped(r.target) + " body " +
         std::to_string(r.body.size()) + " bytes, HTTP/" +
         std::to_string(r.version) + (r.keep_alive ? " keep-alive" : "");
}

// Reads requests from `data` as HttpSession::DoReadRequest does, until an
// error or until the connection would close.
std::vector<ReadOutcome> ReadConnection(std::string_view data, size_t chunk) {
  InputStream stream(data, chunk);
  beast::flat_buffer buffer(kBufferBytes);
  std::vector<ReadOutcome> outcomes;
  for (int i = 0; i < kMaxRequestsPerConnection; ++i) {
    walwatch::RequestParser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(kMaxHeaderBytes));
    parser.body_limit(kMaxRequestBodyBytes);
    ReadOutcome r;
    http::read(stream, buffer, parser, r.ec);
    if (!r.ec) {
      http::request<http::string_body> request = parser.release();
      beast::string_view method = request.method_string();
      beast::string_view target = request.target();
      r.method.assign(method.data(), method.size());
      r.target.assign(target.data(), target.size());
      r.body = request.body();
      r.version = request.version();
      r.keep_alive = request.keep_alive();
    }
    outcomes.push_back(r);
    if (r.ec || !r.keep_alive) break;
  }
  return outcomes;
}

// An event of the watch's own resource, in its cluster and namespace.
walwatch::TestEvent OwnEvent(const walwatch::WatchRequest& w) {
  walwatch::TestEvent e;
  e.group = w.group;
  e.version = w.version;
  e.resource = w.resource;
  e.cluster = w.cluster.empty() ? "c1" : w.cluster;
  e.ns = w.ns.empty() ? "default" : w.ns;
  e.name = "p1";
  e.labels = {{"app", "web"}, {"tier", "db"}, {"env", ""}};
  return e;
}

void CheckStatusBody(const walwatch::RequestError& error) {
  std::string body = walwatch::StatusJson(error);
  FUZZ_CHECK(body.find('\n') == std::string::npos, Escaped(body));
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  FUZZ_CHECK(!parsed.is_discarded() && parsed.is_object(), Escaped(body));
  FUZZ_CHECK(parsed["code"] == error.code, Escaped(body));
  FUZZ_CHECK(parsed["reason"] == error.reason, Escaped(body));
}

// HttpSession::HandleRequest for one request, minus the sending.
void HandleRequest(const ReadOutcome& r) {
  walwatch::ParsedRequest parsed = walwatch::ParseRequest(r.method, r.target);
  if (parsed.error) {
    const walwatch::RequestError& e = *parsed.error;
    FUZZ_CHECK((e.code == 400 && e.reason == "BadRequest") ||
                   (e.code == 404 && e.reason == "NotFound") ||
                   (e.code == 405 && e.reason == "MethodNotAllowed") ||
                   (e.code == 422 && e.reason == "Invalid"),
               std::to_string(e.code) + " " + e.reason);
    // An Invalid names what it rejects, as apimachinery's NewInvalid.
    FUZZ_CHECK(e.code != 422 ||
                   (e.details && !e.details->causes.empty() &&
                    e.message.rfind("ListOptions.meta.k8s.io \"\" is invalid: ",
                                    0) == 0),
               Escaped(e.message));
    FUZZ_CHECK(e.code != 405 || r.method != "GET");
    FUZZ_CHECK(!e.message.empty());
    FUZZ_CHECK(HasNoControlBytes(e.message), Escaped(e.message));
    CheckStatusBody(e);
    return;
  }
  FUZZ_CHECK(r.method == "GET", Escaped(r.method));
  FUZZ_CHECK(!r.target.empty() && r.target[0] == '/', Escaped(r.target));
  switch (parsed.route) {
    case walwatch::RouteKind::kHealthz:
    case walwatch::RouteKind::kReadyz:
    case walwatch::RouteKind::kLivez:
    case walwatch::RouteKind::kFreshRv:
      return;
    case walwatch::RouteKind::kHandoff: {
      if (parsed.handoff.binlog()) {
        // The binlog form: a numbered file and a byte offset, nothing of
        // PostgreSQL's.
        const std::string& file = parsed.handoff.binlog_file;
        FUZZ_CHECK(file.find('.') != std::string::npos &&
                       parsed.handoff.binlog_position < 10'000'000'000ULL &&
                       parsed.handoff.snapshot.empty(),
                   Escaped(file));
        return;
      }
      walwatch::HandoffSnapshot snapshot;
      FUZZ_CHECK(
          walwatch::ParseHandoffSnapshot(parsed.handoff.snapshot, &snapshot),
          Escaped(parsed.handoff.snapshot));
      return;
    }
    case walwatch::RouteKind::kWatch:
      break;
  }
  const walwatch::WatchRequest& w = parsed.watch;
  FUZZ_CHECK(!w.version.empty() && !w.resource.empty());
  // An empty group is the core API, /api/v1 (an empty segment is refused).
  FUZZ_CHECK(!w.group.empty() || w.version == "v1", Escaped(r.target));
  FUZZ_CHECK(!w.timeout_seconds || *w.timeout_seconds >= 0);
  FUZZ_CHECK(w.resource_version_match.empty() ||
             w.resource_version_match == "NotOlderThan");
  for (const std::string* segment :
       {&w.group, &w.version, &w.resource, &w.cluster, &w.ns}) {
    FUZZ_CHECK(segment->size() <= walwatch::kMaxPathSegmentBytes);
    FUZZ_CHECK(HasNoControlBytes(*segment), Escaped(*segment));
    FUZZ_CHECK(segment->find('/') == std::string::npos, Escaped(*segment));
  }

  walwatch::WatchFilter filter;
  std::string error = walwatch::WatchFilter::Create(w, &filter);
  if (!error.empty()) {
    // The session answers 400 BadRequest with it.
    FUZZ_CHECK(HasNoControlBytes(error), Escaped(error));
    FUZZ_CHECK(!w.label_selector.empty() || !w.field_selector.empty(),
               Escaped(error));
    CheckStatusBody(
        walwatch::RequestError{400, "BadRequest", error, std::nullopt});
    return;
  }
  walwatch::TestEvent own = OwnEvent(w);
  bool own_matches = filter.Matches(own);
  if (filter.label_selector().Empty() && filter.field_selector().Empty()) {
    FUZZ_CHECK(own_matches, Escaped(r.target));
  }
  walwatch::TestEvent other = own;
  other.resource += "x";
  FUZZ_CHECK(!filter.Matches(other), Escaped(r.target));
  other = own;
  other.labels.clear();
  other.name = "other";
  filter.Matches(other);
}

}  // namespace

// Boost's assertions stay on in this target (run-fuzz.sh defines
// BOOST_ENABLE_ASSERT_HANDLER), all but one: Beast 1.74's
// BOOST_ASSERT(n >= 5) in basic_parser::parse_chunk_header fires on valid
// input read a few bytes at a time ("0\r\n" then "\r", "\n"), and is wrong:
// the code after it is right and returns need_more (boostorg/beast#2861,
// fixed in Boost 1.86). walwatch's release build has NDEBUG, so it never
// fires there.
namespace boost {
void assertion_failed(const char* expr, const char* function, const char* file,
                      long line) {
  if (std::string_view(expr) == "n >= 5" &&
      std::string_view(function).find("parse_chunk_header") !=
          std::string_view::npos) {
    return;
  }
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion `%s' failed\n", file, line,
               function, expr);
  std::abort();
}
void assertion_failed_msg(const char* expr, const char* msg,
                          const char* function, const char* file, long line) {
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion `%s' failed: %s\n", file,
               line, function, expr, msg);
  std::abort();
}
}  // namespace boost

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  std::vector<ReadOutcome> whole = ReadConnection(input, 65536);
  size_t chunk = 1 + (size == 0 ? 0 : data[size / 2] % 16);
  std::vector<ReadOutcome> pieces = ReadConnection(input, chunk);
  FUZZ_CHECK(whole.size() == pieces.size(),
             std::to_string(whole.size()) + " requests in one read, " +
                 std::to_string(pieces.size()) + " in reads of " +
                 std::to_string(chunk));
  for (size_t i = 0; i < whole.size(); ++i) {
    FUZZ_CHECK(whole[i] == pieces[i], "request " + std::to_string(i) + ": " +
                                          Describe(whole[i]) + " vs " +
                                          Describe(pieces[i]));
  }

  for (const ReadOutcome& r : whole) {
    if (r.ec) {
      // What HttpSession::OnRequestError answers needs no parsing; its
      // message is Beast's, not the client's.
      break;
    }
    HandleRequest(r);
  }
  return 0;
}
