// ArgCursor walks the arguments of walwatch's subcommands (`walwatch watch`,
// `walwatch slots`), which take `--flag value` and `--flag=value` like the
// main flags (watchserver/config.h), without the main flags' env handling.
// Header-only; used by one thread.
#ifndef WALWATCH_CDC_BASE_CLI_ARGS_H_
#define WALWATCH_CDC_BASE_CLI_ARGS_H_

#include <string>

namespace walwatch {

class ArgCursor {
 public:
  ArgCursor(int argc, const char* const* argv, int first)
      : argc_(argc), argv_(argv), i_(first) {}

  bool Done() const { return i_ >= argc_; }
  void Next() { ++i_; }
  std::string arg() const { return argv_[i_]; }

  // The argument is `flag` or `flag=...`.
  bool Is(const char* flag) const {
    std::string a = arg();
    return a == flag || a.rfind(std::string(flag) + "=", 0) == 0;
  }

  // The flag's value: after '=', else the next argument (consumed). False if
  // there is none.
  bool Value(std::string* dst) {
    std::string a = arg();
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      *dst = a.substr(eq + 1);
      return true;
    }
    if (i_ + 1 >= argc_) return false;
    *dst = argv_[++i_];
    return true;
  }

 private:
  const int argc_;
  const char* const* argv_;
  int i_;
};

}  // namespace walwatch

#endif  // WALWATCH_CDC_BASE_CLI_ARGS_H_
