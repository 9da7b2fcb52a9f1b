#include "fs/fuse_io.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "fs/fuse_kernel_ext.h"

namespace stoker {
namespace {

std::atomic<bool> init_pending{true};
std::atomic<bool> init_asked{false};

void AskForPassthrough(char* out, size_t len) {
  using fuse_ext::InitOutHead;
  if (len < sizeof(InitOutHead)) return;  // a kernel older than the fields
  uint32_t major = 0, flags = 0, flags2 = 0;
  std::memcpy(&major, out + offsetof(InitOutHead, major), 4);
  if (major != 7) return;  // not an INIT reply after all
  std::memcpy(&flags, out + offsetof(InitOutHead, flags), 4);
  std::memcpy(&flags2, out + offsetof(InitOutHead, flags2), 4);
  flags |= fuse_ext::kInitExt;
  flags &= ~fuse_ext::kInitWritebackCache;
  flags2 |= static_cast<uint32_t>(fuse_ext::kInitPassthrough >> 32);
  // The opens passthrough may follow are answered FOPEN_DIRECT_IO
  // (fs/fuse_file_ops.cc); a shared mmap of one must still work.
  flags2 |= static_cast<uint32_t>(fuse_ext::kInitDirectIoAllowMmap >> 32);
  const uint32_t depth = fuse_ext::kMaxStackDepth;
  std::memcpy(out + offsetof(InitOutHead, flags), &flags, 4);
  std::memcpy(out + offsetof(InitOutHead, flags2), &flags2, 4);
  std::memcpy(out + offsetof(InitOutHead, max_stack_depth), &depth, 4);
  init_asked = true;
}

ssize_t Writev(int fd, struct iovec* iov, int count, void* /*userdata*/) {
  // libfuse's replies: iov[0] the fuse_out_header, iov[1] the argument.
  if (init_pending.load(std::memory_order_relaxed) && count >= 2 &&
      iov[0].iov_len == sizeof(fuse_out_header)) {
    const auto* h = static_cast<const fuse_out_header*>(iov[0].iov_base);
    if (h->unique != 0 && h->error == 0 && init_pending.exchange(false)) {
      AskForPassthrough(static_cast<char*>(iov[1].iov_base), iov[1].iov_len);
    }
  }
  return writev(fd, iov, count);
}

ssize_t Read(int fd, void* buf, size_t len, void* /*userdata*/) { return read(fd, buf, len); }

ssize_t SpliceSend(int fdin, off_t* offin, int fdout, off_t* offout, size_t len, unsigned int flags,
                   void* /*userdata*/) {
  return splice(fdin, offin, fdout, offout, len, flags);
}

}  // namespace

Status UseFuseIoWithPassthrough(fuse_session* se, int fd) {
  static const fuse_custom_io io = {Writev, Read, /*splice_receive=*/nullptr, SpliceSend};
  const int rc = fuse_session_custom_io(se, &io, fd);
  if (rc != 0) return Status::FromErrno(-rc, "installing the FUSE I/O hooks");
  return Status::OK();
}

bool InitAskedForPassthrough() { return init_asked.load(); }

}  // namespace stoker
