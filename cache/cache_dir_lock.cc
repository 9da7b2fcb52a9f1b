#include "cache/cache_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "util/files.h"

namespace stoker {
namespace {

// "stoker pid 42 (the mount at /mnt)" from what the holder wrote in the
// lock file; "another stoker process" where it says nothing usable (it may
// be writing it right now).
std::string HolderOf(int fd) {
  char buf[4096];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "another stoker process";
  const std::string text(buf, static_cast<size_t>(n));
  const size_t eol = text.find('\n');
  const std::string pid = text.substr(0, eol);
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) {
    return "another stoker process";
  }
  std::string out = "stoker pid " + pid;
  if (eol == std::string::npos) return out;
  std::string mountpoint = text.substr(eol + 1);
  if (const size_t end = mountpoint.find('\n'); end != std::string::npos) mountpoint.resize(end);
  if (!mountpoint.empty()) out += " (the mount at " + mountpoint + ")";
  return out;
}

}  // namespace

Result<std::unique_ptr<CacheDirLock>> CacheDirLock::Acquire(const std::string& dir, bool create,
                                                            const CacheDirHolder& holder) {
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
    const int e = errno;
    const std::string who = e == EWOULDBLOCK ? HolderOf(fd) : "";
    ::close(fd);
    if (e == EWOULDBLOCK) return Status::Busy("cache dir " + dir + " is in use by " + who);
    return Status::FromErrno(e, "cannot lock cache dir '" + dir + "'");
  }
  // For people, and the next one to try: who holds it. Written before the
  // old text is cut, so that the file never reads empty.
  const std::string text =
      std::to_string(holder.pid != 0 ? holder.pid : ::getpid()) + "\n" + holder.mountpoint + "\n";
  if (::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size())) {
    (void)!::ftruncate(fd, static_cast<off_t>(text.size()));
  }
  return std::unique_ptr<CacheDirLock>(new CacheDirLock(dir, fd));
}

CacheDirLock::~CacheDirLock() { ::close(fd_); }

}  // namespace stoker
