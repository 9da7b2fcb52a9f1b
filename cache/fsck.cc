// CheckCache: see cache/fsck.h. Walks the index once per record kind, then
// data/, and repairs (when asked) only after each walk, so a walk never sees
// its own repairs.
#include "cache/fsck.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

#include "cache/cache_dir_lock.h"
#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "util/checksum.h"

namespace stoker {

nlohmann::json FsckReport::ToJson() const {
  return nlohmann::json{{"clean", clean()},
                        {"objects", objects},
                        {"chunks", chunks},
                        {"bytes_checked", bytes_checked},
                        {"bad_checksums", bad_checksums},
                        {"missing_data", missing_data},
                        {"orphan_files", orphan_files},
                        {"leaked_slots", leaked_slots},
                        {"pending_writes", pending_writes},
                        {"bad_records", bad_records},
                        {"usage_mismatch", usage_mismatch},
                        {"index_damage", index_damage},
                        {"index_repair", index_repair},
                        {"repaired", repaired},
                        {"problems", problems}};
}

namespace {

std::string Name(const VersionKey& v) { return ChunkStore::RelativePath(v); }
std::string Name(const ChunkKey& k) {
  return Name(k.version_key()) + " chunk " + std::to_string(k.index);
}
std::string Name(const SlotRef& s) {
  return Name(SlabFileKey(s.slot_class, s.slab)) + " slot " + std::to_string(s.slot);
}
using SlotId = std::tuple<uint32_t, uint32_t, uint32_t>;
SlotId IdOf(const SlotRef& s) { return {s.slot_class, s.slab, s.slot}; }

class Fsck {
 public:
  Fsck(const std::string& dir, bool repair, ChunkIndex* index, ChunkStore* store)
      : dir_(dir),
        repair_(repair),
        index_(index),
        store_(store),
        chunk_size_(index->meta().chunk_size) {}

