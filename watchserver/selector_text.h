// Text helpers the selector parsers (label_selector_parser.cc,
// field_selector.cc) and LabelSelector share: how user text is shown in their
// error messages, and the integers of `>` and `<` requirements.
//
// Thread safety: pure functions of their arguments; any thread. None
// allocates but for the strings it returns.
#ifndef WALWATCH_WATCHSERVER_SELECTOR_TEXT_H_
#define WALWATCH_WATCHSERVER_SELECTOR_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace walwatch {

// `text` with each control character (below 0x20, and 0x7f) written as
// \xHH, so that a message quoting it stays on one line.
std::string Printable(std::string_view text);

// `value` in double quotes as Go's %q shows ASCII: \" \\ \a \b \f \n \r \t
// \v, other control characters as \xHH; bytes above 0x7f are kept as they
// are.
std::string Quoted(std::string_view value);

// `parts` joined with `sep` between them.
std::string Join(const std::vector<std::string>& parts, std::string_view sep);

// strconv.ParseInt(s, 10, 64): an optional sign, then decimal digits, in
// the range of int64_t. Sets *out and returns true, or returns false. Does
// not allocate (LabelSelector::Matches calls it).
bool ParseInt64(std::string_view s, int64_t* out);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_SELECTOR_TEXT_H_
