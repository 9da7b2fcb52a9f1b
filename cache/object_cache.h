// ObjectCache: the SSD tier in front of an Origin. The one thing fs/ talks to
// for file data. It is a ChunkStore (data files), a ChunkIndex (RocksDB), an
// EvictionPolicy with a quota, and a Fetcher that collapses concurrent misses.
//
// Contract:
// - A file is cached per version: (path, OriginIdentity) -> version. A file
//   whose identity changed gets a new version; chunks of the old one are
//   never served again and are dropped. The same content somewhere else (a
//   remounted or copied origin: SameContent in origin.h, or another inode
//   whose bytes match every cached chunk) keeps its version.
// - A damaged index (ChunkIndex::Open's EBADMSG) is never wiped or guessed
//   around: Open refuses with one line naming `stoker fsck --repair DIR`.
//   Neither is a cache of another chunk size, nor one of another origin
//   (kCacheMismatch), unless CacheOptions::reset asks to empty it. Fresh starts (a reset; an
//   index that was deleted) are logged and reported in
//   Stats()["fresh_start"].
// - A chunk is served only after its XXH3 checksum was verified by this
//   process (once per chunk per process); a mismatch drops the chunk, counts
//   checksum_failures and re-fetches from the origin. Readers never see
//   wrong bytes.
// - A chunk becomes visible only after its data is written and its index
//   record committed; a crash at any point leaves at most unreferenced space
//   that the next open (pending-write records) or fsck reclaims.
// - Segments of a ReadReply stay valid (eviction cannot punch them out)
//   until the ReadReply is destroyed.
// - A read that fetches from the origin is answered from the fetched bytes;
//   storing them (data write, index records) is left to the ReadReply's
//   destruction, which fs/ does after sending the reply: the cache write is
//   off the reader's path. Until then, reads of those chunks get the same
//   bytes, without a second origin read (CacheOptions::deferred_store_bytes
//   bounds the bytes waiting; past it, chunks are stored before Read returns).
// - If the origin cannot be reached (IsOriginUnavailable), cached chunks of
//   the last known version keep being served; uncached ranges fail with EIO.
//   For a while after such a failure (OriginBackoff), opens of cached files
//   are answered without asking the origin again: one waits out the
//   timeouts, not each.
// - No space (quota or cache filesystem full): data is served from the origin
//   without being cached; never an error to the reader.
//
// Thread-safety: all methods are thread-safe. OpenFile objects may be used
// from several threads at once.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/derived_source.h"
#include "cache/options.h"
#include "cache/origin/origin.h"
#include "cache/raw_reader.h"
#include "util/status.h"

namespace stoker {

// ObjectCache::Open's code for a cache dir whose index was made with another
// chunk size than options.chunk_size (and no options.reset): one line naming
// the dir's chunk size and --reset. What the cache holds is kept.
inline constexpr int kCacheMismatch = EMEDIUMTYPE;

// Why an open file's version cannot be leased whole (ObjectCache::LeaseWhole).
enum class LeaseRefusal : uint8_t {
  kEmpty,        // no bytes, so no data file
  kSlab,         // kept in a slab slot (a small file): no data file of its own
  kNotCached,    // a chunk is not in the cache (not fetched yet, or evicted)
  kNotVerified,  // a chunk not yet checked by this process
  kUncached,     // the version is served from the origin only (the disk is full)
  kStale,        // a newer version replaced it
  kDataFile,     // the data file is missing, or not the version's size
  kViewErrors,   // a decoded view's file with records that read as EIO
};
inline constexpr int kLeaseRefusals = 8;
// "slab", "not_cached", ...: the names stats use.
const char* LeaseRefusalName(LeaseRefusal why);

// One version's whole data file, held so that something outside the cache
// (the kernel, through FUSE passthrough) may read it directly. While the
// lease lives, every chunk of the version is pinned (eviction cannot punch
// it) and the data file holds the version's bytes, each verified by this
// process, at their own offsets, and is exactly the version's size. A
// version replaced meanwhile is dropped and its file unlinked, never
// punched: an open descriptor keeps reading its old bytes, never new ones.
// REQUIRES: destroyed before the ObjectCache.
class ListingStore;

class WholeFileLease {
 public:
  virtual ~WholeFileLease() = default;
  // The data file, open read-only, for as long as the lease lives.
  virtual int fd() const = 0;
  virtual uint64_t object_id() const = 0;
  virtual uint64_t version() const = 0;
  virtual uint64_t chunks() const = 0;
  // The version's size in bytes (0 for HoldVersion's).
  virtual uint64_t size() const = 0;
  // Another open reads the file: a hit on every chunk, for eviction.
  virtual void CountOpen() = 0;
};

class ObjectCache : public RawReader {
 public:
  // Files a cache holds beside its origin's: files made from other files of
  // the same cache (a mount's decoded views).
  struct Derived {
    // What the cache caches: the origin with the derived files in it (a
    // ViewNamespace over it).
    std::shared_ptr<Origin> origin;
    std::shared_ptr<DerivedSource> source;  // what the cache asks about them
  };
  // Makes the derived files, given the cache they read their sources
  // through. It may keep reader, but reads nothing through it before Open
  // returns; its error fails Open.
  using MakeDerived = std::function<Result<Derived>(RawReader& reader)>;

