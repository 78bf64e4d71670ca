#include "watchserver/watch_filter.h"

#include <utility>

#include "watchserver/watch_request.h"

namespace walwatch {

std::string WatchFilter::Create(const WatchFilterSpec& spec, WatchFilter* out) {
  for (const auto& [name, text] :
       {std::pair<const char*, const std::string&>{"labelSelector",
                                                   spec.label_selector},
        {"fieldSelector", spec.field_selector}}) {
    if (text.size() > kMaxSelectorBytes) {
      return std::string(name) + " is " + std::to_string(text.size()) +
             " bytes long; walwatch takes at most " +
             std::to_string(kMaxSelectorBytes);
    }
  }
  LabelSelector labels;
  std::string err = LabelSelector::Parse(spec.label_selector, &labels);
  if (!err.empty()) return err;
  FieldSelector fields;
  err = FieldSelector::Parse(spec.field_selector, &fields);
  if (!err.empty()) return err;
  out->spec_ = spec;
  out->labels_ = std::move(labels);
  out->fields_ = std::move(fields);
  return "";
}

std::string WatchFilter::Create(const WatchRequest& request, WatchFilter* out) {
  WatchFilterSpec spec;
  spec.group = request.group;
  spec.version = request.version;
  spec.resource = request.resource;
  spec.cluster = request.cluster;
  spec.ns = request.ns;
  spec.label_selector = request.label_selector;
  spec.field_selector = request.field_selector;
  return Create(spec, out);
}

bool WatchFilter::Matches(const Event& event) const {
  return event.resource() == spec_.resource && event.group() == spec_.group &&
         event.version() == spec_.version &&
         (spec_.cluster.empty() || event.cluster() == spec_.cluster) &&
         (spec_.ns.empty() || event.ns() == spec_.ns) &&
         labels_.Matches(event.labels()) && fields_.Matches(event);
}

}  // namespace walwatch
