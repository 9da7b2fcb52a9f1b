#include "cache/chunk_index.h"

#include <dirent.h>
#include <fcntl.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "util/size.h"

namespace stoker {
namespace {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  int code = EIO;
  if (s.IsCorruption()) code = EBADMSG;
  if (s.IsNoSpace()) code = ENOSPC;
  if (s.IsBusy() || s.IsTryAgain()) code = EBUSY;
  if (s.IsInvalidArgument()) code = EINVAL;
  if (s.IsNotSupported()) code = ENOTSUP;
  return Status::Error(code, what + ": " + s.ToString());
}

class RocksCursor : public EvictionPolicy::Cursor {
 public:
  RocksCursor(rocksdb::DB* db, uint8_t queue, bool reverse)
      : lower_(EvictQueuePrefix(queue)), upper_(EvictQueuePrefix(queue + 1)), reverse_(reverse) {
    rocksdb::ReadOptions ro;
    lower_slice_ = rocksdb::Slice(lower_);
    upper_slice_ = rocksdb::Slice(upper_);
    ro.iterate_lower_bound = &lower_slice_;
    ro.iterate_upper_bound = &upper_slice_;
    ro.fill_cache = false;
    it_.reset(db->NewIterator(ro));
    if (reverse_) {
      it_->SeekToLast();
    } else {
      it_->Seek(lower_);
    }
    Settle();
  }
  bool Valid() const override { return it_->Valid(); }
  EvictionRank rank() const override { return current_.first; }
  ChunkKey key() const override { return current_.second; }
  void Next() override {
    Step();
    Settle();
  }

 private:
  void Step() {
    if (reverse_) {
      it_->Prev();
    } else {
      it_->Next();
    }
  }
  void Settle() {
    for (; it_->Valid(); Step()) {
      auto d = DecodeEvictOrderKey(std::string_view(it_->key().data(), it_->key().size()));
      if (d.ok()) {
        current_ = *d;
        return;
      }
    }
  }
  std::string lower_, upper_;
  const bool reverse_;
  rocksdb::Slice lower_slice_, upper_slice_;
  std::unique_ptr<rocksdb::Iterator> it_;
  std::pair<EvictionRank, ChunkKey> current_;
};

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

}  // namespace

class ChunkIndex::Batch {
 public:
  rocksdb::WriteBatch wb;
};

namespace {

// What RocksDB says when a file it needs is corrupt or gone.
bool IsDamage(const rocksdb::Status& s) { return s.IsCorruption() || s.IsPathNotFound(); }

Status Damaged(const std::string& path, const std::string& what) {
  return Status::Error(EBADMSG, "index '" + path + "' is damaged: " + what);
}

// The files of a RocksDB directory that only an index that was there makes:
// without CURRENT, RocksDB would start an empty index beside them.
bool HasIndexFiles(const std::string& path) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir);
  if (!d) return false;
  while (struct dirent* de = ::readdir(d.get())) {
    std::string_view n(de->d_name);
    if (n.rfind("MANIFEST-", 0) == 0 ||
        (n.size() > 4 && (n.substr(n.size() - 4) == ".sst" || n.substr(n.size() - 4) == ".log"))) {
      return true;
    }
  }
  return false;
}

// RocksDB writes while it opens (a new MANIFEST and WAL, the replayed WAL
// flushed to a table file, OPTIONS, its LOG), and a write failing for want of
// space there aborts the process in Debian's build (an assertion in
// WritableFileWriter). So the room it needs is checked first: what it may
// rewrite, plus a margin for its small files (OPTIONS, LOG, a block each).
// Only a disk with next to nothing free is refused. A check (fsck without
// --repair) opens read-only and needs no room at all.
constexpr uint64_t kOpenMarginBytes = 256ull << 10;

// A read-only open writes no LOG either: RocksDB's info log goes here.
class SilentLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

