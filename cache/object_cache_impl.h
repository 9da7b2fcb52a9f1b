// ObjectCacheImpl: the ObjectCache of cache/object_cache.h, composed of
// parts with headers of their own, and nothing else: each ObjectCache call
// is forwarded to the part that does it. The parts: a ChunkIndex (RocksDB)
// and a ChunkStore (data files); ResidentChunks (pins, latches, verified
// once per process); an EvictionPolicy + Quota and IndexSize; the
// VersionTable (which version of each path is served); the ChunkWriter
// (every write and removal of a chunk) and the ChunkReader (reading back,
// checking once); the OriginReader (reading origin files, checking their
// version); a HitLog; the Evictor and the Warmer (threads); the ChunkFetch
// (misses: collapsed, read in runs, stored or held unstored); RecentBytes
// (the one bounded store of bytes held for reads to come: readahead,
// unstored chunks, what views produced); the Prefetcher (reading ahead of
// readers, into each open's Readahead; filling a warm's files); the
// OrderPrefetcher (whole files ahead of a reader in a sampler's order); the
// FileOpener (opens: versions, revalidation, held attributes); the ReadPath
// (reads: a plan, then a step per case); VersionLeases (whole files lent
// for passthrough); a WorkerPool. Private to cache/.
//
// Files: object_cache.cc (the cache directory, the parts put together,
// start, stats, the forwarding), cache_warm.cc (a file the Warmer found:
// opened by the FileOpener, filled by the Prefetcher; a sampler's order
// handed to the OrderPrefetcher).
//
// Threads: FUSE threads call Open/Read, and store what a read fetched when
// its ReadReply goes (after the reply); the pool fetches for prefetch and
// warm; the Evictor's thread evicts, flushes batched hits, drops old
// versions and re-measures the index; the Warmer's thread walks directories.
//
// Lock order (outer first): the FileOpener's stripes (derived -> plain) ->
// ObjectVersion::serving -> the other parts' locks, which are leaves (each
// part's header says its own).
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "cache/cache_dir_lock.h"
#include "cache/chunk.h"
#include "cache/chunk_fetch.h"
#include "cache/chunk_index.h"
#include "cache/chunk_reader.h"
#include "cache/chunk_store.h"
#include "cache/chunk_writer.h"
#include "cache/eviction.h"
#include "cache/evictor.h"
#include "cache/file_opener.h"
#include "cache/hit_log.h"
#include "cache/index_size.h"
#include "cache/io/io_backend.h"
#include "cache/kept_listings.h"
#include "cache/object_cache.h"
#include "cache/object_version.h"
#include "cache/open_file_state.h"
#include "cache/order_prefetcher.h"
#include "cache/origin_reader.h"
#include "cache/prefetcher.h"
#include "cache/read_path.h"
#include "cache/readahead.h"
#include "cache/recent_bytes.h"
#include "cache/resident_chunks.h"
#include "cache/version_leases.h"
#include "cache/version_table.h"
#include "cache/warm_job.h"
#include "cache/warmer.h"
#include "cache/worker_pool.h"
#include "util/mutex.h"

namespace stoker {

class ObjectCacheImpl final : public ObjectCache {
 public:
  struct Parts {
    CacheOptions options;
    std::shared_ptr<Origin> origin;
    MakeDerived make_derived;  // null: nothing is derived
    std::unique_ptr<CacheDirLock> lock;
    std::shared_ptr<IoBackend> io;
    std::unique_ptr<ChunkIndex> index;
    std::unique_ptr<ChunkStore> store;
    std::unique_ptr<ListingStore> listings;
    // Index growth the quota keeps room for between measurements (a memtable
    // flush writes an SST before its WAL goes).
    uint64_t index_headroom = 0;
    // Why Open threw away what the directory held ("" if it did not).
    std::string fresh_start;
  };
  // Makes the derived files (Parts::make_derived) over this cache.
  explicit ObjectCacheImpl(Parts parts);
  ~ObjectCacheImpl() override;
  // make_derived's failure, if it failed (the cache is then not to be used).
  Status made() const { return derived_files_.status(); }

