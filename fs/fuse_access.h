// Whether this process can make a FUSE mount at all, decided before libfuse
// tries, so that a container without /dev/fuse or without CAP_SYS_ADMIN gets
// one line that says what to add instead of libfuse's fallback errors
// ("fuse: device not found", "fusermount3: mount failed: Operation not
// permitted").
//
// How a mount is made (libfuse 3.14): libfuse opens /dev/fuse (a failure
// there is final, no fallback) and, with CAP_SYS_ADMIN, calls mount(2)
// itself. Without it, mount(2) fails with EPERM and libfuse runs the
// setuid-root fusermount3 to mount as root; that needs fusermount3 on PATH,
// CAP_SYS_ADMIN in the capability bounding set (a setuid exec gains only what
// the bounding set keeps) and no no_new_privs (which disables setuid).
//
// Thread-safety: plain functions; ProbeFuseAccess only reads process state.
#pragma once

#include <sys/types.h>

#include <string>

#include "util/status.h"

namespace stoker {

// What decides it, read from the system by ProbeFuseAccess.
struct FuseAccess {
  bool root = false;                // effective uid 0
  int device_errno = 0;             // of stat("/dev/fuse"); 0 if it exists
  bool device_is_char = false;      // /dev/fuse is a character device
  dev_t device_rdev = 0;            // its device number (10:229 for FUSE)
  int open_errno = 0;               // of open("/dev/fuse", O_RDWR); 0 if it opened
  bool cap_sys_admin = false;       // CAP_SYS_ADMIN in the effective set
  bool bounding_sys_admin = false;  // CAP_SYS_ADMIN in the bounding set
  bool no_new_privs = false;        // prctl(PR_GET_NO_NEW_PRIVS)
  std::string fusermount3;          // its path on PATH, "" if none
};

FuseAccess ProbeFuseAccess();

// OK if a mount can be tried; else an error whose message is one line naming
// what is missing and how to give it (docker run / Kubernetes flags).
Status CheckFuseAccess(const FuseAccess& access);

// The first executable fusermount3 on PATH (default /usr/bin:/bin), or "".
std::string FindFusermount3();

}  // namespace stoker