Status RoomToOpen(const std::string& path) {
  uint64_t rewritten = 0;
  if (std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir); d) {
    while (struct dirent* de = ::readdir(d.get())) {
      std::string_view n(de->d_name);
      if (n.rfind("MANIFEST-", 0) != 0 && !(n.size() > 4 && n.substr(n.size() - 4) == ".log")) {
        continue;
      }
      struct stat st;
      if (::fstatat(::dirfd(d.get()), de->d_name, &st, 0) == 0) {
        rewritten += static_cast<uint64_t>(st.st_size);
      }
    }
  }
  // A new index's directory is not there yet: its filesystem is its parent's.
  std::string where = path;
  struct statvfs vfs;
  while (::statvfs(where.c_str(), &vfs) != 0) {
    const size_t slash = where.find_last_of('/');
    if (errno != ENOENT || slash == std::string::npos || slash == 0) return Status::OK();
    where.resize(slash);
  }
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t need = rewritten + kOpenMarginBytes;
  if (avail >= need) return Status::OK();
  return Status::Error(ENOSPC, "no room to open the index '" + path + "': its filesystem has " +
                                   FormatSize(avail) + " free and opening it needs about " +
                                   FormatSize(need) + "; free some space there");
}

rocksdb::Options RocksOptions(const ChunkIndex::Options& options) {
  rocksdb::Options o;
  o.create_if_missing = options.create_if_missing;
  o.write_buffer_size = options.write_buffer_bytes;
  o.max_write_buffer_number = 2;
  o.max_total_wal_size = 2 * options.write_buffer_bytes;
  o.max_background_jobs = 2;
  o.max_open_files = 512;
  o.keep_log_file_num = 2;
  o.max_log_file_size = 1 << 20;
  o.recycle_log_file_num = 0;
  // Preallocation (4 MiB of MANIFEST, a WAL's worth of blocks) would count
  // against the cache bound for nothing.
  o.allow_fallocate = false;
  // The info log lives in index/ and counts against the bound too.
  o.info_log_level = rocksdb::WARN_LEVEL;
  o.manifest_preallocation_size = 0;
  // Evicting from the head of a queue leaves tombstones where the next
  // cursor starts; compact files dense with deletions instead of scanning them.
  o.table_properties_collector_factories.push_back(
      rocksdb::NewCompactOnDeletionCollectorFactory(1024, 256));
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

}  // namespace

Result<std::unique_ptr<ChunkIndex>> ChunkIndex::Open(const Options& options) {
  struct stat st;
  if (::stat((options.path + "/CURRENT").c_str(), &st) != 0 && errno == ENOENT &&
      HasIndexFiles(options.path)) {
    return Damaged(options.path, "its CURRENT file is missing");
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status opened;
  if (options.read_only) {
    rocksdb::Options o = RocksOptions(options);
    o.create_if_missing = false;
    o.info_log = std::make_shared<SilentLogger>();
    opened = rocksdb::DB::OpenForReadOnly(o, options.path, &db);
  } else {
    STOKER_RETURN_IF_ERROR(RoomToOpen(options.path));
    opened = rocksdb::DB::Open(RocksOptions(options), options.path, &db);
  }
  if (IsDamage(opened)) return Damaged(options.path, opened.ToString());
  STOKER_RETURN_IF_ERROR(FromRocks(opened, "open index '" + options.path + "'"));
  std::unique_ptr<rocksdb::DB> owned(db);

  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), kMetaKey, &value);
  IndexMeta meta;
  if (s.IsNotFound()) {
    // A new index, or one cut by a power loss between RocksDB's create and
    // the synced Put below: either holds no record at all and is started
    // with its meta record. One with records but no meta record is damaged
    // (its usage and clock are lost).
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    if (it->Valid()) return Damaged(options.path, "it has records but no meta record");
    if (IsDamage(it->status())) return Damaged(options.path, it->status().ToString());
    STOKER_RETURN_IF_ERROR(FromRocks(it->status(), "read index"));
    it.reset();
    if (options.chunk_size_if_new == 0 || options.read_only) {
      return Damaged(options.path, "it has no meta record");
    }
    meta.chunk_size = options.chunk_size_if_new;
    // Synced, unlike every later write: an index that exists without its
    // meta record after a power cut could not be told from a damaged one.
    rocksdb::WriteOptions wo;
    wo.sync = true;
    STOKER_RETURN_IF_ERROR(
        FromRocks(db->Put(wo, kMetaKey, EncodeMeta(meta)), "write index meta record"));
  } else {
    if (IsDamage(s)) return Damaged(options.path, "meta record: " + s.ToString());
    STOKER_RETURN_IF_ERROR(FromRocks(s, "read index meta record"));
    Result<IndexMeta> decoded = DecodeMeta(value);
    if (!decoded.ok()) return Damaged(options.path, "meta record: " + decoded.status().message());
    meta = *decoded;
    if (meta.chunk_size == 0 || meta.chunk_size % kBlockSize != 0) {
      return Damaged(options.path, "meta record has chunk size " + std::to_string(meta.chunk_size));
    }
  }
  return std::unique_ptr<ChunkIndex>(
      new ChunkIndex(owned.release(), meta, s.IsNotFound(), options.read_only));
}

