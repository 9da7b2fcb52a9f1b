// Paths as fs/ hands them to the cache and the origin: relative to the origin
// root, '/'-separated, no leading '/', "" for the root (see cache/origin/origin.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "util/path.h"
#include "util/status.h"

namespace stoker {

// True if name can be one component of an origin path.
bool IsValidComponent(std::string_view name);

// Turns what a user or a client names ("train/x", "/train//./x/",
// "/mnt/data/train/x" for mountpoint "/mnt/data") into an origin path.
// Absolute paths must lie under mountpoint. ".." is refused (EINVAL) rather
// than resolved: a path that climbs is never what a warm request meant.
Result<std::string> NormalizeClientPath(std::string_view path, std::string_view mountpoint);

}  // namespace stoker
