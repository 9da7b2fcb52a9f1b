// CheckCache: a cache made by ObjectCache, then damaged the ways a crash, a
// bad disk or a person can damage it; fsck finds each, --repair fixes each,
// and the repaired cache serves the right bytes.
#include "cache/fsck.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cache/cache_test_util.h"
#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "cache/object_cache.h"
#include "cache/origin/local/local_origin.h"

namespace stoker {
namespace {

using testing::Pattern;

constexpr uint64_t kCs = 64 << 10;

class FsckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto io = MakeIoBackend(IoBackendKind::kSyscall);
    ASSERT_TRUE(io.ok());
    auto local = LocalOrigin::Create(origin_.path(), std::shared_ptr<IoBackend>(std::move(*io)));
    ASSERT_TRUE(local.ok());
    origin_ptr_ = *local;
    options_.dir = cache_.Sub("c");
    options_.chunk_size = kCs;
    options_.capacity_bytes = 64 << 20;
    options_.prefetch_bytes = 0;
    options_.slab_max_bytes = SlabMax();
    testing::WriteFile(origin_.Sub("a"), Pattern(3 * kCs + 5, 1));
    testing::WriteFile(origin_.Sub("b"), Pattern(kCs, 2));
    Populate();
  }

  // The cases below damage versions' own files; SlabFsckTest, slots.
  virtual uint64_t SlabMax() const { return 0; }

  std::unique_ptr<ObjectCache> OpenCache() {
    auto c = ObjectCache::Open(options_, origin_ptr_);
    STOKER_CHECK(c.ok(), c.status().message().c_str());
    return std::move(c).value();
  }

  std::string ReadAll(ObjectCache& c, const std::string& path) {
    auto o = c.Open(path, false).value();
    ReadReply r;
    EXPECT_TRUE(c.Read(*o.file, 0, 1 << 30, &r).ok());
    return testing::Materialize(r);
  }

  void Populate() {
    auto c = OpenCache();
    ReadAll(*c, "a");
    ReadAll(*c, "b");
  }

  FsckReport Check(bool repair) {
    auto r = CheckCache(options_.dir, repair);
    STOKER_CHECK(r.ok(), r.status().message().c_str());
    return *r;
  }

  std::unique_ptr<ChunkIndex> Index() {
    ChunkIndex::Options o;
    o.path = options_.dir + "/index";
    o.create_if_missing = false;
    return ChunkIndex::Open(o).value();
  }

  std::string Data(const char* rel) const { return options_.dir + "/data/" + rel; }

  testing::ScratchDir origin_{"fsck-origin"};
  testing::ScratchDir cache_{"fsck-cache"};
  std::shared_ptr<Origin> origin_ptr_;
  CacheOptions options_;
};

TEST_F(FsckTest, AFreshCacheIsClean) {
  FsckReport r = Check(false);
  EXPECT_TRUE(r.clean()) << r.ToJson().dump(1);
  EXPECT_EQ(r.objects, 2u);
  EXPECT_EQ(r.chunks, 5u);
  EXPECT_EQ(r.bytes_checked, 4 * kCs + 5);
  EXPECT_EQ(r.ToJson()["clean"], true);
}

TEST_F(FsckTest, ABadOriginRecordIsReportedAndDropped) {
  {
    auto idx = Index();
    ASSERT_TRUE(idx->PutOrigin("local:/data").ok());
  }
  EXPECT_TRUE(Check(false).clean());
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), options_.dir + "/index", &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), kOriginKey, std::string(1, '\x01') + "xy").ok());
    delete db;
  }
  FsckReport r = Check(false);
  EXPECT_EQ(r.bad_records, 1u) << r.ToJson().dump(1);
  FsckReport fixed = Check(true);
  EXPECT_EQ(fixed.repaired, 1u) << fixed.ToJson().dump(1);
  EXPECT_TRUE(Check(false).clean());
  EXPECT_FALSE(Index()->GetOrigin().value().has_value());
}

