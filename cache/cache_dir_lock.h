// CacheDirLock: one stoker process per cache directory. Holds an exclusive
// flock on CACHE_DIR/lock for its lifetime; the kernel drops it when the
// process dies, so a kill -9 never leaves a stale lock behind.
//
// Acquire also checks the directory itself: it must be a directory owned by
// the caller and not writable by group or others (anyone who can write it
// can make the daemon serve their bytes).
//
// The lock file names its holder for the next one that tries: the pid on its
// first line, the mountpoint (if any) on its second.
//
// Errors: EBUSY "cache dir X is in use by stoker pid N (the mount at M)", as
// far as the lock file names them; EPERM for an unsafe mode or owner; ENOENT
// when missing and !create; the mkdir/open errno otherwise.
// Thread-safety: not shared between threads; one per process and directory.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "util/status.h"

namespace stoker {

// Who holds a cache dir, as its lock file tells the next one to try.
struct CacheDirHolder {
  // The process to name: the one that lives as long as the holder's use of
  // the dir (a mount's supervisor, whose daemon may be restarted). 0: this
  // process.
  pid_t pid = 0;
  std::string mountpoint;  // "": not a mount (fsck)
};

class CacheDirLock {
 public:
  // create: make dir (and missing parents; the leaf 0700) if it is missing.
  static Result<std::unique_ptr<CacheDirLock>> Acquire(const std::string& dir, bool create,
                                                       const CacheDirHolder& holder = {});
  ~CacheDirLock();
  CacheDirLock(const CacheDirLock&) = delete;
  CacheDirLock& operator=(const CacheDirLock&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  CacheDirLock(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  const std::string dir_;
  const int fd_;
};

}  // namespace stoker
