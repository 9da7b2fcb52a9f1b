// The CLI's view of a mount: where the stoker mount above a path is, how to
// read its daemon's stats.json, and whether a daemon process still lives.
// The kernel's mount table and unmounting are fs/kernel_mounts.h.
//
// A stoker mount is recognised by name: its root answers a lookup of
// ROOT/.stoker/stats.json (the file need not be listed by readdir).
//
// Thread-safety: pure functions, or functions that only touch the file system;
// none keeps state.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fs/kernel_mounts.h"
#include "util/status.h"

namespace stoker {

// The control directory and stats file below a mount root.
inline constexpr const char* kControlDir = ".stoker";
inline constexpr const char* kStatsFile = ".stoker/stats.json";

// Absolute, lexically normalised form of path. Resolves symlinks in the parent
// directory but never touches the last component, so it works on a stale
// mountpoint (where stat fails with ENOTCONN).
Result<std::string> AbsolutePathNoFollow(const std::string& path);

// "" if path == root, else the part of path below root without a leading '/'.
// REQUIRES: both absolute and normalised, path at or below root.
std::string RelativeToRoot(const std::string& root, const std::string& path);

// The root of the stoker mount at or above path: the nearest directory D
// such that D/.stoker/stats.json exists. With require_fuse, D must also be a
// FUSE mount point, so that a plain directory that happens to contain
// .stoker/stats.json is not taken for a mount. Errors name the path:
// ENOTCONN for a stale mount, ENOENT "... is not under a stoker mount".
Result<std::string> FindMountRoot(const std::string& path, bool require_fuse = true);

// Reads ROOT/.stoker/stats.json as text and as parsed JSON.
struct StatsFile {
  std::string text;
  nlohmann::json json;
};
Result<StatsFile> ReadStatsFile(const std::string& root);

// True while pid names a process that has not exited: while any of its
// threads has not (a zombie whose threads are all gone has closed its files,
// the cache's index among them; a zombie main thread whose other threads
// still run or exit has not).
bool ProcessAlive(pid_t pid);

// Polls until pid has exited or timeout_ms passed. Returns true if it exited.
bool WaitForProcessExit(pid_t pid, int timeout_ms);

}  // namespace stoker
