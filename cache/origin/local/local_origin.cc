#include "cache/origin/local/local_origin.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <thread>
#include <type_traits>

#include "cache/io/direct_io.h"
#include "cache/origin/local/local_stalls.h"
#include "cache/origin/origin_backoff.h"
#include "cache/origin/stall_watch.h"
#include "util/clock.h"
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

// Errors that a dead root gives for every call through it: a shut-down or
// failed disk, a dead network or FUSE filesystem, a stale NFS handle.
bool MayMeanDeadRoot(int code) {
  switch (code) {
    case EIO:
    case ENOTCONN:
    case ESTALE:
    case ENODEV:
    case ENXIO:
    case ETIMEDOUT:
      return true;
    default:
      return false;
  }
}

// 0 if the directory behind fd (O_PATH is enough) can be listed, else errno.
int RootLists(int fd) {
  int list = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list < 0) return errno;
  DIR* d = ::fdopendir(list);
  STOKER_CHECK(d != nullptr, "fdopendir of a directory fd");
  errno = 0;
  int e = ::readdir(d) == nullptr ? errno : 0;
  ::closedir(d);
  return e;
}

// True if the directory fd has no entry but "." and "..".
bool DirIsEmpty(int fd) {
  int list = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list < 0) return false;
  DIR* d = ::fdopendir(list);
  STOKER_CHECK(d != nullptr, "fdopendir of a directory fd");
  bool empty = true;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

// Directories a LocalOrigin remembers for a dead origin (a few hundred
// bytes each).
constexpr size_t kMaxKnownDirs = 1 << 17;

}  // namespace

namespace {

// Opens dir as an origin root (O_PATH) and checks that it can be listed now
// (EACCES, or a dead network mount's EIO). Returns the fd or -errno.
int OpenRoot(const std::string& dir) {
  int root = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -errno;
  int e = RootLists(root);
  if (e != 0) {
    ::close(root);
    return -e;
  }
  return root;
}

}  // namespace

struct LocalOrigin::Root {
  explicit Root(int fd) : fd(fd) {}
  ~Root() { ::close(fd); }
  Root(const Root&) = delete;
  Root& operator=(const Root&) = delete;
  const int fd;
};

Result<std::shared_ptr<LocalOrigin>> LocalOrigin::Create(const std::string& dir,
                                                         std::shared_ptr<IoBackend> io,
                                                         Options options) {
  STOKER_CHECK(io != nullptr, "LocalOrigin needs an I/O backend");
  const std::string what = "origin '" + dir + "'";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(what);
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, what + " is not a directory");
  int root = OpenRoot(dir);
  if (root < 0) return Status::FromErrno(-root, what);

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
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(dir, ec).string();
  if (ec) absolute = root_path;
  std::shared_ptr<LocalOrigin> origin(new LocalOrigin(root, root_path, absolute, std::move(io),
                                                      openat2, options.reopen_interval_ms));
  if (options.stall_timeout_ms > 0) {
    origin->stalls_ = std::make_shared<Stalls>(options.stall_timeout_ms, options.backoff_ms);
  }
  return origin;
}

int LocalOrigin::DupRootFd() const {
  std::shared_ptr<const Root> root = CurrentRoot();
  return ::fcntl(root->fd, F_DUPFD_CLOEXEC, 0);
}

OriginBackoff* LocalOrigin::backoff() { return stalls_ ? &stalls_->backoff : nullptr; }

uint64_t LocalOrigin::stall_refusals() const { return stalls_ ? stalls_->watch.refused() : 0; }

LocalOrigin::LocalOrigin(int root_fd, std::string root_path, std::string reopen_path,
                         std::shared_ptr<IoBackend> io, bool openat2, int reopen_interval_ms)
    : root_path_(std::move(root_path)),
      reopen_path_(std::move(reopen_path)),
      io_(std::move(io)),
      use_openat2_(openat2),
      reopen_interval_ns_(static_cast<int64_t>(std::max(reopen_interval_ms, 0)) * 1000000),
      root_(std::make_shared<const Root>(root_fd)) {
  struct stat st;
  first_dev_ = ::fstat(root_fd, &st) == 0 ? static_cast<uint64_t>(st.st_dev) : 0;
}

LocalOrigin::~LocalOrigin() = default;

