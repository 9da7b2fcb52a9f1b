// The kernel's table of mounts and taking a FUSE mount down: one home for
// what the daemon (fs/mount.cc, fs/mountpoint.cc) and the CLI (stoker
// unmount, stat, warm) need to know about mounts.
//
// A stale mount is one whose daemon is gone: the kernel still lists it in
// /proc/self/mountinfo but every access fails with ENOTCONN.
//
// Thread-safety: plain functions that only read /proc or run fusermount3;
// none keeps state.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace stoker {

// One line of /proc/self/mountinfo, with octal escapes (\040 ...) decoded.
struct MountInfoEntry {
  std::string mount_point;
  std::string fstype;  // "fuse", "fuse.stoker", "ext4", ...
  std::string source;
  dev_t dev = 0;     // the mount's st_dev (field 3, MAJ:MIN)
  std::string root;  // the directory of its file system it shows (field 4; "/" for all of it)
};

// Parses the text of /proc/self/mountinfo; skips malformed lines.
std::vector<MountInfoEntry> ParseMountInfo(const std::string& text);

// Reads and parses /proc/self/mountinfo.
Result<std::vector<MountInfoEntry>> ReadMountInfo();

// The mount abs_path (resolved) lies in: the one at the longest mount point
// above it, the last mounted where several are at one place.
std::optional<MountInfoEntry> MountContaining(const std::vector<MountInfoEntry>& mounts,
                                              const std::string& abs_path);

// True for the fstypes of FUSE mounts: "fuse", "fuseblk", "fuse.<subtype>".
bool IsFuseFsType(const std::string& fstype);

// The entry mounted exactly at abs_path (the last one, which is what a path
// lookup sees), or nullopt. abs_path must be absolute and normalised.
std::optional<MountInfoEntry> FindMountAt(const std::vector<MountInfoEntry>& mounts,
                                          const std::string& abs_path);

// The origin of a stoker mount as its source shows it (the fsname
// "stoker:ORIGIN", fs/fuse_session.h); nullopt for any other mount.
std::optional<std::string> StokerMountOrigin(const MountInfoEntry& mount);

// True if abs_path is the root of a FUSE mount whose daemon is gone. Asks
// statfs, which the kernel never answers from its caches (stat of the root
// may still succeed from the attribute cache after the daemon died).
bool IsDeadFuseMount(const std::string& abs_path);

// Unmounts the FUSE mount at abs_path: umount2 when running as root (lazy =
// MNT_DETACH), else (or where umount2 is refused with EPERM) `fusermount3 -u
// [-z]`. EBUSY when files are still open and lazy is false.
Status UnmountFuse(const std::string& abs_path, bool lazy);

// Whether fusermount3 is on PATH (non-root unmounts need it).
bool HaveFusermount3();

}  // namespace stoker
