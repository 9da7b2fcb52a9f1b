// Helpers shared by the SSD-tier unit tests (object cache, fsck, index).
// Test-only; header-only so that the library does not carry it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

#include "cache/object_cache.h"
#include "util/status.h"
#include "util/test_files.h"

namespace stoker::testing {

// What a reader would receive: fd segments read back, memory copied.
inline std::string Materialize(const ReadReply& reply) {
  std::string out;
  for (const ReadSegment& s : reply.segments()) {
    if (s.mem) {
      out.append(s.mem, s.len);
    } else {
      std::string buf(s.len, '\0');
      ssize_t got = ::pread(s.fd, buf.data(), s.len, s.off);
      STOKER_CHECK(got == static_cast<ssize_t>(s.len), "pread of an fd segment");
      out += buf;
    }
  }
  return out;
}

// Flips one byte of a file in place.
inline void FlipByte(const std::string& path, off_t off) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  STOKER_CHECK(fd >= 0, "open file to corrupt");
  char c;
  STOKER_CHECK(::pread(fd, &c, 1, off) == 1, "read byte to flip");
  c = static_cast<char>(c ^ 0x5a);
  STOKER_CHECK(::pwrite(fd, &c, 1, off) == 1, "write flipped byte");
  ::close(fd);
}

// Bytes allocated under dir (what du would say).
inline uint64_t AllocatedUnder(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

}  // namespace stoker::testing
