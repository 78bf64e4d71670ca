// HelpText (watchserver/config.h): walwatch --help, made from the flag
// table (config_flags.h).
#include "watchserver/config.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "watchserver/config_flags.h"

namespace walwatch {
namespace {

using Group = Flag::Group;

constexpr std::pair<Group, const char*> kGroupHeadings[] = {
    {Group::kPostgreSql, "PostgreSQL"},
    {Group::kMySql, "MySQL/MariaDB (--source mysql)"},
    {Group::kServing, "Serving"},
    {Group::kEventLog, "Event log"},
    {Group::kLogging, "Logging"},
};

// Appends `text` word-wrapped to `width` columns, each line indented.
void AppendWrapped(std::string* out, std::string_view text, size_t indent,
                   size_t width) {
  size_t column = 0;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view()
                                           : text.substr(space + 1);
    if (word.empty()) continue;
    if (column > 0 && column + 1 + word.size() > width) {
      out->push_back('\n');
      column = 0;
    }
    if (column == 0) {
      out->append(indent, ' ');
      column = indent;
    } else {
      out->push_back(' ');
      ++column;
    }
    out->append(word);
    column += word.size();
  }
  out->push_back('\n');
}

void AppendFlagHelp(std::string* out, const Flag& flag) {
  *out += "  --";
  *out += flag.name;
  if (flag.metavar != nullptr) {
    *out += ' ';
    *out += flag.metavar;
  }
  *out += '\n';
  constexpr size_t kIndent = 6, kWidth = 79;
  AppendWrapped(out, flag.usage, kIndent, kWidth);
  if (!flag.is_setting) return;
  std::string tail = "Default: ";
  if (flag.default_text != nullptr) {
    tail += flag.default_text;
  } else {
    const std::string value = flag.display(Config{});
    tail += value.empty() ? "empty" : value;
  }
  tail += ". Env: " + EnvName(flag) + ".";
  // Not wrapped: one line states both, so grep finds them together.
  out->append(kIndent, ' ');
  *out += tail;
  *out += '\n';
}

}  // namespace

std::string HelpText() {
  std::string out =
      "Usage: walwatch [flags]\n"
      "       walwatch watch PATH [...]      print a watch stream "
      "(walwatch watch --help)\n"
      "       walwatch slots list|drop [...] list or drop walwatch's "
      "replication slots\n"
      "                                      (walwatch slots --help)\n"
      "\n"
      "Streams changes from a PostgreSQL logical replication slot (wal2json\n"
      "or pgoutput),\n"
      "or from a MySQL/MariaDB binary log (--source mysql), and serves them\n"
      "as Kubernetes watch events.\n"
      "\n"
      "Flags are written --flag value or --flag=value. Every flag except\n"
      "--help can also be set with the environment variable named with it;\n"
      "the command line wins, and an empty variable counts as unset.\n"
      "Durations: 500ms, 30s, 10m, 1h30m, or a bare number of seconds.\n"
      "Sizes: 256Mi, 1Gi, 512Ki, 100M, 1G, or bytes.\n"
      "\n";
  for (const Flag& flag : AllFlags()) {
    if (flag.group == Group::kGeneral) AppendFlagHelp(&out, flag);
  }
  for (const auto& [group, heading] : kGroupHeadings) {
    out += '\n';
    out += heading;
    out += ":\n";
    for (const Flag& flag : AllFlags()) {
      if (flag.group == group) AppendFlagHelp(&out, flag);
    }
  }
  return out;
}

}  // namespace walwatch
