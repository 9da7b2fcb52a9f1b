#include "cache/local_origin.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cache/direct_io.h"
#include "util/log.h"

namespace stoker {
namespace {

constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

// Opens comp relative to dir without following it; a symlink gives ELOOP
// (O_PATH|O_DIRECTORY|O_NOFOLLOW on a symlink reports ENOTDIR instead).
int OpenNoFollow(int dir, const char* comp, int flags) {
  for (;;) {
    int fd = ::openat(dir, comp, flags | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) return fd;
    int e = errno;
    if (e == EINTR) continue;
    struct stat st;
    if ((e == ENOTDIR || e == ELOOP) && ::fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      e = ELOOP;
    }
    return -e;
  }
}

class LocalOriginFile final : public OriginFile {
 public:
  LocalOriginFile(int fd, uint64_t size, std::shared_ptr<IoBackend> io)
      : fd_(fd), size_(size), io_(std::move(io)), direct_(O_RDONLY) {}
  ~LocalOriginFile() override { ::close(fd_); }
  LocalOriginFile(const LocalOriginFile&) = delete;
  LocalOriginFile& operator=(const LocalOriginFile&) = delete;

  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
    if (off > static_cast<uint64_t>(INT64_MAX)) return Status::Invalid("read offset too large");
    return io_->Read(fd_, buf, len, static_cast<off_t>(off));
  }

  // The aligned part of what the file held at open goes direct, the rest
  // (the last partial block, or what the file grew by) buffered. A file that
  // shrank meanwhile reads short either way; the cache then finds the
  // identity changed and keeps nothing.
  Result<size_t> ReadAtAligned(void* buf, size_t len, uint64_t off) override {
    if (off > static_cast<uint64_t>(INT64_MAX)) return Status::Invalid("read offset too large");
    uint64_t head = off < size_ ? RoundDownToDirect(std::min<uint64_t>(len, size_ - off)) : 0;
    if (head < kMinDirectBytes || RoundDownToDirect(off) != off || !IsDirectAligned(buf)) {
      return ReadAt(buf, len, off);
    }
    int dfd = direct_.Get(fd_);
    if (dfd < 0) return ReadAt(buf, len, off);
    auto got = io_->Read(dfd, buf, head, static_cast<off_t>(off));
    if (!got.ok() && got.status().code() == EINVAL) {
      direct_.Disable();  // the file system takes O_DIRECT opens, not reads
      return ReadAt(buf, len, off);
    }
    if (!got.ok() || *got < head || head == len) return got;
    STOKER_ASSIGN_OR_RETURN(size_t tail,
                            ReadAt(static_cast<char*>(buf) + head, len - head, off + head));
    return head + tail;
  }

  Result<OriginIdentity> Identity() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::FromErrno("fstat '" + DescribeFdPath() + "'");
    return IdentityFromStat(st);
  }

 private:
  std::string DescribeFdPath() const {
    char link[64];
    std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd_);
    char target[PATH_MAX];
    ssize_t n = ::readlink(link, target, sizeof(target));
    return n > 0 ? std::string(target, static_cast<size_t>(n)) : "fd " + std::to_string(fd_);
  }

  const int fd_;
  const uint64_t size_;  // at open
  const std::shared_ptr<IoBackend> io_;
  DirectTwin direct_;
};

}  // namespace