Status LocalOrigin::Error(int code, const char* op, const std::string& path) const {
  return Status::FromErrno(
      code, std::string(op) + " '" + root_path_ + (path.empty() ? "" : "/" + path) + "'");
}

std::shared_ptr<const LocalOrigin::Root> LocalOrigin::CurrentRoot() const {
  MutexLock l(root_mu_);
  return root_;
}

int LocalOrigin::WithRoot(const std::function<int(int)>& fn) {
  std::shared_ptr<const Root> root = CurrentRoot();
  int rc = fn(root->fd);
  if (rc >= 0 || !Reopen(root, -rc)) return rc;
  return fn(CurrentRoot()->fd);
}

bool LocalOrigin::Reopen(const std::shared_ptr<const Root>& root, int code) {
  bool deleted = false;
  if (code == ENOENT) {
    // Every name under a deleted directory is ENOENT; anything else is a
    // name that is not there.
    struct stat st;
    deleted = ::fstat(root->fd, &st) == 0 && st.st_nlink == 0;
    if (!deleted) return false;
  } else if (!MayMeanDeadRoot(code)) {
    return false;
  }
  auto replaced = [&] {
    MutexLock l(root_mu_);
    return root_ != root;
  };
  if (replaced()) return true;
  std::unique_lock<Mutex> trying(reopen_mu_, std::try_to_lock);
  if (!trying.owns_lock()) return false;  // another thread is at it: fail fast
  // Held from here on (the analysis does not follow std::unique_lock).
  reopen_mu_.AssertHeld();
  if (replaced()) return true;
  const int64_t now = MonotonicNs();
  if (last_reopen_ns_ != 0 && now - last_reopen_ns_ < reopen_interval_ns_) return false;
  last_reopen_ns_ = now;
  int fd = OpenRoot(reopen_path_);
  if (fd < 0) {
    LOG_DEBUG("origin '{}' is still dead ({}): reopening it gave {}", root_path_,
              std::strerror(code), std::strerror(-fd));
    return false;
  }
  // The same directory, still listing through the old descriptor: the
  // failure was the file's own (a bad sector) and moving would not help. (A
  // dead filesystem may still list from cached pages, so a root that lists
  // is not proof of life when the path leads elsewhere now.)
  struct stat old_st, new_st;
  if (!deleted && ::fstat(root->fd, &old_st) == 0 && ::fstat(fd, &new_st) == 0 &&
      old_st.st_dev == new_st.st_dev && old_st.st_ino == new_st.st_ino &&
      RootLists(root->fd) == 0) {
    ::close(fd);
    return false;
  }
  // An empty directory on another filesystem than the origin's at start is
  // what a cleanly unmounted NAS leaves at its mountpoint: adopting it would
  // make every file look deleted (and drop it from the cache). Still dead.
  if (::fstat(fd, &new_st) == 0 && static_cast<uint64_t>(new_st.st_dev) != first_dev_ &&
      DirIsEmpty(fd)) {
    ::close(fd);
    LOG_DEBUG("origin '{}' is still dead ({}): '{}' is an empty directory on another filesystem",
              root_path_, std::strerror(code), reopen_path_);
    return false;
  }
  {
    MutexLock l(root_mu_);
    root_ = std::make_shared<const Root>(fd);
  }
  reopens_++;
  LOG_WARN("origin '{}' failed ({}); reopened '{}', which lists again", root_path_,
           deleted ? "its directory was deleted" : std::strerror(code), reopen_path_);
  return true;
}

int LocalOrigin::OpenBeneath(int root, const std::string& path, int flags) const {
  if (use_openat2_) {
    struct open_how how = {};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    how.resolve = kResolve;
    const char* p = path.empty() ? "." : path.c_str();
    // EAGAIN: the kernel saw a concurrent rename and could not prove the
    // lookup stayed beneath the root; it asks to be retried.
    for (int again = 0;; ++again) {
      long fd = ::syscall(SYS_openat2, root, p, &how, sizeof(how));
      if (fd >= 0) return static_cast<int>(fd);
      if (errno == EINTR || (errno == EAGAIN && again < 16)) continue;
      return -errno;
    }
  }
  if (path.empty()) return OpenNoFollow(root, ".", flags);
  int dir = root;
  size_t start = 0;
  for (;;) {
    size_t end = path.find('/', start);
    std::string comp = path.substr(start, end == std::string::npos ? end : end - start);
    bool last = end == std::string::npos;
    int fd = OpenNoFollow(dir, comp.c_str(), last ? flags : O_PATH | O_DIRECTORY);
    if (dir != root) ::close(dir);
    if (fd < 0 || last) return fd;
    dir = fd;
    start = end + 1;
  }
}

