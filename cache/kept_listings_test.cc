// Kept listings: answered from the index after the first listing, in a new
// process too (a new store over the same index), bounded, and dropped by a
// store opened without --revalidate never.
#include "cache/kept_listings.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "cache/chunk_index.h"
#include "util/test_files.h"

namespace stoker {
namespace {

using testing::ScratchDir;
using testing::WriteFile;

// Counts what reaches the origin.
class CountingOrigin final : public ForwardingOrigin {
 public:
  explicit CountingOrigin(std::shared_ptr<Origin> inner) : ForwardingOrigin(std::move(inner)) {}
  Result<struct stat> Stat(const std::string& path) override {
    stats++;
    return inner_->Stat(path);
  }
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override {
    listings++;
    return inner_->ReadDir(path, fn);
  }
  std::atomic<int> stats{0};
  std::atomic<int> listings{0};
};

class KeptListingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(origin_.Sub("a"), "aaa");
    WriteFile(origin_.Sub("d/b"), "bbbb");
    WriteFile(origin_.Sub("d/e/c"), "c");
    counting_ = std::make_shared<CountingOrigin>(MakeOrigin(origin_.path()).value());
  }

  std::unique_ptr<ChunkIndex> OpenIndex() {
    ChunkIndex::Options o;
    o.path = cache_.Sub("index");
    o.chunk_size_if_new = 1 << 20;
    o.write_buffer_bytes = 1 << 20;
    return ChunkIndex::Open(o).value();
  }

  // An index, a store over it and an origin that keeps listings in it: what
  // one mount's process holds.
  struct Kept {
    std::unique_ptr<ChunkIndex> index;
    std::unique_ptr<ListingStore> store;
    std::unique_ptr<KeptListingsOrigin> origin;
  };
  Kept OpenKept() {
    Kept k;
    k.index = OpenIndex();
    k.store = ListingStore::Open(k.index.get(), 1 << 20, true).value();
    k.origin = std::make_unique<KeptListingsOrigin>(counting_);
    k.origin->Attach(k.store.get());
    return k;
  }

  std::set<std::string> List(Origin& o, const std::string& dir) {
    std::set<std::string> names;
    EXPECT_TRUE(o.ReadDir(dir, [&](const OriginDirEntry& e) {
                   names.insert(e.name);
                   return true;
                 }).ok());
    return names;
  }

  ScratchDir origin_{"kept-origin"};
  ScratchDir cache_{"kept-cache"};
  std::shared_ptr<CountingOrigin> counting_;
};

TEST_F(KeptListingsTest, AListedDirectoryIsNeverAskedAgainAlsoInANewProcess) {
  {
    auto index = OpenIndex();
    auto store = ListingStore::Open(index.get(), 1 << 20, true).value();
    KeptListingsOrigin kept(counting_);
    kept.Attach(store.get());
    EXPECT_EQ(List(kept, ""), (std::set<std::string>{"a", "d"}));
    EXPECT_EQ(List(kept, "d"), (std::set<std::string>{"b", "e"}));
    EXPECT_EQ(counting_->listings, 2);
    EXPECT_EQ(List(kept, "d"), (std::set<std::string>{"b", "e"}));
    EXPECT_EQ(counting_->listings, 2);
    EXPECT_EQ(store->count(), 2u);
  }
  WriteFile(origin_.Sub("d/new"), "n");  // not seen: the listing is kept
  counting_->stats = 0;
  auto index = OpenIndex();
  auto store = ListingStore::Open(index.get(), 1 << 20, true).value();
  EXPECT_EQ(store->count(), 2u);
  KeptListingsOrigin kept(counting_);
  kept.Attach(store.get());
  EXPECT_EQ(List(kept, "d"), (std::set<std::string>{"b", "e"}));
  EXPECT_EQ(kept.Stat("d/b")->st_size, 4);
  EXPECT_TRUE(S_ISDIR(kept.Stat("d")->st_mode));
  EXPECT_TRUE(S_ISDIR(kept.Stat("")->st_mode));
  EXPECT_EQ(kept.Stat("d/new").status().code(), ENOENT);
  EXPECT_EQ(kept.Stat("missing").status().code(), ENOENT);
  EXPECT_EQ(counting_->listings, 2) << "a new process listed again";
  EXPECT_EQ(counting_->stats, 0) << "a stat of a listed name asked the origin";
  // Not listed yet: asked.
  EXPECT_EQ(kept.Stat("d/e/c")->st_size, 1);
  EXPECT_EQ(counting_->stats, 1);
}

