// ChunkIndex over a real RocksDB: usage moves with the chunk records in the
// same batch, survives reopening, and the eviction queues follow the records.
#include "cache/chunk_index.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "cache/cache_test_util.h"

namespace stoker {
namespace {

using testing::ScratchDir;

class ChunkIndexTest : public ::testing::Test {
 protected:
  // Deletes the meta record of the closed index (ChunkIndex's own close
  // would write it again).
  void DeleteMeta() {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.Sub("index"), &db).ok());
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), kMetaKey).ok());
    delete db;
  }
  std::unique_ptr<ChunkIndex> OpenIndex(uint64_t chunk_size = 65536) {
    ChunkIndex::Options o;
    o.path = dir_.Sub("index");
    o.chunk_size_if_new = chunk_size;
    o.write_buffer_bytes = 1 << 20;
    auto r = ChunkIndex::Open(o);
    STOKER_CHECK(r.ok(), r.status().message().c_str());
    return std::move(r).value();
  }
  static ChunkRecord Rec(uint32_t len, uint64_t seq) {
    return ChunkRecord{len, 123, AllocatedBytes(len), seq, HitState::kProbationary, seq};
  }
  static std::vector<ChunkKey> Queue(ChunkIndex& idx, uint8_t q) {
    std::vector<ChunkKey> keys;
    for (auto c = idx.NewEvictCursor(q); c->Valid(); c->Next()) keys.push_back(c->key());
    return keys;
  }
  ScratchDir dir_{"index"};
};

TEST_F(ChunkIndexTest, UsageAndCountsFollowCommitsAndDropsAcrossReopen) {
  {
    auto idx = OpenIndex();
    ASSERT_TRUE(idx->PutIntent({1, 1, 0}).ok());
    ASSERT_TRUE(idx->CommitChunk({1, 1, 0}, Rec(100, 1)).ok());
    ASSERT_TRUE(idx->CommitChunk({1, 1, 1}, Rec(5000, 2)).ok());
    EXPECT_EQ(idx->meta().usage_bytes, 4096u + 8192u);
    EXPECT_EQ(idx->meta().chunks, 2u);
    bool intent = false;
    ASSERT_TRUE(idx->ForEach(kIntentPrefix, [&](auto, auto) { return intent = true; }).ok());
    EXPECT_FALSE(intent) << "commit must delete the intent";
    EXPECT_EQ(idx->DropChunk({1, 1, 0}).value(), 4096u);
    EXPECT_EQ(idx->DropChunk({1, 1, 0}).value(), 0u);  // twice frees nothing
    (void)idx->Tick();
  }
  auto idx = OpenIndex();
  EXPECT_EQ(idx->meta().usage_bytes, 8192u);
  EXPECT_EQ(idx->meta().chunks, 1u);
  EXPECT_GE(idx->clock(), 1u);
  EXPECT_EQ(idx->GetChunk({1, 1, 1}).value()->len, 5000u);
  EXPECT_FALSE(idx->GetChunk({1, 1, 0}).value().has_value());
}

TEST_F(ChunkIndexTest, ObjectsGetIdsAndVersionsGetDropIntents) {
  auto idx = OpenIndex();
  ObjectRecord rec;
  rec.version = 1;
  rec.identity.size = 10;
  auto a = idx->CreateObject("a", rec).value();
  auto b = idx->CreateObject("b", rec).value();
  EXPECT_NE(a.object_id, b.object_id);
  EXPECT_EQ(idx->meta().objects, 2u);
  ASSERT_TRUE(idx->CommitChunk({a.object_id, 1, 0}, Rec(10, 1)).ok());
  ObjectRecord a2 = a;
  a2.version = 2;
  ASSERT_TRUE(idx->ReplaceObject("a", a2, {a.object_id, 1}).ok());
  EXPECT_EQ(idx->GetObject("a").value()->version, 2u);
  std::vector<VersionKey> drops;
  ASSERT_TRUE(idx->ForEach(kDropPrefix,
                           [&](std::string_view k, auto) {
                             drops.push_back(DecodeDropKey(k).value());
                             return true;
                           })
                  .ok());
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0], (VersionKey{a.object_id, 1}));
  bool done = false;
  EXPECT_EQ(idx->DropVersionChunks(drops[0], 10, &done).value(), 4096u);
  EXPECT_TRUE(done);
  EXPECT_FALSE(idx->HasChunks(drops[0]).value());
  EXPECT_EQ(idx->meta().usage_bytes, 0u);
  bool left = false;
  ASSERT_TRUE(idx->ForEach(kDropPrefix, [&](auto, auto) { return left = true; }).ok());
  EXPECT_FALSE(left);
  ASSERT_TRUE(idx->DeleteObject("b", {b.object_id, 1}).ok());
  EXPECT_FALSE(idx->GetObject("b").value().has_value());
  EXPECT_EQ(idx->meta().objects, 1u);
}

