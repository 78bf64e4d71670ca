// LabelSelector::Parse (watchserver/label_selector.h): apimachinery's
// labels.Lexer and labels.Parser, and the checks of keys and values that
// labels.NewRequirement makes, with their messages.
#include "watchserver/label_selector.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "watchserver/selector_text.h"

namespace walwatch {

namespace {

constexpr size_t kLabelNameMaxBytes = 63;
constexpr size_t kLabelValueMaxBytes = 63;
constexpr size_t kDns1123SubdomainMaxBytes = 253;

// field.Invalid(path, value, detail).Error()
std::string InvalidValue(std::string_view path, std::string_view value,
                         std::string_view detail) {
  std::string out(path);
  out += ": Invalid value: ";
  out += Quoted(value);
  out += ": ";
  out += detail;
  return out;
}

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$
bool MatchesLabelNameRegex(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
bool MatchesDns1123SubdomainRegex(std::string_view s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label =
        s.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (label.empty() || !IsLowerAlnum(label.front()) ||
        !IsLowerAlnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!IsLowerAlnum(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// The messages below are apimachinery's, byte for byte, including the
// ",  or" that its RegexError writes between examples.
const char kLabelNameRegexError[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
    "or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

// content.IsLabelKey: the problems with `key`, none if it is valid.
std::vector<std::string> LabelKeyErrors(std::string_view key) {
  std::vector<std::string> errs;
  std::string_view name = key;
  size_t slash = key.find('/');
  if (slash != std::string_view::npos) {
    if (key.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back(std::string("a valid label key ") + kLabelNameRegexError +
                     " with an optional DNS subdomain prefix and '/' (e.g. "
                     "'example.com/MyName')");
      return errs;
    }
    std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      if (prefix.size() > kDns1123SubdomainMaxBytes) {
        errs.push_back("prefix part must be no more than 253 bytes");
      }
      if (!MatchesDns1123SubdomainRegex(prefix)) {
        errs.push_back(
            "prefix part a lowercase RFC 1123 subdomain must consist of lower "
            "case alphanumeric characters, '-' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'example.com', regex used "
            "for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'"
            ")");
      }
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > kLabelNameMaxBytes) {
    errs.push_back("name part must be no more than 63 bytes");
  }
  if (!MatchesLabelNameRegex(name)) {
    errs.push_back(std::string("name part ") + kLabelNameRegexError);
  }
  return errs;
}

// validation.IsValidLabelValue: the problems with `value`, none if valid.
std::vector<std::string> LabelValueErrors(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxBytes) {
    errs.push_back("must be no more than 63 bytes");
  }
  if (!value.empty() && !MatchesLabelNameRegex(value)) {
    errs.push_back(
        "a valid label must be an empty string or consist of alphanumeric "
        "characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
        "regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
  }
  return errs;
}

// ---- Label selector lexer (labels.Lexer) ----

enum class Token : uint8_t {
  kError,
  kEndOfString,
  kClosedPar,
  kComma,
  kDoesNotExist,
  kDoubleEquals,
  kEquals,
  kGreaterThan,
  kIdentifier,
  kIn,
  kLessThan,
  kNotEquals,
  kNotIn,
  kOpenPar,
};

struct ScannedItem {
  Token token;
  std::string_view literal;
};

bool LookupToken(std::string_view s, Token* token) {
  static const struct {
    std::string_view text;
    Token token;
  } kTokens[] = {
      {")", Token::kClosedPar},    {",", Token::kComma},
      {"!", Token::kDoesNotExist}, {"==", Token::kDoubleEquals},
      {"=", Token::kEquals},       {">", Token::kGreaterThan},
      {"in", Token::kIn},          {"<", Token::kLessThan},
      {"!=", Token::kNotEquals},   {"notin", Token::kNotIn},
      {"(", Token::kOpenPar},
  };
  for (const auto& t : kTokens) {
    if (t.text == s) {
      *token = t.token;
      return true;
    }
  }
  return false;
}

bool IsWhitespace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool IsSpecialSymbol(unsigned char c) {
  switch (c) {
    case '=':
    case '!':
    case '(':
    case ')':
    case ',':
    case '>':
    case '<':
      return true;
    default:
      return false;
  }
}

// Byte for byte the apiserver's lexer, including its treatment of a NUL
// byte: Read() returns 0 for it as for the end of input, so a NUL ends the
// selector where a token may start and ends an identifier inside one.
class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  ScannedItem Lex() {
    unsigned char c = SkipWhitespace(Read());
    if (c == 0) return {Token::kEndOfString, {}};
    Unread();
    return IsSpecialSymbol(c) ? ScanSpecialSymbol() : ScanIdOrKeyword();
  }

 private:
  unsigned char Read() {
    if (pos_ < s_.size()) return static_cast<unsigned char>(s_[pos_++]);
    return 0;
  }
  void Unread() { --pos_; }

  unsigned char SkipWhitespace(unsigned char c) {
    while (IsWhitespace(c)) c = Read();
    return c;
  }

  ScannedItem ScanIdOrKeyword() {
    size_t start = pos_;
    size_t end;
    while (true) {
      size_t before = pos_;
      unsigned char c = Read();
      if (c == 0) {
        end = before;
        break;
      }
      if (IsSpecialSymbol(c) || IsWhitespace(c)) {
        Unread();
        end = pos_;
        break;
      }
    }
    std::string_view lit = s_.substr(start, end - start);
    Token token;
    if (LookupToken(lit, &token)) return {token, lit};
    return {Token::kIdentifier, lit};
  }

  // The longest run of special symbols that is a token, extended one symbol
  // at a time as the apiserver does ("!=" but "=" then "!" for "=!").
  ScannedItem ScanSpecialSymbol() {
    size_t start = pos_;
    ScannedItem last{Token::kError, {}};
    while (true) {
      unsigned char c = Read();
      if (c == 0) break;
      if (!IsSpecialSymbol(c)) {
        Unread();
        break;
      }
      std::string_view buffer = s_.substr(start, pos_ - start);
      Token token;
      if (LookupToken(buffer, &token)) {
        last = {token, buffer};
      } else if (last.token != Token::kError) {
        Unread();
        break;
      }
    }
    return last;  // every single special symbol is a token: never kError
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

// ---- Label selector parser (labels.Parser) ----

class LabelSelectorParser {
 public:
  using Requirement = LabelSelector::Requirement;
  using Op = LabelSelector::Op;

  explicit LabelSelectorParser(std::string_view text) {
    Lexer lexer(text);
    while (true) {
      items_.push_back(lexer.Lex());
      if (items_.back().token == Token::kEndOfString) break;
    }
  }

  std::string Parse(std::vector<Requirement>* out) {
    while (true) {
      ScannedItem item = Lookahead(kValues);
      switch (item.token) {
        case Token::kIdentifier:
        case Token::kDoesNotExist: {
          Requirement r;
          std::string err = ParseRequirement(&r);
          if (!err.empty()) return "unable to parse requirement: " + err;
          out->push_back(std::move(r));
          ScannedItem next = Consume(kValues);
          if (next.token == Token::kEndOfString) return "";
          if (next.token != Token::kComma) {
            return Found(next) + ", expected: ',' or 'end of string'";
          }
          ScannedItem after = Lookahead(kValues);
          if (after.token != Token::kIdentifier &&
              after.token != Token::kDoesNotExist) {
            return Found(after) + ", expected: identifier after ','";
          }
          break;
        }
        case Token::kEndOfString:
          return "";
        default:
          return Found(item) + ", expected: !, identifier, or 'end of string'";
      }
    }
  }

 private:
  // In a value position `in` and `notin` are plain identifiers.
  enum Context { kKeyAndOperator, kValues };

  static std::string Found(const ScannedItem& item) {
    return "found '" + Printable(item.literal) + "'";
  }

  ScannedItem Adjust(ScannedItem item, Context context) const {
    if (context == kValues &&
        (item.token == Token::kIn || item.token == Token::kNotIn)) {
      item.token = Token::kIdentifier;
    }
    return item;
  }
  ScannedItem Lookahead(Context context) const {
    return Adjust(items_[std::min(position_, items_.size() - 1)], context);
  }
  ScannedItem Consume(Context context) {
    ScannedItem item = Lookahead(context);
    ++position_;
    return item;
  }

  std::string ParseRequirement(Requirement* r) {
    bool has_op = false;
    std::string err = ParseKeyAndInferOperator(&r->key, &r->op, &has_op);
    if (!err.empty()) return err;
    if (has_op) return "";  // exists or does-not-exist: no values
    err = ParseOperator(&r->op);
    if (!err.empty()) return err;
    std::vector<std::string> values;
    if (r->op == Op::kIn || r->op == Op::kNotIn) {
      err = ParseValues(&values);
    } else {
      err = ParseExactValue(&values);
    }
    if (!err.empty()) return err;
    // A set of values, as sets.String.List() returns it: sorted, unique.
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    r->values = std::move(values);
    return ValidateValues(r);
  }

  std::string ParseKeyAndInferOperator(std::string* key, Op* op, bool* has_op) {
    ScannedItem item = Consume(kValues);
    if (item.token == Token::kDoesNotExist) {
      *op = Op::kDoesNotExist;
      *has_op = true;
      item = Consume(kValues);
    }
    if (item.token != Token::kIdentifier) {
      return Found(item) + ", expected: identifier";
    }
    std::vector<std::string> errs = LabelKeyErrors(item.literal);
    if (!errs.empty())
      return InvalidValue("key", item.literal, Join(errs, "; "));
    *key = std::string(item.literal);
    Token next = Lookahead(kValues).token;
    if ((next == Token::kEndOfString || next == Token::kComma) && !*has_op) {
      *op = Op::kExists;
      *has_op = true;
    }
    return "";
  }

  std::string ParseOperator(Op* op) {
    ScannedItem item = Consume(kKeyAndOperator);
    switch (item.token) {
      case Token::kIn:
        *op = Op::kIn;
        return "";
      case Token::kEquals:
        *op = Op::kEquals;
        return "";
      case Token::kDoubleEquals:
        *op = Op::kDoubleEquals;
        return "";
      case Token::kGreaterThan:
        *op = Op::kGreaterThan;
        return "";
      case Token::kLessThan:
        *op = Op::kLessThan;
        return "";
      case Token::kNotIn:
        *op = Op::kNotIn;
        return "";
      case Token::kNotEquals:
        *op = Op::kNotEquals;
        return "";
      default:
        return Found(item) + ", expected: in, notin, =, ==, !=, gt, lt";
    }
  }

  // "(" values ")"
  std::string ParseValues(std::vector<std::string>* values) {
    ScannedItem item = Consume(kValues);
    if (item.token != Token::kOpenPar) return Found(item) + " expected: '('";
    item = Lookahead(kValues);
    switch (item.token) {
      case Token::kIdentifier:
      case Token::kComma: {
        std::string err = ParseIdentifiersList(values);
        if (!err.empty()) return err;
        Consume(kValues);  // the ')' ParseIdentifiersList stopped at
        return "";
      }
      case Token::kClosedPar:  // "()" is the set {""}
        Consume(kValues);
        values->emplace_back();
        return "";
      default:
        return Found(item) + ", expected: ',', ')' or identifier";
    }
  }

  // A list of comma-separated, possibly empty, values up to ')', read as
  // apimachinery's parseIdentifiersList reads it: a comma followed by a comma
  // takes both, so the next token must be a value or a third comma. Hence
  // "(x,,)" and "(,,)" are errors ("found ')', expected: ',', or
  // identifier") while "(,)", "(x,)", "(x,,y)" and "(,,,)" select "".
  std::string ParseIdentifiersList(std::vector<std::string>* values) {
    while (true) {
      ScannedItem item = Consume(kValues);
      switch (item.token) {
        case Token::kIdentifier: {
          values->emplace_back(item.literal);
          ScannedItem next = Lookahead(kValues);
          if (next.token == Token::kComma) continue;
          if (next.token == Token::kClosedPar) return "";
          return Found(next) + ", expected: ',' or ')'";
        }
        case Token::kComma: {
          if (values->empty()) values->emplace_back();  // "(,"
          Token next = Lookahead(kValues).token;
          if (next == Token::kClosedPar) {  // ",)"
            values->emplace_back();
            return "";
          }
          if (next == Token::kComma) {  // ",,": both commas are taken
            Consume(kValues);
            values->emplace_back();
          }
          continue;
        }
        default:
          return Found(item) + ", expected: ',', or identifier";
      }
    }
  }

  std::string ParseExactValue(std::vector<std::string>* values) {
    Token next = Lookahead(kValues).token;
    if (next == Token::kEndOfString || next == Token::kComma) {
      values->emplace_back();  // "a=" selects a=""
      return "";
    }
    ScannedItem item = Consume(kValues);
    if (item.token != Token::kIdentifier) {
      return Found(item) + ", expected: identifier";
    }
    values->emplace_back(item.literal);
    return "";
  }

  // labels.NewRequirement's checks of the values (the key was checked when
  // it was read); several problems are reported as "[a, b]".
  static std::string ValidateValues(Requirement* r) {
    std::vector<std::string> errs;
    const std::vector<std::string>& values = r->values;
    if (r->op == Op::kGreaterThan || r->op == Op::kLessThan) {
      for (size_t i = 0; i < values.size(); ++i) {
        if (!ParseInt64(values[i], &r->bound)) {
          errs.push_back(InvalidValue(
              "values[" + std::to_string(i) + "]", values[i],
              "for 'Gt', 'Lt' operators, the value must be an integer"));
        }
      }
    }
    for (size_t i = 0; i < values.size(); ++i) {
      std::vector<std::string> value_errs = LabelValueErrors(values[i]);
      if (!value_errs.empty()) {
        errs.push_back(InvalidValue(
            "values[" + std::to_string(i) + "][" + Printable(r->key) + "]",
            values[i], Join(value_errs, "; ")));
      }
    }
    if (errs.empty()) return "";
    if (errs.size() == 1) return errs[0];
    return "[" + Join(errs, ", ") + "]";
  }

  std::vector<ScannedItem> items_;
  size_t position_ = 0;
};

// ---- LabelSelector ----

std::string LabelSelector::Parse(std::string_view text, LabelSelector* out) {
  std::vector<Requirement> requirements;
  std::string err = LabelSelectorParser(text).Parse(&requirements);
  if (!err.empty()) return err;
  std::stable_sort(
      requirements.begin(), requirements.end(),
      [](const Requirement& a, const Requirement& b) { return a.key < b.key; });
  out->requirements_ = std::move(requirements);
  return "";
}

}  // namespace walwatch
