// The table of walwatch's flags, as data: for each flag its name, its
// heading in --help, its usage text, how it reads its value into a Config
// and how it shows it. ParseConfig and ConfigToJson (config.cc) and
// HelpText (config_help.cc) all walk this one table, so adding a flag is
// adding one entry to it (config_flags.cc), and its parsing, its
// environment variable, its help and its place in the startup log cannot
// disagree.
//
// Thread safety: the table is constant; any thread may read it. The Flags
// it holds live for the whole program.
#ifndef WALWATCH_WATCHSERVER_CONFIG_FLAGS_H_
#define WALWATCH_WATCHSERVER_CONFIG_FLAGS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "watchserver/config.h"

namespace walwatch {

struct Flag {
  // The heading a flag is listed under in --help; kGeneral flags come
  // first, under none.
  enum class Group {
    kGeneral,
    kPostgreSql,
    kMySql,
    kServing,
    kEventLog,
    kLogging
  };

  const char* name;  // Without the leading "--".
  Group group;
  const char* metavar;  // Shown after the flag in --help; null: boolean.
  const char* usage;    // One or more sentences for --help.
  // Replaces the shown default when the default value alone says too little.
  const char* default_text;
  // Stores `text` into *config. Returns "" or why `text` is not accepted,
  // for example "expected a size such as 256Mi".
  std::string (*parse)(std::string_view text, Config* config);
  // The value for display in --help and ConfigToJson; secrets redacted.
  std::string (*display)(const Config& config);
  bool json_number;  // ConfigToJson writes the value bare, not as a string.
  bool is_setting;   // Has an environment variable and is in ConfigToJson.
};

// The flags in table order: the order --help lists them in under each
// heading, and ConfigToJson writes them in.
struct FlagList {
  const Flag* first;
  size_t count;

  const Flag* begin() const { return first; }
  const Flag* end() const { return first + count; }
  size_t size() const { return count; }
  const Flag& operator[](size_t i) const { return first[i]; }
  // The position in the list of `flag`, which must be one of its flags.
  size_t IndexOf(const Flag* flag) const {
    return static_cast<size_t>(flag - first);
  }
};
FlagList AllFlags();

// The flag called `name` (without the leading "--"), or null.
const Flag* FindFlag(std::string_view name);

// The environment variable of `flag`: "max-log-bytes" ->
// "WALWATCH_MAX_LOG_BYTES".
std::string EnvName(const Flag& flag);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_CONFIG_FLAGS_H_