TEST_F(ChunkIndexTest, DerivedRecordsGoWithTheirVersion) {
  auto idx = OpenIndex();
  EXPECT_FALSE(idx->GetDerived({1, 1}, "layout").value().has_value());
  ASSERT_TRUE(idx->PutDerived({1, 1}, "layout", std::string("a\0b", 3)).ok());
  ASSERT_TRUE(idx->PutDerived({1, 1}, "other", "x").ok());
  ASSERT_TRUE(idx->PutDerived({1, 2}, "layout", "newer").ok());
  ASSERT_TRUE(idx->CommitChunk({1, 1, 0}, Rec(100, 1)).ok());
  EXPECT_EQ(idx->GetDerived({1, 1}, "layout").value(), std::string("a\0b", 3));
  bool done = false;
  while (!done) ASSERT_TRUE(idx->DropVersionChunks({1, 1}, 10, &done).ok());
  EXPECT_FALSE(idx->GetDerived({1, 1}, "layout").value().has_value());
  EXPECT_FALSE(idx->GetDerived({1, 1}, "other").value().has_value());
  EXPECT_EQ(idx->GetDerived({1, 2}, "layout").value(), "newer");
  // A version without chunks drops its derived records too.
  done = false;
  ASSERT_TRUE(idx->DropVersionChunks({1, 2}, 10, &done).ok());
  EXPECT_TRUE(done);
  EXPECT_FALSE(idx->GetDerived({1, 2}, "layout").value().has_value());
  auto key = DecodeDerivedKey(DerivedKey({7, 9}, "n"));
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->object_id, 7u);
  EXPECT_EQ(key->version, 9u);
  EXPECT_FALSE(DecodeDerivedKey("x12").ok());
}

TEST_F(ChunkIndexTest, DropVersionInBatches) {
  auto idx = OpenIndex();
  for (uint64_t i = 0; i < 25; ++i) ASSERT_TRUE(idx->CommitChunk({3, 1, i}, Rec(4096, i)).ok());
  ASSERT_TRUE(idx->CommitChunk({3, 2, 0}, Rec(4096, 99)).ok());
  bool done = false;
  int rounds = 0;
  while (!done) {
    ASSERT_TRUE(idx->DropVersionChunks({3, 1}, 10, &done).ok());
    ++rounds;
  }
  EXPECT_EQ(rounds, 3);
  EXPECT_EQ(idx->meta().chunks, 1u);
  EXPECT_TRUE(idx->HasChunks({3, 2}).value());
  EXPECT_EQ(Queue(*idx, 0).size(), 1u);
}

TEST_F(ChunkIndexTest, HitsMoveChunksToTheProtectedQueue) {
  auto idx = OpenIndex();
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(idx->CommitChunk({1, 1, i}, Rec(10, i + 1)).ok());
  // Newest inserted first.
  EXPECT_EQ(Queue(*idx, 0), (std::vector<ChunkKey>{{1, 1, 2}, {1, 1, 1}, {1, 1, 0}}));
  EvictionPolicy policy;
  ASSERT_TRUE(idx->RecordHits({{{1, 1, 1}, 20}, {{1, 1, 0}, 10}, {{9, 9, 9}, 5}}, policy).ok());
  EXPECT_EQ(Queue(*idx, 0), (std::vector<ChunkKey>{{1, 1, 2}}));
  EXPECT_EQ(Queue(*idx, 1), (std::vector<ChunkKey>{{1, 1, 0}, {1, 1, 1}}));  // LRU
  EXPECT_EQ(idx->GetChunk({1, 1, 1}).value()->state, HitState::kProtected);
  EXPECT_FALSE(idx->GetChunk({9, 9, 9}).value().has_value());  // not resurrected
  EXPECT_EQ(idx->DropChunk({1, 1, 0}).value(), 4096u);
  EXPECT_EQ(Queue(*idx, 1), (std::vector<ChunkKey>{{1, 1, 1}}));
}

