// SequentialReads: one open file's read pattern, and what to prefetch for
// it. One sequential reader's requests arrive out of order (the kernel reads
// ahead with several at once, answered by several threads): a read within a
// window of where the reader got to is still sequential, and what is held
// for the requests still behind it stays. A read further away is a seek: the
// prefetch in flight is for another position, and everything held goes.
//
// Prefetch keeps a window of bytes ahead of the furthest read, asked for in
// batches of at least half a window of new chunks (so that tasks are not one
// chunk each), the last batch of a file whatever its size.
//
// Thread-safety: not thread-safe (its owner holds a lock around Next).
#pragma once

#include <cstdint>

namespace stoker {

class SequentialReads {
 public:
  // window: the prefetch window in bytes (> 0); chunks: the file's chunks.
  SequentialReads(uint64_t window, uint64_t chunk_size, uint64_t chunks)
      : window_(window), chunk_size_(chunk_size), chunks_(chunks) {}

  // What a read of [off, end), whose last chunk is last_chunk, asks for.
  struct Step {
    // The reader moved elsewhere: prefetch in flight is for another position.
    bool seek = false;
    // Held chunks below this index are behind the reader and may go
    // (Readahead::DropBefore; 0 after a seek).
    uint64_t drop_before = 0;
    // Chunks [first, end) to prefetch now (none if first == end).
    uint64_t first = 0;
    uint64_t end = 0;
  };
  Step Next(uint64_t off, uint64_t end, uint64_t last_chunk);

 private:
  const uint64_t window_;
  const uint64_t chunk_size_;
  const uint64_t chunks_;
  uint64_t next_off_ = 0;          // where the furthest read ended
  uint64_t prefetched_until_ = 0;  // chunk index, exclusive
};

}  // namespace stoker
