// Direct I/O (O_DIRECT) around the page cache, for the two copies a cold
// read would otherwise make: origin file -> our buffer, and our buffer ->
// cache data file. Both land in the page cache for nothing: the origin's
// pages are never read again (the SSD tier serves the next read) and the
// first reader is answered from our buffer, not from the data file.
//
// A DirectTwin is a lazily opened O_DIRECT descriptor for the same open file
// as a buffered one (reopened through /proc/self/fd, so a rename or unlink of
// the path in between cannot make it another file). Where the filesystem
// refuses O_DIRECT (tmpfs on older kernels, some FUSE and network file
// systems), the twin is off and callers use the buffered descriptor.
//
// Only the aligned head of a transfer goes direct: buffer, offset and length
// must be multiples of kDirectIoAlign. The tail (< 4 KiB, at the end of a
// file) goes through the buffered descriptor, which the kernel keeps
// coherent with direct transfers; an origin read that ends at the end of the
// file reads its last block direct as well (the device stops at the end).
//
// Thread-safety: DirectTwin is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "util/mutex.h"

namespace stoker {

// Alignment every block device and file system here accepts for O_DIRECT.
inline constexpr size_t kDirectIoAlign = 4096;

// Transfers shorter than this stay buffered: for a small file the second
// descriptor and the split transfer cost more than the copy they save, and
// a direct write would make the reader wait for the device.
inline constexpr uint64_t kMinDirectBytes = 256 << 10;
// Origin reads go direct from this size: a read to the end of the file goes
// whole (no split), so only the second descriptor's open is left against
// the copy. Measured here, 10k files read cold through a mount, 4 alternated
// runs: at 100 KiB direct took 1.54-1.65 s against 1.71-2.01 s buffered
// (daemon CPU 208-227 against 246-302 ticks); at about 32 KiB the two were
// level (1.33-1.49 against 1.31-1.42 s).
inline constexpr uint64_t kMinDirectOriginBytes = 64 << 10;

inline uint64_t RoundDownToDirect(uint64_t n) { return n & ~(uint64_t{kDirectIoAlign} - 1); }
inline uint64_t RoundUpToDirect(uint64_t n) { return RoundDownToDirect(n + kDirectIoAlign - 1); }
inline bool IsDirectAligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & (kDirectIoAlign - 1)) == 0;
}

// Buffers for runs (of chunks read from the origin or produced by a view,
// and of chunks read back from the SSD tier), kept when freed for the next
// run: a fresh multi-MiB buffer is a new mapping whose (huge) pages the
// kernel faults in and zeroes, about as costly as the copy direct I/O
// saves, and in epoch 1 of a decoded view a few percent of the daemon's CPU.
// A request takes a free buffer of its size class, else the smallest larger
// one up to 4x its size; a buffer given back to a full pool displaces
// smaller free ones (a larger buffer serves every smaller run), so the pool
// does not fill up with a class that no run asks for and then free every
// buffer of the class that runs do ask for. At most max_free_bytes sit free.
// The pool must outlive the buffers it hands out.
// Thread-safe.
class AlignedBufferPool {
 public:
  explicit AlignedBufferPool(size_t max_free_bytes) : max_free_bytes_(max_free_bytes) {}
  ~AlignedBufferPool();
  AlignedBufferPool(const AlignedBufferPool&) = delete;
  AlignedBufferPool& operator=(const AlignedBufferPool&) = delete;
  // At least len bytes (rounded up to kDirectIoAlign), aligned to
  // kDirectIoAlign; contents undefined. Aborts when memory is exhausted.
  std::shared_ptr<char[]> Take(size_t len);
  size_t free_bytes() const;
  uint64_t reused() const;     // Takes served from a free buffer
  uint64_t allocated() const;  // Takes that allocated a new one

 private:
  void Give(char* p, size_t cap);
  const size_t max_free_bytes_;
  mutable Mutex mu_;
  std::multimap<size_t, char*> free_ GUARDED_BY(mu_);  // by capacity
  size_t free_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t reused_ GUARDED_BY(mu_) = 0;
  uint64_t allocated_ GUARDED_BY(mu_) = 0;
};

// len bytes (rounded up to kDirectIoAlign), aligned to kDirectIoAlign, from
// the process's AlignedBufferPool (64 MiB free at most).
// Aborts when memory is exhausted, as new[] would.
std::shared_ptr<char[]> AllocAligned(size_t len);
// That pool, for stats.json (run_buffers_reused, run_buffers_allocated).
AlignedBufferPool& RunBufferPool();

class DirectTwin {
 public:
  // flags: O_RDONLY or O_RDWR, as the buffered descriptor was opened.
  explicit DirectTwin(int flags) : flags_(flags) {}
  ~DirectTwin();
  DirectTwin(const DirectTwin&) = delete;
  DirectTwin& operator=(const DirectTwin&) = delete;

  // The O_DIRECT twin of fd (which must stay open as long as this object is
  // used with it), opened on first use; -1 when direct I/O is off for it.
  int Get(int fd);
  // Turns direct I/O off for this file (a transfer was refused with EINVAL).
  void Disable() { state_.store(kOff, std::memory_order_relaxed); }

 private:
  static constexpr int kUnopened = -2;
  static constexpr int kOff = -1;

  const int flags_;
  Mutex mu_;
  std::atomic<int> state_{kUnopened};  // the twin's fd, or kUnopened / kOff
  int fd_ GUARDED_BY(mu_) = -1;        // closed at destruction
};

// Process-wide switch (`stoker mount --no-direct-io`, tests): with it off,
// every DirectTwin stays off. Default: on.
void SetDirectIoEnabled(bool enabled);
bool DirectIoEnabled();

}  // namespace stoker