TEST_F(ChunkIndexTest, UndecodableRecordsAreCorruption) {
  auto idx = OpenIndex();
  ASSERT_TRUE(idx->CommitChunk({1, 1, 0}, Rec(10, 1)).ok());
  ASSERT_TRUE(idx->DeleteRaw(ChunkRecordKey({1, 1, 0})).ok());
  EXPECT_FALSE(idx->GetChunk({1, 1, 0}).value().has_value());
}

TEST_F(ChunkIndexTest, KeepsItsChunkSize) {
  { auto idx = OpenIndex(65536); }
  auto idx = OpenIndex(1 << 20);
  EXPECT_EQ(idx->meta().chunk_size, 65536u) << "the caller decides to wipe";
  EXPECT_GT(ChunkIndex::DiskBytes(dir_.Sub("index")), 0u);
}

// A power loss between RocksDB's create and the synced meta record leaves
// an index with no record at all: it is a new index. One that holds records
// but lost its meta record is damaged, not silently started at usage 0.
TEST_F(ChunkIndexTest, AnIndexWithoutItsMetaRecord) {
  ChunkIndex::Options o;
  o.path = dir_.Sub("index");
  o.write_buffer_bytes = 1 << 20;
  { auto idx = OpenIndex(); }
  DeleteMeta();
  o.chunk_size_if_new = 0;  // as fsck opens it
  auto r = ChunkIndex::Open(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EBADMSG);
  EXPECT_NE(r.status().message().find("no meta record"), std::string::npos);
  {
    auto idx = OpenIndex(1 << 20);
    EXPECT_TRUE(idx->created());
    EXPECT_EQ(idx->meta().chunk_size, uint64_t{1} << 20);
    ASSERT_TRUE(idx->CommitChunk({1, 1, 0}, Rec(10, 1)).ok());
  }
  DeleteMeta();
  o.chunk_size_if_new = 65536;
  r = ChunkIndex::Open(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EBADMSG);
  EXPECT_NE(r.status().message().find("records but no meta record"), std::string::npos)
      << r.status().message();
}

// What a directory holds: each file's name, size and mtime.
std::map<std::string, std::pair<off_t, int64_t>> Listing(const std::string& dir) {
  std::map<std::string, std::pair<off_t, int64_t>> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    struct stat st;
    if (::stat(e.path().c_str(), &st) == 0) {
      out[e.path().filename()] = {st.st_size,
                                  st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec};
    }
  }
  return out;
}

TEST_F(ChunkIndexTest, AReadOnlyOpenReadsEverythingAndWritesNothing) {
  {
    auto idx = OpenIndex();
    ASSERT_TRUE(idx->CommitChunk({1, 1, 0}, Rec(100, 1)).ok());
  }
  {
    auto idx = OpenIndex();
    ASSERT_TRUE(idx->CommitChunk({1, 1, 1}, Rec(5000, 2)).ok());
  }
  const auto before = Listing(dir_.Sub("index"));
  ChunkIndex::Options o;
  o.path = dir_.Sub("index");
  o.create_if_missing = false;
  o.read_only = true;
  {
    auto idx = ChunkIndex::Open(o);
    ASSERT_TRUE(idx.ok()) << idx.status().message();
    EXPECT_EQ((*idx)->meta().chunks, 2u);
    EXPECT_EQ((*idx)->GetChunk({1, 1, 1}).value()->len, 5000u);
    Status put = (*idx)->CommitChunk({1, 1, 2}, Rec(10, 3));
    EXPECT_EQ(put.code(), ENOTSUP) << put.message();
  }
  EXPECT_EQ(Listing(dir_.Sub("index")), before) << "a read-only open changed the index's files";
}

