// Runs ParseConfig (watchserver/config.h) on arguments and environment
// entries given as strings, as walwatch's main would get them, for the tests
// of the flags and of --help. Header-only; for tests.
#ifndef WALWATCH_TESTS_UNIT_SUPPORT_PARSE_CONFIG_H_
#define WALWATCH_TESTS_UNIT_SUPPORT_PARSE_CONFIG_H_

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "watchserver/config.h"

namespace walwatch {

// Runs ParseConfig on `args` (program name added) and `env` ("NAME=value").
struct Parsed {
  std::string error;
  Config config;
};

inline Parsed Parse(std::vector<std::string> args,
                    std::vector<std::string> env = {}) {
  args.insert(args.begin(), "walwatch");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  std::vector<const char*> envp;
  for (const std::string& e : env) envp.push_back(e.c_str());
  envp.push_back(nullptr);
  Parsed p;
  p.error = ParseConfig(static_cast<int>(args.size()), argv.data(), envp.data(),
                        &p.config);
  return p;
}

// The error for `args`, which must be one line.
inline std::string ErrorFor(std::vector<std::string> args,
                            std::vector<std::string> env = {}) {
  Parsed p = Parse(std::move(args), std::move(env));
  EXPECT_EQ(p.error.find('\n'), std::string::npos) << p.error;
  return p.error;
}

}  // namespace walwatch

#endif  // WALWATCH_TESTS_UNIT_SUPPORT_PARSE_CONFIG_H_
