// LabelSelector: a Kubernetes label selector, parsed, and whether a set of
// labels satisfies it. Parsing lives in label_selector_parser.cc, matching
// and the canonical form in label_selector.cc.
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
// Errors are returned as one-line strings ("" for success), fit for the
// message of a 400 BadRequest Status; user text in them is escaped so they
// never contain a control character.
//
// Thread safety: parsing is pure. A parsed selector is immutable; its const
// methods may be called from any number of threads. Matches() does not
// allocate.
#ifndef WALWATCH_WATCHSERVER_LABEL_SELECTOR_H_
#define WALWATCH_WATCHSERVER_LABEL_SELECTOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/model/filter_fields.h"

namespace walwatch {

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

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_LABEL_SELECTOR_H_