TEST_F(FsckTest, ABadKeptListingIsReportedAndDropped) {
  {
    auto idx = Index();
    KeptListing l;
    l.entries.push_back(OriginDirEntry{"x", {}});
    ASSERT_TRUE(idx->PutRaw(ListingKey("good"), EncodeListing(l)).ok());
    ASSERT_TRUE(idx->PutRaw(ListingKey("bad"), std::string(1, '\x01') + "xyz").ok());
  }
  FsckReport r = Check(false);
  EXPECT_EQ(r.bad_records, 1u) << r.ToJson().dump(1);
  EXPECT_EQ(Check(true).repaired, 1u);
  EXPECT_TRUE(Check(false).clean());
  EXPECT_TRUE(Index()->GetRaw(ListingKey("good")).value().has_value());
}

TEST_F(FsckTest, RefusesWhileADaemonHoldsTheCache) {
  auto c = OpenCache();
  auto r = CheckCache(options_.dir, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EBUSY);
}

TEST_F(FsckTest, RefusesWhatIsNotACache) {
  EXPECT_FALSE(CheckCache(cache_.Sub("missing"), false).ok());
  EXPECT_EQ(CheckCache(origin_.path(), false).status().code(), EINVAL);
}

TEST_F(FsckTest, FindsAndRepairsEveryKindOfDamage) {
  // a is object 1 (data/01/1-1), b is object 2.
  testing::FlipByte(Data("01/1-1"), 2 * kCs + 7);  // bad checksum in a's chunk 2
  {
    int fd = open(Data("02/2-1").c_str(), O_RDWR);  // b's only chunk punched out
    ASSERT_TRUE(ChunkStore::Punch(fd, 0, kCs).ok());
    // and data no record refers to, in a slot of an existing file
    std::string junk = Pattern(kCs, 3);
    ASSERT_EQ(pwrite(fd, junk.data(), junk.size(), 5 * kCs), static_cast<ssize_t>(kCs));
    close(fd);
  }
  testing::WriteFile(Data("07/7-1"), "orphan");  // a file no record refers to
  testing::WriteFile(Data("07/junk"), "not ours");
  {
    auto idx = Index();
    ASSERT_TRUE(idx->PutIntent({1, 1, 9}).ok());  // a crashed write
    IndexMeta m = idx->meta();
    m.usage_bytes += 4096;  // books that no longer add up
    ASSERT_TRUE(idx->WriteMeta(m).ok());
  }
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), options_.dir + "/index", &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), ChunkRecordKey({1, 1, 3}), "garbage").ok());
    delete db;
  }

  FsckReport r = Check(false);
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.bad_checksums, 1u);
  EXPECT_EQ(r.missing_data, 1u);
  // 07/7-1, 07/junk, the range in 02/2-1, and a's chunk 3 whose record is garbage.
  EXPECT_EQ(r.orphan_files, 4u);
  EXPECT_EQ(r.pending_writes, 1u);
  EXPECT_EQ(r.bad_records, 2u);  // the record, and the eviction key it orphaned
  EXPECT_TRUE(r.usage_mismatch);
  EXPECT_EQ(r.repaired, 0u);
  EXPECT_EQ(r.problems.size(), 10u) << r.ToJson().dump(1);
  EXPECT_EQ(Check(false).problems.size(), 10u) << "a check without repair changes nothing";

  FsckReport fixed = Check(true);
  EXPECT_GE(fixed.repaired, 7u);
  FsckReport after = Check(false);
  EXPECT_TRUE(after.clean()) << after.ToJson().dump(1);
  EXPECT_EQ(after.chunks, 2u);  // a's chunks 0, 1 (2 was bad, 3 undecodable; b's was gone)

  auto c = OpenCache();
  EXPECT_TRUE(ReadAll(*c, "a") == Pattern(3 * kCs + 5, 1));
  EXPECT_TRUE(ReadAll(*c, "b") == Pattern(kCs, 2));
  EXPECT_EQ(c->counters().checksum_failures.load(), 0u) << "fsck dropped the bad chunk";
  EXPECT_EQ(c->counters().chunks_fetched.load(), 3u);
}

