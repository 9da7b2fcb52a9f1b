#include "cache/direct_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace stoker {
namespace {

std::atomic<bool> g_direct_io{true};

// Freed buffers of run size are kept for the next run: a fresh multi-MiB
// allocation is a new mapping, and faulting in and zeroing its pages cost
// about as much as the copy direct I/O saves.
class BufferPool {
 public:
  static constexpr size_t kMaxPooledBytes = 64 << 20;

  char* Take(size_t cap) {
    {
      std::lock_guard<std::mutex> l(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].second != cap) continue;
        char* p = free_[i].first;
        free_[i] = free_.back();
        free_.pop_back();
        pooled_ -= cap;
        return p;
      }
    }
    // Runs of a MiB or more sit on huge pages where the kernel has them:
    // pinning a buffer for each direct transfer and for the FUSE reply
    // then takes a few folios, not hundreds of pages.
    constexpr size_t kHuge = 2 << 20;
    const bool huge = cap >= kHuge / 2;
    void* p = huge ? std::aligned_alloc(kHuge, (cap + kHuge - 1) / kHuge * kHuge)
                   : std::aligned_alloc(kDirectIoAlign, cap);
    if (p == nullptr) throw std::bad_alloc();
    if (huge) (void)::madvise(p, (cap + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);
    return static_cast<char*>(p);
  }

  void Give(char* p, size_t cap) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (pooled_ + cap <= kMaxPooledBytes) {
        free_.emplace_back(p, cap);
        pooled_ += cap;
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<char*, size_t>> free_;  // GUARDED_BY(mu_)
  size_t pooled_ = 0;                           // GUARDED_BY(mu_)
};

BufferPool& Pool() {
  static BufferPool* pool = new BufferPool;  // never destroyed: buffers may outlive main
  return *pool;
}

}  // namespace

void SetDirectIoEnabled(bool enabled) { g_direct_io.store(enabled); }
bool DirectIoEnabled() { return g_direct_io.load(); }

std::shared_ptr<char[]> AllocAligned(size_t len) {
  size_t cap = std::max<size_t>(kDirectIoAlign,
                                (len + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign);
  // Few size classes above a MiB, so that freed buffers fit later runs.
  if (cap > (1 << 20)) cap = std::bit_ceil(cap);
  char* p = Pool().Take(cap);
  return std::shared_ptr<char[]>(p, [cap](char* q) { Pool().Give(q, cap); });
}

DirectTwin::~DirectTwin() {
  if (fd_ >= 0) ::close(fd_);
}

int DirectTwin::Get(int fd) {
  int s = state_.load(std::memory_order_acquire);
  if (s != kUnopened) return s;
  std::lock_guard<std::mutex> l(mu_);
  s = state_.load(std::memory_order_acquire);
  if (s != kUnopened) return s;
  if (DirectIoEnabled()) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    // A magic link to the open file itself: no path a user controls.
    fd_ = ::open(path, flags_ | O_DIRECT | O_CLOEXEC);
  }
  state_.store(fd_ >= 0 ? fd_ : kOff, std::memory_order_release);
  return fd_ >= 0 ? fd_ : kOff;
}

}  // namespace stoker
