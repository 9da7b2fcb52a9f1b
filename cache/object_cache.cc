// ObjectCache: opening a cache directory (the index, the store, reclaiming
// a crashed predecessor's writes), the parts put together, starting and
// stopping, stats; each other call forwarded to the part that does it.
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>

#include "cache/index_format.h"
#include "cache/io/direct_io.h"
#include "cache/object_cache_impl.h"
#include "cache/origin/origin_backoff.h"
#include "util/duration.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {
namespace {

Status ValidateOptions(const CacheOptions& o) {
  if (o.dir.empty()) return Status::Invalid("cache dir not given");
  if (o.chunk_size < kBlockSize || o.chunk_size % kBlockSize != 0 || o.chunk_size > (64u << 20)) {
    return Status::Invalid("chunk size " + std::to_string(o.chunk_size) +
                           " must be a multiple of 4096 between 4 KiB and 64 MiB");
  }
  if (o.capacity_bytes < 4 * o.chunk_size) {
    return Status::Invalid("cache size " + std::to_string(o.capacity_bytes) +
                           " is smaller than 4 chunks of " + std::to_string(o.chunk_size));
  }
  if (!(o.low_watermark > 0 && o.low_watermark <= o.high_watermark && o.high_watermark <= 1)) {
    return Status::Invalid("watermarks must satisfy 0 < low <= high <= 1");
  }
  return Status::OK();
}

// A fresh start: the index and every data file go (subs: only those).
Status Wipe(const std::string& dir, std::vector<const char*> subs = {"/index", "/data"}) {
  for (const char* sub : subs) {
    std::error_code ec;
    std::filesystem::remove_all(dir + sub, ec);
    if (ec) return Status::Error(ec.value(), "wipe '" + dir + sub + "': " + ec.message());
  }
  return Status::OK();
}

uint64_t CountFiles(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) ++n;
  }
  return n;
}

// A chunk size (a multiple of 4 KiB) in whole MiB or KiB: "1 MiB", or as
// --chunk-size takes it (flag): "1M".
std::string ChunkSizeText(uint64_t bytes, bool flag) {
  const bool mib = bytes % (1u << 20) == 0;
  return std::to_string(mib ? bytes >> 20 : bytes >> 10) +
         (flag ? (mib ? "M" : "K") : (mib ? " MiB" : " KiB"));
}

Status ChunkSizeMismatch(const std::string& dir, uint64_t cached, uint64_t wanted) {
  return Status::Error(kCacheMismatch,
                       "cache dir '" + dir + "' holds chunks of " + ChunkSizeText(cached, false) +
                           ", not " + ChunkSizeText(wanted, false) +
                           ": mount it with --chunk-size " + ChunkSizeText(cached, true) +
                           ", or add --reset to empty it");
}

Status OriginMismatch(const std::string& dir, const std::string& cached,
                      const std::string& wanted) {
  return Status::Error(kCacheMismatch, "cache dir '" + dir + "' holds files of " + cached +
                                           ", not " + wanted + ": mount it over " + cached +
                                           ", or add --reset to empty it");
}

size_t DescriptorBudget() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 4096;
  size_t n = static_cast<size_t>(rl.rlim_cur) / 4;
  return n < 64 ? 64 : (n > 4096 ? 4096 : n);
}

}  // namespace

ReadReply::~ReadReply() = default;

size_t ReadReply::size() const {
  size_t n = 0;
  for (const auto& s : segments_) n += s.len;
  return n;
}