// Index damage at mount and in fsck (issue 6, corruption): the mount refuses
// with one line that names the fix, fsck reports it (exit 1, not "could not
// check"), and fsck --repair rebuilds a cache that serves the right bytes.
class IndexDamageTest : public FsckTest {
 protected:
  std::vector<std::string> IndexFiles(const std::string& prefix, const std::string& suffix) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(options_.dir + "/index")) {
      std::string n = e.path().filename();
      if (n.rfind(prefix, 0) == 0 && n.size() >= suffix.size() &&
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
        out.push_back(e.path());
      }
    }
    return out;
  }
  // The mount's answer, then fsck's, then repair and a clean cache.
  void ExpectRefusedThenRepaired(const std::string& what) {
    auto refused = ObjectCache::Open(options_, origin_ptr_);
    ASSERT_FALSE(refused.ok()) << what << ": the mount went on";
    EXPECT_EQ(refused.status().code(), EBADMSG);
    const std::string& msg = refused.status().message();
    EXPECT_NE(msg.find("damaged"), std::string::npos) << msg;
    EXPECT_NE(msg.find("run 'stoker fsck --repair " + options_.dir + "'"), std::string::npos)
        << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;

    FsckReport r = Check(false);
    EXPECT_FALSE(r.clean());
    EXPECT_NE(r.index_damage.find(what), std::string::npos) << r.ToJson().dump(1);
    EXPECT_EQ(r.repaired, 0u);

    FsckReport fixed = Check(true);
    EXPECT_FALSE(fixed.index_repair.empty()) << fixed.ToJson().dump(1);
    FsckReport after = Check(false);
    EXPECT_TRUE(after.clean()) << after.ToJson().dump(1);

    auto c = OpenCache();
    EXPECT_TRUE(ReadAll(*c, "a") == Pattern(3 * kCs + 5, 1));
    EXPECT_TRUE(ReadAll(*c, "b") == Pattern(kCs, 2));
    EXPECT_EQ(c->counters().checksum_failures.load(), 0u);
    EXPECT_EQ(c->Stats()["fresh_start"], "");
  }
  // Reopens the index once, so that RocksDB turns its WAL into an SST.
  void Settle() { Index().reset(); }
};

TEST_F(IndexDamageTest, DeletedManifest) {
  Settle();
  auto manifests = IndexFiles("MANIFEST-", "");
  ASSERT_FALSE(manifests.empty());
  for (const auto& p : manifests) ASSERT_EQ(unlink(p.c_str()), 0);
  ExpectRefusedThenRepaired("MANIFEST");
}

TEST_F(IndexDamageTest, TruncatedSst) {
  Settle();
  auto ssts = IndexFiles("", ".sst");
  ASSERT_FALSE(ssts.empty());
  for (const auto& p : ssts) ASSERT_EQ(truncate(p.c_str(), 100), 0);
  ExpectRefusedThenRepaired("damaged");
}

TEST_F(IndexDamageTest, DeletedCurrentIsNotAnEmptyIndex) {
  Settle();
  ASSERT_EQ(unlink((options_.dir + "/index/CURRENT").c_str()), 0);
  ExpectRefusedThenRepaired("CURRENT");
}

TEST_F(IndexDamageTest, ADeletedIndexDirStartsEmptyAndSaysSo) {
  std::filesystem::remove_all(options_.dir + "/index");
  auto c = OpenCache();
  EXPECT_EQ(c->Stats()["fresh_start"], "its index was missing; removed 2 data files");
  EXPECT_FALSE(std::filesystem::exists(Data("01/1-1")));
  EXPECT_TRUE(ReadAll(*c, "a") == Pattern(3 * kCs + 5, 1));
}