Status ChunkIndex::Salvage(const std::string& path) {
  Options defaults;
  defaults.path = path;
  rocksdb::Status s = rocksdb::RepairDB(path, RocksOptions(defaults));
  if (!s.ok()) return Status::Error(EBADMSG, "repair of index '" + path + "': " + s.ToString());
  // What RepairDB could not read it keeps in lost/: space for nothing.
  std::error_code ec;
  std::filesystem::remove_all(path + "/lost", ec);
  return Status::OK();
}

ChunkIndex::ChunkIndex(rocksdb::DB* db, IndexMeta meta, bool created, bool read_only)
    : db_(db), created_(created), read_only_(read_only), clock_(meta.clock), meta_(meta) {}

ChunkIndex::~ChunkIndex() {
  if (!read_only_) {
    // Persist the clock so that eviction order survives a clean restart.
    MutexLock l(mu_);
    IndexMeta m = meta_;
    Batch b;
    (void)Write(b, &m);
  }
  (void)db_->Close();
  delete db_;
}

IndexMeta ChunkIndex::meta() const {
  MutexLock l(mu_);
  IndexMeta m = meta_;
  m.clock = clock_.load();
  return m;
}

// Commits batch (with new_meta if given) and adopts it.
Status ChunkIndex::Write(Batch& batch, const IndexMeta* new_meta) {
  IndexMeta m;
  if (new_meta) {
    m = *new_meta;
    m.clock = clock_.load();
    batch.wb.Put(kMetaKey, EncodeMeta(m));
  }
  rocksdb::WriteOptions wo;
  wo.sync = false;
  bytes_written_ += batch.wb.GetDataSize();
  STOKER_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch.wb), "write index"));
  if (new_meta) meta_ = m;
  return Status::OK();
}

Result<std::optional<ObjectRecord>> ChunkIndex::GetObject(const std::string& path) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), ObjectKey(path), &value);
  if (s.IsNotFound()) return std::optional<ObjectRecord>();
  STOKER_RETURN_IF_ERROR(FromRocks(s, "read index object record"));
  STOKER_ASSIGN_OR_RETURN(ObjectRecord rec, DecodeObject(value));
  return std::optional<ObjectRecord>(rec);
}

Result<ObjectRecord> ChunkIndex::CreateObject(const std::string& path, ObjectRecord rec) {
  MutexLock l(mu_);
  IndexMeta m = meta_;
  rec.object_id = m.next_object_id++;
  m.objects++;
  Batch b;
  b.wb.Put(ObjectKey(path), EncodeObject(rec));
  STOKER_RETURN_IF_ERROR(Write(b, &m));
  return rec;
}

