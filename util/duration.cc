#include "util/duration.h"

namespace stoker {

Result<uint64_t> ParseDuration(const std::string& text) {
  auto bad = [&](const char* why) {
    return Status::Invalid("invalid duration '" + text + "': " + why);
  };
  size_t digits = text.find_first_not_of("0123456789");
  if (digits == std::string::npos) digits = text.size();
  if (digits == 0) return bad("expected seconds, or a number with s, m, h or d (90s, 1m, 2h)");
  uint64_t unit = 1;
  const std::string suffix = text.substr(digits);
  if (suffix == "m") {
    unit = 60;
  } else if (suffix == "h") {
    unit = 3600;
  } else if (suffix == "d") {
    unit = 86400;
  } else if (!suffix.empty() && suffix != "s") {
    return bad("unknown unit (use s, m, h or d)");
  }
  uint64_t v = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return bad("too large");
    v = v * 10 + d;
  }
  if (v > UINT64_MAX / unit) return bad("too large");
  return v * unit;
}

}  // namespace stoker
