// Mountpoint checks and kernel knobs around a FUSE mount, kept apart from
// RunMount's lifecycle.
//
// Thread-safety: plain functions; each touches only the path or device given.
#pragma once

#include <sys/types.h>

#include <string>

#include "util/status.h"

namespace stoker {

// Makes mountpoint ready to mount on and returns its absolute path. It must
// exist, be a directory and be empty. A stale FUSE mount there (stat fails with
// ENOTCONN: its daemon died) is detached first (umount2 MNT_DETACH, or
// `fusermount3 -u -z` without the privilege). Errors are one line naming the
// mountpoint: "mountpoint '/mnt/x' is not empty"; EBUSY "mountpoint '/mnt/x'
// is already a stoker mount of '/data' (pid 42); unmount it first" where a
// live stoker mount is there (the pid from its stats.json: its supervisor's,
// which outlives a daemon crash, else its daemon's).
Result<std::string> PrepareMountpoint(const std::string& mountpoint);

// Refuses (EINVAL, one line: "cache dir 'C' is inside the origin 'O'", or
// "is the origin" where they are one) a mountpoint equal to or inside the
// origin (the mount would contain itself) or the cache directory, an origin
// inside the mountpoint (the daemon would read it through itself), and a
// cache directory equal to or inside the origin (the cache would write into
// what it serves) or the mountpoint (hidden by the mount). Compared by path
// and by device and inode up the ancestors of each inner path (for one not
// made yet, of the deepest part that exists), so that neither a symlink nor
// a bind mount of the outer directory hides the nesting, and by where each
// lies in its file system (its mount's root in /proc/self/mountinfo), so that
// a bind mount elsewhere of a directory below the outer does not either. An
// origin URL (s3://, http://) has no local path: only the mountpoint and
// cache dir are checked.
// Reads only: creates nothing.
Status CheckNesting(const std::string& origin, const std::string& mountpoint,
                    const std::string& cache_dir);

// The device (st_dev) of the newest mount at mountpoint, from
// /proc/self/mountinfo: never touches the mount itself. ENOENT if nothing
// is mounted there.
Result<dev_t> DevOfMount(const std::string& mountpoint);

// Detaches whatever is mounted at mountpoint (umount2 MNT_DETACH, or
// `fusermount3 -u -z` without the privilege). False if neither worked.
bool DetachMount(const std::string& mountpoint);

// Raises the read-ahead of the FUSE mount whose st_dev is dev to kb KiB
// (/sys/class/bdi/MAJ:MIN/read_ahead_kb). The kernel caps what FUSE init may
// ask for at its default (128 KiB); this lifts it. Best effort: false on
// failure.
bool RaiseReadahead(dev_t dev, unsigned kb);

// Aborts the FUSE connection of the mount whose st_dev is dev
// (/sys/fs/fuse/connections/MINOR/abort): every pending request fails. Only
// for shutdown, when nothing will answer them anyway. Best effort.
bool AbortFuseConnection(dev_t dev);

}  // namespace stoker
