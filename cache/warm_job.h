// WarmJob: the progress of one warm request (`stoker warm PATH...`), shared
// by the walk that finds its files and the pool tasks that fetch them, and
// read by `stoker warm --wait` and `--status` through the control socket.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace stoker {

class WarmJob {
 public:
  // Failures kept by name (the count goes on past it).
  static constexpr size_t kMaxFailuresKept = 100;

  WarmJob(uint64_t id, std::vector<std::string> paths)
      : id_(id), paths_(std::move(paths)), roots_left_(paths_.size()) {}

  uint64_t id() const { return id_; }
  // The walk found a file of size bytes to fetch; sized: whether that is
  // its size (a view's file listed before it was laid out is not sized).
  void Found(uint64_t bytes, bool sized = true) {
    files_found_++;
    bytes_found_ += bytes;
    if (!sized) unsized_++;
  }
  // A file found is in the cache whole: listed is what Found was told,
  // bytes its size as fetched (which replaces listed in bytes_found).
  void Done(uint64_t listed, bool sized, uint64_t bytes) {
    bytes_found_ += bytes;
    bytes_found_ -= listed;
    bytes_done_ += bytes;
    if (!sized) unsized_--;
    files_done_++;
  }
  // A file found could not be warmed (sized: as told to Found), or a path
  // could not be walked (then after Found(0)).
  void Failed(const std::string& path, const std::string& why, bool sized = true);
  // The walk of one of the paths ended (listed whole, or failed).
  void RootWalked() { roots_left_--; }
  bool finished() const { return roots_left_ == 0 && files_done_ + failures_ == files_found_; }

  // {"job", "paths", "files_found", "files_done", "bytes_found", "bytes_done",
  //  "unsized", "failures", "failed": [{"path", "error"}], "walked",
  //  "finished", "seconds"}; unsized: files found whose size is known
  //  only once they are fetched (bytes_found grows by theirs then).
  nlohmann::json Json() const;

 private:
  const uint64_t id_;
  const std::vector<std::string> paths_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<uint64_t> files_found_{0};
  std::atomic<uint64_t> files_done_{0};
  std::atomic<uint64_t> bytes_found_{0};
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<uint64_t> unsized_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<size_t> roots_left_;
  mutable Mutex mu_;
  std::vector<std::pair<std::string, std::string>> failed_ GUARDED_BY(mu_);
};

}  // namespace stoker