Status ChunkIndex::UpdateObject(const std::string& path, const ObjectRecord& rec) {
  MutexLock l(mu_);
  Batch b;
  b.wb.Put(ObjectKey(path), EncodeObject(rec));
  return Write(b, nullptr);
}

Status ChunkIndex::ReplaceObject(const std::string& path, const ObjectRecord& rec,
                                 const VersionKey& old) {
  MutexLock l(mu_);
  Batch b;
  b.wb.Put(ObjectKey(path), EncodeObject(rec));
  b.wb.Put(DropKey(old), EncodeIntent());
  return Write(b, nullptr);
}

Status ChunkIndex::DeleteObject(const std::string& path, const VersionKey& old) {
  MutexLock l(mu_);
  IndexMeta m = meta_;
  if (m.objects > 0) m.objects--;
  Batch b;
  b.wb.Delete(ObjectKey(path));
  b.wb.Put(DropKey(old), EncodeIntent());
  return Write(b, &m);
}

Result<std::optional<ChunkRecord>> ChunkIndex::GetChunk(const ChunkKey& key) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), ChunkRecordKey(key), &value);
  if (s.IsNotFound()) return std::optional<ChunkRecord>();
  STOKER_RETURN_IF_ERROR(FromRocks(s, "read index chunk record"));
  STOKER_ASSIGN_OR_RETURN(ChunkRecord rec, DecodeChunk(value));
  return std::optional<ChunkRecord>(rec);
}

Status ChunkIndex::PutIntent(const ChunkKey& key) {
  MutexLock l(mu_);
  Batch b;
  b.wb.Put(IntentKey(key), EncodeIntent());
  return Write(b, nullptr);
}

Status ChunkIndex::DeleteIntent(const ChunkKey& key) {
  MutexLock l(mu_);
  Batch b;
  b.wb.Delete(IntentKey(key));
  return Write(b, nullptr);
}

Status ChunkIndex::CommitChunk(const ChunkKey& key, const ChunkRecord& rec) {
  MutexLock l(mu_);
  IndexMeta m = meta_;
  m.usage_bytes += rec.allocated;
  m.chunks++;
  Batch b;
  SlotEdits edits;
  if (rec.slot.valid()) {
    // Taken with the write's intent already (ReserveSlot); marked here only
    // if not, so that no record can commit onto a free slot.
    STOKER_ASSIGN_OR_RETURN(SlabClass * c, ClassLocked(rec.slot.slot_class));
    if (rec.slot.slab >= c->slabs.size() || !c->slabs[rec.slot.slab].Get(rec.slot.slot)) {
      STOKER_RETURN_IF_ERROR(EditSlotLocked(b, edits, rec.slot, true));
    }
  }
  b.wb.Put(ChunkRecordKey(key), EncodeChunk(rec));
  ChunkPolicyState st{rec.state, rec.insert_seq, rec.last_access};
  b.wb.Put(EvictOrderKey(EvictionPolicy::RankOf(st), key), rocksdb::Slice());
  b.wb.Delete(IntentKey(key));
  STOKER_RETURN_IF_ERROR(Write(b, &m));
  AdoptLocked(edits);
  return Status::OK();
}

Result<ChunkIndex::SlabClass*> ChunkIndex::ClassLocked(uint32_t slot_class) {
  auto found = slab_classes_.find(slot_class);
  if (found != slab_classes_.end()) return &found->second;
  SlabClass c;
  STOKER_RETURN_IF_ERROR(
      ForEachPrefix(SlabClassPrefix(slot_class), [&](std::string_view k, std::string_view v) {
        auto key = DecodeSlabKey(k);
        if (!key.ok()) return true;  // fsck's to find
        if (key->second >= c.slabs.size()) c.slabs.resize(key->second + 1);
        auto bitmap = DecodeSlabBitmap(v);
        if (bitmap.ok()) {
          c.slabs[key->second] = *bitmap;
        } else {
          // Unknown owners: allocate nothing from it until fsck rebuilds it.
          for (uint64_t& w : c.slabs[key->second].words) w = ~uint64_t{0};
        }
        return true;
      }));
  return &slab_classes_.emplace(slot_class, std::move(c)).first->second;
}

