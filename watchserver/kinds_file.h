// The operator's --kinds file: the kinds of resources walwatch may serve
// before the table holds a row of them (CRDs, mostly), so that their
// bookmarks carry the right kind (resource_catalog.h, "declared").
//
//   [{"group": "example.com", "version": "v1", "resource": "widgets",
//     "kind": "Widget"}, ...]
//
// "group" may be omitted or "" for the core API; "version", "resource" and
// "kind" are required. Any other key, a value that is not a string, an
// empty or malformed name, or a resource declared twice is an error: a
// typo must stop walwatch at startup, not give a watch the wrong kind.
//
// Thread safety: pure functions (LoadKindsFile reads the file); any thread.
#ifndef WALWATCH_WATCHSERVER_KINDS_FILE_H_
#define WALWATCH_WATCHSERVER_KINDS_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "cdc/model/resource_catalog.h"

namespace walwatch {

struct DeclaredKind {
  GroupVersionResource gvr;
  std::string kind;
};

// Parses a --kinds document into *out. Returns "" on success, else one line
// naming the entry at fault ("entry 3 (widgets.example.com v1): ...").
std::string ParseKinds(std::string_view json, std::vector<DeclaredKind>* out);

// Reads `path` and parses it. Errors start with "--kinds PATH: ".
std::string LoadKindsFile(const std::string& path,
                          std::vector<DeclaredKind>* out);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_KINDS_FILE_H_
