// Fuzz target: the position parsers — resourceVersions, LSNs and
// PostgreSQL snapshots (cdc/postgres/lsn.h, cdc/model/state_source.h,
// cdc/postgres/pg_handoff.h, watchserver/watch_request.h).
//
// The input is one text, given to every parser. Each parser is checked
// against an independent statement of its grammar, and, where it accepts,
// for a round trip through the matching formatter:
//  * ParseResourceVersion: accepts exactly 0|[1-9][0-9]* up to 2^64-1, and
//    std::to_string gives the text back; a watch's resourceVersion= query
//    parameter accepts and rejects the same texts.
//  * ParseLsn and ParsePgLsn: accept exactly [0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}
//    and agree; ParseLsn(FormatLsn(x)) == x.
//  * ParseHandoffSnapshot: the result is well-formed (xmin <= xmax, xip
//    sorted and inside [xmin, xmax)), prints to a text that parses to the
//    same snapshot, and SnapshotSees() agrees with the definition; a handoff
//    request accepts and rejects the same snapshots.
// The input's first 8 bytes, read as a number, also go round both
// formatters.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "cdc/model/state_source.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_handoff.h"
#include "tests/fuzz/fuzz_check.h"
#include "watchserver/watch_request.h"

namespace {

using walwatch::HandoffSnapshot;
using walwatch::ParseHandoffSnapshot;
using walwatch::SnapshotSees;
using walwatch::fuzz::Escaped;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// 0|[1-9][0-9]* with a value that fits in 64 bits.
bool IsCanonicalU64(std::string_view s) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  if (s.size() > 1 && s[0] == '0') return false;
  return s.size() < 20 || s <= "18446744073709551615";
}

// [0-9]+ with a value that fits in 64 bits (leading zeros allowed).
bool IsDecimalU64(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  size_t zeros = 0;
  while (zeros + 1 < s.size() && s[zeros] == '0') ++zeros;
  return IsCanonicalU64(s.substr(zeros));
}

bool IsLsnText(std::string_view s) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view hi = s.substr(0, slash), lo = s.substr(slash + 1);
  auto half = [](std::string_view h) {
    if (h.empty() || h.size() > 8) return false;
    for (char c : h) {
      if (!IsHex(c)) return false;
    }
    return true;
  };
  return half(hi) && half(lo);
}

std::string FormatSnapshot(const HandoffSnapshot& s) {
  std::string out = std::to_string(s.xmin) + ":" + std::to_string(s.xmax) + ":";
  for (size_t i = 0; i < s.xip.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(s.xip[i]);
  }
  return out;
}

void FuzzResourceVersion(std::string_view text) {
  std::optional<uint64_t> rv = walwatch::ParseResourceVersion(text);
  FUZZ_CHECK(rv.has_value() == IsCanonicalU64(text), Escaped(text));
  if (rv) FUZZ_CHECK(std::to_string(*rv) == text, Escaped(text));

  // The query parameter, where the text survives percent-decoding as it is
  // ('+' becomes ' ', which neither accepts) and an empty value means unset.
  if (text.empty() || text.find_first_of("&%#") != std::string_view::npos) {
    return;
  }
  std::string target = "/api/v1/pods?watch=1&resourceVersion=";
  target.append(text);
  walwatch::ParsedRequest parsed = walwatch::ParseRequest("GET", target);
  if (rv) {
    FUZZ_CHECK(!parsed.error, Escaped(target) + ": " + parsed.error->message);
    FUZZ_CHECK(parsed.watch.resource_version == rv, Escaped(target));
  } else {
    FUZZ_CHECK(parsed.error && parsed.error->code == 400, Escaped(target));
  }
}

