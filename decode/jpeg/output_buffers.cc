#include "decode/jpeg/output_buffers.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <map>
#include <new>
#include <vector>

#include "util/mutex.h"

namespace stoker {

struct OutputBuffers::Buffer::State {
  explicit State(size_t max_free) : max_free_bytes(max_free) {}
  ~State() {
    for (auto& [cap, ptrs] : free) {
      for (char* p : ptrs) std::free(p);
    }
  }
  void Give(char* p, size_t cap) {
    {
      MutexLock l(mu);
      if (free_bytes + cap <= max_free_bytes) {
        free[cap].push_back(p);
        free_bytes += cap;
        return;
      }
    }
    std::free(p);
  }

  const size_t max_free_bytes;
  mutable Mutex mu;
  std::map<size_t, std::vector<char*>> free GUARDED_BY(mu);  // by capacity
  size_t free_bytes GUARDED_BY(mu) = 0;
  uint64_t reused GUARDED_BY(mu) = 0;
  uint64_t allocated GUARDED_BY(mu) = 0;
};

OutputBuffers::Buffer::~Buffer() { state_->Give(p_, cap_); }

OutputBuffers::OutputBuffers(size_t max_free_bytes)
    : state_(std::make_shared<Buffer::State>(max_free_bytes)) {}

OutputBuffers::~OutputBuffers() = default;

size_t OutputBuffers::ClassOf(size_t len) {
  constexpr size_t kMin = 4096;
  if (len <= kMin) return kMin;
  // Eight classes per power of two: at most 1/8 over.
  const size_t step = std::bit_floor(len) / 8;
  return (len + step - 1) / step * step;
}

std::shared_ptr<OutputBuffers::Buffer> OutputBuffers::Take(size_t len) {
  const size_t cap = ClassOf(len);
  char* p = nullptr;
  {
    MutexLock l(state_->mu);
    auto it = state_->free.find(cap);
    if (it != state_->free.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      state_->free_bytes -= cap;
      state_->reused++;
    } else {
      state_->allocated++;
    }
  }
  if (p == nullptr) {
    p = static_cast<char*>(std::malloc(cap));
    if (p == nullptr) throw std::bad_alloc();
  }
  return std::shared_ptr<Buffer>(new Buffer(state_, p, len, cap));
}

size_t OutputBuffers::free_bytes() const {
  MutexLock l(state_->mu);
  return state_->free_bytes;
}

uint64_t OutputBuffers::reused() const {
  MutexLock l(state_->mu);
  return state_->reused;
}

uint64_t OutputBuffers::allocated() const {
  MutexLock l(state_->mu);
  return state_->allocated;
}

}  // namespace stoker
