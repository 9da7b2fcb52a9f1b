// LocalOrigin: an Origin over a local directory (an HDD, or an NFS/SMB mount).
//
// The root is opened once (O_PATH|O_DIRECTORY) and pinned: renaming the
// directory later does not move the origin, nor does a lazy unmount of its
// filesystem (the kernel keeps the detached filesystem working for us).
// The root moves only when it is dead: a call through it failed with EIO,
// ENOTCONN, ESTALE, ENODEV, ENXIO or ETIMEDOUT (a shut-down disk, a dead
// network or FUSE filesystem, a stale NFS handle), or with ENOENT and the
// pinned directory has been deleted. Then the path given to Create is
// opened again (at most once per Options::reopen_interval_ms, by one thread
// at a time; the others fail at once with the error they got), and if that
// directory can be listed it becomes the root and the call is tried once
// more (unless it is the root's own directory and that still lists through
// the old descriptor: then the error was the file's, not the root's). So an origin that is
// remounted at its path (the same filesystem or a copy on another device), or recreated there, is
// used again without a remount of stoker; but an empty directory on another filesystem is not
// adopted (it is what a cleanly unmounted NAS leaves at its mountpoint, and would make every file
// look deleted): the origin stays dead. Calls in flight keep the descriptor they started with
// until they return; an OriginFile keeps the file it opened (a dead one
// keeps failing: open the path again). While the origin is dead, Stat of a
// directory seen before (by Stat or ReadDir) answers with the attributes
// seen last, as the remote origins do, so that the cached files below it
// can still be reached; everything else fails. Every access is
// resolved beneath that descriptor and never follows a symlink at any
// component (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; where a
// sandbox forbids openat2, a walk that opens one component at a time with
// O_NOFOLLOW). A symlink in the middle of a path gives ELOOP; a symlink that
// is the path itself is reported by Stat/ReadDir/ReadLink as a symlink, and
// whatever it points to (inside or outside the origin) is never read.
//
// Descriptors: only the root stays open. Stat, ReadDir, ReadLink and the
// xattr calls close what they open before returning; an OriginFile holds one
// descriptor for its own lifetime. A million-file tree costs no descriptors.
//
// Errors are the kernel's, with a message naming the origin path: EINVAL for
// a path with "..", ".", empty components, NUL or a leading '/'; ELOOP for a
// symlink where a file or directory is needed; EISDIR/EINVAL when Open is
// given a directory/special file.
//
// A hung origin (a hard NFS mount whose server is gone): with
// Options::stall_timeout_ms, every call and every read of an OriginFile is
// watched (cache/origin/stall_watch.h). One that has not returned after that long
// makes the origin unreachable in backoff(), so the cache answers for the
// files and directories it holds, and further calls fail at once with
// ETIMEDOUT instead of stalling too; a statfs in a thread of its own probes
// the origin once per back-off period meanwhile, and the first answer (of
// the probe or of a stalled call) ends it.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/io/io_backend.h"
#include "cache/origin/origin.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class LocalOrigin final : public Origin {
 public:
  struct Options {
    // Resolve with openat2(2). false forces the component walk (a test seam;
    // Create also turns it off when the kernel or a seccomp profile refuses
    // openat2). Default: true.
    bool use_openat2 = true;
    // Least time between two attempts to reopen a dead root (0: every
    // failing call may try). Default: 1000.
    int reopen_interval_ms = 1000;
    // A call that has not returned after this long means the origin
    // hangs. 0 = never (calls wait as long as the kernel does). Default: 0;
    // the mount passes --origin-stall-timeout.
    int64_t stall_timeout_ms = 0;
    // While it hangs: the least time between two probes. Default: 5000.
    int64_t backoff_ms = 5000;
  };

  // Opens dir (which may itself be reached through symlinks: the user named
  // it). REQUIRES: io != nullptr.
  [[nodiscard]] static Result<std::shared_ptr<LocalOrigin>> Create(const std::string& dir,
                                                                   std::shared_ptr<IoBackend> io,
                                                                   Options options);
  [[nodiscard]] static Result<std::shared_ptr<LocalOrigin>> Create(const std::string& dir,
                                                                   std::shared_ptr<IoBackend> io) {
    return Create(dir, std::move(io), Options());
  }
  ~LocalOrigin() override;

  LocalOrigin(const LocalOrigin&) = delete;
  LocalOrigin& operator=(const LocalOrigin&) = delete;

  std::string Describe() const override { return "local:" + root_path_; }
  std::string IoBackendName() const override { return io_->Name(); }
  Result<struct stat> Stat(const std::string& path) override;
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override;
  Result<std::string> ReadLink(const std::string& path) override;
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override;
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(const std::string& path) override;

  // Whether paths are resolved with openat2 (false: the component walk).
  bool uses_openat2() const { return use_openat2_; }
  // Times a dead root was replaced by a reopened one.
  uint64_t root_reopens() const { return reopens_.load(); }
  // Non-null with a stall timeout.
  OriginBackoff* backoff() override;
  // Calls refused while the origin hung (0 without a stall timeout).
  uint64_t stall_refusals() const;

  struct Stalls;  // the backoff and the watch, shared with open files

 private:
  struct Root;  // one open root descriptor, closed when the last user lets go
  LocalOrigin(int root_fd, std::string root_path, std::string reopen_path,
              std::shared_ptr<IoBackend> io, bool openat2, int reopen_interval_ms);

  std::shared_ptr<const Root> CurrentRoot() const;
  // A new descriptor of the current root (for a probe), or -1.
  int DupRootFd() const;
  // Runs fn(root_fd), which returns >= 0 or -errno; if it failed because
  // the root is dead and a fresh root could be opened, runs it once more on
  // that one. Returns fn's last result.
  int WithRoot(const std::function<int(int)>& fn);
  // After a call through root failed with code: true if a fresh root is now
  // current (reopened here, or by another thread meanwhile).
  bool Reopen(const std::shared_ptr<const Root>& root, int code);
  // Opens path (already validated; "" = the root) beneath root with flags;
  // returns the fd or -errno.
  int OpenBeneath(int root, const std::string& path, int flags) const;
  // Validates path and runs fn(parent_fd, name) on its parent directory; the
  // root is (root, "."). Returns fn's -errno, 0 on success.
  int WithParent(int root, const std::string& path,
                 const std::function<int(int, const char*)>& fn) const;
  // WithParent on the current root, through WithRoot.
  int WithParentOfPath(const std::string& path, const std::function<int(int, const char*)>& fn);
  Status Error(int code, const char* op, const std::string& path) const;
  // ReadDir and Open, unwatched.
  Status List(const std::string& path, const std::function<bool(const OriginDirEntry&)>& fn);
  Result<std::unique_ptr<OriginFile>> OpenFile(const std::string& path);

  const std::string root_path_;    // resolved, for messages
  const std::string reopen_path_;  // as given, made absolute (symlinks not resolved)
  const std::shared_ptr<IoBackend> io_;
  const bool use_openat2_;
  const int64_t reopen_interval_ns_;
  uint64_t first_dev_ = 0;  // the root's st_dev at start (set once, in the constructor)

  // Lock order: reopen_mu_ -> root_mu_.
  mutable Mutex root_mu_;
  std::shared_ptr<const Root> root_ GUARDED_BY(root_mu_);
  // Held by the one thread trying to reopen.
  Mutex reopen_mu_;
  int64_t last_reopen_ns_ GUARDED_BY(reopen_mu_) = 0;  // steady clock
  std::atomic<uint64_t> reopens_{0};
  std::shared_ptr<Stalls> stalls_;  // null without a stall timeout

  void NoteDir(const std::string& path, const struct stat& st);
  std::optional<struct stat> KnownDir(const std::string& path) const;
  mutable Mutex dirs_mu_;
  // At most kMaxKnownDirs; past that, new ones are not noted.
  std::unordered_map<std::string, struct stat> known_dirs_ GUARDED_BY(dirs_mu_);
};

}  // namespace stoker
