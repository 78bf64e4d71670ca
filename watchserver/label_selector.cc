#include "watchserver/label_selector.h"

#include <algorithm>
#include <cstdint>

#include "watchserver/selector_text.h"

namespace walwatch {

namespace {

// Set values are searched linearly up to this many, by bisection beyond.
constexpr size_t kLinearSearchMax = 8;

// Sets *value to the value of `key` in `labels` and returns true, or
// returns false. The last occurrence wins.
template <typename Labels>
bool LookupLabel(const Labels& labels, std::string_view key,
                 std::string_view* value) {
  bool found = false;
  for (const auto& [k, v] : labels) {
    if (k == key) {
      *value = v;
      found = true;
    }
  }
  return found;
}

}  // namespace

bool LabelSelector::Requirement::HasValue(std::string_view value) const {
  if (values.size() <= kLinearSearchMax) {
    for (const std::string& v : values) {
      if (v == value) return true;
    }
    return false;
  }
  auto it = std::lower_bound(values.begin(), values.end(), value,
                             [](const std::string& a, std::string_view b) {
                               return std::string_view(a) < b;
                             });
  return it != values.end() && *it == value;
}

bool LabelSelector::Requirement::Matches(const std::string_view* value) const {
  switch (op) {
    case Op::kIn:
    case Op::kEquals:
    case Op::kDoubleEquals:
      return value != nullptr && HasValue(*value);
    case Op::kNotIn:
    case Op::kNotEquals:
      return value == nullptr || !HasValue(*value);
    case Op::kExists:
      return value != nullptr;
    case Op::kDoesNotExist:
      return value == nullptr;
    case Op::kGreaterThan:
    case Op::kLessThan: {
      int64_t n;
      if (value == nullptr || !ParseInt64(*value, &n)) return false;
      return op == Op::kGreaterThan ? n > bound : n < bound;
    }
  }
  return false;
}

template <typename Labels>
bool LabelSelector::MatchesLabels(const Labels& labels) const {
  for (const Requirement& r : requirements_) {
    std::string_view value;
    if (!r.Matches(LookupLabel(labels, r.key, &value) ? &value : nullptr)) {
      return false;
    }
  }
  return true;
}

bool LabelSelector::Matches(LabelsView labels) const {
  return MatchesLabels(labels);
}

bool LabelSelector::Matches(const LabelList& labels) const {
  return MatchesLabels(labels);
}

std::string LabelSelector::ToString() const {
  std::string out;
  for (const Requirement& r : requirements_) {
    if (!out.empty()) out += ',';
    if (r.op == Op::kDoesNotExist) out += '!';
    out += r.key;
    switch (r.op) {
      case Op::kExists:
      case Op::kDoesNotExist:
        continue;
      case Op::kEquals:
        out += '=';
        break;
      case Op::kDoubleEquals:
        out += "==";
        break;
      case Op::kNotEquals:
        out += "!=";
        break;
      case Op::kIn:
        out += " in (";
        break;
      case Op::kNotIn:
        out += " notin (";
        break;
      case Op::kGreaterThan:
        out += '>';
        break;
      case Op::kLessThan:
        out += '<';
        break;
    }
    out += Join(r.values, ",");
    if (r.op == Op::kIn || r.op == Op::kNotIn) out += ')';
  }
  return out;
}

}  // namespace walwatch