  Status Run() {
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
  FsckReport& report() { return r_; }

 private:
  void Problem(std::string line) { r_.problems.push_back(std::move(line)); }
  void Repaired(const Status& s) {
    if (s.ok()) {
      r_.repaired++;
    } else {
      Problem("repair failed: " + s.message());
    }
  }
  void Punch(const ChunkKey& key, const SlotRef& slot) {
    const ChunkPlace place = PlaceOf(key, slot, chunk_size_);
    auto file = store_->Get(place.file, false);
    if (file.ok()) (void)ChunkStore::Punch((*file)->fd(), place.off, place.span);
  }
  // Drops key's record and frees its slot; the slot is punched unless
  // another record owns it.
  void DropChunk(const ChunkKey& key) {
    auto rec = index_->GetChunk(key);
    SlotRef slot = rec.ok() && *rec ? (*rec)->slot : SlotRef{};
    auto owner = slot.valid() ? owners_.find(IdOf(slot)) : owners_.end();
    if (owner == owners_.end() || owner->second == key) Punch(key, slot);
    Repaired(index_->DropChunk(key).status());
  }

  Status CheckObjects() {
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
  Status CheckDerived() {
    std::vector<std::string> bad;
    STOKER_RETURN_IF_ERROR(index_->ForEach(kDerivedPrefix, [&](std::string_view k, auto) {
      auto v = DecodeDerivedKey(k);
      if (!v.ok()) {
        r_.bad_records++;
        Problem(v.status().message());
        bad.emplace_back(k);
      } else if (!sizes_.count(*v) && !drops_.count(*v)) {
        r_.bad_records++;
        Problem("derived record of " + Name(*v) + ", a version no longer cached");
        bad.emplace_back(k);
      }
      return true;
    }));
    if (repair_) {
      for (const auto& k : bad) Repaired(index_->DeleteRaw(k));
    }
    return Status::OK();
  }

  Status CheckDrops() {
    std::vector<std::string> bad;
    STOKER_RETURN_IF_ERROR(index_->ForEach(kDropPrefix, [&](std::string_view k, auto) {
      auto v = DecodeDropKey(k);
      if (!v.ok()) {
        r_.bad_records++;
        Problem(v.status().message());
        bad.emplace_back(k);
      } else {
        r_.pending_writes++;
        Problem("drop of old version " + Name(*v) + " was interrupted");
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

  Status CheckIntents() {
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
        Problem("interrupted write of " + Name(*key));
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
  std::string CheckChunk(const ChunkKey& key, const ChunkRecord& rec) {
    auto size = sizes_.find(key.version_key());
    if (size == sizes_.end()) return "belongs to no cached object";
    if (rec.len != ChunkLength(size->second, chunk_size_, key.index)) {
      return "has length " + std::to_string(rec.len) + ", the object implies " +
             std::to_string(ChunkLength(size->second, chunk_size_, key.index));
    }
    if (rec.slot.valid()) {
      if (ChunkCount(size->second, chunk_size_) != 1) return "has a slab slot but several chunks";
      auto [owner, first] = owners_.emplace(IdOf(rec.slot), key);
      if (!first) return "shares " + Name(rec.slot) + " with " + Name(owner->second);
      auto taken = index_->SlotTaken(rec.slot);
      if (!taken.ok()) return "slot: " + taken.status().message();
      if (!*taken) return "is in " + Name(rec.slot) + ", which its slab's bitmap says is free";
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

  Status CheckChunks() {
    // Drop repairs above kept the meta record in step; compare from here.
    before_ = index_->meta();
    std::vector<std::string> bad;
    std::vector<ChunkKey> drop;
    STOKER_RETURN_IF_ERROR(
        index_->ForEach(kChunkPrefix, [&](std::string_view k, std::string_view v) {
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
          Problem(Name(*key) + ": " + why);
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

  void Keep(const ChunkKey& key, const ChunkRecord& rec) {
    kept_usage_ += rec.allocated;
    kept_chunks_++;
    const ChunkPlace place = PlaceOf(key, rec.slot, chunk_size_);
    files_[place.file].push_back({place.off, place.off + rec.allocated});
    if (rec.slot.valid()) kept_slots_.insert(IdOf(rec.slot));
    ChunkPolicyState st{rec.state, rec.insert_seq, rec.last_access};
    expected_evict_[EvictOrderKey(EvictionPolicy::RankOf(st), key)] = key;
  }

  Status CheckEvictionKeys() {
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
      Problem(d.ok() ? "eviction key of " + Name(d->second) + " has no matching chunk record"
                     : d.status().message());
      stray.emplace_back(k);
      return true;
    }));
    for (const auto& [k, key] : expected_evict_) {
      r_.bad_records++;
      Problem(Name(key) + ": no eviction key (it could never be evicted)");
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

  // Data extents of fd not covered by any of ranges (sorted by start).
  static std::vector<std::pair<off_t, off_t>> Uncovered(
      int fd, std::vector<std::pair<uint64_t, uint64_t>> ranges) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<off_t, off_t>> out;
    off_t pos = 0;
    for (;;) {
      off_t d = ::lseek(fd, pos, SEEK_DATA);
      if (d < 0) break;
      off_t h = ::lseek(fd, d, SEEK_HOLE);
      if (h <= d) break;
      off_t cur = d;
      for (const auto& [a, b] : ranges) {
        if (static_cast<off_t>(b) <= cur) continue;
        if (static_cast<off_t>(a) >= h) break;
        if (static_cast<off_t>(a) > cur) out.emplace_back(cur, static_cast<off_t>(a));
        cur = std::max(cur, static_cast<off_t>(b));
        if (cur >= h) break;
      }
      if (cur < h) out.emplace_back(cur, h);
      pos = h;
    }
    return out;
  }

  Status CheckDataFiles() {
    std::string data = dir_ + "/data";
    DIR* top = ::opendir(data.c_str());
    if (!top) return errno == ENOENT ? Status::OK() : Status::FromErrno("open '" + data + "'");
    std::vector<std::string> subs;
    while (struct dirent* e = ::readdir(top)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") subs.push_back(n);
    }
    ::closedir(top);
    for (const auto& sub : subs) CheckSubdir(data, sub);
    return Status::OK();
  }

  void Orphan(const std::string& path, const std::string& why, bool is_dir) {
    r_.orphan_files++;
    Problem("orphan " + path + ": " + why);
    if (!repair_) return;
    if (::unlink(path.c_str()) != 0 && !(is_dir && ::rmdir(path.c_str()) == 0)) {
      Repaired(Status::FromErrno("remove '" + path + "'"));
    } else {
      r_.repaired++;
    }
  }

  void CheckSubdir(const std::string& data, const std::string& sub) {
    std::string path = data + "/" + sub;
    DIR* d = ::opendir(path.c_str());
    if (!d) return Orphan(path, "not a data directory", false);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    if (sub == "slab") return CheckSlabFiles(path, names);
    for (const auto& n : names) {
      std::string file = path + "/" + n;
      auto v = ChunkStore::ParseFileName(n);
      if (!v || ChunkStore::RelativePath(*v) != sub + "/" + n) {
        Orphan(file, "not a data file name", true);
        continue;
      }
      if (drops_.count(*v) && !repair_) continue;
      auto it = files_.find(*v);
      if (it == files_.end()) {
        Orphan(file, "no chunk record refers to it", false);
        continue;
      }
      CheckFileSpace(file, it->second);
    }
  }

  // Slab files: one with no bitmap record is an orphan; in the others, data
  // outside the kept chunks' slots is.
  void CheckSlabFiles(const std::string& path, const std::vector<std::string>& names) {
    for (const auto& n : names) {
      std::string file = path + "/" + n;
      auto v = ChunkStore::ParseSlabFileName(n);
      if (!v) {
        Orphan(file, "not a slab file name", true);
        continue;
      }
      if (!slabs_.count(*v) && !files_.count(*v)) {
        Orphan(file, "no slab record refers to it", false);
        continue;
      }
      CheckFileSpace(file, files_[*v]);
    }
  }

  // Slab bitmaps: a slot taken by no kept record and no pending intent is
  // leaked (a lost write: space the quota does not see); repair punches it
  // and frees it. An undecodable bitmap is rebuilt from the records.
  Status CheckSlabs() {
    std::vector<SlotRef> leaked;
    std::vector<std::pair<std::string, std::pair<uint32_t, uint32_t>>> bad;
    STOKER_RETURN_IF_ERROR(index_->ForEach(kSlabPrefix, [&](std::string_view k,
                                                            std::string_view v) {
      auto key = DecodeSlabKey(k);
      auto bitmap = key.ok() ? DecodeSlabBitmap(v) : Result<SlabBitmap>(key.status());
      if (!bitmap.ok()) {
        r_.bad_records++;
        Problem("slab record: " + bitmap.status().message());
        if (key.ok()) slabs_.insert(SlabFileKey(key->first, key->second));
        bad.emplace_back(std::string(k), key.ok() ? *key : std::make_pair(0u, 0u));
        return true;
      }
      slabs_.insert(SlabFileKey(key->first, key->second));
      for (uint32_t i = 0; i < kSlotsPerSlab; ++i) {
        SlotRef slot{key->first, key->second, i};
        if (!bitmap->Get(i) || kept_slots_.count(IdOf(slot)) || intent_slots_.count(IdOf(slot))) {
          continue;
        }
        r_.leaked_slots++;
        Problem(Name(slot) + " is taken, but no chunk record or write intent holds it");
        leaked.push_back(slot);
      }
      return true;
    }));
    if (!repair_) return Status::OK();
    for (const auto& [k, where] : bad) {
      if (where.first == 0) {
        Repaired(index_->DeleteRaw(k));
        continue;
      }
      SlabBitmap rebuilt;
      for (const SlotId& id : kept_slots_) {
        if (std::get<0>(id) == where.first && std::get<1>(id) == where.second) {
          rebuilt.Set(std::get<2>(id), true);
        }
      }
      Repaired(index_->WriteSlab(where.first, where.second, rebuilt));
    }
    for (const SlotRef& slot : leaked) {
      Punch(ChunkKey{}, slot);
      Repaired(index_->SetSlotTaken(slot, false));
    }
    return Status::OK();
  }

  // Space in a data file beyond its chunks' (a write whose record was lost).
  void CheckFileSpace(const std::string& file,
                      const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return;
    for (const auto& [a, b] : Uncovered(fd, ranges)) {
      r_.orphan_files++;
      Problem("orphan data in " + file + " at [" + std::to_string(a) + ", " + std::to_string(b) +
              ")");
      // Whole blocks: a punched partial block at EOF would stay allocated.
      if (repair_) Repaired(ChunkStore::Punch(fd, a, AllocatedBytes(b - a)));
    }
    ::close(fd);
  }

  Status CheckUsage() {
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

  const std::string dir_;
  const bool repair_;
  ChunkIndex* const index_;
  ChunkStore* const store_;
  const uint64_t chunk_size_;
  FsckReport r_;
  std::map<VersionKey, uint64_t> sizes_;  // current versions -> object size
  std::set<VersionKey> drops_;
  std::map<VersionKey, std::vector<std::pair<uint64_t, uint64_t>>> files_;  // kept chunk ranges
  std::map<std::string, ChunkKey> expected_evict_;
  std::map<SlotId, ChunkKey> owners_;  // slots of checked chunk records
  std::set<SlotId> kept_slots_;        // slots of kept chunk records
  std::set<SlotId> intent_slots_;      // slots of pending (unrepaired) intents
  std::set<VersionKey> slabs_;         // slabs with a bitmap record
  uint64_t recorded_usage_ = 0, recorded_chunks_ = 0;
  uint64_t kept_usage_ = 0, kept_chunks_ = 0, kept_objects_ = 0, all_objects_ = 0;
  IndexMeta before_;
};

// True if no regular file is under path (or there is no path).
bool NoRegularFiles(const std::string& path) {
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(path, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) return false;
  }
  return true;
}

}  // namespace

Result<FsckReport> CheckCache(const std::string& dir, bool repair) {
  STOKER_ASSIGN_OR_RETURN(auto lock, CacheDirLock::Acquire(dir, false));
  struct stat st;
  std::string index_path = dir + "/index";
  if (::stat(index_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Invalid("'" + dir + "' is not a stoker cache directory (no index/)");
  }
  // An empty index/ and no data file (left by a reset below, or by a mount
  // that stopped before RocksDB made its files): nothing is cached, nothing
  // to check.
  std::error_code empty_ec;
  if (std::filesystem::is_empty(index_path, empty_ec) && !empty_ec &&
      NoRegularFiles(dir + "/data")) {
    return FsckReport{};
  }
  ChunkIndex::Options o;
  o.path = index_path;
  o.create_if_missing = false;
  // A check alone writes nothing: it can look at a cache whose disk is full.
  o.read_only = !repair;
  o.write_buffer_bytes = 4ull << 20;
  o.block_cache_bytes = 8ull << 20;
  auto check = [&]() -> Result<FsckReport> {
    STOKER_ASSIGN_OR_RETURN(auto index, ChunkIndex::Open(o));
    STOKER_ASSIGN_OR_RETURN(auto store, ChunkStore::Open(dir + "/data", 64));
    Fsck fsck(dir, repair, index.get(), store.get());
    STOKER_RETURN_IF_ERROR(fsck.Run());
    return std::move(fsck.report());
  };
  // EBADMSG: RocksDB found its files damaged, at open or in a walk.
  Result<FsckReport> checked = check();
  if (checked.ok() || checked.status().code() != EBADMSG) return checked;
  FsckReport damage;
  damage.index_damage = checked.status().message();
  if (damage.index_damage.find("is damaged") == std::string::npos) {
    damage.index_damage = "index '" + index_path + "' is damaged: " + damage.index_damage;
  }
  damage.problems.push_back(damage.index_damage);
  if (!repair) return damage;
  Status salvaged = ChunkIndex::Salvage(index_path);
  if (salvaged.ok()) checked = check();
  if (!salvaged.ok() || !checked.ok()) {
    damage.problems.push_back("could not salvage it (" +
                              (salvaged.ok() ? checked.status() : salvaged).message() +
                              "): removed the index and every data file");
    damage.index_repair = "reset";
    for (const char* sub : {"/index", "/data"}) {
      std::error_code ec;
      std::filesystem::remove_all(dir + sub, ec);
      if (ec) return Status::Error(ec.value(), "remove '" + dir + sub + "': " + ec.message());
    }
    // An empty index directory: a cache directory still, which the next
    // mount fills.
    ::mkdir(index_path.c_str(), 0700);
    damage.repaired++;
    return damage;
  }
  FsckReport r = std::move(checked).value();
  r.index_damage = damage.index_damage;
  r.index_repair = "salvaged";
  r.repaired++;
  r.problems.insert(r.problems.begin(),
                    {damage.index_damage, "salvaged what RocksDB could still read; checked below"});
  return r;
}

}  // namespace stoker