// A power loss between RocksDB's create of a new index and the synced Put
// of its meta record leaves an index with no record at all: fsck reports it,
// and a mount starts it empty with one line (no data file can belong to it).
TEST_F(IndexDamageTest, AnIndexCutBeforeItsMetaRecordStartsEmptyAndSaysSo) {
  for (const char* sub : {"/index", "/data"}) std::filesystem::remove_all(options_.dir + sub);
  rocksdb::Options ro;
  ro.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(ro, options_.dir + "/index", &db).ok());
  delete db;

  FsckReport r = Check(false);
  EXPECT_FALSE(r.clean());
  EXPECT_NE(r.index_damage.find("no meta record"), std::string::npos) << r.ToJson().dump(1);

  {
    auto c = OpenCache();
    EXPECT_EQ(c->Stats()["fresh_start"],
              "its index held no record, not even its meta record (a new index cut short)");
    EXPECT_TRUE(ReadAll(*c, "a") == Pattern(3 * kCs + 5, 1));
  }
  FsckReport after = Check(false);
  EXPECT_TRUE(after.clean()) << after.ToJson().dump(1);
}

// Records without a meta record: usage and clock are lost, so the index is
// damaged (not restarted at usage 0 under its old records); repair leaves a
// cache that checks clean and serves the right bytes.
TEST_F(IndexDamageTest, RecordsWithoutTheMetaRecordAreDamage) {
  {
    rocksdb::DB* db = nullptr;  // the index's own close would write its meta record again
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), options_.dir + "/index", &db).ok());
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), kMetaKey).ok());
    delete db;
  }
  auto refused = ObjectCache::Open(options_, origin_ptr_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), EBADMSG);
  EXPECT_NE(refused.status().message().find("records but no meta record"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("stoker fsck --repair"), std::string::npos);

  FsckReport r = Check(false);
  EXPECT_FALSE(r.clean());
  EXPECT_NE(r.index_damage.find("no meta record"), std::string::npos) << r.ToJson().dump(1);
  FsckReport fixed = Check(true);
  EXPECT_FALSE(fixed.index_repair.empty()) << fixed.ToJson().dump(1);
  auto after = CheckCache(options_.dir, false);
  ASSERT_TRUE(after.ok()) << "fsck cannot check the repaired cache: " << after.status().message();
  EXPECT_TRUE(after->clean()) << after->ToJson().dump(1);
  auto c = OpenCache();
  EXPECT_TRUE(ReadAll(*c, "a") == Pattern(3 * kCs + 5, 1));
}

TEST_F(FsckTest, AnInterruptedVersionDropIsFinishedByRepair) {
  {
    auto idx = Index();
    ObjectRecord rec = idx->GetObject("a").value().value();
    rec.version = 2;
    ASSERT_TRUE(idx->ReplaceObject("a", rec, {rec.object_id, 1}).ok());
  }
  FsckReport r = Check(false);
  EXPECT_EQ(r.pending_writes, 1u);
  EXPECT_EQ(r.orphan_files, 0u) << "its file belongs to the pending drop";
  Check(true);
  FsckReport after = Check(false);
  EXPECT_TRUE(after.clean()) << after.ToJson().dump(1);
  EXPECT_EQ(after.chunks, 1u);
  EXPECT_NE(access(Data("01/1-1").c_str(), F_OK), 0);
}

TEST_F(FsckTest, DerivedRecordsOfCurrentVersionsAreCleanOthersRepaired) {
  {
    auto idx = Index();
    ObjectRecord a = idx->GetObject("a").value().value();
    ASSERT_TRUE(idx->PutDerived({a.object_id, a.version}, "layout", "L").ok());
    ASSERT_TRUE(idx->PutDerived({a.object_id, a.version + 5}, "layout", "stale").ok());
  }
  FsckReport r = Check(false);
  EXPECT_EQ(r.bad_records, 1u) << r.ToJson().dump(1);
  Check(true);
  FsckReport after = Check(false);
  EXPECT_TRUE(after.clean()) << after.ToJson().dump(1);
  auto idx = Index();
  ObjectRecord a = idx->GetObject("a").value().value();
  EXPECT_EQ(idx->GetDerived({a.object_id, a.version}, "layout").value(), "L");
  EXPECT_FALSE(idx->GetDerived({a.object_id, a.version + 5}, "layout").value().has_value());
}

