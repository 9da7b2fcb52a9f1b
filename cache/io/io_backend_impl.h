// The concrete IoBackends behind MakeIoBackend. Only io_backend.cc and the
// conformance test name them; everything else asks MakeIoBackend.
//
// Thread-safety: as IoBackend (every method from any thread at once).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cache/io/io_backend.h"
#include "util/status.h"

namespace stoker {

// pread/pwrite loops. ReadBatch runs the ops one after another.
std::unique_ptr<IoBackend> MakeSyscallIoBackend();

// io_uring with one ring per calling thread. Fails with the kernel's errno
// (EPERM under a seccomp profile, ENOSYS on old kernels) where io_uring or its
// read/write opcodes are unavailable.
Result<std::unique_ptr<IoBackend>> MakeUringIoBackend();

// What fd refers to, for error messages: "/nas/x" or "fd 7".
std::string DescribeFd(int fd);

// "read '/nas/x' at 4096: Input/output error"; code is the errno.
Status IoErrorStatus(int code, const char* op, int fd, uint64_t off);

}  // namespace stoker
