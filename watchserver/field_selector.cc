#include "watchserver/field_selector.h"

#include <algorithm>
#include <utility>

#include "cdc/base/text.h"
#include "watchserver/selector_text.h"

namespace walwatch {

namespace {

// fields.splitTerms: split at commas not escaped by a backslash; the
// backslashes stay in the terms.
std::vector<std::string_view> SplitTerms(std::string_view selector) {
  std::vector<std::string_view> terms;
  if (selector.empty()) return terms;
  size_t start = 0;
  bool in_slash = false;
  for (size_t i = 0; i < selector.size(); ++i) {
    char c = selector[i];
    if (in_slash) {
      in_slash = false;
    } else if (c == '\\') {
      in_slash = true;
    } else if (c == ',') {
      terms.push_back(selector.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(selector.substr(start));
  return terms;
}

// fields.splitTerm: split at the first operator; "!=" and "==" are tried
// before "=" at each position.
bool SplitTerm(std::string_view term, std::string_view* lhs, bool* equal,
               std::string_view* rhs) {
  for (size_t i = 0; i < term.size(); ++i) {
    std::string_view rest = term.substr(i);
    size_t op_len = 0;
    if (rest.substr(0, 2) == "!=") {
      op_len = 2;
      *equal = false;
    } else if (rest.substr(0, 2) == "==") {
      op_len = 2;
      *equal = true;
    } else if (rest[0] == '=') {
      op_len = 1;
      *equal = true;
    }
    if (op_len > 0) {
      *lhs = term.substr(0, i);
      *rhs = term.substr(i + op_len);
      return true;
    }
  }
  return false;
}

// fields.UnescapeValue.
std::string UnescapeValue(std::string_view s, std::string* out) {
  out->clear();
  out->reserve(s.size());
  bool in_slash = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_slash) {
      in_slash = false;
      if (c == '\\' || c == ',' || c == '=') {
        out->push_back(c);
        continue;
      }
      // The bytes its lead byte announces (1 when it leads no sequence).
      size_t n = std::min(
          std::max<size_t>(Utf8LeadLength(static_cast<unsigned char>(c)), 1),
          s.size() - i);
      return "invalid field selector: invalid escape sequence: \\" +
             Printable(s.substr(i, n));
    }
    if (c == '\\') {
      in_slash = true;
    } else if (c == ',' || c == '=') {
      return std::string(
                 "invalid field selector: unescaped character in "
                 "value: '") +
             c + "'";
    } else {
      out->push_back(c);
    }
  }
  if (in_slash) return "invalid field selector: invalid escape sequence: \\";
  return "";
}

bool FieldFromName(std::string_view name, FieldSelector::Field* field) {
  using Field = FieldSelector::Field;
  if (name == "metadata.name") {
    *field = Field::kName;
    return true;
  }
  if (name == "metadata.namespace") {
    *field = Field::kNamespace;
    return true;
  }
  if (name == "cluster") {
    *field = Field::kCluster;
    return true;
  }
  if (!name.empty() && name[0] == '.') name.remove_prefix(1);
  if (name == "metadata.annotations['shadow.clusterpedia.io/cluster-name']" ||
      name == "metadata.annotations[\"shadow.clusterpedia.io/cluster-name\"]") {
    *field = Field::kCluster;
    return true;
  }
  return false;
}

std::string_view FieldValue(const Event& event, FieldSelector::Field field) {
  switch (field) {
    case FieldSelector::Field::kName:
      return event.name();
    case FieldSelector::Field::kNamespace:
      return event.ns();
    case FieldSelector::Field::kCluster:
      break;
  }
  return event.cluster();
}

}  // namespace

std::string FieldSelector::Parse(std::string_view text, FieldSelector* out) {
  std::vector<std::string_view> parts = SplitTerms(text);
  std::sort(parts.begin(), parts.end());
  std::vector<std::string_view> names;
  std::vector<Term> terms;
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    std::string_view lhs, rhs;
    Term term{Field::kName, true, {}};
    if (!SplitTerm(part, &lhs, &term.equal, &rhs)) {
      return "invalid selector: '" + Printable(text) + "'; can't understand '" +
             Printable(part) + "'";
    }
    std::string err = UnescapeValue(rhs, &term.value);
    if (!err.empty()) return err;
    // apimachinery drops a term whose field and value are both empty ("=",
    // "==", "!=") when it parses: such a term selects everything.
    if (lhs.empty() && term.value.empty()) continue;
    names.push_back(lhs);
    terms.push_back(std::move(term));
  }
  // Field names are checked once everything has parsed, as the apiserver
  // converts field labels only after decoding the selector.
  for (size_t i = 0; i < terms.size(); ++i) {
    if (!FieldFromName(names[i], &terms[i].field)) {
      return "field label not supported: " + Printable(names[i]);
    }
  }
  out->terms_ = std::move(terms);
  return "";
}

bool FieldSelector::Matches(const Event& event) const {
  for (const Term& t : terms_) {
    if ((FieldValue(event, t.field) == t.value) != t.equal) return false;
  }
  return true;
}

}  // namespace walwatch
