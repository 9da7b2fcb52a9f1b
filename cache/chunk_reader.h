// ChunkReader: reads chunks back from the SSD tier and checks them. A chunk
// is checked against its record's checksum once per process: a good one is
// marked verified in ResidentChunks (later reads serve it from the data file
// without reading it here); a bad one (bit rot, a hole a crash left, a data
// file cut short) is counted, unpinned and dropped through the ChunkWriter,
// and its reader fetches it from the origin again.
//
// Chunks are read in one batch through the I/O backend (io_uring where it
// is there); full-block chunks the caller keeps in memory are read direct,
// around the page cache, which would otherwise hold a second copy.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/chunk.h"
#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "cache/chunk_writer.h"
#include "cache/fetcher.h"
#include "cache/io/io_backend.h"
#include "cache/object_version.h"
#include "cache/resident_chunks.h"

namespace stoker {

// A cached chunk to read back and check: its index, checksum and slot.
struct ChunkToCheck {
  uint64_t idx = 0;
  uint64_t sum = 0;
  SlotRef slot;
};

// One chunk read back into a fresh buffer.
struct ChunkRead {
  std::shared_ptr<char[]> buf;
  uint64_t len = 0;   // the chunk's length
  uint64_t done = 0;  // bytes read: short only where the data file is
  Status status;
  bool whole() const { return status.ok() && done == len; }
  ChunkBytes bytes() const {  // as read from the cache
    return ChunkBytes{std::shared_ptr<const char>(buf, buf.get()), len, /*from_cache=*/true};
  }
};

class ChunkReader {
 public:
  // Chunks CheckInBatches reads at a time.
  static constexpr size_t kCheckBatch = 16;

  // The parts it reads through; all outlive the reader.
  struct Parts {
    uint64_t chunk_size = 0;
    IoBackend* io = nullptr;
    ChunkIndex* index = nullptr;
    ChunkStore* store = nullptr;
    ResidentChunks* resident = nullptr;
    ChunkWriter* writer = nullptr;  // drops what fails its check
    CacheCounters* counters = nullptr;
  };
  explicit ChunkReader(Parts parts) : p_(parts) {}

  // Reads chunks of v's data file into fresh buffers, in one batch; with
  // direct, full-block chunks around the page cache (unless the data file
  // is kept there: ChunkWriter::Direct).
  std::vector<ChunkRead> Read(const ObjectVersion& v, DataFile& file,
                              const std::vector<ChunkToCheck>& chunks, bool direct);
  // Reads back and checks chunks of v's data file not yet verified by this
  // process. REQUIRES: each chunk pinned by the caller. Marks the good ones
  // verified; a bad one is counted, unpinned and dropped. Returns one flag
  // per chunk. With bytes, the good chunks' bytes go there (the caller
  // serves them from memory), and full-block chunks are read direct.
  std::vector<char> Check(const ObjectVersion& v, DataFile& file,
                          const std::vector<ChunkToCheck>& to_check,
                          std::vector<ChunkBytes>* bytes = nullptr);
  // Check, kCheckBatch chunks at a time (a buffer each), not all at once.
  std::vector<char> CheckInBatches(const ObjectVersion& v, DataFile& file,
                                   const std::vector<ChunkToCheck>& to_check);
  // Chunk idx of v's bytes if it is in the store with a matching checksum
  // (pinned while read; not marked verified).
  std::optional<ChunkBytes> LoadStored(const ObjectVersion& v, uint64_t idx);
  // Present (verified here, or in the index)?
  bool IsCached(const ChunkKey& key);

 private:
  const Parts p_;
};

}  // namespace stoker
