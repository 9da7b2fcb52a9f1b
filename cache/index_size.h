// IndexSize: what the index and the cache directory's own files take on the
// disk, as the quota counts it. Measuring walks the index's files, so it is
// done now and then (at start, by the evictor); between measurements, what
// RocksDB has written since (its WAL, flushed memtables) is added, and a
// fixed headroom covers a memtable flush that writes an SST before its WAL
// goes.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "cache/chunk_index.h"
#include "cache/eviction.h"
#include "util/mutex.h"

namespace stoker {

class IndexSize {
 public:
  // dir: the cache directory (index/ inside it). index and quota outlive this.
  IndexSize(std::string dir, uint64_t headroom, ChunkIndex* index, Quota* quota);

  // Measures the index's files and the directory's own files (lock, the
  // views' error list), then tells the quota (Refresh).
  void Measure();
  // The last measurement plus what the index wrote since.
  uint64_t Now();
  // Tells the quota Now() + headroom.
  void Refresh();
  uint64_t headroom() const { return headroom_; }

 private:
  const std::string dir_;
  const uint64_t headroom_;
  ChunkIndex* const index_;
  Quota* const quota_;
  Mutex mu_;
  uint64_t measured_ GUARDED_BY(mu_) = 0;
  uint64_t written_at_ GUARDED_BY(mu_) = 0;  // index_->bytes_written() when measured
};

}  // namespace stoker
