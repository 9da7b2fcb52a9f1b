// ViewStats: what the decoded views of one mount count, and the list of
// records and files that did not decode (MOUNTPOINT/.stoker/errors).
//
// Counters are monotonic for the life of the daemon. An error is listed once
// per (view file, raw offset, message) however often its layout is loaded or
// its range read; the list keeps the newest kMaxErrors. Kept in a file of
// the cache directory (Persist), the list outlives the daemon: a remount
// lists what earlier mounts found before anything is read again.
//
// Thread-safety: counters are atomics; the error list has its own mutex
// (a leaf lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>

#include "util/mutex.h"
#include "util/status.h"

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
  static constexpr size_t kMaxFileBytes = 16u << 20;  // read back at most
  // Adds "file: offset N: message" unless listed already; true if new.
  bool Add(const std::string& file, uint64_t offset, const std::string& message);
  // Drops the lines of file: its layout is being made anew (the raw file
  // changed, or its stored layout went), and lists its errors again.
  void ForgetFile(const std::string& file);
  // One line per error, oldest first.
  std::string Text() const;
  size_t size() const;

  // Keeps the list in the file at path from now on: the lines there are
  // listed first (how many is returned), each new line is appended, and the
  // file is rewritten when lines are dropped. A file that cannot be opened
  // or read is an error here (the list then stays in memory); a later
  // failed write is logged once, and the list goes on in memory.
  Result<size_t> Persist(const std::string& path);

 private:
  bool AddLocked(std::string line) REQUIRES(mu_);
  void AppendLocked(const std::string& line) REQUIRES(mu_);
  void RewriteLocked() REQUIRES(mu_);
  // Writes text to path opened with flags (O_APPEND or O_TRUNC); false, and
  // logged once, if it could not.
  bool WriteLocked(const std::string& path, int flags, const std::string& text) REQUIRES(mu_);
  void WriteFailedLocked() REQUIRES(mu_);

  mutable Mutex mu_;
  std::deque<std::string> lines_ GUARDED_BY(mu_);
  std::unordered_set<std::string> seen_ GUARDED_BY(mu_);
  std::string path_ GUARDED_BY(mu_);       // empty: not persisted
  size_t file_lines_ GUARDED_BY(mu_) = 0;  // lines in the file
  bool write_failed_ GUARDED_BY(mu_) = false;
};

struct ViewStats {
  ViewCounters counters;
  ViewErrorList errors;
};

}  // namespace stoker
