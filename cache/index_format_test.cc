// Index encoding: round trips, key order, and that malformed or foreign
// records are Corruption, never guesses.
#include "cache/index_format.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

ObjectRecord SampleObject() {
  ObjectRecord o;
  o.object_id = 7;
  o.version = 3;
  o.identity = {12345, -5, 1700000000123456789, 99, 2049, "etag-1"};
  o.attrs = {0100644, 1000, 1000, 2, 42, 24};
  o.validated_ns = 1700000001000000000;
  return o;
}

TEST(IndexFormatTest, ValuesRoundTrip) {
  IndexMeta m{kIndexFormatVersion, 1 << 20, 17, 4096 * 9, 9, 3, 12345};
  EXPECT_EQ(DecodeMeta(EncodeMeta(m)).value(), m);
  ObjectRecord o = SampleObject();
  EXPECT_EQ(DecodeObject(EncodeObject(o)).value(), o);
  ChunkRecord c{1000, 0xdeadbeefcafef00dULL, 4096, 77, HitState::kProtected, 80};
  EXPECT_EQ(DecodeChunk(EncodeChunk(c)).value(), c);
  EXPECT_TRUE(DecodeIntent(EncodeIntent()).ok());
}

TEST(IndexFormatTest, TheOriginRecordRoundTrips) {
  EXPECT_EQ(DecodeOrigin(EncodeOrigin("s3://bucket/prefix/")).value(), "s3://bucket/prefix/");
  std::string v = EncodeOrigin("local:/data");
  EXPECT_EQ(DecodeOrigin(v.substr(0, v.size() - 1)).status().code(), EBADMSG);
  EXPECT_EQ(DecodeOrigin(v + "x").status().code(), EBADMSG);
}

