// The HTTP of walwatch's watch clients in tests/: the bytes of a GET, and
// ResponseParser, Boost.Beast's response parser fed with the bytes a client
// has read. It hands the body's data (a chunked body's without its framing)
// to a callback as it parses it, in place, never keeping a copy.
//
// WatchHttpClient (watch_http_client.h), the one blocking client of the
// unit and integration tests, reads through it, and so does the epoll loop
// of tests/bench/fanout_client.cc's thousands of watchers: walwatch's
// answers are parsed one way for all of them.
//
// Header-only, with Beast: for tests and benchmarks only.
// Thread safety: one thread per object.
#ifndef WALWATCH_TESTS_SUPPORT_RESPONSE_PARSER_H_
#define WALWATCH_TESTS_SUPPORT_RESPONSE_PARSER_H_

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/optional.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

namespace walwatch::test_support {

// The request walwatch's clients send for `target`: a GET, HTTP/1.1.
inline std::string GetRequestBytes(std::string_view target) {
  std::string request = "GET ";
  request += target;
  request +=
      " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: walwatch-test\r\n"
      "Accept: application/json\r\n\r\n";
  return request;
}

// `OnBody`: a callable taking std::string_view, each piece of body data in
// order. It may not call back into the parser.
template <class OnBody>
class ResponseParser {
 public:
  using ErrorCode = boost::beast::error_code;

  explicit ResponseParser(OnBody on_body) : on_body_(std::move(on_body)) {
    parser_.get().body().sink = &on_body_;
    // Each put() parses as far as the bytes go, not one piece at a time.
    parser_.eager(true);
    // Not boost::none: Beast 1.74 compares a Content-Length with the
    // optional itself, and then rejects every body.
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  }
  // The parser points its body at on_body_: it stays where it is.
  ResponseParser(const ResponseParser&) = delete;
  ResponseParser& operator=(const ResponseParser&) = delete;

  // Parses `bytes` as far as they go: to their end, to the end of the
  // response, or to a piece of framing they hold only part of. Returns how
  // many bytes it used; the caller gives the rest again, with more. Needing
  // more is no error; a parse error is set in *ec.
  size_t Parse(std::string_view bytes, ErrorCode* ec) {
    *ec = {};
    size_t used = 0;
    while (used < bytes.size() && !parser_.is_done()) {
      const size_t n = parser_.put(
          boost::asio::buffer(bytes.data() + used, bytes.size() - used), *ec);
      used += n;
      if (*ec == boost::beast::http::error::need_more) {
        *ec = {};
        break;
      }
      if (*ec || n == 0) break;
    }
    return used;
  }
  // The connection ended: a response that runs until then is complete;
  // any other is cut short (*ec), and one not begun is end_of_stream.
  void ParseEof(ErrorCode* ec) {
    if (!parser_.got_some()) {
      // Beast would call it complete.
      *ec = boost::beast::http::error::end_of_stream;
      return;
    }
    parser_.put_eof(*ec);
  }

  bool header_done() const { return parser_.is_header_done(); }
  bool done() const { return parser_.is_done(); }
  unsigned status() const { return parser_.get().result_int(); }
  bool chunked() const { return parser_.chunked(); }
  // A header field's value ("" if absent); `name` in any case.
  std::string header(std::string_view name) const {
    auto value =
        parser_.get()[boost::beast::string_view(name.data(), name.size())];
    return std::string(value.data(), value.size());
  }

 private:
  // A Beast Body whose data goes to the parser's OnBody.
  struct SinkBody {
    struct value_type {
      OnBody* sink = nullptr;
    };
    class reader {
     public:
      template <bool kIsRequest, class Fields>
      reader(boost::beast::http::header<kIsRequest, Fields>&, value_type& body)
          : body_(body) {}
      void init(const boost::optional<std::uint64_t>&, ErrorCode& ec) {
        ec = {};
      }
      template <class ConstBufferSequence>
      size_t put(const ConstBufferSequence& buffers, ErrorCode& ec) {
        ec = {};
        size_t n = 0;
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers); ++it) {
          const boost::asio::const_buffer piece = *it;
          (*body_.sink)(std::string_view(static_cast<const char*>(piece.data()),
                                         piece.size()));
          n += piece.size();
        }
        return n;
      }
      void finish(ErrorCode& ec) { ec = {}; }

     private:
      value_type& body_;
    };
  };

  OnBody on_body_;
  boost::beast::http::response_parser<SinkBody> parser_;
};

}  // namespace walwatch::test_support

#endif  // WALWATCH_TESTS_SUPPORT_RESPONSE_PARSER_H_