  // Opens (or creates) the cache at options.dir: takes the directory lock
  // (EBUSY "cache dir X is in use by stoker pid N (the mount at M)" if held),
  // empties it where options.reset says so, opens
  // the index, makes the derived files (make_derived; null: none), reclaims
  // pending writes of a crashed predecessor, starts the eviction and fetch
  // threads. Does not scan data/.
  static Result<std::unique_ptr<ObjectCache>> Open(const CacheOptions& options,
                                                   std::shared_ptr<Origin> origin,
                                                   const MakeDerived& make_derived = nullptr);
  // Stops threads, flushes access records, closes the index.
  virtual ~ObjectCache() = default;

  // Opens path for reading, revalidating its identity with the origin if the
  // last check is older than revalidate_seconds (or force_revalidate).
  virtual Result<Opened> Open(const std::string& path, bool force_revalidate) = 0;
  // Opens path for another member of a cache group (group/peer_server.h):
  // as a reader's open, but what it misses is read from the origin only
  // (Via::kOriginOnly), never asked of a third member. keep_cache and
  // changed are always false.
  virtual Result<Opened> OpenForPeer(const std::string& path) = 0;

  // The attributes of path's cached version, for a lookup to be answered
  // without the origin: when the origin was asked about path less than
  // --revalidate ago (by this process or, as the index records, an earlier
  // one; counts attrs_from_cache), while the origin backs off
  // (Origin::backoff()), or with origin_failed (a request just failed to
  // reach it; both count revalidations_skipped). nullopt: the cache holds no
  // version of path, or the origin should be asked (a derived path, unless
  // origin_failed: its Stat opens its source through the cache, which
  // answers the same way). Never asks the origin.
  virtual std::optional<struct stat> HeldAttr(const std::string& path, bool origin_failed) = 0;

  // `stoker refresh`: everything held of the origin at or below prefix ("" is
  // the root) is asked of it again, once, whatever --revalidate says (never
  // included): the listings a wrapper keeps go (Origin::Refresh), and each
  // path's next open or lookup revalidates it, in this process and, as the
  // index records, after a remount. A changed file gets a new version at its
  // next open; open files keep theirs. Returns how many files were marked.
  virtual Result<uint64_t> Refresh(const std::string& prefix) = 0;

  // Held by fs/ from before a Read until its reply has reached the kernel.
  // When an open finds the origin file changed, the version it replaces is
  // superseded (its later reads fail with ESTALE) and the open waits for
  // the reads already past that check to be answered before it returns:
  // so no byte of the old version enters the kernel's page cache after the
  // open that invalidates it (and new pages never sit beside old ones).
  virtual std::shared_lock<std::shared_mutex> HoldServe(OpenFileState& file) = 0;

  // CacheOptions::data_files_in_page_cache from now on (fs/ turns it off
  // when the kernel refuses passthrough).
  virtual void SetDataFilesInPageCache(bool on) = 0;

  // Leases the whole data file of file's version (see WholeFileLease), or
  // says why not in *why (the status is then EAGAIN).
  virtual Result<std::unique_ptr<WholeFileLease>> LeaseWhole(OpenFileState& file,
                                                             LeaseRefusal* why) = 0;
  // Pins the chunks of version (object_id, version), cached or not, without
  // checking them: for a restarted daemon whose predecessor leased it, as
  // the kernel still reads the file. fd() is -1.
  virtual std::unique_ptr<WholeFileLease> HoldVersion(uint64_t object_id, uint64_t version,
                                                      uint64_t chunks) = 0;

  // Queues path (a file, or a directory walked recursively) to be fetched
  // into the cache in the background. Returns once queued.
  virtual Status Warm(const std::string& path) = 0;
  // Queues paths as one job (cache/warm_job.h); returns its id once queued.
  // Each path must exist and be a file or a directory.
  virtual Result<uint64_t> StartWarm(const std::vector<std::string>& paths) = 0;
  // WarmJob::Json of job id, or an array of every job kept with id 0; null
  // for a job not kept (the last kMaxWarmJobs are).
  virtual nlohmann::json WarmStatus(uint64_t id) = 0;
  static constexpr size_t kMaxWarmJobs = 64;

  // Prefetch in a sampler's order (cache/order_prefetcher.h): SetOrder
  // replaces the order with paths (origin paths, in the order a reader will
  // open them), cancelling the old one's fetches, and returns its id. EINVAL
  // for no paths or one of its first kOrderPathsChecked that is not a
  // regular file (ENOENT if absent; the others are not asked about: one
  // that is gone is passed over, counted in order_not_fetched); EFBIG past
  // the order's memory bound; ENOTSUP when orders are off
  // (order_ahead_files 0).
  virtual Result<uint64_t> SetOrder(const std::vector<std::string>& paths) = 0;
  // Adds paths to the end of order id (an order sent in parts); ESTALE if
  // another order replaced it.
  virtual Status AppendOrder(uint64_t id, const std::vector<std::string>& paths) = 0;
  // Drops the order.
  virtual void ClearOrder() = 0;
  static constexpr size_t kOrderPathsChecked = 4;

  // The counters and gauges as JSON (the stats.json schema).
  virtual nlohmann::json Stats() = 0;

  // The directory listings kept with --revalidate never
  // (cache/kept_listings.h); with any other --revalidate, none are kept and
  // those kept before were dropped at Open.
  virtual ListingStore& listings() = 0;

  virtual CacheCounters& counters() = 0;
};

}  // namespace stoker