Result<std::shared_ptr<LocalOrigin>> LocalOrigin::Create(const std::string& dir,
                                                         std::shared_ptr<IoBackend> io,
                                                         Options options) {
  STOKER_CHECK(io != nullptr, "LocalOrigin needs an I/O backend");
  const std::string what = "origin '" + dir + "'";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(what);
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, what + " is not a directory");
  int root = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return Status::FromErrno(what);

  // Readable now: list one entry (EACCES, or a dead network mount's EIO).
  int list = ::openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list < 0) {
    Status s = Status::FromErrno(what);
    ::close(root);
    return s;
  }
  DIR* d = ::fdopendir(list);
  STOKER_CHECK(d != nullptr, "fdopendir of a directory fd");
  errno = 0;
  if (::readdir(d) == nullptr && errno != 0) {
    Status s = Status::FromErrno(what);
    ::closedir(d);
    ::close(root);
    return s;
  }
  ::closedir(d);

  bool openat2 = options.use_openat2;
  if (openat2) {
    struct open_how how = {};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = kResolve;
    long fd = ::syscall(SYS_openat2, root, ".", &how, sizeof(how));
    if (fd >= 0) {
      ::close(static_cast<int>(fd));
    } else if (errno == ENOSYS || errno == EPERM || errno == EINVAL || errno == E2BIG) {
      LOG_INFO("openat2 unavailable ({}); {} resolves paths one component at a time",
               std::strerror(errno), what);
      openat2 = false;
    }
  }

  char* real = ::realpath(dir.c_str(), nullptr);
  std::string root_path = real != nullptr ? real : dir;
  std::free(real);
  return std::shared_ptr<LocalOrigin>(new LocalOrigin(root, root_path, std::move(io), openat2));
}

LocalOrigin::LocalOrigin(int root_fd, std::string root_path, std::shared_ptr<IoBackend> io,
                         bool openat2)
    : root_fd_(root_fd),
      root_path_(std::move(root_path)),
      io_(std::move(io)),
      use_openat2_(openat2) {}

LocalOrigin::~LocalOrigin() { ::close(root_fd_); }

Status LocalOrigin::Error(int code, const char* op, const std::string& path) const {
  return Status::FromErrno(
      code, std::string(op) + " '" + root_path_ + (path.empty() ? "" : "/" + path) + "'");
}

int LocalOrigin::OpenBeneath(const std::string& path, int flags) const {
  if (use_openat2_) {
    struct open_how how = {};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    how.resolve = kResolve;
    const char* p = path.empty() ? "." : path.c_str();
    // EAGAIN: the kernel saw a concurrent rename and could not prove the
    // lookup stayed beneath the root; it asks to be retried.
    for (int again = 0;; ++again) {
      long fd = ::syscall(SYS_openat2, root_fd_, p, &how, sizeof(how));
      if (fd >= 0) return static_cast<int>(fd);
      if (errno == EINTR || (errno == EAGAIN && again < 16)) continue;
      return -errno;
    }
  }
  if (path.empty()) return OpenNoFollow(root_fd_, ".", flags);
  int dir = root_fd_;
  size_t start = 0;
  for (;;) {
    size_t end = path.find('/', start);
    std::string comp = path.substr(start, end == std::string::npos ? end : end - start);
    bool last = end == std::string::npos;
    int fd = OpenNoFollow(dir, comp.c_str(), last ? flags : O_PATH | O_DIRECTORY);
    if (dir != root_fd_) ::close(dir);
    if (fd < 0 || last) return fd;
    dir = fd;
    start = end + 1;
  }
}

int LocalOrigin::WithParent(const std::string& path,
                            const std::function<int(int, const char*)>& fn) const {
  if (path.empty()) return fn(root_fd_, ".");
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return fn(root_fd_, path.c_str());
  int dir = OpenBeneath(path.substr(0, slash), O_PATH | O_DIRECTORY);
  if (dir < 0) return dir;
  int rc = fn(dir, path.c_str() + slash + 1);
  ::close(dir);
  return rc;
}

Result<struct stat> LocalOrigin::Stat(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  struct stat st;
  int rc = WithParent(path, [&](int dir, const char* name) {
    return ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
  });
  if (rc < 0) return Error(-rc, "stat", path);
  return st;
}

Status LocalOrigin::ReadDir(const std::string& path,
                            const std::function<bool(const OriginDirEntry&)>& fn) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  int fd = OpenBeneath(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Error(-fd, "readdir", path);
  std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(fd), ::closedir);
  STOKER_CHECK(d != nullptr, "fdopendir of a directory fd");
  OriginDirEntry entry;
  for (;;) {
    errno = 0;
    struct dirent* de = ::readdir(d.get());
    if (de == nullptr) {
      if (errno != 0) return Error(errno, "readdir", path);
      return Status::OK();
    }
    std::string_view name(de->d_name);
    if (name == "." || name == "..") continue;
    if (::fstatat(::dirfd(d.get()), de->d_name, &entry.st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed while we listed
      return Error(errno, "stat", path.empty() ? std::string(name) : path + "/" + de->d_name);
    }
    entry.name.assign(name);
    if (!fn(entry)) return Status::OK();
  }
}

