// OpensPolicy: --opens auto, which decides once, from the opens it sees,
// whether the kernel should open files by itself from then on
// (docs/opens.md).
//
// A mount starts with daemon opens: each open reaches the daemon, which
// can hand a file the cache holds whole to the kernel (passthrough). For a
// tree of small files that costs more than it gives: their open and close
// round trips are most of a read from memory, and small files are never
// passed through (they live in slab slots). So the policy looks at the
// last kWindow opens of origin files; once kWindow have been seen and at
// least kSmallShare of those were small (no data file of their own: at
// most --slab-max, in one chunk), it decides for kernel opens. The daemon
// then answers the next OPEN with ENOSYS: the kernel sets no_open for the
// connection and never sends an OPEN again, so the move is one way, and
// from then on no file is passed through (large files are read through
// the daemon, and their pages kept by the kernel).
//
// A mixed tree (more than 1 open in 10 of large files) keeps daemon opens.
// With --passthrough on, the policy never moves (the user asked for
// passthrough).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "util/mutex.h"

namespace stoker {

class OpensPolicy {
 public:
  static constexpr size_t kWindow = 1000;
  static constexpr size_t kSmallShare = 900;  // of kWindow

  // What a decision says, for the log and stats.
  struct Decision {
    std::string why;       // "950 of the last 1000 opens were small files"
    uint64_t after_opens;  // opens seen when it was taken
  };

  // small_max: the largest "small" file, for the messages (--slab-max).
  explicit OpensPolicy(uint64_t small_max) : small_max_(small_max) {}

  // One open of an origin file; small: it has no data file of its own.
  // True exactly once: for the open after which kernel opens are decided.
  bool Note(bool small);

  // Taken over from a predecessor (a supervised restart): already decided.
  void Inherit();

  std::optional<Decision> decision() const;
  uint64_t small_max() const { return small_max_; }

 private:
  const uint64_t small_max_;
  mutable Mutex mu_;
  std::array<bool, kWindow> ring_ GUARDED_BY(mu_){};
  size_t small_ GUARDED_BY(mu_) = 0;  // small opens in ring_
  uint64_t seen_ GUARDED_BY(mu_) = 0;
  std::optional<Decision> decided_ GUARDED_BY(mu_);
};

}  // namespace stoker
