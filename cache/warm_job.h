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
  // The walk found a file of size bytes to fetch.
  void Found(uint64_t bytes) {
    files_found_++;
    bytes_found_ += bytes;
  }
  // A file found was fetched whole (bytes: its size), or could not be.
  void Done(uint64_t bytes) {
    bytes_done_ += bytes;
    files_done_++;
  }
  void Failed(const std::string& path, const std::string& why);
  // The walk of one of the paths ended (listed whole, or failed).
  void RootWalked() { roots_left_--; }
  bool finished() const { return roots_left_ == 0 && files_done_ + failures_ == files_found_; }

  // {"job", "paths", "files_found", "files_done", "bytes_found", "bytes_done",
  //  "failures", "failed": [{"path", "error"}], "walked", "finished",
  //  "seconds"}
  nlohmann::json Json() const;

 private:
  const uint64_t id_;
  const std::vector<std::string> paths_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<uint64_t> files_found_{0};
  std::atomic<uint64_t> files_done_{0};
  std::atomic<uint64_t> bytes_found_{0};
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<size_t> roots_left_;
  mutable Mutex mu_;
  std::vector<std::pair<std::string, std::string>> failed_ GUARDED_BY(mu_);
};

}  // namespace stoker