Status ChunkIndex::EditSlotLocked(Batch& batch, SlotEdits& edits, const SlotRef& slot, bool taken) {
  STOKER_CHECK(slot.valid() && slot.slot < kSlotsPerSlab, "edit of an invalid slot");
  STOKER_ASSIGN_OR_RETURN(SlabClass * c, ClassLocked(slot.slot_class));
  auto [it, fresh] = edits.try_emplace({slot.slot_class, slot.slab});
  if (fresh && slot.slab < c->slabs.size()) it->second = c->slabs[slot.slab];
  it->second.Set(slot.slot, taken);
  batch.wb.Put(SlabKey(slot.slot_class, slot.slab), EncodeSlabBitmap(it->second));
  return Status::OK();
}

void ChunkIndex::AdoptLocked(const SlotEdits& edits) {
  for (const auto& [where, bitmap] : edits) {
    SlabClass& c = slab_classes_.at(where.first);
    if (where.second >= c.slabs.size()) c.slabs.resize(where.second + 1);
    c.slabs[where.second] = bitmap;
    for (uint64_t w : bitmap.words) {
      if (w != ~uint64_t{0}) {
        c.first_free = std::min(c.first_free, where.second);
        break;
      }
    }
  }
}

Result<SlotRef> ChunkIndex::ReserveSlot(const ChunkKey& key, uint64_t len) {
  MutexLock l(mu_);
  const uint32_t slot_class = SlotClassFor(len);
  STOKER_ASSIGN_OR_RETURN(SlabClass * c, ClassLocked(slot_class));
  SlotRef slot{slot_class, static_cast<uint32_t>(c->slabs.size()), 0};
  for (uint32_t i = c->first_free; i < c->slabs.size(); ++i) {
    const SlabBitmap& b = c->slabs[i];
    uint32_t w = 0;
    while (w < kSlotsPerSlab / 64 && b.words[w] == ~uint64_t{0}) ++w;
    if (w == kSlotsPerSlab / 64) {
      c->first_free = i + 1;
      continue;
    }
    slot.slab = i;
    slot.slot = w * 64 + static_cast<uint32_t>(__builtin_ctzll(~b.words[w]));
    break;
  }
  Batch b;
  SlotEdits edits;
  STOKER_RETURN_IF_ERROR(EditSlotLocked(b, edits, slot, true));
  b.wb.Put(IntentKey(key), EncodeIntent(slot));
  STOKER_RETURN_IF_ERROR(Write(b, nullptr));
  AdoptLocked(edits);
  return slot;
}

Status ChunkIndex::ReleaseSlot(const ChunkKey& key, const SlotRef& slot) {
  MutexLock l(mu_);
  Batch b;
  SlotEdits edits;
  STOKER_RETURN_IF_ERROR(EditSlotLocked(b, edits, slot, false));
  b.wb.Delete(IntentKey(key));
  STOKER_RETURN_IF_ERROR(Write(b, nullptr));
  AdoptLocked(edits);
  return Status::OK();
}

Result<bool> ChunkIndex::SlotTaken(const SlotRef& slot) {
  MutexLock l(mu_);
  STOKER_ASSIGN_OR_RETURN(SlabClass * c, ClassLocked(slot.slot_class));
  return slot.slab < c->slabs.size() && c->slabs[slot.slab].Get(slot.slot);
}

Status ChunkIndex::WriteSlab(uint32_t slot_class, uint32_t slab, const SlabBitmap& bitmap) {
  MutexLock l(mu_);
  STOKER_RETURN_IF_ERROR(ClassLocked(slot_class).status());
  Batch b;
  b.wb.Put(SlabKey(slot_class, slab), EncodeSlabBitmap(bitmap));
  STOKER_RETURN_IF_ERROR(Write(b, nullptr));
  AdoptLocked(SlotEdits{{{slot_class, slab}, bitmap}});
  return Status::OK();
}