void FuzzLsn(std::string_view text) {
  std::optional<uint64_t> lsn = walwatch::ParseLsn(text);
  FUZZ_CHECK(lsn.has_value() == IsLsnText(text), Escaped(text));
  uint64_t pg_lsn = 0;
  bool pg_ok = walwatch::ParsePgLsn(text, &pg_lsn);
  FUZZ_CHECK(pg_ok == lsn.has_value(), Escaped(text));
  if (!lsn) return;
  FUZZ_CHECK(pg_lsn == *lsn, Escaped(text));
  std::string formatted = walwatch::FormatLsn(*lsn);
  FUZZ_CHECK(walwatch::ParseLsn(formatted) == lsn,
             Escaped(text) + " -> " + formatted);
  // The formatted text is the input without leading zeros, in upper case.
  auto canonical_half = [](std::string_view h) {
    while (h.size() > 1 && h[0] == '0') h.remove_prefix(1);
    std::string out(h);
    for (char& c : out) {
      if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
    }
    return out;
  };
  size_t slash = text.find('/');
  std::string canonical = canonical_half(text.substr(0, slash)) + "/" +
                          canonical_half(text.substr(slash + 1));
  FUZZ_CHECK(formatted == canonical, Escaped(text) + " -> " + formatted);
}

void FuzzSnapshot(std::string_view text) {
  HandoffSnapshot snapshot;
  snapshot.xmin = 7;  // to see that a failed parse leaves *out alone
  bool ok = ParseHandoffSnapshot(text, &snapshot);

  // The handoff request checks its snapshot with the same parser.
  if (!text.empty() && text.find_first_of("&%#+") == std::string_view::npos) {
    std::string target = "/walwatch/v1/handoff?snapshot=";
    target.append(text);
    walwatch::ParsedRequest parsed = walwatch::ParseRequest("GET", target);
    FUZZ_CHECK(ok == !parsed.error, Escaped(target));
    if (ok) FUZZ_CHECK(parsed.handoff.snapshot == text, Escaped(target));
  }

  if (!ok) {
    FUZZ_CHECK(snapshot.xmin == 7 && snapshot.xip.empty(), Escaped(text));
    return;
  }
  // The grammar: three colon-separated parts, decimal xids.
  size_t a = text.find(':');
  size_t b = text.find(':', a + 1);
  FUZZ_CHECK(a != std::string_view::npos && b != std::string_view::npos);
  FUZZ_CHECK(IsDecimalU64(text.substr(0, a)), Escaped(text));
  FUZZ_CHECK(IsDecimalU64(text.substr(a + 1, b - a - 1)), Escaped(text));

  FUZZ_CHECK(snapshot.xmin <= snapshot.xmax, Escaped(text));
  for (size_t i = 0; i < snapshot.xip.size(); ++i) {
    uint64_t x = snapshot.xip[i];
    FUZZ_CHECK(x >= snapshot.xmin && x < snapshot.xmax, Escaped(text));
    FUZZ_CHECK(i == 0 || snapshot.xip[i - 1] <= x, Escaped(text));
    FUZZ_CHECK(!SnapshotSees(snapshot, x), Escaped(text));
  }
  if (snapshot.xmin > 0) FUZZ_CHECK(SnapshotSees(snapshot, snapshot.xmin - 1));
  FUZZ_CHECK(!SnapshotSees(snapshot, snapshot.xmax), Escaped(text));
  if (snapshot.xip.empty() && snapshot.xmin < snapshot.xmax) {
    FUZZ_CHECK(SnapshotSees(snapshot, snapshot.xmin), Escaped(text));
  }

  std::string formatted = FormatSnapshot(snapshot);
  HandoffSnapshot again;
  FUZZ_CHECK(ParseHandoffSnapshot(formatted, &again),
             Escaped(text) + " -> " + formatted);
  FUZZ_CHECK(again.xmin == snapshot.xmin && again.xmax == snapshot.xmax &&
                 again.xip == snapshot.xip,
             Escaped(text) + " -> " + formatted);
}

void FuzzFormatters(const uint8_t* data, size_t size) {
  uint64_t x = 0;
  std::memcpy(&x, data, std::min<size_t>(size, sizeof(x)));
  FUZZ_CHECK(walwatch::ParseLsn(walwatch::FormatLsn(x)) == x,
             walwatch::FormatLsn(x));
  FUZZ_CHECK(walwatch::ParseResourceVersion(std::to_string(x)) == x,
             std::to_string(x));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  FuzzResourceVersion(text);
  FuzzLsn(text);
  FuzzSnapshot(text);
  FuzzFormatters(data, size);
  return 0;
}
