// Timestamps as HTTP servers and object stores write them, to seconds since
// the epoch (UTC). Remote origins keep whole seconds only: S3's listing says
// "2026-12-03T12:00:00.000Z" where its HEAD says "Thu, 03 Dec 2026 12:00:00
// GMT", and both must give the same identity.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace stoker {

// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), also without the weekday.
std::optional<int64_t> ParseHttpDate(std::string_view s);

// ISO 8601 UTC as S3 lists it: "2026-12-03T12:00:00Z", with optional
// fractional seconds (dropped).
std::optional<int64_t> ParseIso8601(std::string_view s);

// nginx's HTML autoindex: "03-Dec-2026 12:00" (minutes; taken as UTC).
std::optional<int64_t> ParseAutoindexDate(std::string_view s);

}  // namespace stoker
