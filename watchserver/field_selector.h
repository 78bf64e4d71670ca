// FieldSelector: a Kubernetes field selector, parsed, and whether an event
// satisfies it.
//
// FieldSelector follows k8s.io/apimachinery/pkg/fields (ParseSelector):
// comma-separated `field=value`, `field==value`, `field!=value`; no
// whitespace trimming; empty terms, and terms with an empty field and an
// empty value ("=", "!="), are skipped; in a value `\,` `\=` `\\`
// stand for `,` `=` `\`, and an unescaped ',' or '=' or any other backslash
// escape is an error (reported with the character, where apimachinery
// prints its code point). Supported fields: those the apiserver supports for
// every resource, plus the cluster:
//   metadata.name       Event::name
//   metadata.namespace  Event::ns ("" for cluster-scoped objects)
//   cluster             Event::cluster
//   metadata.annotations['shadow.clusterpedia.io/cluster-name']  Event::cluster
//     (also with double quotes, and with a leading '.'). Clusterpedia keeps
//     an object's cluster in that annotation, and this is how its enhanced
//     field selector names it; Clusterpedia has no `metadata.cluster` field,
//     so neither does walwatch.
// Any other field fails with `field label not supported: <field>`, checked
// after the whole selector has parsed (as the apiserver converts field labels
// after decoding).
//
// Errors are returned as one-line strings ("" for success), fit for the
// message of a 400 BadRequest Status; user text in them is escaped so they
// never contain a control character.
//
// Thread safety: parsing is pure. A parsed selector is immutable; its const
// methods may be called from any number of threads. Matches() does not
// allocate.
#ifndef WALWATCH_WATCHSERVER_FIELD_SELECTOR_H_
#define WALWATCH_WATCHSERVER_FIELD_SELECTOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/model/event.h"

namespace walwatch {

class FieldSelector {
 public:
  enum class Field : uint8_t { kName, kNamespace, kCluster };

  // The empty selector: selects everything.
  FieldSelector() = default;

  // Parses `text`. Returns "" and sets *out, or returns the error and leaves
  // *out unchanged.
  static std::string Parse(std::string_view text, FieldSelector* out);

  bool Matches(const Event& event) const;
  bool Empty() const { return terms_.empty(); }

 private:
  struct Term {
    Field field;
    bool equal;  // true: = or ==; false: !=
    std::string value;
  };

  std::vector<Term> terms_;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_FIELD_SELECTOR_H_