Result<std::unique_ptr<ObjectCache>> ObjectCache::Open(const CacheOptions& options,
                                                       std::shared_ptr<Origin> origin,
                                                       const MakeDerived& make_derived) {
  STOKER_RETURN_IF_ERROR(ValidateOptions(options));
  ObjectCacheImpl::Parts p;
  p.options = options;
  p.origin = std::move(origin);
  p.make_derived = make_derived;
  STOKER_ASSIGN_OR_RETURN(p.lock, CacheDirLock::Acquire(options.dir, true,
                                                        {.pid = options.holder_pid,
                                                         .mountpoint = options.holder_mountpoint}));
  if (options.reset) {
    STOKER_RETURN_IF_ERROR(Wipe(options.dir));
    p.fresh_start = "emptied on request (--reset)";
  }
  if (options.io != nullptr) {
    p.io = options.io;
  } else {
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<IoBackend> io, MakeIoBackend(options.io_backend));
    p.io = std::move(io);
  }

  ChunkIndex::Options io_opts;
  io_opts.path = options.dir + "/index";
  io_opts.chunk_size_if_new = options.chunk_size;
  // A small cache must not spend its bound on memtables and WAL.
  io_opts.write_buffer_bytes =
      std::clamp<uint64_t>(options.capacity_bytes / 256, 256ull << 10, 16ull << 20);
  p.index_headroom = io_opts.write_buffer_bytes;
  // A damaged index is never guessed around: which chunks it still vouches
  // for is for fsck to find out, with every checksum checked.
  auto damaged = [&](const std::string& what) {
    std::string msg = what.find("is damaged") != std::string::npos
                          ? what
                          : "index '" + io_opts.path + "' is damaged: " + what;
    return Status::Error(
        EBADMSG, "cache " + msg + "; run 'stoker fsck --repair " + options.dir + "' to rebuild it");
  };
  struct stat current;
  const bool had_index = ::stat((io_opts.path + "/CURRENT").c_str(), &current) == 0;
  auto index = ChunkIndex::Open(io_opts);
  if (!index.ok() && index.status().code() == EBADMSG) return damaged(index.status().message());
  if (index.ok() && index.value()->meta().chunk_size != options.chunk_size) {
    return ChunkSizeMismatch(options.dir, index.value()->meta().chunk_size, options.chunk_size);
  }
  if (index.ok() && index.value()->created()) {
    // A new index beside old data files (index/ was deleted): nothing can
    // reach them any more, and they would take space outside the bound.
    uint64_t files = CountFiles(options.dir + "/data");
    if (files > 0) {
      p.fresh_start = "its index was missing; removed " + std::to_string(files) + " data files";
      STOKER_RETURN_IF_ERROR(Wipe(options.dir, {"/data"}));
    } else if (had_index) {
      p.fresh_start = "its index held no record, not even its meta record (a new index cut short)";
    }
  }
  if (!index.ok()) return index.status();
  if (!options.origin_location.empty()) {
    // A cache made before the origin record gets one at its first mount.
    Result<std::optional<std::string>> held = index.value()->GetOrigin();
    if (!held.ok() && held.status().code() == EBADMSG) return damaged(held.status().message());
    STOKER_RETURN_IF_ERROR(held.status());
    if (!held->has_value()) {
      STOKER_RETURN_IF_ERROR(index.value()->PutOrigin(options.origin_location));
    } else if (**held != options.origin_location) {
      return OriginMismatch(options.dir, **held, options.origin_location);
    }
  }
  if (!p.fresh_start.empty()) {
    LOG_WARN("cache in '{}' started empty: {}", options.dir, p.fresh_start);
  }
  p.index = std::move(index).value();
  // A sixteenth of the bound: a million files in 1,000-entry directories
  // take about 100 MiB of listings.
  STOKER_ASSIGN_OR_RETURN(p.listings,
                          ListingStore::Open(p.index.get(), options.capacity_bytes / 16,
                                             options.revalidate_seconds == kNeverSeconds));
  STOKER_ASSIGN_OR_RETURN(p.store, ChunkStore::Open(options.dir + "/data", DescriptorBudget()));

  auto impl = std::make_unique<ObjectCacheImpl>(std::move(p));
  STOKER_RETURN_IF_ERROR(impl->made());
  Status started = impl->Start();
  if (started.code() == EBADMSG) return damaged(started.message());
  STOKER_RETURN_IF_ERROR(started);
  return std::unique_ptr<ObjectCache>(std::move(impl));
}

