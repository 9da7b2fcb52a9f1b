// mount(8) and umount(8) helpers, so that stoker mounts from /etc/fstab and
// `mount -t fuse.stoker`:
//   mount -t fuse.stoker ORIGIN DIR -o cache=/ssd/c,cache_size=200G,allow_other
// runs `mount.fuse.stoker ORIGIN DIR -o OPTS` (util-linux looks for
// /sbin/mount.<type>; the binary installed under that name), or, through
// fuse3's mount.fuse3 where that helper is missing, `stoker ORIGIN DIR -o
// OPTS`; `umount DIR` runs `umount.fuse.stoker DIR`. These map such command
// lines to stoker's own: each -o key is a `stoker mount` option written
// with _ for - (cache=DIR is --cache DIR; a flag such as no_supervise takes
// no value), FUSE and VFS options pass through as -o, and the options of
// fstab's own (noauto, nofail, _netdev, x-systemd.*, ...) are left out.
// A view's own options are separated by ';' (',' separates mount options).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace stoker {

// The arguments of `stoker mount` for a mount helper's arguments (ORIGIN DIR
// and options, as mount(8) passes them: -o OPTS, -n, -s, -v, -f).
Result<std::vector<std::string>> MountHelperArgs(const std::vector<std::string>& args);

// What a mount option is, by its -o key (words joined by _).
enum class MountOptionKind {
  kValued,   // a `stoker mount` option that takes a value: cache=DIR is --cache DIR
  kFlag,     // a `stoker mount` flag: no_supervise is --no-supervise
  kPassed,   // a FUSE or VFS option, passed on as -o (allow_other)
  kIgnored,  // fstab's and mount(8)'s own (noauto, _netdev, x-systemd.*)
  kUnknown,
};
MountOptionKind MountOptionKindOf(std::string_view key);

// The arguments of `stoker unmount` for umount(8)'s helper arguments (DIR,
// and -n, -l for lazy, -f, -v, -r, -t TYPE).
Result<std::vector<std::string>> UnmountHelperArgs(const std::vector<std::string>& args);

}  // namespace stoker
