#include "cache/sequential_reads.h"

#include <algorithm>

#include "cache/chunk.h"

namespace stoker {

SequentialReads::Step SequentialReads::Next(uint64_t off, uint64_t end, uint64_t last_chunk) {
  Step step;
  const bool sequential =
      off <= next_off_ ? next_off_ - off <= window_ : off - next_off_ <= window_;
  if (!sequential) {
    next_off_ = end;
    prefetched_until_ = 0;
    step.seek = true;
    return step;
  }
  next_off_ = std::max(next_off_, end);
  step.drop_before = (off > window_ ? off - window_ : 0) / chunk_size_;
  const uint64_t until = std::min(chunks_, ChunkCount(next_off_ + window_, chunk_size_));
  const uint64_t from = std::max(prefetched_until_, last_chunk + 1);
  const uint64_t batch = std::max<uint64_t>(1, window_ / chunk_size_);
  if (from >= until || (until - from < (batch + 1) / 2 && until < chunks_)) return step;
  prefetched_until_ = until;
  step.first = from;
  step.end = until;
  return step;
}

}  // namespace stoker
