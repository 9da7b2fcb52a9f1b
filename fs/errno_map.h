// ErrnoFor: the one table that turns a Status into the errno a FUSE reply
// carries. Everything in fs/ replies with ErrnoFor(status), never with a raw
// status code, so that what a reader sees is decided in one place.
//
// Why a table and not the code as is: some codes mean something else to the
// kernel than to us. ENOSYS from open or getxattr makes the kernel stop
// sending that operation for the life of the mount; ENOTCONN reads to a user
// as a dead mount ("Transport endpoint is not connected") when it only means
// the origin is unreachable; EBADMSG (a corrupt chunk) must never reach a
// reader, the cache re-fetches instead, and if it leaks it is an I/O error.
//
// Thread-safety: pure functions.
#pragma once

#include "util/status.h"

namespace stoker {

// A positive errno for a non-OK status; 0 for OK.
int ErrnoFor(const Status& status);

// For getxattr/listxattr: as ErrnoFor, but "this origin has no extended
// attributes" (ENOTSUP, EOPNOTSUPP, ENOSYS) becomes ENOTSUP, which the kernel
// reports per call instead of disabling xattrs for the whole mount.
int XattrErrnoFor(const Status& status);

}  // namespace stoker
