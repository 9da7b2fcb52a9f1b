// IoBackend: how stoker does positional file I/O on origin and cache files.
// Implementations: io_uring (liburing), plain syscalls (pread/pwrite), and a
// fault injector for tests that wraps another backend. All are selected at
// start (MakeIoBackend) and must pass io_backend_test's conformance suite.
//
// Thread-safety: all methods may be called concurrently from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace stoker {

struct ReadOp {
  int fd = -1;
  void* buf = nullptr;
  size_t len = 0;
  off_t off = 0;
  // Filled by ReadBatch: bytes read (short only at EOF) or the error.
  size_t done = 0;
  Status status;
};

class IoBackend {
 public:
  virtual ~IoBackend() = default;
  virtual std::string Name() const = 0;  // "io_uring", "syscall", "faulty(...)"
  // Reads until len bytes or EOF; retries EINTR and short reads.
  virtual Result<size_t> Read(int fd, void* buf, size_t len, off_t off) = 0;
  // Writes all of len or fails (ENOSPC, EIO...).
  virtual Status Write(int fd, const void* buf, size_t len, off_t off) = 0;
  // Issues every read at once where the backend can (io_uring) and waits for
  // all. Each op carries its own status; the call itself never fails.
  virtual void ReadBatch(std::vector<ReadOp>& ops) = 0;
};

enum class IoBackendKind { kAuto, kUring, kSyscall };

// kAuto probes io_uring (io_uring_queue_init) and falls back to syscalls.
Result<std::unique_ptr<IoBackend>> MakeIoBackend(IoBackendKind kind);

// Test seam: fails the Nth matching operation(s) with the given errno, or
// flips a byte in what a read returns.
struct FaultSpec {
  enum Op { kRead, kWrite } op = kRead;
  int error = EIO;          // 0: no error, corrupt instead
  bool corrupt = false;     // flip one byte of the data read
  int every_nth = 1;        // 1 = every matching op
  std::string path_substr;  // empty = any fd (matched via /proc/self/fd)
};
std::unique_ptr<IoBackend> MakeFaultyIoBackend(std::unique_ptr<IoBackend> inner,
                                               std::vector<FaultSpec> faults);

}  // namespace stoker
