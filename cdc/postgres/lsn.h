// PostgreSQL log sequence numbers (LSNs) and the resourceVersions built on
// them. An LSN is a uint64 byte position in the WAL, written by PostgreSQL as
// two hex halves "XXXXXXXX/YYYYYYYY". walwatch's resourceVersion is that same
// uint64 in decimal (watchserver/PROTOCOL.md).
#ifndef WALWATCH_CDC_POSTGRES_LSN_H_
#define WALWATCH_CDC_POSTGRES_LSN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walwatch {

// Parses "16/B374D848". nullopt for anything else (empty halves, non-hex,
// halves wider than 32 bits, trailing bytes).
std::optional<uint64_t> ParseLsn(std::string_view text);
std::string FormatLsn(uint64_t lsn);

// Parses a resourceVersion: a decimal uint64 with no sign, no spaces and no
// leading zeros beyond "0" itself. nullopt for anything else, including
// overflow.
std::optional<uint64_t> ParseResourceVersion(std::string_view text);

}  // namespace walwatch

#endif  // WALWATCH_CDC_POSTGRES_LSN_H_
