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
// mountpoint: "mountpoint '/mnt/x' is not empty".
Result<std::string> PrepareMountpoint(const std::string& mountpoint);

// Refuses a mountpoint inside the origin directory (the mount would contain
// itself) or the cache directory, and an origin or cache directory inside the
// mountpoint (the daemon would read it through itself, or it would be
// hidden). Purely by path (symlinks of what exists resolved); an origin URL
// (s3://, http://) is not checked.
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
