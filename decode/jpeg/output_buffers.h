// OutputBuffers: memory that decoded output (a view record, an .npy image)
// is produced into, reused from one production to the next. A fresh buffer
// of a few hundred KiB is new pages that the kernel faults in and zeroes
// (and a std::string zeroes again); in epoch 1 of a view, faulting and
// zeroing were about 16% of the daemon's CPU (perf, 800 500x375 images). A buffer goes back to the
// pool when its last holder lets go: once its bytes were copied into the cache's run (and the
// record is no longer kept for the next read of its file).
//
// Contract: Take(len) gives at least len writable bytes of undefined
// content (the producers write every byte). Requests are rounded up to a
// size class (at most 1/8 over, so that varied image sizes share buffers);
// a free buffer of the class is reused. At most max_free_bytes sit free;
// a buffer given back beyond that is freed. Buffers may outlive the
// OutputBuffers object (their pool state lives as long as they do).
//
// Thread-safety: all methods are thread-safe; a buffer is used by whoever
// holds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace stoker {

class OutputBuffers {
 public:
  // Default for max_free_bytes: 128 MiB, a few runs' worth of records.
  static constexpr size_t kDefaultMaxFreeBytes = size_t{128} << 20;

  class Buffer {
   public:
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer();
    char* data() { return p_; }
    const char* data() const { return p_; }
    size_t size() const { return size_; }
    size_t capacity() const { return cap_; }

   private:
    friend class OutputBuffers;
    struct State;
    Buffer(std::shared_ptr<State> state, char* p, size_t size, size_t cap)
        : state_(std::move(state)), p_(p), size_(size), cap_(cap) {}
    std::shared_ptr<State> state_;
    char* p_;
    size_t size_;
    size_t cap_;
  };

  explicit OutputBuffers(size_t max_free_bytes = kDefaultMaxFreeBytes);
  ~OutputBuffers();

  // A buffer of size() == len. Aborts when memory is exhausted, as new[].
  std::shared_ptr<Buffer> Take(size_t len);

  // The capacity a request of len bytes gets.
  static size_t ClassOf(size_t len);

  // Gauges and counters for stats and tests.
  size_t free_bytes() const;
  uint64_t reused() const;     // Takes served from a free buffer
  uint64_t allocated() const;  // Takes that allocated a new one

 private:
  std::shared_ptr<Buffer::State> state_;
};

}  // namespace stoker
