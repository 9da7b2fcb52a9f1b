// ChunkStore: the data files of a cache directory (CACHE_DIR/data). One
// sparse file per object version, data/XX/<object_id>-<version> with XX the
// low byte of the object id in hex; chunk i lives at byte i*chunk_size.
// A file exists only while it may hold chunks: the store unlinks it when
// its version has no chunk records left.
//
// Slab files (cache/slab.h) are data/slab/<slot bytes>-<n>, named here by
// SlabFileKey (object id 0); they are reused, never unlinked by the cache.
//
// Descriptors are cached (bounded LRU). A DataFile stays open for as long as
// anyone holds it, so a ReadReply's fd segments stay valid even when the
// file is evicted from the descriptor cache or unlinked.
//
// Writers bracket their writes with BeginWrite/EndWrite; UnlinkIfIdle never
// unlinks a file with a write in progress, so a chunk is never committed into
// a file that was just unlinked. BeginWrite creates a missing file outside the
// store lock (the writer is registered first).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <fcntl.h>

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "cache/chunk.h"
#include "cache/io/direct_io.h"
#include "cache/slab.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class DataFile {
 public:
  explicit DataFile(int fd) : fd_(fd), direct_(O_RDWR) {}
  ~DataFile();
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;
  int fd() const { return fd_; }
  // The O_DIRECT twin of fd(), or -1 (see cache/io/direct_io.h). Chunks are
  // written through it; reads always use fd().
  int direct_fd() { return direct_.Get(fd_); }
  void DisableDirect() { direct_.Disable(); }

 private:
  const int fd_;
  DirectTwin direct_;
};

class ChunkStore {
 public:
  // data_dir is created if missing. max_open: descriptor cache size.
  static Result<std::unique_ptr<ChunkStore>> Open(const std::string& data_dir, size_t max_open);

  const std::string& dir() const { return dir_; }
  // "XX/<object_id>-<version>", or "slab/<slot bytes>-<n>" for a
  // SlabFileKey, relative to dir().
  static std::string RelativePath(const VersionKey& v);
  // The inverse of RelativePath's file name part; nullopt if it is not one.
  static std::optional<VersionKey> ParseFileName(const std::string& name);
  // The same for a name in data/slab.
  static std::optional<VersionKey> ParseSlabFileName(const std::string& name);

  // The version's file, opened read-write. ENOENT if missing and !create.
  Result<std::shared_ptr<DataFile>> Get(const VersionKey& v, bool create);

  // Starts a write into v's file (created if missing), unless refuse() says
  // the version must not be written any more (checked under the store lock).
  // Without open_file, only registers the write (the chunk goes to a slab)
  // and returns null.
  // REQUIRES: EndWrite(v) after a successful BeginWrite.
  Result<std::shared_ptr<DataFile>> BeginWrite(const VersionKey& v,
                                               const std::function<bool()>& refuse,
                                               bool open_file = true);
  void EndWrite(const VersionKey& v);
  // Whether a write into v is in progress.
  bool Writing(const VersionKey& v);

  // Unlinks v's file if no write is in progress and empty() (asked under the
  // store lock) is true. Returns whether it was unlinked (or already gone).
  Result<bool> UnlinkIfIdle(const VersionKey& v, const std::function<Result<bool>()>& empty);

  // Frees [off, off+len) of the file, keeping its size.
  static Status Punch(int fd, uint64_t off, uint64_t len);

 private:
  ChunkStore(std::string dir, size_t max_open) : dir_(std::move(dir)), max_open_(max_open) {}
  Result<std::shared_ptr<DataFile>> GetLocked(const VersionKey& v, bool create) REQUIRES(mu_);
  // v's cached descriptor (made most recent), or null.
  std::shared_ptr<DataFile> FindLocked(const VersionKey& v) REQUIRES(mu_);
  // Caches fd as v's file and returns it, unless v has
  // one already (then that, and fd is closed).
  std::shared_ptr<DataFile> AdoptLocked(const VersionKey& v, int fd) REQUIRES(mu_);
  void EndWriteLocked(const VersionKey& v) REQUIRES(mu_);
  // Opens (or creates, with its directory) v's file; no lock needed.
  Result<int> OpenFile(const VersionKey& v, bool create) const;
  void Forget(const VersionKey& v) REQUIRES(mu_);

  const std::string dir_;
  const size_t max_open_;
  Mutex mu_;
  // Most recently used first.
  std::list<std::pair<VersionKey, std::shared_ptr<DataFile>>> lru_ GUARDED_BY(mu_);
  std::unordered_map<VersionKey, decltype(lru_)::iterator, VersionKeyHash> open_ GUARDED_BY(mu_);
  std::unordered_map<VersionKey, int, VersionKeyHash> writers_ GUARDED_BY(mu_);
};

}  // namespace stoker
