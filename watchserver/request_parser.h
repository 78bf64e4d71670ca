// Beast's HTTP request parser, with a header field too long for Beast's
// field storage turned into a parse error instead of an exception.
//
// basic_fields keeps each field's name and value lengths in 16 bits: a name
// or value over 65,533 bytes makes it throw std::length_error. Boost 1.74's
// http::parser inserts fields without catching that, so the exception leaves
// async_read from inside the parse, where no completion handler sees it, and
// escapes io_context::run: one request header of 64 KiB, well inside the
// 1 MiB header limit, would end the process. (Later Boost versions report
// http::error::header_field_value_too_large instead.) Here such a field is
// http::error::header_limit, which the server answers with 431.
//
// It also bounds the number of fields (trailers included): each costs
// Beast some 80 bytes beside its text, so 1 MiB of empty fields would cost
// some 20 MB. kube-apiserver's clients send a dozen; past
// kMaxHeaderFields, header_limit as well.
//
// With a BudgetAllocator (connection_budget.h), the request line and the
// fields are stored in memory the connection buffer budget pays for; an
// allocation it refuses is header_limit too, never an exception out of the
// parse, and the allocator's account says refused().
#ifndef WALWATCH_WATCHSERVER_REQUEST_PARSER_H_
#define WALWATCH_WATCHSERVER_REQUEST_PARSER_H_

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>

namespace walwatch {

// The longest field name or value basic_fields stores (its new_element).
inline constexpr size_t kMaxHeaderFieldPartBytes =
    std::numeric_limits<std::uint16_t>::max() - 2;
// The most header (and trailer) fields one request may have.
inline constexpr size_t kMaxHeaderFields = 256;

template <class Body, class Allocator = std::allocator<char>>
class RequestParser
    : public boost::beast::http::parser<true, Body, Allocator> {
 public:
  using boost::beast::http::parser<true, Body, Allocator>::parser;

 private:
  void on_request_impl(boost::beast::http::verb method,
                       boost::beast::string_view method_string,
                       boost::beast::string_view target, int version,
                       boost::beast::error_code& ec) override {
    // What http::parser::on_request_impl does (its own is private), with
    // a refused allocation turned into an error. The parser is used once.
    try {
      auto& message = this->get();
      message.target(target);
      if (method != boost::beast::http::verb::unknown) {
        message.method(method);
      } else {
        message.method_string(method_string);
      }
      message.version(version);
    } catch (const std::length_error&) {
      ec = boost::beast::http::error::header_limit;
    }
  }

  void on_field_impl(boost::beast::http::field name,
                     boost::beast::string_view name_string,
                     boost::beast::string_view value,
                     boost::beast::error_code& ec) override {
    if (name_string.size() > kMaxHeaderFieldPartBytes ||
        value.size() > kMaxHeaderFieldPartBytes ||
        ++fields_ > kMaxHeaderFields) {
      ec = boost::beast::http::error::header_limit;
      return;
    }
    // What http::parser::on_field_impl does; it is private there.
    try {
      this->get().insert(name, name_string, value);
    } catch (const std::length_error&) {
      ec = boost::beast::http::error::header_limit;
    }
  }

  size_t fields_ = 0;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_REQUEST_PARSER_H_
