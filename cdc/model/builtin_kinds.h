// The kinds of Kubernetes' built-in resources, and a guess for the others.
//
// A watch's bookmarks carry the watched resource's kind and apiVersion
// (watchserver/PROTOCOL.md, "Bookmarks"), and client-go's decoders need the kind.
// When the table has never held a row of a resource, these are what
// ResourceCatalog falls back on.
//
// The table is keyed by (group, resource) alone: a built-in resource keeps
// its kind in every version it is served in (autoscaling/v1 and /v2
// horizontalpodautoscalers are both HorizontalPodAutoscaler), so it also
// answers for versions it does not list, older and newer.
//
// Thread safety: pure functions over constant data; any thread.
#ifndef WALWATCH_CDC_MODEL_BUILTIN_KINDS_H_
#define WALWATCH_CDC_MODEL_BUILTIN_KINDS_H_

#include <optional>
#include <string>
#include <string_view>

namespace walwatch {

// The kind of a built-in resource ("" group for the core API):
// ("", "pods") -> "Pod", ("discovery.k8s.io", "endpointslices") ->
// "EndpointSlice"; nullopt for a resource that is not built in.
std::optional<std::string_view> BuiltinKind(std::string_view group,
                                            std::string_view resource);

// A best-effort kind for a resource nothing else names: the plural made
// singular by English rules ("ies" -> "y"; "sses", "shes", "ches" and "xes"
// lose "es"; otherwise a trailing "s", not "ss", is dropped) and the first
// letter upper-cased: "widgets" -> "Widget", "policies" -> "Policy".
// A kind of several words cannot be recovered from its lower-case plural
// ("foobars" -> "Foobar", not "FooBar"); an operator declares those
// (--kinds). Never empty for a non-empty resource.
std::string GuessKind(std::string_view resource);

}  // namespace walwatch

#endif  // WALWATCH_CDC_MODEL_BUILTIN_KINDS_H_
