#include "decode/view/cached_byte_source.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace stoker {

Result<size_t> CachedByteSource::ReadAt(void* buf, size_t len, uint64_t off) {
  if (off >= size_) return size_t{0};
  len = static_cast<size_t>(std::min<uint64_t>(len, size_ - off));
  auto* out = static_cast<char*>(buf);
  size_t done = 0;
  while (done < len) {
    ReadReply reply;
    STOKER_RETURN_IF_ERROR(reader_->Read(*file_, off + done, len - done, &reply));
    if (reply.size() == 0) break;
    for (const ReadSegment& s : reply.segments()) {
      if (s.mem != nullptr) {
        std::memcpy(out + done, s.mem, s.len);
        done += s.len;
        continue;
      }
      size_t got = 0;
      while (got < s.len) {
        ssize_t n = ::pread(s.fd, out + done + got, s.len - got, s.off + got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Status::FromErrno("read cached chunk");
        if (n == 0) return Status::IOError("cached chunk ended early");
        got += static_cast<size_t>(n);
      }
      done += s.len;
    }
  }
  if (counter_ != nullptr) *counter_ += done;
  return done;
}

}  // namespace stoker