TEST_F(ChunkIndexTest, SlotsAreTakenWithTheIntentAndFreedWithTheRecord) {
  auto idx = OpenIndex();
  const ChunkKey a{1, 1, 0}, b{2, 1, 0}, c{3, 1, 0};
  SlotRef sa = idx->ReserveSlot(a, 100 << 10).value();
  SlotRef sb = idx->ReserveSlot(b, 100 << 10).value();
  EXPECT_EQ(sa, (SlotRef{26, 0, 0}));
  EXPECT_EQ(sb, (SlotRef{26, 0, 1}));
  EXPECT_TRUE(idx->SlotTaken(sa).value());
  // The intent names its slot, for a restart after a crash.
  std::string value;
  ASSERT_TRUE(idx->ForEach(kIntentPrefix,
                           [&](auto k, auto v) {
                             if (DecodeIntentKey(k).value() == a) value = v;
                             return true;
                           })
                  .ok());
  EXPECT_EQ(DecodeIntent(value).value(), sa);

  // A write that did not commit gives its slot back, and the next write of
  // the class takes it: the slab does not grow.
  ASSERT_TRUE(idx->ReleaseSlot(a, sa).ok());
  EXPECT_FALSE(idx->SlotTaken(sa).value());
  EXPECT_EQ(idx->ReserveSlot(c, 99 << 10).value(), sa);

  ChunkRecord rec = Rec(100 << 10, 1);
  rec.slot = sb;
  ASSERT_TRUE(idx->CommitChunk(b, rec).ok());
  EXPECT_EQ(idx->GetChunk(b).value()->slot, sb);
  EXPECT_EQ(idx->DropChunk(b).value(), AllocatedBytes(100 << 10));
  EXPECT_FALSE(idx->SlotTaken(sb).value());
  // A record never commits onto a free slot, even one not reserved first.
  rec.slot = SlotRef{26, 0, 9};
  ASSERT_TRUE(idx->CommitChunk({4, 1, 0}, rec).ok());
  EXPECT_TRUE(idx->SlotTaken(rec.slot).value());
  // Another class has slots of its own.
  EXPECT_EQ(idx->ReserveSlot(a, 5000).value(), (SlotRef{2, 0, 0}));
}

TEST_F(ChunkIndexTest, SlotStateSurvivesARestartAtEveryStep) {
  const ChunkKey written{1, 1, 0}, committed{2, 1, 0}, dropped{3, 1, 0};
  SlotRef sw, sc, sd;
  {
    auto idx = OpenIndex();
    sw = idx->ReserveSlot(written, 4096).value();  // written, not committed
    sc = idx->ReserveSlot(committed, 4096).value();
    ChunkRecord rec = Rec(4096, 1);
    rec.slot = sc;
    ASSERT_TRUE(idx->CommitChunk(committed, rec).ok());
    sd = idx->ReserveSlot(dropped, 4096).value();
    rec.slot = sd;
    ASSERT_TRUE(idx->CommitChunk(dropped, rec).ok());
    bool done = false;
    ASSERT_TRUE(idx->DropVersionChunks(dropped.version_key(), 10, &done).ok());
    EXPECT_TRUE(done);
  }
  auto idx = OpenIndex();
  EXPECT_TRUE(idx->SlotTaken(sw).value()) << "an intent keeps its slot across a restart";
  EXPECT_TRUE(idx->SlotTaken(sc).value());
  EXPECT_EQ(idx->GetChunk(committed).value()->slot, sc);
  EXPECT_FALSE(idx->SlotTaken(sd).value());
  // The next write takes the dropped chunk's slot, never a held one.
  EXPECT_EQ(idx->ReserveSlot({4, 1, 0}, 4096).value(), sd);
  EXPECT_EQ(idx->ReserveSlot({5, 1, 0}, 4096).value(), (SlotRef{1, 0, 3}));
}

TEST_F(ChunkIndexTest, AFullSlabStartsTheNextAndFreedSlotsAreTakenFirst) {
  auto idx = OpenIndex();
  for (uint32_t i = 0; i < kSlotsPerSlab; ++i) {
    ASSERT_EQ(idx->ReserveSlot({i + 1, 1, 0}, 4096).value(), (SlotRef{1, 0, i}));
  }
  EXPECT_EQ(idx->ReserveSlot({5000, 1, 0}, 4096).value(), (SlotRef{1, 1, 0}));
  ASSERT_TRUE(idx->ReleaseSlot({701, 1, 0}, SlotRef{1, 0, 700}).ok());
  EXPECT_EQ(idx->ReserveSlot({5001, 1, 0}, 4096).value(), (SlotRef{1, 0, 700}));
  EXPECT_EQ(idx->ReserveSlot({5002, 1, 0}, 4096).value(), (SlotRef{1, 1, 1}));
}

}  // namespace
}  // namespace stoker
