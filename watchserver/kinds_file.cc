#include "watchserver/kinds_file.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace walwatch {

namespace {

// Kubernetes' own limits: a group is a DNS subdomain, a version and a
// resource are DNS labels (lower case), and a kind is an identifier.
bool IsLowerName(std::string_view s, bool dots) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
              (dots && c == '.');
    if (!ok) return false;
  }
  return true;
}

bool IsKindName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// "entry 3 (widgets.example.com v1)", as kubectl writes a resource.group.
std::string Describe(size_t index, const DeclaredKind& d) {
  std::string s = "entry " + std::to_string(index);
  if (d.gvr.resource.empty()) return s;
  s += " (" + d.gvr.resource;
  if (!d.gvr.group.empty()) s += "." + d.gvr.group;
  if (!d.gvr.version.empty()) s += " " + d.gvr.version;
  return s + ")";
}

}  // namespace

std::string ParseKinds(std::string_view json, std::vector<DeclaredKind>* out) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded()) return "not valid JSON";
  if (!doc.is_array()) {
    return "expected a JSON array of {\"group\", \"version\", \"resource\", "
           "\"kind\"} objects";
  }
  std::vector<DeclaredKind> kinds;
  std::map<GroupVersionResource, size_t> index_of;
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& entry = doc[i];
    DeclaredKind d;
    if (!entry.is_object()) {
      return Describe(i, d) + ": expected an object";
    }
    // Read the strings first, so that every error can name the resource.
    auto field_of = [&d](const std::string& key) -> std::string* {
      return key == "group"      ? &d.gvr.group
             : key == "version"  ? &d.gvr.version
             : key == "resource" ? &d.gvr.resource
             : key == "kind"     ? &d.kind
                                 : nullptr;
    };
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      std::string* field = field_of(it.key());
      if (field && it->is_string()) *field = it->get<std::string>();
    }
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      if (!field_of(it.key())) {
        return Describe(i, d) + ": unknown key \"" + it.key() +
               "\" (expected group, version, resource, kind)";
      }
      if (!it->is_string()) {
        return Describe(i, d) + ": \"" + it.key() + "\" must be a string";
      }
    }
    for (const char* key : {"version", "resource", "kind"}) {
      if (!entry.contains(key)) {
        return Describe(i, d) + ": lacks \"" + key + "\"";
      }
    }
    if (!d.gvr.group.empty() && !IsLowerName(d.gvr.group, /*dots=*/true)) {
      return Describe(i, d) + ": group \"" + d.gvr.group +
             "\" must be lower-case letters, digits, '-' and '.'";
    }
    if (!IsLowerName(d.gvr.version, /*dots=*/false)) {
      return Describe(i, d) + ": version \"" + d.gvr.version +
             "\" must be lower-case letters, digits and '-'";
    }
    if (!IsLowerName(d.gvr.resource, /*dots=*/false)) {
      return Describe(i, d) + ": resource \"" + d.gvr.resource +
             "\" must be lower-case letters, digits and '-' (the plural, "
             "as in the watch path)";
    }
    if (!IsKindName(d.kind)) {
      return Describe(i, d) + ": kind \"" + d.kind +
             "\" must be letters and digits, such as Widget";
    }
    auto [it, inserted] = index_of.emplace(d.gvr, i);
    if (!inserted) {
      return Describe(i, d) + ": declared again (first in entry " +
             std::to_string(it->second) + ")";
    }
    kinds.push_back(std::move(d));
  }
  *out = std::move(kinds);
  return "";
}

std::string LoadKindsFile(const std::string& path,
                          std::vector<DeclaredKind>* out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return "--kinds " + path + ": is a directory, not a file";
  }
  std::ifstream in(path);
  if (!in) return "--kinds " + path + ": cannot read the file";
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return "--kinds " + path + ": cannot read the file";
  std::string err = ParseKinds(text.str(), out);
  if (!err.empty()) return "--kinds " + path + ": " + err;
  return "";
}

}  // namespace walwatch
