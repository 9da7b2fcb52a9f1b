// IoBackend over pread/pwrite: the fallback where io_uring is forbidden.
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "cache/io/io_backend_impl.h"

namespace stoker {
namespace {

// One pread/pwrite moves at most this much (the kernel caps it near 2 GiB).
constexpr size_t kMaxSyscallBytes = 1u << 30;

class SyscallIoBackend final : public IoBackend {
 public:
  std::string Name() const override { return "syscall"; }

  Result<size_t> Read(int fd, void* buf, size_t len, off_t off) override {
    if (off < 0) return IoErrorStatus(EINVAL, "read", fd, 0);
    char* p = static_cast<char*>(buf);
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd, p + done, std::min(len - done, kMaxSyscallBytes), off + done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoErrorStatus(errno, "read", fd, off + done);
      }
      if (n == 0) break;  // end of file
      done += static_cast<size_t>(n);
    }
    return done;
  }

  Status Write(int fd, const void* buf, size_t len, off_t off) override {
    if (off < 0) return IoErrorStatus(EINVAL, "write", fd, 0);
    const char* p = static_cast<const char*>(buf);
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pwrite(fd, p + done, std::min(len - done, kMaxSyscallBytes), off + done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoErrorStatus(errno, "write", fd, off + done);
      }
      // pwrite of a non-zero length never returns 0 on a working file;
      // looping on it would spin forever.
      if (n == 0) return IoErrorStatus(EIO, "write", fd, off + done);
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }

  void ReadBatch(std::vector<ReadOp>& ops) override {
    for (ReadOp& op : ops) {
      Result<size_t> r = Read(op.fd, op.buf, op.len, op.off);
      op.done = r.ok() ? *r : 0;
      op.status = r.ok() ? Status::OK() : r.status();
    }
  }
};

}  // namespace

std::unique_ptr<IoBackend> MakeSyscallIoBackend() { return std::make_unique<SyscallIoBackend>(); }

}  // namespace stoker
