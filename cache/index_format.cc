#include "cache/index_format.h"

#include <cstring>

namespace stoker {
namespace {

void PutBE64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetBE64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Little-endian fixed-width writer/reader for values.
class Writer {
 public:
  Writer() { s_.push_back(static_cast<char>(kIndexFormatVersion)); }
  Writer& U8(uint8_t v) {
    s_.push_back(static_cast<char>(v));
    return *this;
  }
  Writer& U32(uint32_t v) { return Fixed(v, 4); }
  Writer& U64(uint64_t v) { return Fixed(v, 8); }
  Writer& I64(int64_t v) { return Fixed(static_cast<uint64_t>(v), 8); }
  Writer& Str(const std::string& v) {
    U32(static_cast<uint32_t>(v.size()));
    s_ += v;
    return *this;
  }
  // Optional trailing fields: nothing when there is no slot.
  Writer& Slot(const SlotRef& slot) {
    if (!slot.valid()) return *this;
    return U32(slot.slot_class).U32(slot.slab).U32(slot.slot);
  }
  // Optional trailing field: nothing when the value is unknown (negative).
  Writer& OptionalI64(int64_t v) { return v < 0 ? *this : I64(v); }
  std::string Done() { return std::move(s_); }

 private:
  Writer& Fixed(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string s_;
};

class Reader {
 public:
  Reader(std::string_view v, const char* what) : v_(v), what_(what) {
    if (v_.empty()) {
      ok_ = false;
    } else if (static_cast<uint8_t>(v_[0]) != kIndexFormatVersion) {
      ok_ = false;
      bad_version_ = true;
    } else {
      pos_ = 1;
    }
  }
  uint8_t U8() { return static_cast<uint8_t>(Fixed(1)); }
  uint32_t U32() { return static_cast<uint32_t>(Fixed(4)); }
  uint64_t U64() { return Fixed(8); }
  int64_t I64() { return static_cast<int64_t>(Fixed(8)); }
  std::string Str() {
    uint32_t n = U32();
    if (!ok_ || v_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    std::string s(v_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool AtEnd() const { return ok_ && pos_ == v_.size(); }
  // The slot fields if the value goes on (records written before slabs end
  // without them).
  Status OptionalSlot(SlotRef* slot) {
    if (!ok_ || AtEnd()) return Status::OK();
    slot->slot_class = U32();
    slot->slab = U32();
    slot->slot = U32();
    if (ok_ && (slot->slot_class == 0 || slot->slot >= kSlotsPerSlab)) {
      return Status::Corruption(std::string("index ") + what_ + " record has slot class " +
                                std::to_string(slot->slot_class) + " slot " +
                                std::to_string(slot->slot));
    }
    return Status::OK();
  }
  // Every field read, nothing left over.
  Status Finish() const {
    if (bad_version_) {
      return Status::Corruption(std::string("index ") + what_ + " record has format version " +
                                std::to_string(static_cast<uint8_t>(v_[0])) + ", expected " +
                                std::to_string(kIndexFormatVersion));
    }
    if (!ok_ || pos_ != v_.size()) {
      return Status::Corruption(std::string("index ") + what_ + " record is malformed (" +
                                std::to_string(v_.size()) + " bytes)");
    }
    return Status::OK();
  }

 private:
  uint64_t Fixed(int n) {
    if (!ok_ || v_.size() - pos_ < static_cast<size_t>(n)) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(v_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  std::string_view v_;
  const char* what_;
  size_t pos_ = 0;
  bool ok_ = true;
  bool bad_version_ = false;
};

std::string WithChunkKey(char prefix, const ChunkKey& k) {
  std::string s(1, prefix);
  PutBE64(&s, k.object_id);
  PutBE64(&s, k.version);
  PutBE64(&s, k.index);
  return s;
}

Result<ChunkKey> ParseChunkKey(std::string_view key, char prefix, size_t skip, const char* what) {
  if (key.size() != 1 + skip + 24 || key[0] != prefix) {
    return Status::Corruption(std::string("malformed index ") + what + " key (" +
                              std::to_string(key.size()) + " bytes)");
  }
  const char* p = key.data() + 1 + skip;
  return ChunkKey{GetBE64(p), GetBE64(p + 8), GetBE64(p + 16)};
}

}  // namespace

std::string ObjectKey(std::string_view path) {
  std::string s(1, kObjectPrefix);
  s += path;
  return s;
}

std::string ChunkRecordKey(const ChunkKey& key) { return WithChunkKey(kChunkPrefix, key); }

std::string VersionChunkPrefix(const VersionKey& v) {
  std::string s(1, kChunkPrefix);
  PutBE64(&s, v.object_id);
  PutBE64(&s, v.version);
  return s;
}

std::string EvictOrderKey(const EvictionRank& rank, const ChunkKey& key) {
  std::string s = EvictQueuePrefix(rank.queue);
  PutBE64(&s, rank.order);
  PutBE64(&s, key.object_id);
  PutBE64(&s, key.version);
  PutBE64(&s, key.index);
  return s;
}

std::string EvictQueuePrefix(uint8_t queue) {
  std::string s(1, kEvictPrefix);
  s.push_back(static_cast<char>(queue));
  return s;
}

std::string IntentKey(const ChunkKey& key) { return WithChunkKey(kIntentPrefix, key); }

std::string DropKey(const VersionKey& v) {
  std::string s(1, kDropPrefix);
  PutBE64(&s, v.object_id);
  PutBE64(&s, v.version);
  return s;
}

std::string DerivedVersionPrefix(const VersionKey& v) {
  std::string s(1, kDerivedPrefix);
  PutBE64(&s, v.object_id);
  PutBE64(&s, v.version);
  return s;
}

std::string DerivedKey(const VersionKey& v, std::string_view name) {
  std::string s = DerivedVersionPrefix(v);
  s.append(name);
  return s;
}

Result<std::string> DecodeObjectKey(std::string_view key) {
  if (key.empty() || key[0] != kObjectPrefix) return Status::Corruption("malformed object key");
  return std::string(key.substr(1));
}

Result<ChunkKey> DecodeChunkRecordKey(std::string_view key) {
  return ParseChunkKey(key, kChunkPrefix, 0, "chunk");
}

Result<std::pair<EvictionRank, ChunkKey>> DecodeEvictOrderKey(std::string_view key) {
  STOKER_ASSIGN_OR_RETURN(ChunkKey k, ParseChunkKey(key, kEvictPrefix, 9, "eviction"));
  EvictionRank rank{static_cast<uint8_t>(key[1]), GetBE64(key.data() + 2)};
  return std::make_pair(rank, k);
}

Result<ChunkKey> DecodeIntentKey(std::string_view key) {
  return ParseChunkKey(key, kIntentPrefix, 0, "write intent");
}

Result<VersionKey> DecodeDerivedKey(std::string_view key) {
  if (key.size() < 17 || key[0] != kDerivedPrefix) {
    return Status::Corruption("malformed derived record key");
  }
  return VersionKey{GetBE64(key.data() + 1), GetBE64(key.data() + 9)};
}

std::string SlabClassPrefix(uint32_t slot_class) {
  std::string s(1, kSlabPrefix);
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((slot_class >> (8 * i)) & 0xff));
  return s;
}

std::string SlabKey(uint32_t slot_class, uint32_t slab) {
  std::string s = SlabClassPrefix(slot_class);
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((slab >> (8 * i)) & 0xff));
  return s;
}

Result<std::pair<uint32_t, uint32_t>> DecodeSlabKey(std::string_view key) {
  if (key.size() != 9 || key[0] != kSlabPrefix) {
    return Status::Corruption("malformed index slab key (" + std::to_string(key.size()) +
                              " bytes)");
  }
  uint64_t v = GetBE64(key.data() + 1);
  uint32_t slot_class = static_cast<uint32_t>(v >> 32);
  if (slot_class == 0) return Status::Corruption("index slab key has slot class 0");
  return std::make_pair(slot_class, static_cast<uint32_t>(v));
}

Result<VersionKey> DecodeDropKey(std::string_view key) {
  if (key.size() != 17 || key[0] != kDropPrefix) {
    return Status::Corruption("malformed index drop key");
  }
  return VersionKey{GetBE64(key.data() + 1), GetBE64(key.data() + 9)};
}

std::string EncodeMeta(const IndexMeta& m) {
  return Writer()
      .U64(m.chunk_size)
      .U64(m.next_object_id)
      .U64(m.usage_bytes)
      .U64(m.chunks)
      .U64(m.objects)
      .U64(m.clock)
      .Done();
}

Result<IndexMeta> DecodeMeta(std::string_view v) {
  Reader r(v, "meta");
  IndexMeta m;
  m.chunk_size = r.U64();
  m.next_object_id = r.U64();
  m.usage_bytes = r.U64();
  m.chunks = r.U64();
  m.objects = r.U64();
  m.clock = r.U64();
  STOKER_RETURN_IF_ERROR(r.Finish());
  return m;
}

std::string ListingKey(std::string_view dir) {
  std::string k(1, kListingPrefix);
  k.append(dir);
  return k;
}

namespace {

// The lstat fields a listing keeps (what RemoteStat and lstat give).
void PutStat(Writer& w, const struct stat& st) {
  w.U32(st.st_mode)
      .U64(st.st_ino)
      .U64(st.st_dev)
      .U64(st.st_nlink)
      .U32(st.st_uid)
      .U32(st.st_gid)
      .U64(static_cast<uint64_t>(st.st_size))
      .I64(st.st_blocks)
      .U32(static_cast<uint32_t>(st.st_blksize))
      .I64(st.st_atim.tv_sec)
      .U32(static_cast<uint32_t>(st.st_atim.tv_nsec))
      .I64(st.st_mtim.tv_sec)
      .U32(static_cast<uint32_t>(st.st_mtim.tv_nsec))
      .I64(st.st_ctim.tv_sec)
      .U32(static_cast<uint32_t>(st.st_ctim.tv_nsec));
}

struct stat GetStat(Reader& r) {
  struct stat st {};
  st.st_mode = r.U32();
  st.st_ino = r.U64();
  st.st_dev = r.U64();
  st.st_nlink = r.U64();
  st.st_uid = r.U32();
  st.st_gid = r.U32();
  st.st_size = static_cast<off_t>(r.U64());
  st.st_blocks = r.I64();
  st.st_blksize = static_cast<blksize_t>(r.U32());
  st.st_atim.tv_sec = r.I64();
  st.st_atim.tv_nsec = r.U32();
  st.st_mtim.tv_sec = r.I64();
  st.st_mtim.tv_nsec = r.U32();
  st.st_ctim.tv_sec = r.I64();
  st.st_ctim.tv_nsec = r.U32();
  return st;
}

}  // namespace

std::string EncodeListing(const KeptListing& l) {
  Writer w;
  PutStat(w, l.self);
  w.U64(l.entries.size());
  for (const OriginDirEntry& e : l.entries) {
    w.Str(e.name).U8(e.attrs_complete ? 1 : 0);
    PutStat(w, e.st);
  }
  return w.Done();
}

Result<KeptListing> DecodeListing(std::string_view v) {
  Reader r(v, "listing");
  KeptListing l;
  l.self = GetStat(r);
  const uint64_t n = r.U64();
  // Each entry takes more than 64 bytes: a count beyond that is damage.
  if (n > v.size() / 64)
    return Status::Corruption("index listing record counts " + std::to_string(n) + " entries in " +
                              std::to_string(v.size()) + " bytes");
  l.entries.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    OriginDirEntry e;
    e.name = r.Str();
    e.attrs_complete = r.U8() != 0;
    e.st = GetStat(r);
    l.entries.push_back(std::move(e));
  }
  STOKER_RETURN_IF_ERROR(r.Finish());
  return l;
}

std::string EncodeOrigin(const std::string& location) { return Writer().Str(location).Done(); }

Result<std::string> DecodeOrigin(std::string_view v) {
  Reader r(v, "origin");
  std::string location = r.Str();
  STOKER_RETURN_IF_ERROR(r.Finish());
  return location;
}

std::string EncodeObject(const ObjectRecord& o) {
  return Writer()
      .U64(o.object_id)
      .U64(o.version)
      .U64(o.identity.size)
      .I64(o.identity.mtime_ns)
      .I64(o.identity.ctime_ns)
      .U64(o.identity.ino)
      .U64(o.identity.dev)
      .Str(o.identity.etag)
      .U32(o.attrs.mode)
      .U32(o.attrs.uid)
      .U32(o.attrs.gid)
      .U64(o.attrs.nlink)
      .I64(o.attrs.atime_ns)
      .I64(o.validated_ns)
      .OptionalI64(o.attrs.blocks)
      .Done();
}

Result<ObjectRecord> DecodeObject(std::string_view v) {
  Reader r(v, "object");
  ObjectRecord o;
  o.object_id = r.U64();
  o.version = r.U64();
  o.identity.size = r.U64();
  o.identity.mtime_ns = r.I64();
  o.identity.ctime_ns = r.I64();
  o.identity.ino = r.U64();
  o.identity.dev = r.U64();
  o.identity.etag = r.Str();
  o.attrs.mode = r.U32();
  o.attrs.uid = r.U32();
  o.attrs.gid = r.U32();
  o.attrs.nlink = r.U64();
  o.attrs.atime_ns = r.I64();
  o.validated_ns = r.I64();
  const bool has_blocks = !r.AtEnd();  // absent from older records
  if (has_blocks) o.attrs.blocks = r.I64();
  STOKER_RETURN_IF_ERROR(r.Finish());
  // Written only when known, so a present value is never negative: one
  // encoding per record (the fuzzer holds the format to that).
  if (has_blocks && o.attrs.blocks < 0) {
    return Status::Corruption("index object record has a negative block count");
  }
  if (o.object_id == 0 || o.version == 0) {
    return Status::Corruption("index object record has object id or version 0");
  }
  return o;
}

std::string EncodeChunk(const ChunkRecord& c) {
  return Writer()
      .U32(c.len)
      .U64(c.xxh3)
      .U64(c.allocated)
      .U64(c.insert_seq)
      .U8(static_cast<uint8_t>(c.state))
      .U64(c.last_access)
      .Slot(c.slot)
      .Done();
}

Result<ChunkRecord> DecodeChunk(std::string_view v) {
  Reader r(v, "chunk");
  ChunkRecord c;
  c.len = r.U32();
  c.xxh3 = r.U64();
  c.allocated = r.U64();
  c.insert_seq = r.U64();
  uint8_t state = r.U8();
  c.last_access = r.U64();
  STOKER_RETURN_IF_ERROR(r.OptionalSlot(&c.slot));
  STOKER_RETURN_IF_ERROR(r.Finish());
  if (state > static_cast<uint8_t>(HitState::kProtected)) {
    return Status::Corruption("index chunk record has unknown hit state " + std::to_string(state));
  }
  c.state = static_cast<HitState>(state);
  if (c.len == 0 || c.allocated < c.len) {
    return Status::Corruption("index chunk record has length " + std::to_string(c.len) +
                              " and allocated bytes " + std::to_string(c.allocated));
  }
  return c;
}

std::string EncodeIntent(const SlotRef& slot) { return Writer().Slot(slot).Done(); }

Result<SlotRef> DecodeIntent(std::string_view v) {
  Reader r(v, "intent");
  SlotRef slot;
  STOKER_RETURN_IF_ERROR(r.OptionalSlot(&slot));
  STOKER_RETURN_IF_ERROR(r.Finish());
  return slot;
}

std::string EncodeSlabBitmap(const SlabBitmap& b) {
  Writer w;
  for (uint64_t word : b.words) w.U64(word);
  return w.Done();
}

Result<SlabBitmap> DecodeSlabBitmap(std::string_view v) {
  Reader r(v, "slab");
  SlabBitmap b;
  for (uint64_t& word : b.words) word = r.U64();
  STOKER_RETURN_IF_ERROR(r.Finish());
  return b;
}

}  // namespace stoker