ObjectCacheImpl::ObjectCacheImpl(Parts p)
    : options_(p.options),
      recent_(std::make_shared<RecentBytes>(
          RecentBytes::Limits{options_.recent_bytes, options_.recent_bytes / 3 * 2,
                              std::min(options_.deferred_store_bytes, options_.recent_bytes),
                              options_.recent_bytes / 6})),
      derived_files_(p.make_derived ? p.make_derived(*this) : Derived{p.origin, nullptr}),
      origin_(derived_files_.ok() ? derived_files_->origin : p.origin),
      derived_(derived_files_.ok() && derived_files_->source != nullptr
                   ? derived_files_->source
                   : std::make_shared<NothingDerived>()),
      lock_(std::move(p.lock)),
      io_(std::move(p.io)),
      index_(std::move(p.index)),
      store_(std::move(p.store)),
      listings_(std::move(p.listings)),
      chunk_size_(options_.chunk_size),
      fresh_start_(p.fresh_start),
      quota_(options_.capacity_bytes, options_.high_watermark, options_.low_watermark),
      index_size_(options_.dir, p.index_headroom, index_.get(), &quota_),
      writer_(ChunkWriter::Options{options_.dir, options_.chunk_size, options_.slab_max_bytes,
                                   options_.min_free_bytes, options_.data_files_in_page_cache},
              ChunkWriter::Parts{io_.get(), index_.get(), store_.get(), &quota_, resident_.get(),
                                 &index_size_, &hits_, &counters_, [this] { evictor_.Kick(); }}),
      reader_(ChunkReader::Parts{chunk_size_, io_.get(), index_.get(), store_.get(),
                                 resident_.get(), &writer_, &counters_}),
      origin_reader_(OriginReader::Parts{chunk_size_, index_.get(), derived_.get(), &counters_}),
      evictor_(Evictor::Parts{chunk_size_, index_.get(), store_.get(), &quota_, &policy_,
                              resident_.get(), &writer_, &hits_, &index_size_, &counters_}),
      warmer_(origin_.get(), derived_.get(), &counters_, kMaxWarmJobs,
              [this](const std::string& path) { return WarmFile(path); }),
      fetch_(ChunkFetch::Parts{chunk_size_, &origin_reader_, &writer_, &reader_, derived_.get(),
                               &counters_, recent_.get()},
             Prefetcher::ReadaheadLimit(options_)),
      prefetcher_(options_,
                  Prefetcher::Parts{
                      chunk_size_, index_.get(), store_.get(), &quota_, resident_.get(), &writer_,
                      &reader_, &fetch_, derived_.get(), &counters_,
                      [this](const std::string& path) {
                        return opener_.Open(path, false, Opener::kPrefetch);
                      },
                      [this](const std::string& dir) -> Result<std::vector<std::string>> {
                        std::vector<std::string> files;
                        const size_t most = DirScan::Options{}.max_entries + 1;
                        STOKER_RETURN_IF_ERROR(origin_->ReadDir(dir, [&](const OriginDirEntry& e) {
                          if (S_ISREG(e.st.st_mode)) files.push_back(e.name);
                          return files.size() < most;
                        }));
                        return files;
                      }}),
      opener_(options_, FileOpener::Parts{chunk_size_, origin_, derived_.get(), index_.get(),
                                          &versions_, &writer_, &evictor_, &counters_,
                                          [this] { return std::make_shared<Readahead>(recent_); }}),
      reads_(ReadPath::Parts{chunk_size_, index_.get(), store_.get(), resident_, &writer_, &reader_,
                             &fetch_, &hits_, &prefetcher_, derived_.get(), &counters_}),
      leases_(
          VersionLeases::Parts{chunk_size_, index_.get(), store_.get(), resident_.get(), &writer_,
                               &reader_, &hits_, &prefetcher_, derived_.get(), &counters_},
          options_.verify_at_open_bytes),
      order_(OrderPrefetcher::Options{{static_cast<size_t>(options_.order_ahead_files),
                                       options_.order_ahead_bytes},
                                      OrderPrefetcher::Options{}.max_order_bytes,
                                      options_.order_threads},
             &counters_, [this](const std::string& path) { return prefetcher_.FetchWhole(path); }) {
  quota_.SetCommitted(index_->meta().usage_bytes);
  index_size_.Measure();
  writer_.MeasureDisk();
}

