// ChunkIndex records: objects, chunks and intents, slab slots, hits and
// eviction order, derived records. Opening the index: chunk_index_open.cc.
#include "cache/chunk_index.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <string_view>

#include "cache/chunk_index_rocks.h"
#include "util/mutex.h"
#include "util/size.h"

namespace stoker {
namespace {

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

}  // namespace

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

Result<std::optional<std::string>> ChunkIndex::GetOrigin() {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kOriginKey, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  STOKER_RETURN_IF_ERROR(FromRocks(s, "read index origin record"));
  STOKER_ASSIGN_OR_RETURN(std::string location, DecodeOrigin(value));
  return std::optional<std::string>(std::move(location));
}

Status ChunkIndex::PutOrigin(const std::string& location) {
  MutexLock l(mu_);
  Batch b;
  b.wb.Put(kOriginKey, EncodeOrigin(location));
  return Write(b, nullptr);
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

Result<std::optional<std::string>> ChunkIndex::GetRaw(std::string_view key) {
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  STOKER_RETURN_IF_ERROR(FromRocks(s, "read index record"));
  return std::optional<std::string>(std::move(value));
}

Status ChunkIndex::PutRaw(std::string_view key, std::string_view value) {
  MutexLock l(mu_);
  Batch b;
  b.wb.Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size()));
  return Write(b, nullptr);
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

}  // namespace stoker
