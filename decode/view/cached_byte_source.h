// CachedByteSource: a ByteSource over one file opened in the cache (a RawReader), so
// the decode parsers read a raw file through the SSD tier (its chunks are
// fetched, checksummed, cached and prefetched as for any reader).
//
// The size is that of the cached version opened; a read after the origin
// file changed fails with ESTALE (RawReader::Read), which the parsers pass
// through as a failure of the world, not a data error.
//
// Thread-safety: ReadAt may be called from many threads at once (the cache's
// OpenFileState is thread-safe).
#pragma once

#include <atomic>
#include <memory>

#include "cache/raw_reader.h"
#include "decode/tfrecord/byte_source.h"

namespace stoker {

class CachedByteSource final : public ByteSource {
 public:
  // REQUIRES: cache (and counter, if given: bytes read are added to it)
  // outlive this source.
  CachedByteSource(RawReader* reader, std::shared_ptr<OpenFileState> file, uint64_t size,
                   std::atomic<uint64_t>* counter = nullptr)
      : reader_(reader), file_(std::move(file)), size_(size), counter_(counter) {}
  uint64_t size() const override { return size_; }
  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override;

 private:
  RawReader* const reader_;
  const std::shared_ptr<OpenFileState> file_;
  const uint64_t size_;
  std::atomic<uint64_t>* const counter_;
};

}  // namespace stoker
