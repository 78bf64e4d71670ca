// The syntaxes of walwatch's flag values (watchserver/config.h), read and
// written back: booleans, sizes, file modes, durations (read by
// ParseDuration, cdc/base/text.h), slot names and id lists (read by
// ParseIdList, watchserver/peer_credentials.h).
//
// Each Parse* returns true and sets *value for text it accepts, and false
// for anything else. Each Format* writes a value in the form its parser
// reads back to the same value; --help and ConfigToJson show values so.
//
// Thread safety: pure functions of their arguments; any thread.
#ifndef WALWATCH_WATCHSERVER_CONFIG_VALUES_H_
#define WALWATCH_WATCHSERVER_CONFIG_VALUES_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace walwatch {

// "true" or "1", "false" or "0".
bool ParseBool(std::string_view text, bool* value);

// "0s" for zero, else the units h, m, s, ms, largest first, each at most
// once: "1h30m", "500ms".
std::string FormatDuration(std::chrono::milliseconds d);

// Plain bytes, or a number with a suffix Ki Mi Gi Ti (powers of 1024) or
// k K M G T (powers of 1000): "256Mi", "100M". False on overflow.
bool ParseSize(std::string_view text, uint64_t* value);
// The largest binary unit that divides `bytes` ("256Mi"), else the largest
// decimal one ("100M"), else plain bytes.
std::string FormatSize(uint64_t bytes);

// Octal permission bits, at most 07777, with or without a leading 0.
bool ParseFileMode(std::string_view text, mode_t* value);
// Four octal digits: "0660".
std::string FormatFileMode(mode_t mode);

// 1 to 63 characters from a-z, 0-9 and _, as PostgreSQL allows in the name
// of a replication slot.
bool IsValidSlotName(std::string_view text);
// A valid slot name made from any text, for --slot-from: lower-cased, other
// characters become _, and a name over 63 bytes is cut to 54 plus _ and a
// hash of the whole text.
std::string SlotNameFrom(std::string_view text);

// Ids joined with ',', as ParseIdList reads them; "" for none.
std::string JoinIds(const std::vector<uint32_t>& ids);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_CONFIG_VALUES_H_
