// Mount helpers for the CLI: where is the stoker mount above a path, is a
// directory a FUSE mount (and is that mount stale), how to take one down, and
// how to read the daemon's stats.json.
//
// A stoker mount is recognised by name: its root answers a lookup of
// ROOT/.stoker/stats.json (the file need not be listed by readdir). A stale
// mount is one whose daemon is gone: the kernel still lists it in
// /proc/self/mountinfo but every access fails with ENOTCONN.
//
// Thread-safety: pure functions, or functions that only touch the file system
// and child processes; none keeps state.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace stoker {

// The control directory and stats file below a mount root.
inline constexpr const char* kControlDir = ".stoker";
inline constexpr const char* kStatsFile = ".stoker/stats.json";

// One line of /proc/self/mountinfo, with octal escapes (\040 ...) decoded.
struct MountInfoEntry {
  std::string mount_point;
  std::string fstype;  // "fuse", "fuse.stoker", "ext4", ...
  std::string source;
};

// Parses the text of /proc/self/mountinfo; skips malformed lines.
std::vector<MountInfoEntry> ParseMountInfo(const std::string& text);

// True for the fstypes of FUSE mounts: "fuse", "fuseblk", "fuse.<subtype>".
bool IsFuseFsType(const std::string& fstype);

// The entry mounted exactly at abs_path (the last one, which is what a path
// lookup sees), or nullopt. abs_path must be absolute and normalised.
std::optional<MountInfoEntry> FindMountAt(const std::vector<MountInfoEntry>& mounts,
                                          const std::string& abs_path);

// True if abs_path is the root of a FUSE mount whose daemon is gone. Asks
// statfs, which the kernel never answers from its caches (stat of the root
// may still succeed from the attribute cache after the daemon died).
bool IsDeadFuseMount(const std::string& abs_path);

// Reads and parses /proc/self/mountinfo.
Result<std::vector<MountInfoEntry>> ReadMountInfo();

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

// Unmounts the FUSE mount at abs_path: umount2 when running as root (lazy =
// MNT_DETACH), else `fusermount3 -u [-z]`. EBUSY when files are still open
// and lazy is false.
Status UnmountFuse(const std::string& abs_path, bool lazy);

// True while pid names a process that has not exited (zombies count as
// exited: their index is already closed).
bool ProcessAlive(pid_t pid);

// Polls until pid has exited or timeout_ms passed. Returns true if it exited.
bool WaitForProcessExit(pid_t pid, int timeout_ms);

// Whether fusermount3 is on PATH (non-root unmounts need it).
bool HaveFusermount3();

}  // namespace stoker
