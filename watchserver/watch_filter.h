// WatchFilter is what a watch session tests each event with: exact group,
// version and resource; the cluster and namespace from the path when set;
// then the label and field selectors.
//
// Errors are returned as one-line strings ("" for success), fit for the
// message of a 400 BadRequest Status; user text in them is escaped so they
// never contain a control character.
//
// Thread safety: Create is pure. A created filter is immutable; its const
// methods may be called from any number of threads. Matches() does not
// allocate.
#ifndef WALWATCH_WATCHSERVER_WATCH_FILTER_H_
#define WALWATCH_WATCHSERVER_WATCH_FILTER_H_

#include <cstddef>
#include <string>

#include "cdc/model/event.h"
#include "watchserver/field_selector.h"
#include "watchserver/label_selector.h"

namespace walwatch {

struct WatchRequest;

// What WatchFilter::Create reads. Empty cluster or ns means "any".
struct WatchFilterSpec {
  std::string group, version, resource;
  std::string cluster, ns;
  std::string label_selector, field_selector;
};

// The longest labelSelector or fieldSelector a watch may give. A watch
// holds its selectors, parsed, for its life, at some ten times their text:
// without a bound, a few watches of 1 MiB selectors (inside the header
// limit) would take hundreds of MB. 64 KiB is a set of some thousand
// object names.
inline constexpr size_t kMaxSelectorBytes = 64 * 1024;

class WatchFilter {
 public:
  // Parses the selectors (the label selector first, as the apiserver decodes
  // labelSelector before fieldSelector). Returns "" and sets *out, or the
  // one-line error and leaves *out unchanged.
  static std::string Create(const WatchFilterSpec& spec, WatchFilter* out);
  // The same from a parsed watch request.
  static std::string Create(const WatchRequest& request, WatchFilter* out);

  bool Matches(const Event& event) const;

  const WatchFilterSpec& spec() const { return spec_; }
  const LabelSelector& label_selector() const { return labels_; }
  const FieldSelector& field_selector() const { return fields_; }

 private:
  WatchFilterSpec spec_;
  LabelSelector labels_;
  FieldSelector fields_;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_WATCH_FILTER_H_