  // Reclaims write intents, queues drop intents, starts the threads.
  Status Start();

  Result<Opened> Open(const std::string& path, bool force_revalidate) override;
  ListingStore& listings() override { return *listings_; }
  Result<Opened> OpenForDerived(const std::string& path) override;
  Result<Opened> OpenForPeer(const std::string& path) override;
  std::optional<struct stat> HeldAttr(const std::string& path, bool origin_failed) override;
  Result<uint64_t> Refresh(const std::string& prefix) override;
  Result<std::optional<std::string>> GetDerived(const OpenFileState& file,
                                                const std::string& name) override;
  Status PutDerived(const OpenFileState& file, const std::string& name,
                    const std::string& value) override;
  Status Read(OpenFileState& file, uint64_t off, size_t len, ReadReply* out) override;
  std::shared_lock<std::shared_mutex> HoldServe(OpenFileState& file) override;
  void SetDataFilesInPageCache(bool on) override { writer_.SetDataFilesInPageCache(on); }
  Result<std::unique_ptr<WholeFileLease>> LeaseWhole(OpenFileState& file,
                                                     LeaseRefusal* why) override;
  std::unique_ptr<WholeFileLease> HoldVersion(uint64_t object_id, uint64_t version,
                                              uint64_t chunks) override;
  Status Warm(const std::string& path) override;
  Result<uint64_t> StartWarm(const std::vector<std::string>& paths) override;
  nlohmann::json WarmStatus(uint64_t id) override;
  Result<uint64_t> SetOrder(const std::vector<std::string>& paths) override;
  Status AppendOrder(uint64_t id, const std::vector<std::string>& paths) override;
  void ClearOrder() override;
  nlohmann::json Stats() override;
  CacheCounters& counters() override { return counters_; }
  RecentBytes& recent() override { return *recent_; }

 private:
  // cache_warm.cc: fetches a file the Warmer found whole (Warmer::WarmFile):
  // opened as a warm, filled by the Prefetcher, if it fits below the high
  // watermark (a warm evicts nothing); its size, or ENOSPC if not kept.
  Result<uint64_t> WarmFile(const std::string& path);
  // Claims n bytes below the high watermark for a warm's file; false if
  // they do not fit beside what the cache and other warm files hold.
  bool ClaimWarmRoom(uint64_t n);

  const CacheOptions options_;
  // Bytes made recently and wanted again soon: readahead, unstored chunks,
  // what derived files produced (RawReader::recent). Before derived_files_:
  // the views made with this cache use it.
  const std::shared_ptr<RecentBytes> recent_;
  const Result<Derived> derived_files_;
  const std::shared_ptr<Origin> origin_;          // derived_files_'s, else the one given
  const std::shared_ptr<DerivedSource> derived_;  // views' files; never null
  const std::unique_ptr<CacheDirLock> lock_;
  const std::shared_ptr<IoBackend> io_;
  const std::unique_ptr<ChunkIndex> index_;
  const std::unique_ptr<ChunkStore> store_;
  const std::unique_ptr<ListingStore> listings_;  // uses index_: declared after it
  const uint64_t chunk_size_;
  const std::string fresh_start_;
  CacheCounters counters_;
  const EvictionPolicy policy_;
  Quota quota_;
  const std::shared_ptr<ResidentChunks> resident_ =
      std::make_shared<ResidentChunks>(options_.max_verified_chunks);
  IndexSize index_size_;
  HitLog hits_{index_.get(), &policy_};
  ChunkWriter writer_;
  ChunkReader reader_;
  OriginReader origin_reader_;
  Evictor evictor_;
  Warmer warmer_;
  std::atomic<uint64_t> warm_claimed_{0};  // ClaimWarmRoom's, until the file is filled
  ChunkFetch fetch_;
  Prefetcher prefetcher_;
  VersionTable versions_{chunk_size_, options_.max_object_entries};
  FileOpener opener_;
  ReadPath reads_;
  VersionLeases leases_;
  // Its threads stop before the parts its fetches use.
  OrderPrefetcher order_;

  // Declared last: destroyed (stopped) first.
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace stoker