TEST(IndexFormatTest, AKeptListingRoundTrips) {
  KeptListing l;
  l.self.st_mode = S_IFDIR | 0755;
  l.self.st_mtim = {1700000000, 5};
  OriginDirEntry f{"file", {}};
  f.st.st_mode = S_IFREG | 0644;
  f.st.st_size = 12345;
  f.st.st_ino = 77;
  f.st.st_ctim = {1700000001, 999999999};
  OriginDirEntry v{"view.npy", {}, false};
  v.st.st_mode = S_IFREG;
  l.entries = {f, v};
  Result<KeptListing> back = DecodeListing(EncodeListing(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->self.st_mode, l.self.st_mode);
  EXPECT_EQ(back->self.st_mtim.tv_nsec, 5);
  ASSERT_EQ(back->entries.size(), 2u);
  EXPECT_EQ(back->entries[0].name, "file");
  EXPECT_EQ(back->entries[0].st.st_size, 12345);
  EXPECT_EQ(back->entries[0].st.st_ino, 77u);
  EXPECT_EQ(back->entries[0].st.st_ctim.tv_nsec, 999999999);
  EXPECT_TRUE(back->entries[0].attrs_complete);
  EXPECT_FALSE(back->entries[1].attrs_complete);
  std::string enc = EncodeListing(l);
  EXPECT_EQ(DecodeListing(enc.substr(0, enc.size() - 1)).status().code(), EBADMSG);
  KeptListing none;
  std::string empty = EncodeListing(none);
  // A count of entries that cannot fit is damage, not an allocation.
  std::string lying = empty.substr(0, empty.size() - 8) + std::string(8, '\xff');
  EXPECT_EQ(DecodeListing(lying).status().code(), EBADMSG);
}

TEST(IndexFormatTest, ObjectBlocksAreOptional) {
  ObjectRecord o = SampleObject();
  std::string v = EncodeObject(o);
  // A record written before the origin's block count was kept ends without it.
  ObjectRecord old = DecodeObject(v.substr(0, v.size() - 8)).value();
  EXPECT_EQ(old.attrs.blocks, -1);
  old.attrs.blocks = o.attrs.blocks;
  EXPECT_EQ(old, o);
  // One encoding per record: an unknown count is written as the old bytes, and
  // a negative count present in the bytes is corruption.
  ObjectRecord unknown = o;
  unknown.attrs.blocks = -1;
  EXPECT_EQ(EncodeObject(unknown), v.substr(0, v.size() - 8));
  std::string negative = v.substr(0, v.size() - 8) + std::string(8, '\xff');
  EXPECT_EQ(DecodeObject(negative).status().code(), EBADMSG);
}

TEST(IndexFormatTest, SlotFieldsAreOptionalAndRoundTrip) {
  // A record written before slabs: exactly the old bytes, read with no slot.
  ChunkRecord old{1000, 7, 4096, 77, HitState::kProbationary, 80};
  std::string bytes = EncodeChunk(old);
  EXPECT_EQ(bytes.size(), 1u + 4 + 8 + 8 + 8 + 1 + 8);
  EXPECT_FALSE(DecodeChunk(bytes).value().slot.valid());
  ChunkRecord slotted = old;
  slotted.slot = SlotRef{26, 3, 1023};
  EXPECT_EQ(DecodeChunk(EncodeChunk(slotted)).value(), slotted);
  EXPECT_EQ(EncodeChunk(slotted).size(), bytes.size() + 12);
  // A slot past the slab, class 0, or a cut slot is corruption, not a guess.
  for (SlotRef bad : {SlotRef{26, 3, kSlotsPerSlab}}) {
    ChunkRecord r = old;
    r.slot = bad;
    EXPECT_EQ(DecodeChunk(EncodeChunk(r)).status().code(), EBADMSG);
  }
  std::string class0 = bytes + std::string(12, '\0');
  EXPECT_EQ(DecodeChunk(class0).status().code(), EBADMSG);
  EXPECT_EQ(DecodeChunk(EncodeChunk(slotted).substr(0, bytes.size() + 6)).status().code(), EBADMSG);

  EXPECT_EQ(EncodeIntent(), std::string(1, static_cast<char>(kIndexFormatVersion)));
  EXPECT_FALSE(DecodeIntent(EncodeIntent()).value().valid());
  EXPECT_EQ(DecodeIntent(EncodeIntent(SlotRef{1, 0, 5})).value(), (SlotRef{1, 0, 5}));

  SlabBitmap b;
  b.Set(0, true);
  b.Set(1023, true);
  b.Set(64, true);
  b.Set(64, false);
  EXPECT_TRUE(b.Get(1023));
  EXPECT_FALSE(b.Get(64));
  EXPECT_EQ(DecodeSlabBitmap(EncodeSlabBitmap(b)).value(), b);
  EXPECT_EQ(DecodeSlabBitmap(EncodeSlabBitmap(b).substr(1)).status().code(), EBADMSG);
  EXPECT_EQ(DecodeSlabKey(SlabKey(26, 70000)).value(), std::make_pair(26u, 70000u));
  EXPECT_EQ(SlabKey(26, 1).substr(0, 5), SlabClassPrefix(26));
  EXPECT_FALSE(DecodeSlabKey(SlabKey(0, 1)).ok());
  EXPECT_FALSE(DecodeSlabKey(SlabKey(1, 1).substr(1)).ok());
}

TEST(IndexFormatTest, KeysRoundTripAndSortNumerically) {
  ChunkKey k{1ull << 40, 2, 300};
  EXPECT_EQ(DecodeChunkRecordKey(ChunkRecordKey(k)).value(), k);
  EXPECT_EQ(DecodeIntentKey(IntentKey(k)).value(), k);
  EXPECT_EQ(DecodeDropKey(DropKey(k.version_key())).value(), k.version_key());
  EXPECT_EQ(DecodeObjectKey(ObjectKey("a/b c")).value(), "a/b c");
  auto e = DecodeEvictOrderKey(EvictOrderKey({1, 99}, k)).value();
  EXPECT_EQ(e.first, (EvictionRank{1, 99}));
  EXPECT_EQ(e.second, k);

  // Chunk 255 sorts before chunk 256 (big-endian), and a version's chunks
  // share its prefix and nothing else does.
  EXPECT_LT(ChunkRecordKey({1, 1, 255}), ChunkRecordKey({1, 1, 256}));
  EXPECT_LT(ChunkRecordKey({1, 1, UINT64_MAX}), ChunkRecordKey({1, 2, 0}));
  std::string p = VersionChunkPrefix({1, 1});
  EXPECT_EQ(ChunkRecordKey({1, 1, 9}).rfind(p, 0), 0u);
  EXPECT_NE(ChunkRecordKey({1, 2, 9}).rfind(p, 0), 0u);
  EXPECT_LT(EvictOrderKey({0, UINT64_MAX}, k), EvictOrderKey({1, 0}, k));
  EXPECT_LT(EvictOrderKey({1, 5}, {9, 9, 9}), EvictOrderKey({1, 6}, {1, 1, 1}));
  EXPECT_LT(EvictOrderKey({1, UINT64_MAX}, k), EvictQueuePrefix(2));
}

TEST(IndexFormatTest, TruncatedOrExtendedValuesAreCorruption) {
  std::string v = EncodeChunk(ChunkRecord{10, 1, 4096, 1, HitState::kProbationary, 1});
  for (size_t n = 0; n < v.size(); ++n) {
    auto r = DecodeChunk(v.substr(0, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), EBADMSG);
  }
  EXPECT_FALSE(DecodeChunk(v + "x").ok());
  std::string o = EncodeObject(SampleObject());
  EXPECT_FALSE(DecodeObject(o.substr(0, o.size() - 1)).ok());
  EXPECT_FALSE(DecodeMeta("").ok());
}

TEST(IndexFormatTest, ForeignFormatVersionIsCorruption) {
  std::string v = EncodeMeta(IndexMeta{});
  v[0] = static_cast<char>(kIndexFormatVersion + 1);
  auto r = DecodeMeta(v);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("format version"), std::string::npos);
}

TEST(IndexFormatTest, ImpossibleFieldsAreCorruption) {
  EXPECT_FALSE(DecodeChunk(EncodeChunk(ChunkRecord{0, 1, 4096, 1})).ok());     // empty chunk
  EXPECT_FALSE(DecodeChunk(EncodeChunk(ChunkRecord{8192, 1, 4096, 1})).ok());  // alloc < len
  std::string v = EncodeChunk(ChunkRecord{10, 1, 4096, 1});
  v[1 + 4 + 8 + 8 + 8] = 7;  // hit state
  EXPECT_FALSE(DecodeChunk(v).ok());
  ObjectRecord o = SampleObject();
  o.version = 0;
  EXPECT_FALSE(DecodeObject(EncodeObject(o)).ok());
  EXPECT_FALSE(DecodeChunkRecordKey("c123").ok());
  EXPECT_FALSE(DecodeChunkRecordKey(IntentKey({1, 1, 1})).ok());  // wrong kind
  EXPECT_FALSE(DecodeDropKey("d").ok());
}

}  // namespace
}  // namespace stoker
