#include "cache/cache_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "util/files.h"

namespace stoker {

Result<std::unique_ptr<CacheDirLock>> CacheDirLock::Acquire(const std::string& dir, bool create) {
  if (dir.empty()) return Status::Invalid("cache dir not given");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT || !create) return Status::FromErrno("cache dir '" + dir + "'");
    // mkdir -p: the directories above it 0755 as mkdir -p makes them, the cache dir 0700.
    STOKER_RETURN_IF_ERROR(MakeDirs(dir, 0700, 0755));
    if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno("cache dir '" + dir + "'");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error(ENOTDIR, "cache dir '" + dir + "' is not a directory");
  }
  if (st.st_uid != ::geteuid()) {
    return Status::Error(EPERM, "cache dir '" + dir + "' is owned by uid " +
                                    std::to_string(st.st_uid) + ", not by this user");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::Error(EPERM, "cache dir '" + dir + "' is writable by group or others (mode " +
                                    mode + "); chmod 700 it");
  }
  std::string path = dir + "/lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::FromErrno("cannot open cache lock '" + path + "'");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK) {
      return Status::Busy("cache dir " + dir + " is in use by another stoker process");
    }
    return Status::FromErrno(e, "cannot lock cache dir '" + dir + "'");
  }
  // For people: which process holds it.
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  return std::unique_ptr<CacheDirLock>(new CacheDirLock(dir, fd));
}

CacheDirLock::~CacheDirLock() { ::close(fd_); }

}  // namespace stoker