// `stoker refresh d/e`: the listings of d/e and below, and of d (which
// names e), are asked again, in this process and the next; the rest stay.
TEST_F(KeptListingsTest, ARefreshDropsTheSubtreeAndItsParentOnly) {
  {
    Kept k = OpenKept();
    KeptListingsOrigin& kept = *k.origin;
    List(kept, "");
    List(kept, "d");
    List(kept, "d/e");
    ASSERT_EQ(counting_->listings, 3);
    WriteFile(origin_.Sub("d/e/new"), "n");
    WriteFile(origin_.Sub("d/new2"), "n");
    WriteFile(origin_.Sub("new3"), "n");
    kept.Refresh("d/e");
    EXPECT_EQ(List(kept, "d/e"), (std::set<std::string>{"c", "new"}));
    EXPECT_EQ(List(kept, "d"), (std::set<std::string>{"b", "e", "new2"}));
    EXPECT_EQ(List(kept, ""), (std::set<std::string>{"a", "d"})) << "the root was kept";
    EXPECT_EQ(counting_->listings, 5);
    EXPECT_EQ(kept.Stat("d/e/new")->st_size, 1);
  }
  Kept k = OpenKept();
  KeptListingsOrigin& kept = *k.origin;
  EXPECT_EQ(List(kept, "d/e"), (std::set<std::string>{"c", "new"})) << "kept as listed again";
  EXPECT_EQ(counting_->listings, 5);
  kept.Refresh("");
  EXPECT_EQ(k.store->count(), 0u);
  EXPECT_EQ(List(kept, ""), (std::set<std::string>{"a", "d", "new3"}));
}

TEST_F(KeptListingsTest, AStoreWithoutNeverDropsWhatWasKept) {
  {
    Kept k = OpenKept();
    List(*k.origin, "");
    List(*k.origin, "d");
  }
  {
    auto index = OpenIndex();
    EXPECT_EQ(ListingStore::Open(index.get(), 1 << 20, false).value()->count(), 0u);
  }
  auto index = OpenIndex();
  EXPECT_EQ(ListingStore::Open(index.get(), 1 << 20, true).value()->count(), 0u);
}

TEST_F(KeptListingsTest, TheBoundDropsTheOldestListings) {
  auto index = OpenIndex();
  KeptListing one;
  one.entries.resize(10);
  for (size_t i = 0; i < one.entries.size(); ++i) one.entries[i].name = "f" + std::to_string(i);
  const uint64_t size = EncodeListing(one).size();
  auto store = ListingStore::Open(index.get(), 3 * size, true).value();
  for (const char* d : {"x", "y", "z", "w"}) ASSERT_TRUE(store->Put(d, one).ok());
  EXPECT_EQ(store->count(), 3u);
  EXPECT_LE(store->bytes(), 3 * size);
  EXPECT_EQ(store->dropped(), 1u);
  EXPECT_FALSE(store->Get("x")->has_value()) << "the oldest goes first";
  EXPECT_TRUE(store->Get("w")->has_value());
  KeptListing huge;
  huge.entries.resize(100);
  ASSERT_TRUE(store->Put("h", huge).ok());
  EXPECT_FALSE(store->Get("h")->has_value()) << "a listing larger than the bound is not kept";
}

TEST_F(KeptListingsTest, AnUndecodableListingIsDroppedAndListedAgain) {
  auto index = OpenIndex();
  ASSERT_TRUE(index->PutRaw(ListingKey("d"), std::string(1, '\x01') + "bad").ok());
  auto store = ListingStore::Open(index.get(), 1 << 20, true).value();
  KeptListingsOrigin kept(counting_);
  kept.Attach(store.get());
  EXPECT_EQ(List(kept, "d"), (std::set<std::string>{"b", "e"}));
  EXPECT_EQ(counting_->listings, 1);
  EXPECT_EQ(store->count(), 1u);
}

}  // namespace
}  // namespace stoker
