// Parsing durations given in whole seconds: "90", "90s", "1m", "2h", "1d".
// A plain number is seconds, as every seconds-valued flag took before units;
// one unit suffix (s, m, h, d; lower case) multiplies it.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace stoker {

// A number of seconds that means "never again" (`--revalidate never`):
// whoever takes a seconds value that may be it must test for it, never add
// to it or scale it.
inline constexpr uint64_t kNeverSeconds = UINT64_MAX;

// Seconds; EINVAL with a message naming the text for anything else: empty,
// negative, a fraction, an unknown or repeated unit, or more seconds than
// 64 bits hold.
Result<uint64_t> ParseDuration(const std::string& text);

}  // namespace stoker