Status ChunkIndex::SetSlotTaken(const SlotRef& slot, bool taken) {
  MutexLock l(mu_);
  Batch b;
  SlotEdits edits;
  STOKER_RETURN_IF_ERROR(EditSlotLocked(b, edits, slot, taken));
  STOKER_RETURN_IF_ERROR(Write(b, nullptr));
  AdoptLocked(edits);
  return Status::OK();
}

Result<uint64_t> ChunkIndex::DropChunk(const ChunkKey& key,
                                       const std::optional<EvictionRank>& stale_rank) {
  MutexLock l(mu_);
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), ChunkRecordKey(key), &value);
  Batch b;
  if (stale_rank) b.wb.Delete(EvictOrderKey(*stale_rank, key));
  if (s.IsNotFound()) {
    if (stale_rank) STOKER_RETURN_IF_ERROR(Write(b, nullptr));
    return uint64_t{0};
  }
  STOKER_RETURN_IF_ERROR(FromRocks(s, "read index chunk record"));
  b.wb.Delete(ChunkRecordKey(key));
  IndexMeta m = meta_;
  uint64_t freed = 0;
  auto rec = DecodeChunk(value);
  if (rec.ok()) {
    ChunkPolicyState st{rec->state, rec->insert_seq, rec->last_access};
    b.wb.Delete(EvictOrderKey(EvictionPolicy::RankOf(st), key));
    freed = rec->allocated;
  }
  SlotEdits edits;
  if (rec.ok() && rec->slot.valid()) {
    STOKER_RETURN_IF_ERROR(EditSlotLocked(b, edits, rec->slot, false));
  }
  m.usage_bytes -= std::min(m.usage_bytes, freed);
  if (m.chunks > 0) m.chunks--;
  STOKER_RETURN_IF_ERROR(Write(b, &m));
  AdoptLocked(edits);
  return freed;
}

Status ChunkIndex::RecordHits(const std::vector<std::pair<ChunkKey, uint64_t>>& hits,
                              const EvictionPolicy& policy) {
  if (hits.empty()) return Status::OK();
  MutexLock l(mu_);
  std::vector<std::string> keys;
  keys.reserve(hits.size());
  for (const auto& h : hits) keys.push_back(ChunkRecordKey(h.first));
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<std::string> values;
  std::vector<rocksdb::Status> st = db_->MultiGet(rocksdb::ReadOptions(), slices, &values);
  Batch b;
  for (size_t i = 0; i < hits.size(); ++i) {
    if (!st[i].ok()) continue;
    auto rec = DecodeChunk(values[i]);
    if (!rec.ok()) continue;
    ChunkPolicyState before{rec->state, rec->insert_seq, rec->last_access};
    ChunkPolicyState after = policy.OnHit(before, hits[i].second);
    if (after == before) continue;
    EvictionRank old_rank = EvictionPolicy::RankOf(before);
    EvictionRank new_rank = EvictionPolicy::RankOf(after);
    if (!(old_rank == new_rank)) {
      b.wb.Delete(EvictOrderKey(old_rank, hits[i].first));
      b.wb.Put(EvictOrderKey(new_rank, hits[i].first), rocksdb::Slice());
    }
    rec->state = after.state;
    rec->last_access = after.last_access;
    b.wb.Put(keys[i], EncodeChunk(*rec));
  }
  IndexMeta m = meta_;
  return Write(b, &m);
}