// b (one chunk) is in slot 0 of slab data/slab/65536-0.
class SlabFsckTest : public FsckTest {
 protected:
  uint64_t SlabMax() const override { return 1 << 20; }
  const SlotRef b_slot_{16, 0, 0};
  std::string Slab() const { return Data("slab/65536-0"); }
};

TEST_F(SlabFsckTest, ASlabCacheIsClean) {
  FsckReport r = Check(false);
  EXPECT_TRUE(r.clean()) << r.ToJson().dump(1);
  EXPECT_EQ(r.chunks, 5u);
  EXPECT_EQ(r.bytes_checked, 4 * kCs + 5);
  EXPECT_TRUE(std::filesystem::exists(Slab()));
  EXPECT_FALSE(std::filesystem::exists(Data("02/2-1")));
}

TEST_F(SlabFsckTest, FindsAndRepairsBadSlotsAndLeakedOnes) {
  testing::FlipByte(Slab(), 100);  // b's slot
  const SlotRef leaked{16, 0, 5}, pending{16, 0, 1};
  {
    auto idx = Index();
    // A slot taken by nothing (a lost write), with bytes in it.
    ASSERT_TRUE(idx->SetSlotTaken(leaked, true).ok());
    // A crashed write: its intent holds its slot.
    ASSERT_EQ(idx->ReserveSlot({9, 1, 0}, kCs).value(), pending);
  }
  std::string junk = Pattern(kCs, 3);
  int fd = open(Slab().c_str(), O_RDWR);
  ASSERT_EQ(pwrite(fd, junk.data(), kCs, SlotOffset(leaked)), static_cast<ssize_t>(kCs));
  ASSERT_EQ(pwrite(fd, junk.data(), kCs, SlotOffset(pending)), static_cast<ssize_t>(kCs));
  close(fd);
  testing::WriteFile(Data("slab/8192-0"), "a slab no record knows");
  testing::WriteFile(Data("slab/junk"), "not ours");

  FsckReport r = Check(false);
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.bad_checksums, 1u) << r.ToJson().dump(1);
  EXPECT_EQ(r.leaked_slots, 1u) << r.ToJson().dump(1);
  EXPECT_EQ(r.pending_writes, 1u);
  EXPECT_EQ(r.repaired, 0u);
  const uint64_t before = testing::AllocatedUnder(Data("slab"));

  FsckReport fixed = Check(true);
  EXPECT_GT(fixed.repaired, 0u);
  FsckReport after = Check(false);
  EXPECT_TRUE(after.clean()) << after.ToJson().dump(1);
  EXPECT_EQ(after.chunks, 4u);  // b's bad chunk went
  EXPECT_FALSE(std::filesystem::exists(Data("slab/8192-0")));
  EXPECT_FALSE(std::filesystem::exists(Data("slab/junk")));
  EXPECT_EQ(testing::AllocatedUnder(Data("slab")), 0u) << "was " << before;
  {
    auto idx = Index();
    EXPECT_FALSE(idx->SlotTaken(leaked).value());
    EXPECT_FALSE(idx->SlotTaken(pending).value());
    EXPECT_FALSE(idx->SlotTaken(b_slot_).value());
  }
  auto c = OpenCache();
  EXPECT_EQ(ReadAll(*c, "b"), Pattern(kCs, 2));
}

TEST_F(SlabFsckTest, ARecordOnAFreeSlotIsDropped) {
  { ASSERT_TRUE(Index()->SetSlotTaken(b_slot_, false).ok()); }
  FsckReport r = Check(false);
  EXPECT_EQ(r.bad_records, 1u) << r.ToJson().dump(1);
  Check(true);
  FsckReport after = Check(false);
  EXPECT_TRUE(after.clean()) << after.ToJson().dump(1);
  EXPECT_EQ(after.chunks, 4u);
  EXPECT_EQ(testing::AllocatedUnder(Data("slab")), 0u);
}

}  // namespace
}  // namespace stoker
