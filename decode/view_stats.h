// ViewStats: what the decoded views of one mount count, and the list of
// records and files that did not decode (MOUNTPOINT/.stoker/errors).
//
// Counters are monotonic for the life of the daemon. An error is listed once
// per (view file, raw offset, message) however often its layout is loaded or
// its range read; the list keeps the newest kMaxErrors.
//
// Thread-safety: counters are atomics; the error list has its own mutex
// (a leaf lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>

namespace stoker {

struct ViewCounters {
  std::atomic<uint64_t> layouts_computed{0};  // raw files scanned to lay out a view
  std::atomic<uint64_t> layouts_loaded{0};    // layouts read back from the index
  std::atomic<uint64_t> records_decoded{0};   // TFRecord view records produced
  std::atomic<uint64_t> images_decoded{0};    // .npy views produced
  std::atomic<uint64_t> decoded_bytes{0};     // bytes of decoded output produced
  std::atomic<uint64_t> errors{0};            // distinct records/files that do not decode
  std::atomic<uint64_t> failed_reads{0};      // view reads answered EIO
  // Raw bytes the views read through the cache (to lay out and decode);
  // also counted in the cache's bytes_read.
  std::atomic<uint64_t> raw_bytes_read{0};
  // JPEGs checked to decode while laying out on_error=skip views.
  std::atomic<uint64_t> images_checked{0};
};

class ViewErrorList {
 public:
  static constexpr size_t kMaxErrors = 10000;
  // Adds "file: offset N: message" unless listed already; true if new.
  bool Add(const std::string& file, uint64_t offset, const std::string& message);
  // One line per error, oldest first.
  std::string Text() const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::deque<std::string> lines_;         // GUARDED_BY(mu_)
  std::unordered_set<std::string> seen_;  // GUARDED_BY(mu_)
};

struct ViewStats {
  ViewCounters counters;
  ViewErrorList errors;
};

}  // namespace stoker
