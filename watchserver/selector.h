// Kubernetes label and field selectors, and the WatchFilter that decides
// which events a watch receives.
//
// LabelSelector follows k8s.io/apimachinery/pkg/labels (Parse and
// Requirement.Matches): the same grammar, lexer quirks, validation and match
// results, so a selector the apiserver accepts is accepted here and selects
// the same objects, and one it rejects is rejected here. Error messages are
// apimachinery's, byte for byte for valid UTF-8 input, but for two deliberate
// differences: a bad key is reported as `key: Invalid value: ...` where the
// apiserver prints `<nil>: ...`, and control characters are escaped (below).
//
//   selector     ::= "" | requirement ("," requirement)*
//   requirement  ::= KEY | "!" KEY
//                  | KEY ("=" | "==" | "!=") [VALUE]
//                  | KEY ("in" | "notin") "(" [VALUE] ("," [VALUE])* ")"
//                  | KEY (">" | "<") DIGITS   (an int64 that is a VALUE)
//   KEY   ::= [DNS-1123 subdomain (<= 253 bytes) "/"] NAME
//   NAME  ::= <= 63 bytes of [A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]
//   VALUE ::= "" | NAME
// Whitespace (' ', '\t', '\r', '\n') may surround any token and is required
// only between a key and `in`/`notin`. `in`/`notin` are keywords only where
// an operator is expected ("in in (in)" is valid). An empty value is allowed:
// `a=` selects a="" and `a in (,b)` selects "" or "b". `!=` and `notin` select
// objects without the key; `>`/`<` never do. Requirements are ANDed; the empty
// selector selects everything. Clusterpedia's search labels
// (`search.clusterpedia.io/clusters`...) get no special meaning: they are
// ordinary requirements here, which objects' labels never satisfy.
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
// WatchFilter is what a watch session tests each event with: exact group,
// version and resource; the cluster and namespace from the path when set;
// then the label and field selectors.
//
// Errors are returned as one-line strings ("" for success), fit for the
// message of a 400 BadRequest Status; user text in them is escaped so they
// never contain a control character.
//
// Thread safety: parsing functions are pure. A parsed selector or filter is
// immutable; its const methods may be called from any number of threads.
// Matches() does not allocate.
#ifndef WALWATCH_WATCHSERVER_SELECTOR_H_
#define WALWATCH_WATCHSERVER_SELECTOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cdc/model/event.h"

namespace walwatch {

struct WatchRequest;

class LabelSelector {
 public:
  enum class Op : uint8_t {
    kIn,
    kNotIn,
    kEquals,        // =
    kDoubleEquals,  // ==
    kNotEquals,     // !=
    kExists,        // key
    kDoesNotExist,  // !key
    kGreaterThan,   // >
    kLessThan,      // <
  };

  // The empty selector: selects everything.
  LabelSelector() = default;

  // Parses `text`. Returns "" and sets *out, or returns the error and leaves
  // *out unchanged.
  static std::string Parse(std::string_view text, LabelSelector* out);

  // An event's labels, or a list of them (the last value of a repeated key
  // counts).
  bool Matches(LabelsView labels) const;
  bool Matches(const LabelList& labels) const;
  bool Empty() const { return requirements_.empty(); }

  // The canonical form, as apimachinery's Selector.String() writes it:
  // requirements sorted by key, set values sorted ("a in (x,y),!b").
  std::string ToString() const;

 private:
  struct Requirement {
    std::string key;
    Op op = Op::kExists;
    // Sorted and unique for kIn/kNotIn; exactly one for the others that take
    // a value; empty for kExists/kDoesNotExist.
    std::vector<std::string> values;
    int64_t bound = 0;  // kGreaterThan/kLessThan: values[0] as an integer

    // `value`: the label's value, or null if the object lacks the label.
    bool Matches(const std::string_view* value) const;
    bool HasValue(std::string_view value) const;
  };
  friend class LabelSelectorParser;
  template <typename Labels>
  bool MatchesLabels(const Labels& labels) const;

  std::vector<Requirement> requirements_;  // sorted by key
};

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

#endif  // WALWATCH_WATCHSERVER_SELECTOR_H_
