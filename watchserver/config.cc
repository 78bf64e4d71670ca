#include "watchserver/config.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "cdc/base/logging.h"
#include "watchserver/config_flags.h"

namespace walwatch {
namespace {

// The value of `name` in `envp`, or null. The first entry wins, as getenv.
const char* LookupEnv(const char* const* envp, const std::string& name) {
  if (envp == nullptr) return nullptr;
  for (; *envp != nullptr; ++envp) {
    const std::string_view entry = *envp;
    if (entry.size() > name.size() && entry[name.size()] == '=' &&
        entry.compare(0, name.size(), name) == 0) {
      return *envp + name.size() + 1;
    }
  }
  return nullptr;
}

// A value inside an error message: quoted and escaped, so the message stays
// one line whatever the value holds.
std::string Quote(std::string_view value) {
  std::string out;
  AppendJsonString(&out, value);
  return out;
}

// A flag name inside an error message: as is when it is plain, else quoted.
std::string FlagForMessage(std::string_view arg) {
  const bool plain = std::all_of(arg.begin(), arg.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
  return plain ? std::string(arg) : Quote(arg);
}

}  // namespace

std::string ParseConfig(int argc, const char* const* argv,
                        const char* const* envp, Config* out) {
  *out = Config{};
  const FlagList flags = AllFlags();
  std::vector<bool> set_by_flag(flags.size(), false);

  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h") arg = "--help";
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) {
      if (arg.size() >= 2 && arg[0] == '-') {
        return "unknown flag " + FlagForMessage(arg) + " (see --help)";
      }
      return "unexpected argument " + Quote(arg) +
             ": walwatch takes only flags (see --help)";
    }
    const std::string_view body = arg.substr(2);
    const size_t eq = body.find('=');
    const std::string_view name = body.substr(0, eq);
    const Flag* flag = FindFlag(name);
    if (flag == nullptr) {
      return "unknown flag --" + FlagForMessage(name) + " (see --help)";
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = body.substr(eq + 1);
    } else if (flag->metavar == nullptr) {
      value = "true";
    } else if (i + 1 < argc &&
               std::string_view(argv[i + 1]).compare(0, 2, "--") != 0) {
      value = argv[++i];
    } else {
      return std::string("flag --") + flag->name + " needs a value";
    }
    if (std::string why = flag->parse(value, out); !why.empty()) {
      return "invalid value " + Quote(value) + " for --" + flag->name + ": " +
             why;
    }
    set_by_flag[flags.IndexOf(flag)] = true;
    if (out->help) return "";
  }

  // --slot and --slot-from set the same thing: one given on the command
  // line wins over either in the environment.
  const size_t slot = flags.IndexOf(FindFlag("slot"));
  const size_t slot_from = flags.IndexOf(FindFlag("slot-from"));
  if (set_by_flag[slot] || set_by_flag[slot_from]) {
    set_by_flag[slot] = set_by_flag[slot_from] = true;
  }

  // So do --server-id and --server-id-from.
  const size_t server_id = flags.IndexOf(FindFlag("server-id"));
  const size_t server_id_from = flags.IndexOf(FindFlag("server-id-from"));
  if (set_by_flag[server_id] || set_by_flag[server_id_from]) {
    set_by_flag[server_id] = set_by_flag[server_id_from] = true;
  }

  for (size_t f = 0; f < flags.size(); ++f) {
    const Flag& flag = flags[f];
    if (!flag.is_setting || set_by_flag[f]) continue;
    const std::string env = EnvName(flag);
    const char* value = LookupEnv(envp, env);
    if (value == nullptr || *value == '\0') continue;
    if (std::string why = flag.parse(value, out); !why.empty()) {
      return "invalid value " + Quote(value) + " for " + env + " (--" +
             flag.name + "): " + why;
    }
  }
  return "";
}

std::string ConfigToJson(const Config& config) {
  std::string out = "{";
  for (const Flag& flag : AllFlags()) {
    if (!flag.is_setting) continue;
    if (out.size() > 1) out += ',';
    AppendJsonString(&out, flag.name);
    out += ':';
    const std::string value = flag.display(config);
    if (flag.json_number) {
      out += value;
    } else {
      AppendJsonString(&out, value);
    }
  }
  out += '}';
  return out;
}

}  // namespace walwatch