Result<uint64_t> ChunkIndex::DropVersionChunks(const VersionKey& v, size_t max, bool* done) {
  MutexLock l(mu_);
  std::string prefix = VersionChunkPrefix(v);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  Batch b;
  SlotEdits edits;
  IndexMeta m = meta_;
  uint64_t freed = 0;
  size_t n = 0;
  *done = true;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (n == max) {
      *done = false;
      break;
    }
    b.wb.Delete(it->key());
    auto key = DecodeChunkRecordKey(View(it->key()));
    auto rec = DecodeChunk(View(it->value()));
    if (key.ok() && rec.ok()) {
      ChunkPolicyState st{rec->state, rec->insert_seq, rec->last_access};
      b.wb.Delete(EvictOrderKey(EvictionPolicy::RankOf(st), *key));
      freed += rec->allocated;
      if (rec->slot.valid()) STOKER_RETURN_IF_ERROR(EditSlotLocked(b, edits, rec->slot, false));
    }
    if (m.chunks > 0) m.chunks--;
    ++n;
  }
  STOKER_RETURN_IF_ERROR(FromRocks(it->status(), "walk index chunk records"));
  if (*done) {
    const std::string derived = DerivedVersionPrefix(v);
    std::unique_ptr<rocksdb::Iterator> d(db_->NewIterator(rocksdb::ReadOptions()));
    for (d->Seek(derived); d->Valid() && d->key().starts_with(derived); d->Next()) {
      b.wb.Delete(d->key());
    }
    STOKER_RETURN_IF_ERROR(FromRocks(d->status(), "walk index derived records"));
    b.wb.Delete(DropKey(v));
  }
  m.usage_bytes -= std::min(m.usage_bytes, freed);
  STOKER_RETURN_IF_ERROR(Write(b, &m));
  AdoptLocked(edits);
  return freed;
}

Result<std::optional<std::string>> ChunkIndex::GetDerived(const VersionKey& v,
                                                          std::string_view name) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), DerivedKey(v, name), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  STOKER_RETURN_IF_ERROR(FromRocks(s, "read index derived record"));
  if (value.empty() || static_cast<uint8_t>(value[0]) != kIndexFormatVersion) {
    return Status::Corruption("derived record of unknown format");
  }
  return std::optional<std::string>(value.substr(1));
}

Status ChunkIndex::PutDerived(const VersionKey& v, std::string_view name, std::string_view value) {
  MutexLock l(mu_);
  std::string stored(1, static_cast<char>(kIndexFormatVersion));
  stored.append(value);
  Batch b;
  b.wb.Put(DerivedKey(v, name), stored);
  return Write(b, nullptr);
}

Result<bool> ChunkIndex::HasChunks(const VersionKey& v) {
  bool found = false;
  STOKER_RETURN_IF_ERROR(ForEachPrefix(VersionChunkPrefix(v), [&](auto, auto) {
    found = true;
    return false;
  }));
  return found;
}

Status ChunkIndex::ForEach(char prefix, const RawFn& fn) {
  return ForEachPrefix(std::string(1, prefix), fn);
}

Status ChunkIndex::ForEachPrefix(const std::string& prefix, const RawFn& fn) {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (!fn(View(it->key()), View(it->value()))) break;
  }
  return FromRocks(it->status(), "walk index");
}

std::unique_ptr<EvictionPolicy::Cursor> ChunkIndex::NewEvictCursor(uint8_t queue, bool reverse) {
  return std::make_unique<RocksCursor>(db_, queue, reverse);
}

Status ChunkIndex::DeleteRaw(std::string_view key) {
  MutexLock l(mu_);
  Batch b;
  b.wb.Delete(rocksdb::Slice(key.data(), key.size()));
  return Write(b, nullptr);
}

Status ChunkIndex::WriteMeta(const IndexMeta& meta) {
  MutexLock l(mu_);
  Batch b;
  clock_.store(std::max(clock_.load(), meta.clock));
  return Write(b, &meta);
}

uint64_t ChunkIndex::DiskBytes(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (!d) return 0;
  uint64_t total = 0;
  while (struct dirent* e = readdir(d)) {
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  closedir(d);
  return total;
}

}  // namespace stoker
