// ByteSource: random-access read-only bytes of known size, what the decode
// parsers read their input through. The same parsers then run over memory
// (tests, fuzzers), a plain file (tools), or the cache (a view being laid out
// or produced), and only the adapter differs.
//
// Contract: ReadAt(buf, len, off) reads up to len bytes at off and returns
// how many; it is short only at the end (off + result == size()), and 0 at or
// past the end. An error is a failure of the world (EIO, the origin could not
// be reached) and is passed through the parsers unchanged, so callers can tell
// "the data is bad" (EBADMSG, EINVAL from the parsers) from "we could not
// read it".
//
// Thread-safety: implementations here are safe for concurrent ReadAt calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

namespace stoker {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  virtual Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) = 0;
};

// Reads exactly len bytes at off, or fails: EBADMSG "... truncated" if the
// source ends first (what is missing is data, not I/O), what names "what".
Status ReadExactly(ByteSource& src, void* buf, size_t len, uint64_t off, const char* what);

// Bytes in memory the caller keeps alive for the source's lifetime.
class MemoryByteSource final : public ByteSource {
 public:
  explicit MemoryByteSource(std::string_view data) : data_(data) {}
  uint64_t size() const override { return data_.size(); }
  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override;

 private:
  std::string_view data_;
};

// A local file, read with pread. Size is taken at Open.
class FileByteSource final : public ByteSource {
 public:
  static Result<std::unique_ptr<FileByteSource>> Open(const std::string& path);
  ~FileByteSource() override;
  FileByteSource(const FileByteSource&) = delete;
  FileByteSource& operator=(const FileByteSource&) = delete;
  uint64_t size() const override { return size_; }
  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override;

 private:
  FileByteSource(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_;
  uint64_t size_;
  std::string path_;
};

}  // namespace stoker
