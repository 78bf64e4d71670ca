// The command line of the bench programs (bench_writer, fanout_client,
// fanout_ceiling, watch_count, poll_client), one definition: "--name VALUE"
// flags and "--name" switches, each bound to an option's field or handled by
// a function; a number that does not parse, a flag that takes a value and has
// none, or an unknown flag is a usage error (the program's usage line on
// stderr, exit status 2).
//
//   const walwatch::bench::Flags flags("fanout_client", "usage: ...");
//   flags.Parse(argc, argv, {{"--socket", &o.socket},        // string
//                            {"--watchers", &o.watchers},    // number
//                            {"--check-seq", &o.check_seq},  // switch
//                            {"--paths-file", [&](const std::string& f) {...}}});
//   if (o.socket.empty()) flags.Usage("--socket is required");
#ifndef WALWATCH_TESTS_BENCH_BENCH_ARGS_H_
#define WALWATCH_TESTS_BENCH_BENCH_ARGS_H_

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace walwatch::bench {

// One flag: its name and what its value does.
struct Flag {
  using Setter = std::function<void(const std::string&)>;

  Flag(const char* flag_name, std::string* field)
      : name(flag_name), set([field](const std::string& v) { *field = v; }) {}
  Flag(const char* flag_name, bool* field)
      : name(flag_name),
        takes_value(false),
        set([field](const std::string&) { *field = true; }) {}
  template <typename Number,
            typename = std::enable_if_t<std::is_arithmetic_v<Number> &&
                                        !std::is_same_v<Number, bool>>>
  Flag(const char* flag_name, Number* field)
      : name(flag_name), number(true), set([field](const std::string& v) {
          char* end = nullptr;
          errno = 0;
          if constexpr (std::is_floating_point_v<Number>) {
            *field = static_cast<Number>(std::strtod(v.c_str(), &end));
          } else if constexpr (std::is_signed_v<Number>) {
            *field = static_cast<Number>(std::strtoll(v.c_str(), &end, 10));
          } else {
            *field = static_cast<Number>(std::strtoull(v.c_str(), &end, 10));
          }
          if (v.empty() || *end != '\0' || errno != 0) throw BadNumber{};
        }) {}
  Flag(const char* flag_name, Setter handler)
      : name(flag_name), set(std::move(handler)) {}

  struct BadNumber {};

  const char* name;
  bool takes_value = true;
  bool number = false;
  Setter set;
};

class Flags {
 public:
  Flags(const char* program, const char* usage)
      : program_(program), usage_(usage) {}

  // Sets the options `flags` name from argv; any error is a usage error.
  void Parse(int argc, char** argv, std::initializer_list<Flag> flags) const {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const Flag* flag = nullptr;
      for (const Flag& f : flags) {
        if (arg == f.name) flag = &f;
      }
      if (flag == nullptr) Usage(("unknown argument " + arg).c_str());
      std::string value;
      if (flag->takes_value) {
        if (i + 1 >= argc) Usage(("missing value for " + arg).c_str());
        value = argv[++i];
      }
      try {
        flag->set(value);
      } catch (const Flag::BadNumber&) {
        Usage((arg + ": not a number: " + value).c_str());
      }
    }
  }

  // The usage line on stderr, after `message` if there is one; exit 2.
  [[noreturn]] void Usage(const char* message) const {
    if (message != nullptr) std::fprintf(stderr, "%s: %s\n", program_, message);
    std::fprintf(stderr, "%s\n", usage_);
    std::exit(2);
  }

 private:
  const char* program_;
  const char* usage_;
};

}  // namespace walwatch::bench

#endif  // WALWATCH_TESTS_BENCH_BENCH_ARGS_H_
