// FUZZ_CHECK: the fuzz targets' assertion. A failed check prints what was
// expected and aborts, which libFuzzer reports as a crash and saves the
// input (tests/fuzz/run-fuzz.sh says how to replay one). Unlike assert() it
// is never compiled out.
#ifndef WALWATCH_TESTS_FUZZ_FUZZ_CHECK_H_
#define WALWATCH_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace walwatch::fuzz {

[[noreturn]] inline void CheckFailed(const char* file, int line,
                                     const char* condition,
                                     const std::string& detail) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed", file, line, condition);
  if (!detail.empty()) std::fprintf(stderr, ": %s", detail.c_str());
  std::fputc('\n', stderr);
  std::abort();
}

// Printable form of bytes for a failure message: escapes all but graphic
// ASCII, so the message stays one line.
inline std::string Escaped(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

// True when `text` holds no byte below 0x20 and no DEL.
inline bool HasNoControlBytes(std::string_view text) {
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace walwatch::fuzz

// FUZZ_CHECK(cond) or FUZZ_CHECK(cond, detail): `detail` (a std::string
// expression) is only evaluated when the check fails.
#define FUZZ_CHECK_1(cond)                                                     \
  do {                                                                         \
    if (!(cond))                                                               \
      ::walwatch::fuzz::CheckFailed(__FILE__, __LINE__, #cond, std::string()); \
  } while (0)
#define FUZZ_CHECK_2(cond, detail)                                        \
  do {                                                                    \
    if (!(cond))                                                          \
      ::walwatch::fuzz::CheckFailed(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)
#define FUZZ_CHECK_PICK(_1, _2, name, ...) name
#define FUZZ_CHECK(...) \
  FUZZ_CHECK_PICK(__VA_ARGS__, FUZZ_CHECK_2, FUZZ_CHECK_1, unused)(__VA_ARGS__)

#endif  // WALWATCH_TESTS_FUZZ_FUZZ_CHECK_H_
