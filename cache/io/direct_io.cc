#include "cache/io/direct_io.h"

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

AlignedBufferPool& Pool() {
  // Never destroyed: buffers may outlive main.
  static AlignedBufferPool* pool = new AlignedBufferPool(64 << 20);
  return *pool;
}

size_t ClassOf(size_t len) {
  size_t cap = std::max<size_t>(kDirectIoAlign,
                                (len + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign);
  // Few size classes above a MiB, so that freed buffers fit later runs.
  if (cap > (1 << 20)) cap = std::bit_ceil(cap);
  return cap;
}

char* Allocate(size_t cap) {
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

}  // namespace

AlignedBufferPool::~AlignedBufferPool() {
  for (auto& [cap, p] : free_) std::free(p);
}

std::shared_ptr<char[]> AlignedBufferPool::Take(size_t len) {
  size_t cap = ClassOf(len);
  char* p = nullptr;
  {
    MutexLock l(mu_);
    auto it = free_.lower_bound(cap);  // the same class, else the smallest larger
    if (it != free_.end() && it->first <= 4 * cap) {
      cap = it->first;
      p = it->second;
      free_.erase(it);
      free_bytes_ -= cap;
      reused_++;
    } else {
      allocated_++;
    }
  }
  if (p == nullptr) p = Allocate(cap);
  return std::shared_ptr<char[]>(p, [this, cap](char* q) { Give(q, cap); });
}

void AlignedBufferPool::Give(char* p, size_t cap) {
  std::vector<char*> drop;
  {
    MutexLock l(mu_);
    // Smaller free buffers make room for a larger one.
    while (free_bytes_ + cap > max_free_bytes_ && !free_.empty() && free_.begin()->first < cap) {
      drop.push_back(free_.begin()->second);
      free_bytes_ -= free_.begin()->first;
      free_.erase(free_.begin());
    }
    if (free_bytes_ + cap <= max_free_bytes_) {
      free_.emplace(cap, p);
      free_bytes_ += cap;
      p = nullptr;
    }
  }
  for (char* q : drop) std::free(q);
  std::free(p);
}

size_t AlignedBufferPool::free_bytes() const {
  MutexLock l(mu_);
  return free_bytes_;
}

uint64_t AlignedBufferPool::reused() const {
  MutexLock l(mu_);
  return reused_;
}

uint64_t AlignedBufferPool::allocated() const {
  MutexLock l(mu_);
  return allocated_;
}

void SetDirectIoEnabled(bool enabled) { g_direct_io.store(enabled); }
bool DirectIoEnabled() { return g_direct_io.load(); }

std::shared_ptr<char[]> AllocAligned(size_t len) { return Pool().Take(len); }

AlignedBufferPool& RunBufferPool() { return Pool(); }

DirectTwin::~DirectTwin() {
  if (fd_ >= 0) ::close(fd_);
}

int DirectTwin::Get(int fd) {
  int s = state_.load(std::memory_order_acquire);
  if (s != kUnopened) return s;
  MutexLock l(mu_);
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
