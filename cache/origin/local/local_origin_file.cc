// An open file of a local origin: reads through the I/O backend, the
// aligned part direct, each call watched for stalls.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "cache/io/direct_io.h"
#include "cache/origin/local/local_stalls.h"

namespace stoker {
namespace {

class LocalOriginFile final : public OriginFile {
 public:
  // noatime: fd was opened O_NOATIME (so is its direct twin).
  LocalOriginFile(int fd, uint64_t size, std::shared_ptr<IoBackend> io,
                  std::shared_ptr<LocalOrigin::Stalls> stalls, std::string path, bool noatime)
      : fd_(fd),
        size_(size),
        io_(std::move(io)),
        stalls_(std::move(stalls)),
        path_(std::move(path)),
        direct_(O_RDONLY | (noatime ? O_NOATIME : 0)) {}
  ~LocalOriginFile() override { ::close(fd_); }
  LocalOriginFile(const LocalOriginFile&) = delete;
  LocalOriginFile& operator=(const LocalOriginFile&) = delete;

  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
    return Watched(
        stalls_.get(), "read", path_, [&] { return ::fcntl(fd_, F_DUPFD_CLOEXEC, 0); },
        [&] { return Read(buf, len, off); });
  }

  // The aligned part of what the file held at open goes direct, the rest
  // (the last partial block, or what the file grew by) buffered. A file that
  // shrank meanwhile reads short either way; the cache then finds the
  // identity changed and keeps nothing.
  Result<size_t> ReadAtAligned(void* buf, size_t len, uint64_t off, Urgency) override {
    return Watched(
        stalls_.get(), "read", path_, [&] { return ::fcntl(fd_, F_DUPFD_CLOEXEC, 0); },
        [&] { return ReadAligned(buf, len, off); });
  }

  Result<OriginIdentity> Identity() override {
    return Watched(
        stalls_.get(), "fstat", path_, [&] { return ::fcntl(fd_, F_DUPFD_CLOEXEC, 0); },
        [&]() -> Result<OriginIdentity> {
          struct stat st;
          if (::fstat(fd_, &st) != 0) return Status::FromErrno("fstat '" + DescribeFdPath() + "'");
          return IdentityFromStat(st);
        });
  }

 private:
  Result<size_t> Read(void* buf, size_t len, uint64_t off) {
    if (off > static_cast<uint64_t>(INT64_MAX)) return Status::Invalid("read offset too large");
    return io_->Read(fd_, buf, len, static_cast<off_t>(off));
  }

  Result<size_t> ReadAligned(void* buf, size_t len, uint64_t off) {
    if (off > static_cast<uint64_t>(INT64_MAX)) return Status::Invalid("read offset too large");
    const uint64_t want = off < size_ ? std::min<uint64_t>(len, size_ - off) : 0;
    uint64_t head = RoundDownToDirect(want);
    // A read to the end of the file goes direct whole: the caller's buffer
    // holds len rounded up (origin.h), and the device stops at the end.
    const bool to_end = want > 0 && off + want == size_;
    if (to_end) head = RoundUpToDirect(want);
    if (head < kMinDirectOriginBytes || RoundDownToDirect(off) != off || !IsDirectAligned(buf)) {
      return Read(buf, len, off);
    }
    int dfd = direct_.Get(fd_);
    if (dfd < 0) return Read(buf, len, off);
    auto got = io_->Read(dfd, buf, head, static_cast<off_t>(off));
    if (!got.ok() && got.status().code() == EINVAL) {
      direct_.Disable();  // the file system takes O_DIRECT opens, not reads
      return Read(buf, len, off);
    }
    // The file may have grown since it was opened: never more than asked,
    // and what is past the head comes through the buffered descriptor.
    if (!got.ok() || *got < head) return got;
    if (*got >= len) return len;
    STOKER_ASSIGN_OR_RETURN(size_t tail,
                            Read(static_cast<char*>(buf) + head, len - head, off + head));
    return head + tail;
  }

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
  const std::shared_ptr<LocalOrigin::Stalls> stalls_;  // null: not watched
  const std::string path_;                             // for the watch's messages
  DirectTwin direct_;
};

}  // namespace

std::unique_ptr<OriginFile> NewLocalOriginFile(int fd, uint64_t size, std::shared_ptr<IoBackend> io,
                                               std::shared_ptr<LocalOrigin::Stalls> stalls,
                                               std::string path, bool noatime) {
  return std::make_unique<LocalOriginFile>(fd, size, std::move(io), std::move(stalls),
                                           std::move(path), noatime);
}

}  // namespace stoker
