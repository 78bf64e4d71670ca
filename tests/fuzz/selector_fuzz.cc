// Fuzz target: the label and field selector parsers
// (watchserver/label_selector.h, watchserver/field_selector.h).
//
// The input is the selector text, as it arrives in labelSelector= or
// fieldSelector= once percent-decoded; both parsers get it.
//
// Checked:
//  * An error is one line: no control characters (the header's promise; it
//    becomes a Status message), and the output selector is left unchanged.
//  * LabelSelector::ToString() is canonical: it parses again, to a selector
//    with the same ToString() that selects the same label sets.
//  * Matches() runs over fixed label sets and over labels made from the
//    input's own words, so that keys and values the selector names occur.
//  * FieldSelector::Matches() runs over events whose fields come from the
//    input's words.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/model/event.h"
#include "tests/fuzz/fuzz_check.h"
#include "watchserver/field_selector.h"
#include "watchserver/label_selector.h"

namespace {

using walwatch::Event;
using walwatch::FieldSelector;
using walwatch::LabelList;
using walwatch::LabelSelector;
using walwatch::fuzz::Escaped;
using walwatch::fuzz::HasNoControlBytes;

// Runs of bytes that may appear in a label key or value ('/' for a key's
// prefix), at most `max` of them.
std::vector<std::string> Words(std::string_view text, size_t max) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty() && words.size() < max) words.push_back(word);
    word.clear();
  };
  for (char c : text) {
    bool part = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
                c == '/';
    if (part) {
      word.push_back(c);
    } else {
      flush();
    }
  }
  flush();
  return words;
}

std::vector<LabelList> LabelSets(const std::vector<std::string>& words) {
  std::vector<LabelList> sets = {
      {},
      {{"app", "web"}},
      {{"app", ""}, {"env", "prod"}, {"tier", "db"}},
      {{"a", "1"}, {"b", "-5"}, {"c", "10"}, {"d", "x"}},
      {{"app", "a"}, {"app", "b"}},  // a repeated key: the last counts
  };
  // Consecutive words as key, value; each word alone as a key with "".
  LabelList pairs, keys;
  for (size_t i = 0; i + 1 < words.size(); i += 2) {
    pairs.emplace_back(words[i], words[i + 1]);
  }
  for (const std::string& w : words) keys.emplace_back(w, "");
  sets.push_back(std::move(pairs));
  sets.push_back(std::move(keys));
  // Shifted by one, so that a word that was a value becomes a key.
  LabelList shifted;
  for (size_t i = 1; i + 1 < words.size(); i += 2) {
    shifted.emplace_back(words[i], words[i + 1]);
  }
  sets.push_back(std::move(shifted));
  return sets;
}

void FuzzLabelSelector(std::string_view text,
                       const std::vector<LabelList>& label_sets) {
  LabelSelector selector;
  std::string error = LabelSelector::Parse(text, &selector);
  if (!error.empty()) {
    FUZZ_CHECK(HasNoControlBytes(error), Escaped(error));
    FUZZ_CHECK(selector.Empty(), "Parse changed *out on error");
    return;
  }
  std::string canonical = selector.ToString();
  FUZZ_CHECK(HasNoControlBytes(canonical), Escaped(canonical));
  FUZZ_CHECK(selector.Empty() == canonical.empty(), Escaped(canonical));

  LabelSelector again;
  error = LabelSelector::Parse(canonical, &again);
  FUZZ_CHECK(error.empty(), "ToString() " + Escaped(canonical) + " of " +
                                Escaped(text) +
                                " does not parse: " + Escaped(error));
  std::string canonical_again = again.ToString();
  FUZZ_CHECK(canonical_again == canonical,
             Escaped(canonical) + " became " + Escaped(canonical_again));
  for (const LabelList& labels : label_sets) {
    FUZZ_CHECK(selector.Matches(labels) == again.Matches(labels),
               Escaped(text) + " and its ToString() " + Escaped(canonical) +
                   " select differently");
    // An event's packed labels select as the list they were made from.
    Event::Strings strings;
    strings.labels = &labels;
    walwatch::EventPtr event = Event::Make(strings, "{}\n");
    FUZZ_CHECK(selector.Matches(event->labels()) == selector.Matches(labels),
               Escaped(text) + " selects an event's labels differently");
  }
  if (selector.Empty()) {
    for (const LabelList& labels : label_sets) {
      FUZZ_CHECK(selector.Matches(labels));
    }
  }
}

void FuzzFieldSelector(std::string_view text,
                       const std::vector<std::string>& words) {
  FieldSelector selector;
  std::string error = FieldSelector::Parse(text, &selector);
  if (!error.empty()) {
    FUZZ_CHECK(HasNoControlBytes(error), Escaped(error));
    FUZZ_CHECK(selector.Empty(), "Parse changed *out on error");
    return;
  }
  auto event = [](std::string_view cluster, std::string_view ns,
                  std::string_view name) {
    Event::Strings s;
    s.version = "v1";
    s.resource = "pods";
    s.cluster = cluster;
    s.ns = ns;
    s.name = name;
    return Event::Make(s, "{}\n");
  };
  bool matches = selector.Matches(*event("c1", "default", "p1"));
  if (selector.Empty()) FUZZ_CHECK(matches);
  selector.Matches(*event("c1", "", "p1"));  // a cluster-scoped object
  for (size_t i = 0; i + 2 < words.size() && i < 12; ++i) {
    selector.Matches(*event(words[i + 2], words[i + 1], words[i]));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> words = Words(text, 16);
  FuzzLabelSelector(text, LabelSets(words));
  FuzzFieldSelector(text, words);
  return 0;
}
