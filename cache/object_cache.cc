// ObjectCache: opening a cache directory, revalidating opens, stats.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <mutex>

#include "cache/index_format.h"
#include "cache/io/direct_io.h"
#include "cache/object_cache_impl.h"
#include "cache/origin/origin_backoff.h"
#include "util/checksum.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {
namespace {

// A mount without decoded views: no path is derived.
class NothingDerived final : public DerivedSource {
 public:
  bool IsDerived(const std::string&) const override { return false; }
  uint64_t DerivedDevice(const std::string&) const override { return 0; }
  Status CheckRead(const std::string&, uint64_t, uint64_t) override { return Status::OK(); }
  bool HasUnreadableRanges(const std::string&) override { return false; }
  void Expedite(const std::string&) override {}
};

// Opened::content_tag: what SameContent judges by in the identity the
// version was first cached with (not a local file's ctime: linking a file
// changes it, and hard links must share their tag; a remote origin's ETag is
// in it); for a derived object also the version itself, as its bytes may be
// remade from an unchanged source.
uint64_t ContentTag(const ObjectVersion& v, bool derived) {
  const OriginIdentity& id = v.identity;
  std::string b = id.etag;
  const bool remote = id.dev == 0;
  for (uint64_t x : {id.size, static_cast<uint64_t>(id.mtime_ns),
                     remote ? static_cast<uint64_t>(id.ctime_ns) : 0, id.ino, id.dev,
                     derived ? v.key.object_id : 0, derived ? v.key.version : 0}) {
    b.append(reinterpret_cast<const char*>(&x), sizeof(x));
  }
  return ChunkChecksum(b.data(), b.size());
}

int64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

ObjectAttrs AttrsOf(const struct stat& st) {
  ObjectAttrs a;
  a.mode = st.st_mode;
  a.uid = st.st_uid;
  a.gid = st.st_gid;
  a.nlink = st.st_nlink;
  a.atime_ns = static_cast<int64_t>(st.st_atim.tv_sec) * 1000000000 + st.st_atim.tv_nsec;
  a.blocks = static_cast<int64_t>(st.st_blocks);
  return a;
}

struct timespec ToTimespec(int64_t ns) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  if (ts.tv_nsec < 0) {
    ts.tv_nsec += 1000000000;
    ts.tv_sec -= 1;
  }
  return ts;
}

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

Result<std::shared_ptr<OriginFile>> OriginHandle::Get() {
  MutexLock l(mu_);
  if (!file_) {
    STOKER_ASSIGN_OR_RETURN(file_, origin_->Open(path_));
  }
  return file_;
}

bool ObjectVersion::AtOrigin(const OriginIdentity& now) const {
  MutexLock l(at_mu);
  if (at_origin == now) return true;
  if (!SameContent(at_origin, now)) return false;
  LOG_INFO("origin file '{}' is the same content at {} (was {}); its cached data stays valid", path,
           now.ToString(), at_origin.ToString());
  at_origin = now;
  return true;
}

void ObjectVersion::MovedTo(const OriginIdentity& now) const {
  MutexLock l(at_mu);
  LOG_INFO("origin file '{}' is another inode now ({}, was {}) with the same bytes", path,
           now.ToString(), at_origin.ToString());
  at_origin = now;
}

void OriginHandle::Forget(const OriginFile* file) {
  MutexLock l(mu_);
  if (file_.get() == file) file_.reset();
}

Result<std::unique_ptr<ObjectCache>> ObjectCache::Open(const CacheOptions& options,
                                                       std::shared_ptr<Origin> origin,
                                                       std::shared_ptr<DerivedSource> derived) {
  STOKER_RETURN_IF_ERROR(ValidateOptions(options));
  ObjectCacheImpl::Parts p;
  p.options = options;
  p.origin = std::move(origin);
  p.derived = derived != nullptr ? std::move(derived) : std::make_shared<NothingDerived>();
  STOKER_ASSIGN_OR_RETURN(p.lock, CacheDirLock::Acquire(options.dir, true));
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
    p.fresh_start = "it was made with chunk size " +
                    std::to_string(index.value()->meta().chunk_size) + ", this mount uses " +
                    std::to_string(options.chunk_size);
    index.value().reset();
    STOKER_RETURN_IF_ERROR(Wipe(options.dir));
    index = ChunkIndex::Open(io_opts);
  } else if (index.ok() && index.value()->created()) {
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
  if (!p.fresh_start.empty()) {
    LOG_WARN("cache in '{}' started empty: {}", options.dir, p.fresh_start);
  }
  p.index = std::move(index).value();
  STOKER_ASSIGN_OR_RETURN(p.store, ChunkStore::Open(options.dir + "/data", DescriptorBudget()));

  auto impl = std::make_unique<ObjectCacheImpl>(std::move(p));
  Status started = impl->Start();
  if (started.code() == EBADMSG) return damaged(started.message());
  STOKER_RETURN_IF_ERROR(started);
  return std::unique_ptr<ObjectCache>(std::move(impl));
}