Result<std::string> LocalOrigin::ReadLink(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  std::string target;
  int rc = WithParent(path, [&](int dir, const char* name) {
    std::string buf(256, '\0');
    for (;;) {
      ssize_t n = ::readlinkat(dir, name, buf.data(), buf.size());
      if (n < 0) return -errno;
      if (static_cast<size_t>(n) < buf.size()) {
        target.assign(buf.data(), static_cast<size_t>(n));
        return 0;
      }
      if (buf.size() >= (1u << 20)) return -ENAMETOOLONG;
      buf.resize(buf.size() * 2);
    }
  });
  if (rc < 0) return Error(-rc, "readlink", path);
  return target;
}

Result<std::unique_ptr<OriginFile>> LocalOrigin::Open(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  // O_NONBLOCK: a FIFO swapped in for a file must not block the open.
  int fd = OpenBeneath(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return Error(-fd, "open", path);
  struct stat st;
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (S_ISDIR(st.st_mode)) {
    err = EISDIR;
  } else if (!S_ISREG(st.st_mode)) {
    Status s = Status::Invalid("open '" + root_path_ + "/" + path + "': not a regular file");
    ::close(fd);
    return s;
  } else {
    // Blocking again: io_uring answers EAGAIN on a non-blocking fd where it
    // would otherwise wait for the disk.
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) err = errno;
  }
  if (err != 0) {
    ::close(fd);
    return Error(err, "open", path);
  }
  return std::unique_ptr<OriginFile>(
      std::make_unique<LocalOriginFile>(fd, static_cast<uint64_t>(st.st_size), io_));
}

// Xattrs cannot be read through an O_PATH fd (fgetxattr gives EBADF), and a
// path from the root would follow symlinks. So the parent directory is
// resolved safely and the leaf is named through its /proc/self/fd link with
// the l-variants, which do not follow a symlink leaf.
Result<std::string> LocalOrigin::GetXattr(const std::string& path, const std::string& name) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  if (name.empty() || name.find('\0') != std::string::npos) {
    return Status::Invalid("bad xattr name");
  }
  std::string value;
  int rc = WithParent(path, [&](int dir, const char* leaf) {
    std::string proc = "/proc/self/fd/" + std::to_string(dir) + "/" + leaf;
    for (;;) {
      ssize_t n = ::lgetxattr(proc.c_str(), name.c_str(), nullptr, 0);
      if (n < 0) return -errno;
      value.resize(static_cast<size_t>(n));
      if (n == 0) return 0;
      ssize_t m = ::lgetxattr(proc.c_str(), name.c_str(), value.data(), value.size());
      if (m >= 0) {
        value.resize(static_cast<size_t>(m));
        return 0;
      }
      if (errno != ERANGE) return -errno;  // ERANGE: it grew; ask again
    }
  });
  if (rc < 0) return Error(-rc, "getxattr", path);
  return value;
}

Result<std::vector<std::string>> LocalOrigin::ListXattr(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  std::string list;
  int rc = WithParent(path, [&](int dir, const char* leaf) {
    std::string proc = "/proc/self/fd/" + std::to_string(dir) + "/" + leaf;
    for (;;) {
      ssize_t n = ::llistxattr(proc.c_str(), nullptr, 0);
      if (n < 0) return -errno;
      list.resize(static_cast<size_t>(n));
      if (n == 0) return 0;
      ssize_t m = ::llistxattr(proc.c_str(), list.data(), list.size());
      if (m >= 0) {
        list.resize(static_cast<size_t>(m));
        return 0;
      }
      if (errno != ERANGE) return -errno;
    }
  });
  if (rc < 0) return Error(-rc, "listxattr", path);
  std::vector<std::string> names;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find('\0', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) names.emplace_back(list, start, end - start);
    start = end + 1;
  }
  return names;
}

}  // namespace stoker
