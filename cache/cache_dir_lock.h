// CacheDirLock: one stoker process per cache directory. Holds an exclusive
// flock on CACHE_DIR/lock for its lifetime; the kernel drops it when the
// process dies, so a kill -9 never leaves a stale lock behind.
//
// Acquire also checks the directory itself: it must be a directory owned by
// the caller and not writable by group or others (anyone who can write it
// can make the daemon serve their bytes).
//
// Errors: EBUSY "cache dir X is in use by another stoker process"; EPERM for
// an unsafe mode or owner; ENOENT when missing and !create; the mkdir/open
// errno otherwise.
// Thread-safety: not shared between threads; one per process and directory.
#pragma once

#include <memory>
#include <string>

#include "util/status.h"

namespace stoker {

class CacheDirLock {
 public:
  // create: make dir (and missing parents; the leaf 0700) if it is missing.
  static Result<std::unique_ptr<CacheDirLock>> Acquire(const std::string& dir, bool create);
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
