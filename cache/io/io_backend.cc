// MakeIoBackend: picks the backend at start, and the helpers every backend
// shares for its error messages.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "cache/io/io_backend_impl.h"
#include "util/log.h"

namespace stoker {

std::string DescribeFd(int fd) {
  char link[64];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  ssize_t n = ::readlink(link, target, sizeof(target));
  if (n <= 0) return "fd " + std::to_string(fd);
  return std::string(target, static_cast<size_t>(n));
}

Status IoErrorStatus(int code, const char* op, int fd, uint64_t off) {
  return Status::FromErrno(code,
                           std::string(op) + " '" + DescribeFd(fd) + "' at " + std::to_string(off));
}

Result<std::unique_ptr<IoBackend>> MakeIoBackend(IoBackendKind kind) {
  switch (kind) {
    case IoBackendKind::kSyscall:
      return MakeSyscallIoBackend();
    case IoBackendKind::kUring:
      return MakeUringIoBackend();
    case IoBackendKind::kAuto: {
      Result<std::unique_ptr<IoBackend>> uring = MakeUringIoBackend();
      if (uring.ok()) return uring;
      LOG_INFO("{}; using syscalls for file I/O", uring.status().message());
      return MakeSyscallIoBackend();
    }
  }
  return Status::Invalid("unknown I/O backend kind");
}

}  // namespace stoker
