// What chunk_index.cc and chunk_index_open.cc share of RocksDB: its status
// as a Status, a slice as a string_view, and the write batch. Private to
// ChunkIndex.
#pragma once

#include <rocksdb/slice.h>
#include <rocksdb/status.h>
#include <rocksdb/write_batch.h>

#include <string>
#include <string_view>

#include "cache/chunk_index.h"
#include "util/status.h"

namespace stoker {

// RocksDB's status as a Status: corruption EBADMSG, no space ENOSPC, busy
// EBUSY, invalid argument EINVAL, not supported ENOTSUP, the rest EIO.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

inline std::string_view View(const rocksdb::Slice& s) {
  return std::string_view(s.data(), s.size());
}

class ChunkIndex::Batch {
 public:
  rocksdb::WriteBatch wb;
};

}  // namespace stoker
