// LocalOrigin: an Origin over a local directory (an HDD, or an NFS/SMB mount).
//
// The root is opened once (O_PATH|O_DIRECTORY) and pinned: renaming or
// replacing the directory later does not move the origin. Every access is
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
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/io_backend.h"
#include "cache/origin.h"
#include "util/status.h"

namespace stoker {

class LocalOrigin final : public Origin {
 public:
  struct Options {
    // Resolve with openat2(2). false forces the component walk (a test seam;
    // Create also turns it off when the kernel or a seccomp profile refuses
    // openat2). Default: true.
    bool use_openat2 = true;
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
  Result<struct stat> Stat(const std::string& path) override;
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override;
  Result<std::string> ReadLink(const std::string& path) override;
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override;
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(const std::string& path) override;

  // Whether paths are resolved with openat2 (false: the component walk).
  bool uses_openat2() const { return use_openat2_; }

 private:
  LocalOrigin(int root_fd, std::string root_path, std::shared_ptr<IoBackend> io, bool openat2);

  // Opens path (already validated; "" = the root) beneath the root with
  // flags; returns the fd or -errno.
  int OpenBeneath(const std::string& path, int flags) const;
  // Validates path and runs fn(parent_fd, name) on its parent directory; the
  // root is (root_fd_, "."). Returns fn's -errno, 0 on success.
  int WithParent(const std::string& path, const std::function<int(int, const char*)>& fn) const;
  Status Error(int code, const char* op, const std::string& path) const;

  const int root_fd_;
  const std::string root_path_;
  const std::shared_ptr<IoBackend> io_;
  const bool use_openat2_;
};

}  // namespace stoker
