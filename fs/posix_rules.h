// The answers of a read-only file system that do not depend on the caller:
// which opens write, and what access(2) says where no modes are checked.
// Checked call by call against a read-only tmpfs holding the same tree
// (tests/integration/test_readonly.py).
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace stoker::fuse_ops {

// An open that would write: for writing, or truncating or creating. Not
// O_APPEND alone, which Linux allows on a read-only file (it only places
// writes, and none can be made).
inline bool WantsWrite(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_CREAT)) != 0;
}

// access(2) on a file of the given mode without mode checks (FUSE without
// default_permissions): writing a file, directory or symlink is EROFS; a
// FIFO, socket or device can still be written; executing anything but a
// directory needs one of its x bits, whoever asks (root included).
inline int AccessErrno(mode_t mode, int mask) {
  if ((mask & W_OK) && (S_ISREG(mode) || S_ISDIR(mode) || S_ISLNK(mode))) return EROFS;
  if ((mask & X_OK) && !S_ISDIR(mode) && (mode & (S_IXUSR | S_IXGRP | S_IXOTH)) == 0) return EACCES;
  return 0;
}

}  // namespace stoker::fuse_ops
