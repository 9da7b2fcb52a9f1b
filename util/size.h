// Parsing and printing byte sizes: "512M", "200G", "4096", "1.5G".
// Suffixes are binary (K = 1024) and case-insensitive; an optional trailing
// "B" or "iB" is accepted ("4MiB", "4MB").
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace stoker {

// Fails with EINVAL and a message naming the text for anything unparsable,
// negative, or overflowing 64 bits.
Result<uint64_t> ParseSize(const std::string& text);

// "1.5 GiB", "512 B": for people, not for parsing back.
std::string FormatSize(uint64_t bytes);

}  // namespace stoker
