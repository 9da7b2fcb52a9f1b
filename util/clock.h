// The one monotonic clock: nanoseconds since an arbitrary start, never going
// back (CLOCK_MONOTONIC, which std::chrono::steady_clock reads on Linux). For
// intervals and deadlines, never for what a user sees as a date.
//
// Thread-safety: any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace stoker {

inline int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace stoker