Status ObjectCacheImpl::Start() {
  STOKER_RETURN_IF_ERROR(writer_.ReclaimIntents());
  STOKER_RETURN_IF_ERROR(index_->ForEach(kDropPrefix, [&](std::string_view k, auto) {
    auto v = DecodeDropKey(k);
    if (v.ok()) evictor_.QueueDrop(*v);
    return true;
  }));
  pool_ = std::make_unique<WorkerPool>(options_.fetch_threads, 64);
  evictor_.Start();
  warmer_.Start(pool_.get());
  prefetcher_.Start(pool_.get());
  if (options_.order_ahead_files > 0) order_.Start();
  IndexMeta m = index_->meta();
  LOG_INFO("cache '{}': {} objects, {} chunks, {} bytes of {} ({} I/O)", options_.dir, m.objects,
           m.chunks, m.usage_bytes, options_.capacity_bytes, io_->Name());
  return Status::OK();
}

Result<ObjectCache::Opened> ObjectCacheImpl::Open(const std::string& path, bool force) {
  Result<Opened> opened = opener_.Open(path, force, Opener::kFs);
  if (opened.ok()) {
    prefetcher_.AfterOpen(path);
    order_.Opened(path);
  }
  return opened;
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenForDerived(const std::string& path) {
  return opener_.Open(path, false, Opener::kForDerived);
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenForPeer(const std::string& path) {
  // A view's file is made by each member from raw bytes: never shared.
  if (derived_->IsDerived(path)) {
    return Status::NotFound("'" + path + "' is not a file of the origin's tree");
  }
  return opener_.Open(path, false, Opener::kPeer);
}

std::optional<struct stat> ObjectCacheImpl::HeldAttr(const std::string& path, bool origin_failed) {
  return opener_.HeldAttr(path, origin_failed);
}

Result<uint64_t> ObjectCacheImpl::Refresh(const std::string& prefix) {
  return opener_.Refresh(prefix);
}

std::shared_lock<std::shared_mutex> ObjectCacheImpl::HoldServe(OpenFileState& file) {
  return std::shared_lock<std::shared_mutex>(file.version->serving);
}

Result<std::optional<std::string>> ObjectCacheImpl::GetDerived(const OpenFileState& file,
                                                               const std::string& name) {
  return index_->GetDerived(file.version->key, name);
}

Status ObjectCacheImpl::PutDerived(const OpenFileState& file, const std::string& name,
                                   const std::string& value) {
  // A record put after the version's drop finished would stay behind it.
  if (file.version->superseded || file.version->uncached) return Status::OK();
  return index_->PutDerived(file.version->key, name, value);
}

Status ObjectCacheImpl::Read(OpenFileState& file, uint64_t off, size_t len, ReadReply* out) {
  return reads_.Read(file, off, len, out);
}

Result<std::unique_ptr<WholeFileLease>> ObjectCacheImpl::LeaseWhole(OpenFileState& file,
                                                                    LeaseRefusal* why) {
  return leases_.LeaseWhole(file, why);
}

std::unique_ptr<WholeFileLease> ObjectCacheImpl::HoldVersion(uint64_t object_id, uint64_t version,
                                                             uint64_t chunks) {
  return leases_.HoldVersion(object_id, version, chunks);
}

ObjectCacheImpl::~ObjectCacheImpl() {
  // A walk blocked on the pool's full queue goes on once the pool stops.
  warmer_.RequestStop();
  if (pool_) pool_->Stop();
  warmer_.Join();
  evictor_.Stop();
}

nlohmann::json ObjectCacheImpl::Stats() {
  nlohmann::json j;
  const CacheCounters& c = counters_;
#define STOKER_COUNTER(name) j[#name] = c.name.load();
  STOKER_COUNTER(bytes_read)
  STOKER_COUNTER(read_requests)
  STOKER_COUNTER(cache_hit_bytes)
  STOKER_COUNTER(origin_bytes_read)
  STOKER_COUNTER(origin_reads)
  STOKER_COUNTER(derived_bytes_produced)
  STOKER_COUNTER(chunks_fetched)
  STOKER_COUNTER(chunks_written)
  STOKER_COUNTER(slab_chunks_written)
  STOKER_COUNTER(chunks_not_cached)
  STOKER_COUNTER(evicted_bytes)
  STOKER_COUNTER(evicted_chunks)
  STOKER_COUNTER(revalidations)
  STOKER_COUNTER(origin_changes)
  STOKER_COUNTER(checksum_failures)
  STOKER_COUNTER(chunks_verified)
  STOKER_COUNTER(chunks_verified_by_readers)
  STOKER_COUNTER(chunks_verified_at_open)
  STOKER_COUNTER(chunks_verified_ahead)
  STOKER_COUNTER(origin_errors)
  STOKER_COUNTER(revalidations_skipped)
  STOKER_COUNTER(attrs_from_cache)
  STOKER_COUNTER(errors)
  STOKER_COUNTER(collapsed_misses)
  STOKER_COUNTER(collapsed_checks)
  STOKER_COUNTER(prefetched_chunks)
  STOKER_COUNTER(dir_prefetched_files)
  STOKER_COUNTER(warm_files_queued)
  STOKER_COUNTER(warm_files_done)
  STOKER_COUNTER(warm_bytes)
  STOKER_COUNTER(orders_set)
  STOKER_COUNTER(order_prefetched_files)
  STOKER_COUNTER(order_hits)
  STOKER_COUNTER(order_cancelled)
  STOKER_COUNTER(order_not_fetched)
#undef STOKER_COUNTER
  j.update(order_.Gauges());
  IndexMeta m = index_->meta();
  uint64_t index_bytes = index_size_.Now();
  j["cache_used_bytes"] = quota_.committed() + index_bytes;
  j["chunk_bytes"] = quota_.committed();
  j["index_bytes"] = index_bytes;
  j["index_headroom_bytes"] = index_size_.headroom();
  j["fresh_start"] = fresh_start_;
  j["kept_listings"] = listings_->count();
  j["kept_listing_bytes"] = listings_->bytes();
  j["cache_capacity_bytes"] = options_.capacity_bytes;
  // Below capacity while others fill the cache's filesystem (ChunkWriter::MeasureDisk).
  j["cache_limit_bytes"] = quota_.limit();
  j["objects"] = m.objects;
  j["chunks"] = m.chunks;
  j["chunk_size"] = chunk_size_;
  j["objects_in_memory"] = versions_.size();
  j["pending_drops"] = evictor_.pending_drops();
  j["verified_chunks_held"] = resident_->verified();
  // Memory held for reads to come (RecentBytes), by what holds it.
  j["recent_bytes"] = recent_->bytes();
  j["recent_limit_bytes"] = recent_->limits().total;
  j["readahead_bytes"] = recent_->bytes(RecentBytes::Kind::kReadahead);
  j["unstored_bytes"] = recent_->bytes(RecentBytes::Kind::kUnstored);
  j["produced_kept_bytes"] = recent_->bytes(RecentBytes::Kind::kProduced);
  j["run_buffers_reused"] = RunBufferPool().reused();
  j["run_buffers_allocated"] = RunBufferPool().allocated();
  j["io_backend"] = io_->Name();
  j["origin"] = origin_->Describe();
  if (std::string io = origin_->IoBackendName(); !io.empty()) j["origin_io_backend"] = io;
  if (OriginBackoff* b = origin_->backoff()) {
    j["origin_unreachable"] = b->unreachable();
    j["origin_unreachable_episodes"] = b->episodes();
  }
  j["cache_dir"] = options_.dir;
  uint64_t read = c.bytes_read.load();
  j["hit_ratio"] = read ? static_cast<double>(c.cache_hit_bytes.load()) / read : 0.0;
  return j;
}

}  // namespace stoker
