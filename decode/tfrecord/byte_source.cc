#include "decode/tfrecord/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>

namespace stoker {

Status ReadExactly(ByteSource& src, void* buf, size_t len, uint64_t off, const char* what) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t done = 0;
  while (done < len) {
    STOKER_ASSIGN_OR_RETURN(size_t n, src.ReadAt(p + done, len - done, off + done));
    if (n == 0) {
      return Status::Corruption(std::string(what) + " truncated at offset " +
                                std::to_string(off + done) + " (wanted " + std::to_string(len) +
                                " bytes at " + std::to_string(off) + ")");
    }
    done += n;
  }
  return Status::OK();
}

Result<size_t> MemoryByteSource::ReadAt(void* buf, size_t len, uint64_t off) {
  if (off >= data_.size()) return size_t{0};
  size_t n = std::min<uint64_t>(len, data_.size() - off);
  std::memcpy(buf, data_.data() + off, n);
  return n;
}

Result<std::unique_ptr<FileByteSource>> FileByteSource::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open '" + path + "'");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = Status::FromErrno("fstat '" + path + "'");
    ::close(fd);
    return s;
  }
  return std::unique_ptr<FileByteSource>(
      new FileByteSource(fd, static_cast<uint64_t>(st.st_size), path));
}

FileByteSource::~FileByteSource() { ::close(fd_); }

Result<size_t> FileByteSource::ReadAt(void* buf, size_t len, uint64_t off) {
  if (off >= size_) return size_t{0};
  len = std::min<uint64_t>(len, size_ - off);
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd_, static_cast<uint8_t*>(buf) + done, len - done, off + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read '" + path_ + "'");
    }
    if (n == 0) break;  // the file shrank since Open
    done += n;
  }
  return done;
}

}  // namespace stoker
