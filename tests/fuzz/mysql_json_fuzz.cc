// Fuzz target: MySQL 8's binary JSON to text (cdc/mysql/mysql_json.h), the
// decoding the binlog reader applies to every JSON column MySQL writes.
//
// The input is one binary JSON value (a type byte, then the value), decoded
// once. Checked:
//  * it returns, whatever the bytes (ASan/UBSan watch every read);
//  * an error is one line starting "binary JSON: " and naming a byte offset
//    inside the input;
//  * a success is valid JSON (nlohmann::json accepts it: RFC 8259, numbers
//    of any length, as a DECIMAL prints them), and the text stays
//    within the decoder's bound (16 bytes per input byte plus 64, overshot
//    by at most the one value that crossed it);
//  * decoding is deterministic: a second decode gives the same answer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cdc/mysql/mysql_json.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using walwatch::fuzz::Escaped;
using walwatch::fuzz::HasNoControlBytes;

std::string Head(std::string_view bytes) {
  return Escaped(bytes.substr(0, 200));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string text;
  std::string err = walwatch::mysql::DecodeMysqlJson(input, &text);

  std::string again;
  std::string err_again = walwatch::mysql::DecodeMysqlJson(input, &again);
  FUZZ_CHECK(err == err_again, Head(input));

  if (!err.empty()) {
    FUZZ_CHECK(err.rfind("binary JSON: ", 0) == 0, err);
    FUZZ_CHECK(HasNoControlBytes(err), Escaped(err));
    size_t at = err.rfind(" at byte ");
    FUZZ_CHECK(at != std::string::npos, err);
    FUZZ_CHECK(std::stoull(err.substr(at + 9)) <= size,
               err + " / " + Head(input));
    return 0;
  }
  FUZZ_CHECK(text == again, Head(input));
  FUZZ_CHECK(text.size() <= 16 * size + 64 + 6 * size + 64, Head(input));

  FUZZ_CHECK(nlohmann::json::accept(text),
             Escaped(text.substr(0, 300)) + " <- " + Head(input));
  return 0;
}
