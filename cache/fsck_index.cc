// FsckPass over the index: each record kind checked against the others and
// against the data it vouches for (chunk checksums), then the usage record.
#include <algorithm>

#include "cache/fsck_pass.h"
#include "util/checksum.h"

namespace stoker {

Status FsckPass::Run() {
  STOKER_RETURN_IF_ERROR(CheckOrigin());
  STOKER_RETURN_IF_ERROR(CheckListings());
  STOKER_RETURN_IF_ERROR(CheckObjects());
  STOKER_RETURN_IF_ERROR(CheckDrops());
  STOKER_RETURN_IF_ERROR(CheckDerived());
  STOKER_RETURN_IF_ERROR(CheckIntents());
  STOKER_RETURN_IF_ERROR(CheckChunks());
  STOKER_RETURN_IF_ERROR(CheckEvictionKeys());
  STOKER_RETURN_IF_ERROR(CheckSlabs());
  STOKER_RETURN_IF_ERROR(CheckDataFiles());
  return CheckUsage();
}

void FsckPass::Repaired(const Status& s) {
  if (s.ok()) {
    r_.repaired++;
  } else {
    Problem("repair failed: " + s.message());
  }
}

void FsckPass::Punch(const ChunkKey& key, const SlotRef& slot) {
  const ChunkPlace place = PlaceOf(key, slot, chunk_size_);
  auto file = store_->Get(place.file, false);
  if (file.ok()) (void)ChunkStore::Punch((*file)->fd(), place.off, place.span);
}

// Drops key's record and frees its slot; the slot is punched unless
// another record owns it.
void FsckPass::DropChunk(const ChunkKey& key) {
  auto rec = index_->GetChunk(key);
  SlotRef slot = rec.ok() && *rec ? (*rec)->slot : SlotRef{};
  auto owner = slot.valid() ? owners_.find(IdOf(slot)) : owners_.end();
  if (owner == owners_.end() || owner->second == key) Punch(key, slot);
  Repaired(index_->DropChunk(key).status());
}

// The origin record: a bad one is dropped (the next mount writes it anew,
// as for a cache made before it).
Status FsckPass::CheckOrigin() {
  Result<std::optional<std::string>> held = index_->GetOrigin();
  if (held.ok()) return Status::OK();
  if (held.status().code() != EBADMSG) return held.status();
  r_.bad_records++;
  Problem("origin record: " + held.status().message());
  if (repair_) Repaired(index_->DeleteRaw(kOriginKey));
  return Status::OK();
}

// Kept listings (--revalidate never): a bad one is dropped (the origin is
// listed again).
Status FsckPass::CheckListings() {
  std::vector<std::string> bad;
  STOKER_RETURN_IF_ERROR(
      index_->ForEach(kListingPrefix, [&](std::string_view k, std::string_view v) {
        if (Result<KeptListing> l = DecodeListing(v); !l.ok()) {
          r_.bad_records++;
          Problem("kept listing of '" + std::string(k.substr(1)) + "': " + l.status().message());
          bad.emplace_back(k);
        }
        return true;
      }));
  if (repair_) {
    for (const auto& k : bad) Repaired(index_->DeleteRaw(k));
  }
  return Status::OK();
}

Status FsckPass::CheckObjects() {
  std::vector<std::string> bad;
  STOKER_RETURN_IF_ERROR(
      index_->ForEach(kObjectPrefix, [&](std::string_view k, std::string_view v) {
        auto rec = DecodeObject(v);
        if (!rec.ok()) {
          r_.bad_records++;
          Problem("object record '" + std::string(k.substr(1)) + "': " + rec.status().message());
          bad.emplace_back(k);
          return true;
        }
        r_.objects++;
        sizes_[VersionKey{rec->object_id, rec->version}] = rec->identity.size;
        return true;
      }));
  all_objects_ = r_.objects + bad.size();
  kept_objects_ = repair_ ? r_.objects : all_objects_;
  if (repair_) {
    for (const auto& k : bad) Repaired(index_->DeleteRaw(k));
  }
  return Status::OK();
}

// Derived records (a view's layout) of a version no longer cached: left
// by a put that raced the version's drop. Harmless but never reclaimed.
Status FsckPass::CheckDerived() {
  std::vector<std::string> bad;
  STOKER_RETURN_IF_ERROR(index_->ForEach(kDerivedPrefix, [&](std::string_view k, auto) {
    auto v = DecodeDerivedKey(k);
    if (!v.ok()) {
      r_.bad_records++;
      Problem(v.status().message());
      bad.emplace_back(k);
    } else if (!sizes_.count(*v) && !drops_.count(*v)) {
      r_.bad_records++;
      Problem("derived record of " + FsckName(*v) + ", a version no longer cached");
      bad.emplace_back(k);
    }
    return true;
  }));
  if (repair_) {
    for (const auto& k : bad) Repaired(index_->DeleteRaw(k));
  }
  return Status::OK();
}

Status FsckPass::CheckDrops() {
  std::vector<std::string> bad;
  STOKER_RETURN_IF_ERROR(index_->ForEach(kDropPrefix, [&](std::string_view k, auto) {
    auto v = DecodeDropKey(k);
    if (!v.ok()) {
      r_.bad_records++;
      Problem(v.status().message());
      bad.emplace_back(k);
    } else {
      r_.pending_writes++;
      Problem("drop of old version " + FsckName(*v) + " was interrupted");
      drops_.insert(*v);
    }
    return true;
  }));
  if (!repair_) return Status::OK();
  for (const auto& k : bad) Repaired(index_->DeleteRaw(k));
  for (const VersionKey& v : drops_) {
    const ChunkKey first{v.object_id, v.version, 0};
    auto rec = index_->GetChunk(first);
    if (rec.ok() && *rec && (*rec)->slot.valid()) DropChunk(first);
    bool done = false;
    Status s;
    while (!done && s.ok()) s = index_->DropVersionChunks(v, 1024, &done).status();
    if (s.ok()) s = store_->UnlinkIfIdle(v, []() -> Result<bool> { return true; }).status();
    Repaired(s);
  }
  return Status::OK();
}

Status FsckPass::CheckIntents() {
  std::vector<std::string> bad;
  std::vector<std::pair<ChunkKey, SlotRef>> intents;
  STOKER_RETURN_IF_ERROR(index_->ForEach(kIntentPrefix, [&](std::string_view k, auto v) {
    auto key = DecodeIntentKey(k);
    auto slot = key.ok() ? DecodeIntent(v) : Result<SlotRef>(key.status());
    if (!slot.ok()) {
      r_.bad_records++;
      Problem(slot.status().message());
      bad.emplace_back(k);
    } else {
      r_.pending_writes++;
      Problem("interrupted write of " + FsckName(*key));
      intents.emplace_back(*key, *slot);
    }
    return true;
  }));
  if (!repair_) {
    // Its slot is still taken, rightly: not a leak.
    for (const auto& [key, slot] : intents) {
      if (slot.valid()) intent_slots_.insert(IdOf(slot));
    }
    return Status::OK();
  }
  for (const auto& k : bad) Repaired(index_->DeleteRaw(k));
  for (const auto& [key, slot] : intents) {
    auto rec = index_->GetChunk(key);
    const bool owned = rec.ok() && *rec && (*rec)->slot == slot;
    if (rec.ok() && !owned) Punch(key, slot);
    Repaired(slot.valid() && rec.ok() && !owned ? index_->ReleaseSlot(key, slot)
                                                : index_->DeleteIntent(key));
  }
  return Status::OK();
}

// The problem with a decodable chunk record, or "" if it is good.
std::string FsckPass::CheckChunk(const ChunkKey& key, const ChunkRecord& rec) {
  auto size = sizes_.find(key.version_key());
  if (size == sizes_.end()) return "belongs to no cached object";
  if (rec.len != ChunkLength(size->second, chunk_size_, key.index)) {
    return "has length " + std::to_string(rec.len) + ", the object implies " +
           std::to_string(ChunkLength(size->second, chunk_size_, key.index));
  }
  if (rec.slot.valid()) {
    if (ChunkCount(size->second, chunk_size_) != 1) return "has a slab slot but several chunks";
    auto [owner, first] = owners_.emplace(IdOf(rec.slot), key);
    if (!first) return "shares " + FsckName(rec.slot) + " with " + FsckName(owner->second);
    auto taken = index_->SlotTaken(rec.slot);
    if (!taken.ok()) return "slot: " + taken.status().message();
    if (!*taken) return "is in " + FsckName(rec.slot) + ", which its slab's bitmap says is free";
  }
  const ChunkPlace place = PlaceOf(key, rec.slot, chunk_size_);
  auto file = store_->Get(place.file, false);
  if (!file.ok()) return "missing: " + file.status().message();
  int fd = (*file)->fd();
  off_t off = static_cast<off_t>(place.off);
  struct stat st;
  off_t data = ::lseek(fd, off, SEEK_DATA);
  if (::fstat(fd, &st) != 0 || st.st_size < off + static_cast<off_t>(rec.len) || data != off) {
    return "missing: no data at offset " + std::to_string(off);
  }
  std::vector<char> buf(rec.len);
  ssize_t got = ::pread(fd, buf.data(), rec.len, off);
  r_.bytes_checked += got > 0 ? static_cast<uint64_t>(got) : 0;
  if (got != static_cast<ssize_t>(rec.len)) return "missing: short read";
  if (ChunkChecksum(buf.data(), rec.len) != rec.xxh3) return "checksum mismatch";
  return "";
}

Status FsckPass::CheckChunks() {
  // Drop repairs above kept the meta record in step; compare from here.
  before_ = index_->meta();
  std::vector<std::string> bad;
  std::vector<ChunkKey> drop;
  STOKER_RETURN_IF_ERROR(index_->ForEach(kChunkPrefix, [&](std::string_view k, std::string_view v) {
    r_.chunks++;
    auto key = DecodeChunkRecordKey(k);
    auto rec = key.ok() ? DecodeChunk(v) : Result<ChunkRecord>(key.status());
    if (!rec.ok()) {
      r_.bad_records++;
      Problem("chunk record: " + rec.status().message());
      bad.emplace_back(k);
      return true;
    }
    recorded_usage_ += rec->allocated;
    recorded_chunks_++;
    if (drops_.count(key->version_key())) {
      if (!repair_) Keep(*key, *rec);
      return true;  // counted with its drop intent
    }
    std::string why = CheckChunk(*key, *rec);
    if (why.empty()) {
      Keep(*key, *rec);
      return true;
    }
    if (why == "checksum mismatch") {
      r_.bad_checksums++;
    } else if (why.rfind("missing", 0) == 0) {
      r_.missing_data++;
    } else {
      r_.bad_records++;
    }
    Problem(FsckName(*key) + ": " + why);
    if (repair_) {
      drop.push_back(*key);
    } else {
      Keep(*key, *rec);
    }
    return true;
  }));
  for (const auto& k : bad) {
    if (repair_) Repaired(index_->DeleteRaw(k));
  }
  for (const ChunkKey& k : drop) DropChunk(k);
  return Status::OK();
}

void FsckPass::Keep(const ChunkKey& key, const ChunkRecord& rec) {
  kept_usage_ += rec.allocated;
  kept_chunks_++;
  const ChunkPlace place = PlaceOf(key, rec.slot, chunk_size_);
  files_[place.file].push_back({place.off, place.off + rec.allocated});
  if (rec.slot.valid()) kept_slots_.insert(IdOf(rec.slot));
  ChunkPolicyState st{rec.state, rec.insert_seq, rec.last_access};
  expected_evict_[EvictOrderKey(EvictionPolicy::RankOf(st), key)] = key;
}

Status FsckPass::CheckEvictionKeys() {
  std::vector<std::string> stray;
  STOKER_RETURN_IF_ERROR(index_->ForEach(kEvictPrefix, [&](std::string_view k, auto) {
    auto it = expected_evict_.find(std::string(k));
    if (it != expected_evict_.end()) {
      expected_evict_.erase(it);
      return true;
    }
    auto d = DecodeEvictOrderKey(k);
    if (d.ok() && drops_.count(d->second.version_key())) return true;
    r_.bad_records++;
    Problem(d.ok() ? "eviction key of " + FsckName(d->second) + " has no matching chunk record"
                   : d.status().message());
    stray.emplace_back(k);
    return true;
  }));
  for (const auto& [k, key] : expected_evict_) {
    r_.bad_records++;
    Problem(FsckName(key) + ": no eviction key (it could never be evicted)");
  }
  if (!repair_) return Status::OK();
  for (const auto& k : stray) Repaired(index_->DeleteRaw(k));
  for (const auto& [k, key] : expected_evict_) {
    auto rec = index_->GetChunk(key);
    if (rec.ok() && *rec) {
      kept_usage_ -= std::min(kept_usage_, (*rec)->allocated);
      kept_chunks_--;
    }
    DropChunk(key);
  }
  return Status::OK();
}

Status FsckPass::CheckUsage() {
  const IndexMeta& m = before_;
  if (m.usage_bytes != recorded_usage_ || m.chunks != r_.chunks || m.objects != all_objects_) {
    r_.usage_mismatch = true;
    Problem("meta record says " + std::to_string(m.usage_bytes) + " bytes in " +
            std::to_string(m.chunks) + " chunks of " + std::to_string(m.objects) +
            " objects; the records say " + std::to_string(recorded_usage_) + " in " +
            std::to_string(r_.chunks) + " of " + std::to_string(all_objects_));
  }
  if (!repair_) return Status::OK();
  IndexMeta now = index_->meta();
  IndexMeta fixed = now;
  fixed.usage_bytes = kept_usage_;
  fixed.chunks = kept_chunks_;
  fixed.objects = kept_objects_;
  if (!(fixed == now)) Repaired(index_->WriteMeta(fixed));
  return Status::OK();
}

}  // namespace stoker