int LocalOrigin::WithParent(int root, const std::string& path,
                            const std::function<int(int, const char*)>& fn) const {
  if (path.empty()) return fn(root, ".");
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return fn(root, path.c_str());
  int dir = OpenBeneath(root, path.substr(0, slash), O_PATH | O_DIRECTORY);
  if (dir < 0) return dir;
  int rc = fn(dir, path.c_str() + slash + 1);
  ::close(dir);
  return rc;
}

int LocalOrigin::WithParentOfPath(const std::string& path,
                                  const std::function<int(int, const char*)>& fn) {
  return WithRoot([&](int root) { return WithParent(root, path, fn); });
}

void LocalOrigin::NoteDir(const std::string& path, const struct stat& st) {
  MutexLock l(dirs_mu_);
  auto it = known_dirs_.find(path);
  if (it != known_dirs_.end()) {
    it->second = st;
  } else if (known_dirs_.size() < kMaxKnownDirs) {
    known_dirs_.emplace(path, st);
  }
}

std::optional<struct stat> LocalOrigin::KnownDir(const std::string& path) const {
  MutexLock l(dirs_mu_);
  auto it = known_dirs_.find(path);
  if (it == known_dirs_.end()) return std::nullopt;
  return it->second;
}

Result<struct stat> LocalOrigin::Stat(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  struct stat st;
  int rc = Watched(
      stalls_.get(), "stat", path, [this] { return DupRootFd(); },
      [&] {
        return WithParentOfPath(path, [&](int dir, const char* name) {
          return ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
        });
      });
  if (rc < 0) {
    if (MayMeanDeadRoot(-rc)) {
      if (auto known = KnownDir(path)) return *known;
    }
    return Error(-rc, "stat", path);
  }
  if (S_ISDIR(st.st_mode)) NoteDir(path, st);
  return st;
}

Status LocalOrigin::ReadDir(const std::string& path,
                            const std::function<bool(const OriginDirEntry&)>& fn) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  return Watched(
      stalls_.get(), "readdir", path, [this] { return DupRootFd(); },
      [&] { return List(path, fn); });
}

Status LocalOrigin::List(const std::string& path,
                         const std::function<bool(const OriginDirEntry&)>& fn) {
  int fd = WithRoot([&](int root) { return OpenBeneath(root, path, O_RDONLY | O_DIRECTORY); });
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
    if (S_ISDIR(entry.st.st_mode))
      NoteDir(path.empty() ? entry.name : path + "/" + entry.name, entry.st);
    if (!fn(entry)) return Status::OK();
  }
}

Result<std::string> LocalOrigin::ReadLink(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  std::string target;
  int rc = Watched(
      stalls_.get(), "readlink", path, [this] { return DupRootFd(); },
      [&] {
        return WithParentOfPath(path, [&](int dir, const char* name) {
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
      });
  if (rc < 0) return Error(-rc, "readlink", path);
  return target;
}

Result<std::unique_ptr<OriginFile>> LocalOrigin::Open(const std::string& path) {
  if (!IsPlainRelativePath(path)) return NotPlainRelativePath(path);
  return Watched(
      stalls_.get(), "open", path, [this] { return DupRootFd(); }, [&] { return OpenFile(path); });
}

Result<std::unique_ptr<OriginFile>> LocalOrigin::OpenFile(const std::string& path) {
  // O_NONBLOCK: a FIFO swapped in for a file must not block the open.
  // O_NOATIME: reading through the cache leaves the origin's access time as
  // the mount shows it; allowed to the file's owner and to root, so another
  // user's file is opened without it.
  constexpr int kFlags = O_RDONLY | O_NOCTTY | O_NONBLOCK;
  bool noatime = true;
  int fd = WithRoot([&](int root) { return OpenBeneath(root, path, kFlags | O_NOATIME); });
  if (fd == -EPERM) {
    noatime = false;
    fd = WithRoot([&](int root) { return OpenBeneath(root, path, kFlags); });
  }
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
  return NewLocalOriginFile(fd, static_cast<uint64_t>(st.st_size), io_, stalls_,
                            stalls_ ? path : std::string(), noatime);
}

}  // namespace stoker
