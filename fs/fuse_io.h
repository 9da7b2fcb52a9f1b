// The I/O libfuse does on /dev/fuse, given to it as a fuse_custom_io: plain
// read, writev and splice, except that the reply to the kernel's INIT is
// changed on its way out to ask for FUSE passthrough and shared mmaps of
// FOPEN_DIRECT_IO opens (flags2, max stack depth; no writeback cache), which libfuse 3.14 cannot
// express: it builds that reply from a 32-bit capability mask. The kernel sends nothing else before
// INIT is answered, so the first reply of a session is INIT's (a restarted daemon's replayed INIT
// included, whose reply the kernel refuses as it refused libfuse's own before). Protocol facts:
// fs/fuse_kernel_ext.h.
//
// Thread-safety: the hooks run on libfuse's worker threads; the state they
// share is atomic.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse3/fuse_lowlevel.h>

#include "util/status.h"

namespace stoker {

// Makes fd the session's /dev/fuse descriptor (instead of
// fuse_session_mount("/dev/fd/N")), with the hooks above. Splice replies
// keep working (libfuse turns splicing off for a custom io without them).
Status UseFuseIoWithPassthrough(fuse_session* se, int fd);

// Whether this process's INIT reply asked for passthrough (for stats).
bool InitAskedForPassthrough();

}  // namespace stoker