ObjectCacheImpl::ObjectCacheImpl(Parts p)
    : options_(p.options),
      origin_(std::move(p.origin)),
      derived_(std::move(p.derived)),
      lock_(std::move(p.lock)),
      io_(std::move(p.io)),
      index_(std::move(p.index)),
      store_(std::move(p.store)),
      index_path_(options_.dir + "/index"),
      chunk_size_(options_.chunk_size),
      index_headroom_(p.index_headroom),
      fresh_start_(p.fresh_start),
      quota_(options_.capacity_bytes, options_.high_watermark, options_.low_watermark),
      dir_scan_(DirScan::Options{static_cast<size_t>(options_.dir_prefetch_files)},
                [this](const std::string& dir) -> Result<std::vector<std::string>> {
                  std::vector<std::string> files;
                  const size_t most = DirScan::Options{}.max_entries + 1;
                  STOKER_RETURN_IF_ERROR(origin_->ReadDir(dir, [&](const OriginDirEntry& e) {
                    if (S_ISREG(e.st.st_mode)) files.push_back(e.name);
                    return files.size() < most;
                  }));
                  return files;
                }) {
  quota_.SetCommitted(index_->meta().usage_bytes);
  MeasureIndex();
  MeasureDisk();
}

void ObjectCacheImpl::MeasureIndex() {
  uint64_t written = index_->bytes_written();
  uint64_t bytes = ChunkIndex::DiskBytes(index_path_);
  // The cache directory's own files (lock, the views' error list) count too.
  if (std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(options_.dir.c_str()), ::closedir); d) {
    while (struct dirent* de = ::readdir(d.get())) {
      struct stat st;
      if (::fstatat(::dirfd(d.get()), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISREG(st.st_mode)) {
        bytes += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
  }
  {
    MutexLock l(index_size_mu_);
    index_measured_ = bytes;
    index_written_at_ = written;
  }
  RefreshIndexBytes();
}

uint64_t ObjectCacheImpl::IndexBytesNow() {
  MutexLock l(index_size_mu_);
  return index_measured_ + (index_->bytes_written() - index_written_at_);
}

void ObjectCacheImpl::RefreshIndexBytes() {
  quota_.SetIndexBytes(IndexBytesNow() + index_headroom_);
}

Status ObjectCacheImpl::Start() {
  STOKER_RETURN_IF_ERROR(ReclaimIntents());
  STOKER_RETURN_IF_ERROR(index_->ForEach(kDropPrefix, [&](std::string_view k, auto) {
    auto v = DecodeDropKey(k);
    if (v.ok()) QueueDrop(*v);
    return true;
  }));
  pool_ = std::make_unique<WorkerPool>(options_.fetch_threads, 64);
  evictor_ = std::thread([this] { EvictorLoop(); });
  warmer_ = std::thread([this] { WarmLoop(); });
  IndexMeta m = index_->meta();
  LOG_INFO("cache '{}': {} objects, {} chunks, {} bytes of {} ({} I/O)", options_.dir, m.objects,
           m.chunks, m.usage_bytes, options_.capacity_bytes, io_->Name());
  return Status::OK();
}

ObjectCacheImpl::~ObjectCacheImpl() {
  {
    MutexLock l(warm_mu_);
    warm_stop_ = true;
  }
  warm_cv_.notify_all();
  if (pool_) pool_->Stop();
  if (warmer_.joinable()) warmer_.join();
  {
    MutexLock l(bg_mu_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (evictor_.joinable()) evictor_.join();
}

// A crashed predecessor may have written data whose record never committed:
// punch it out. The intents name every such range, so data/ is not scanned.
Status ObjectCacheImpl::ReclaimIntents() {
  std::vector<std::string> bad;
  std::vector<std::pair<ChunkKey, SlotRef>> intents;
  STOKER_RETURN_IF_ERROR(index_->ForEach(kIntentPrefix, [&](std::string_view k, auto value) {
    auto key = DecodeIntentKey(k);
    auto slot = DecodeIntent(value);
    if (key.ok() && slot.ok()) {
      intents.emplace_back(*key, *slot);
    } else {
      bad.emplace_back(k);  // a slot it named is fsck's to find
    }
    return true;
  }));
  for (const auto& k : bad) STOKER_RETURN_IF_ERROR(index_->DeleteRaw(k));
  for (const auto& [key, slot] : intents) {
    STOKER_ASSIGN_OR_RETURN(auto rec, index_->GetChunk(key));
    const bool owned = rec && (*rec).slot == slot;  // committed there after all
    if (!owned) {
      const ChunkPlace place = PlaceOf(key, slot, chunk_size_);
      auto file = store_->Get(place.file, false);
      if (file.ok()) {
        Status s = ChunkStore::Punch((*file)->fd(), place.off, place.span);
        if (!s.ok()) LOG_WARN("reclaiming an interrupted chunk write: {}", s.message());
      }
    }
    if (slot.valid() && !owned) {
      STOKER_RETURN_IF_ERROR(index_->ReleaseSlot(key, slot));
    } else {
      STOKER_RETURN_IF_ERROR(index_->DeleteIntent(key));
    }
    VersionKey v = key.version_key();
    STOKER_RETURN_IF_ERROR(store_
                               ->UnlinkIfIdle(v,
                                              [&]() -> Result<bool> {
                                                STOKER_ASSIGN_OR_RETURN(bool has,
                                                                        index_->HasChunks(v));
                                                return !has;
                                              })
                               .status());
  }
  if (!intents.empty()) LOG_INFO("reclaimed {} interrupted chunk writes", intents.size());
  return Status::OK();
}

std::shared_ptr<ObjectVersion> ObjectCacheImpl::MakeVersion(const std::string& path,
                                                            const ObjectRecord& rec) {
  auto v = std::make_shared<ObjectVersion>();
  v->path = path;
  v->key = {rec.object_id, rec.version};
  v->identity = rec.identity;
  {
    MutexLock l(v->at_mu);  // not shared yet: for the analysis
    v->at_origin = rec.identity;
  }
  v->chunks = ChunkCount(rec.identity.size, chunk_size_);
  struct stat& st = v->st;
  st.st_mode = rec.attrs.mode;
  st.st_uid = rec.attrs.uid;
  st.st_gid = rec.attrs.gid;
  st.st_nlink = rec.attrs.nlink;
  st.st_size = static_cast<off_t>(rec.identity.size);
  st.st_ino = rec.identity.ino;
  st.st_dev = rec.identity.dev;
  st.st_blksize = 4096;
  st.st_blocks = rec.attrs.blocks >= 0 ? static_cast<blkcnt_t>(rec.attrs.blocks)
                                       : static_cast<blkcnt_t>((rec.identity.size + 511) / 512);
  st.st_atim = ToTimespec(rec.attrs.atime_ns);
  st.st_mtim = ToTimespec(rec.identity.mtime_ns);
  st.st_ctim = ToTimespec(rec.identity.ctime_ns);
  return v;
}

ObjectCacheImpl::ObjectEntry ObjectCacheImpl::UncachedEntry(const std::string& path,
                                                            ObjectRecord rec, const Status& why) {
  // Object ids the index hands out count up from 1: these never meet one.
  rec.object_id = kUncachedObjectIds | ++uncached_versions_;
  rec.version = 1;
  if (!logged_no_space_.exchange(true)) {
    LOG_WARN("serving from the origin without caching: {}", why.message());
  }
  auto v = MakeVersion(path, rec);
  v->uncached = true;
  return ObjectEntry{rec, std::move(v), false};
}

void ObjectCacheImpl::Supersede(const std::shared_ptr<ObjectVersion>& v, const VersionKey& key) {
  if (v) {
    v->superseded = true;
    // Reads already past their check finish their replies first; later ones
    // see superseded. (Readers never wait on an open: no cycle.)
    std::unique_lock<std::shared_mutex> drained(v->serving);
  }
  QueueDrop(key);
}

std::shared_lock<std::shared_mutex> ObjectCacheImpl::HoldServe(OpenFileState& file) {
  return std::shared_lock<std::shared_mutex>(file.version->serving);
}

Result<ObjectCache::Opened> ObjectCacheImpl::Open(const std::string& path, bool force) {
  Result<Opened> opened = OpenAs(path, force, Opener::kFs);
  if (opened.ok()) MaybePrefetchDir(path);
  return opened;
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenForDerived(const std::string& path) {
  return OpenAs(path, false, Opener::kBackground);
}

bool ObjectCacheImpl::HeldWhole(const ObjectVersion& v) {
  uint64_t held = 0;
  Status s = index_->ForEachPrefix(VersionChunkPrefix(v.key), [&](auto, auto) {
    held++;
    return true;
  });
  return s.ok() && held == v.chunks;
}

bool ObjectCacheImpl::OriginBackingOff(const ObjectVersion& v) {
  OriginBackoff* b = origin_->backoff();
  if (b == nullptr || !b->unreachable()) return false;
  // A file held in part will need the origin for the rest: its open asks,
  // so that it reads the version the origin has now, not a stale one that
  // fails (ESTALE) where it is not cached.
  return HeldWhole(v) && b->AnswerFromHeld();
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenHeldUnlocked(const std::string& path) {
  std::optional<ObjectEntry> entry;
  {
    MutexLock l(objects_mu_);
    auto it = objects_.find(path);
    if (it != objects_.end()) entry = it->second;
  }
  if (!entry) {
    auto r = index_->GetObject(path);
    if (r.ok() && r->has_value() && !OtherDerivation(path, **r)) {
      entry = ObjectEntry{**r, MakeVersion(path, **r), false};
    }
  }
  if (!entry || entry->version->superseded || !HeldWhole(*entry->version)) {
    counters_.errors++;
    return Status::Error(ETIMEDOUT, "open of '" + path +
                                        "': the origin is not answering and the cache does "
                                        "not hold the file whole");
  }
  counters_.revalidations_skipped++;
  Opened o;
  o.keep_cache = false;  // its stripe holder may find it changed
  o.st = entry->version->st;
  const bool derived = derived_->IsDerived(path);
  o.content_tag = ContentTag(*entry->version, derived);
  o.file =
      std::make_shared<OpenFileState>(entry->version, std::make_shared<OriginHandle>(origin_, path),
                                      std::make_shared<Readahead>(readahead_budget_), derived);
  return o;
}

std::optional<struct stat> ObjectCacheImpl::HeldAttr(const std::string& path, bool origin_failed) {
  // Every lookup comes here: with --revalidate 0 and the origin answering,
  // at no cost.
  OriginBackoff* b = origin_->backoff();
  const bool backing_off = origin_failed || (b != nullptr && b->unreachable());
  if (!backing_off && options_.revalidate_seconds == 0) return std::nullopt;
  // A derived file's Stat opens its source through the cache, which answers
  // the same way: asked only once that Stat has failed.
  if (!origin_failed && derived_->IsDerived(path)) return std::nullopt;
  std::shared_ptr<ObjectVersion> v;
  int64_t validated_ns = 0;
  {
    MutexLock l(objects_mu_);
    auto it = objects_.find(path);
    if (it != objects_.end()) {
      v = it->second.version;
      validated_ns = it->second.rec.validated_ns;
    }
  }
  if (!v) {
    auto r = index_->GetObject(path);
    if (!r.ok() || !r->has_value() || OtherDerivation(path, **r)) return std::nullopt;
    v = MakeVersion(path, **r);
    validated_ns = (*r)->validated_ns;
  }
  // Asked less than --revalidate ago: the answer stands, as the kernel's
  // own entry would (an Open trusts it the same way).
  if (!origin_failed && ValidatedWithinWindow(validated_ns) && !v->changed_at_origin) {
    counters_.attrs_from_cache++;
    return v->st;
  }
  if (!backing_off) return std::nullopt;
  // Asked only for a held file: a probe that would not be sent is no probe.
  if (!origin_failed && !OriginBackingOff(*v)) return std::nullopt;
  counters_.revalidations_skipped++;
  return v->st;
}

bool ObjectCacheImpl::OtherDerivation(const std::string& path, const ObjectRecord& r) const {
  const uint64_t dev = derived_->DerivedDevice(path);
  // A plain path whose record is a derived file's: a view's path before.
  if (dev == 0) return (r.identity.dev & kDerivedDevBit) != 0;
  return r.identity.dev != dev;
}

bool ObjectCacheImpl::ValidatedWithinWindow(int64_t validated_ns) const {
  const int64_t now = RealtimeNs();
  const int64_t window = static_cast<int64_t>(options_.revalidate_seconds) * 1000000000;
  return window > 0 && now >= validated_ns && now - validated_ns < window;
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

void ObjectCacheImpl::TrimObjects() {
  // Entries nothing else holds: the next open of their path reads its record
  // from the index again, and sets no keep_cache (seen is lost), which only
  // costs the kernel's pages of it. Down to 3/4, so that trims are rare.
  for (auto it = objects_.begin();
       it != objects_.end() && objects_.size() > options_.max_object_entries * 3 / 4;) {
    if (it->second.version.use_count() == 1) {
      it = objects_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenAs(const std::string& path, bool force,
                                                    Opener who) {
  auto& stripes = derived_->IsDerived(path) ? derived_stripes_ : open_stripes_;
  std::unique_lock<TimedMutex> stripe(stripes[std::hash<std::string>()(path) % stripes.size()],
                                      std::defer_lock);
  if (!stripe.try_lock()) {
    OriginBackoff* b = origin_->backoff();
    while (!stripe.try_lock_for(std::chrono::milliseconds(100))) {
      if (b != nullptr && b->unreachable()) return OpenHeldUnlocked(path);
    }
  }
  OpenLookup l;
  {
    MutexLock lock(objects_mu_);
    auto it = objects_.find(path);
    if (it != objects_.end()) l.entry = it->second;
  }
  // Not in the index (its disk was full): the origin is asked again and the
  // version recorded, and cached, as soon as there is room. What the index
  // holds for the path is older (or nothing): it must not stand for it.
  l.unrecorded = l.entry && l.entry->version->uncached;
  if (l.unrecorded) l.entry.reset();
  if (l.entry && !force && ValidatedWithinWindow(l.entry->rec.validated_ns) &&
      !l.entry->version->changed_at_origin) {
    return FinishOpen(path, who, std::move(*l.entry), /*changed=*/false);
  }
  if (Status s = LookUpRecord(path, &l); !s.ok()) return FailOpen(s);
  if (!force) {
    if (std::optional<ObjectEntry> held = HeldWithoutAsking(path, l)) {
      return FinishOpen(path, who, std::move(*held), /*changed=*/false);
    }
  }
  bool changed = false;
  Result<ObjectEntry> revalidated = Revalidate(path, l, &changed);
  if (!revalidated.ok()) return FailOpen(revalidated.status());
  return FinishOpen(path, who, std::move(revalidated).value(), changed);
}

Status ObjectCacheImpl::FailOpen(const Status& s) {
  counters_.errors++;
  return s;
}

ObjectCache::Opened ObjectCacheImpl::FinishOpen(const std::string& path, Opener who,
                                                ObjectEntry entry, bool changed) {
  Opened o;
  if (changed) entry.change_unannounced = true;
  if (who == Opener::kFs) {
    o.changed = entry.change_unannounced;
    o.keep_cache = !o.changed && entry.seen;
    entry.seen = true;
    entry.change_unannounced = false;
  }
  o.st = entry.version->st;
  const bool derived = derived_->IsDerived(path);
  o.content_tag = ContentTag(*entry.version, derived);
  o.file =
      std::make_shared<OpenFileState>(entry.version, std::make_shared<OriginHandle>(origin_, path),
                                      std::make_shared<Readahead>(readahead_budget_), derived);
  MutexLock l(objects_mu_);
  objects_[path] = std::move(entry);
  if (objects_.size() > options_.max_object_entries) TrimObjects();
  return o;
}

Status ObjectCacheImpl::LookUpRecord(const std::string& path, OpenLookup* l) {
  if (l->entry) {
    l->known = l->entry->rec;
    return Status::OK();
  }
  auto r = index_->GetObject(path);
  if (r.ok()) {
    l->known = *r;
    // The index's record is of another derivation: it is replaced (a new
    // version), never served.
    l->other = l->known && OtherDerivation(path, *l->known);
    return Status::OK();
  }
  if (r.status().code() != EBADMSG) return r.status();
  // Its chunks become unreachable and leave through eviction.
  LOG_WARN("dropping undecodable index record of '{}': {}", path, r.status().message());
  (void)index_->DeleteRaw(ObjectKey(path));
  return Status::OK();
}

std::optional<ObjectCacheImpl::ObjectEntry> ObjectCacheImpl::HeldWithoutAsking(
    const std::string& path, const OpenLookup& l) {
  if (!l.known || l.unrecorded || l.other) return std::nullopt;
  // Validated within --revalidate by an earlier process (the index says).
  if (!l.entry && ValidatedWithinWindow(l.known->validated_ns)) {
    return ObjectEntry{*l.known, MakeVersion(path, *l.known), false};
  }
  if (l.entry && l.entry->version->changed_at_origin) return std::nullopt;
  std::shared_ptr<ObjectVersion> held = l.entry ? l.entry->version : MakeVersion(path, *l.known);
  if (!OriginBackingOff(*held)) return std::nullopt;
  counters_.revalidations_skipped++;
  return l.entry ? *l.entry : ObjectEntry{*l.known, held, false};
}

Result<ObjectCacheImpl::ObjectEntry> ObjectCacheImpl::Revalidate(const std::string& path,
                                                                 OpenLookup& l, bool* changed) {
  const int64_t now = RealtimeNs();
  counters_.revalidations++;
  auto st = origin_->Stat(path);
  if (!st.ok()) {
    int code = st.status().code();
    bool unavailable = IsOriginUnavailable(code);
    if (unavailable) counters_.origin_errors++;
    if (unavailable && l.known && !l.other) {
      LOG_WARN("origin unreachable for '{}' ({}); serving the cached version", path,
               st.status().message());
      return l.entry ? *l.entry : ObjectEntry{*l.known, MakeVersion(path, *l.known), false};
    }
    if (code == ENOENT && l.known) {
      VersionKey old{l.known->object_id, l.known->version};
      Status s = index_->DeleteObject(path, old);
      if (!s.ok()) LOG_WARN("forgetting deleted '{}': {}", path, s.message());
      Supersede(l.entry ? l.entry->version : nullptr, old);
      MutexLock lock(objects_mu_);
      objects_.erase(path);
    }
    return st.status();
  }
  if (!S_ISREG(st->st_mode)) {
    int code = S_ISDIR(st->st_mode) ? EISDIR : (S_ISLNK(st->st_mode) ? ELOOP : EINVAL);
    return Status::Error(code, "origin '" + path + "' is not a regular file");
  }

  OriginIdentity id = IdentityFromStat(*st);
  ObjectRecord rec;
  rec.identity = id;
  rec.attrs = AttrsOf(*st);
  rec.validated_ns = now;
  // Against where this process last saw the version, if it did (it may
  // have moved since the record was written).
  const bool same =
      l.entry ? l.entry->version->AtOrigin(id) : (l.known && SameContent(l.known->identity, id));
  if (same) {
    rec.object_id = l.known->object_id;
    rec.version = l.known->version;
    Status s = index_->UpdateObject(path, rec);
    if (!s.ok()) LOG_WARN("recording revalidation of '{}': {}", path, s.message());
    if (!l.entry) return ObjectEntry{rec, MakeVersion(path, rec), false};
    l.entry->rec = rec;
    l.entry->version->changed_at_origin = false;
    return *l.entry;
  }
  if (l.known) {
    VersionKey old{l.known->object_id, l.known->version};
    rec.object_id = l.known->object_id;
    rec.version = l.known->version + 1;
    Status s = index_->ReplaceObject(path, rec, old);
    if (!s.ok() && s.code() != ENOSPC) return s;
    counters_.origin_changes++;
    LOG_INFO("origin file '{}' changed; caching version {}", path, rec.version);
    Supersede(l.entry ? l.entry->version : nullptr, old);
    *changed = true;
    return s.ok() ? ObjectEntry{rec, MakeVersion(path, rec), false} : UncachedEntry(path, rec, s);
  }
  rec.version = 1;
  auto created = index_->CreateObject(path, rec);
  if (created.ok()) return ObjectEntry{*created, MakeVersion(path, *created), false};
  if (created.status().code() == ENOSPC) return UncachedEntry(path, rec, created.status());
  return created.status();
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
#undef STOKER_COUNTER
  IndexMeta m = index_->meta();
  uint64_t index_bytes = IndexBytesNow();
  j["cache_used_bytes"] = quota_.committed() + index_bytes;
  j["chunk_bytes"] = quota_.committed();
  j["index_bytes"] = index_bytes;
  j["index_headroom_bytes"] = index_headroom_;
  j["fresh_start"] = fresh_start_;
  j["cache_capacity_bytes"] = options_.capacity_bytes;
  // Below capacity while others fill the cache's filesystem (MeasureDisk).
  j["cache_limit_bytes"] = quota_.limit();
  j["objects"] = m.objects;
  j["chunks"] = m.chunks;
  j["chunk_size"] = chunk_size_;
  {
    MutexLock l(objects_mu_);
    j["objects_in_memory"] = objects_.size();
  }
  j["pending_drops"] = drops_pending_.load();
  j["verified_chunks_held"] = resident_->verified();
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
