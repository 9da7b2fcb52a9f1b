// VersionLeases over the cache's real parts: a version is lent only when
// the cache holds it whole, each chunk verified (checked at the lease if no
// read did, up to verify_at_open_bytes), and is neither superseded nor a
// view's file with unreadable ranges; a lease pins every chunk until it
// goes; HoldVersion pins what is not being evicted.
#include "cache/version_leases.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/chunk_parts_test_util.h"
#include "cache/object_cache_test_origin.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::FetchParts;
using testing::Pattern;

constexpr uint64_t kChunk = ChunkParts::kChunk;
constexpr uint64_t kSize = 3 * kChunk + 100;  // 4 chunks, the last one short

class VersionLeasesTest : public ::testing::Test {
 protected:
  // Stores chunk idx of v's bytes, as a fetch would.
  void Store(const ObjectVersion& v, uint64_t idx) {
    const uint64_t len = std::min(kChunk, v.identity.size - idx * kChunk);
    ASSERT_TRUE(parts_.writer->Store(v, idx, ChunkParts::Bytes(data_.substr(idx * kChunk, len))));
  }
  void StoreAll(const ObjectVersion& v) {
    for (uint64_t idx = 0; idx < v.chunks; ++idx) Store(v, idx);
  }
  VersionLeases Leases(uint64_t verify_at_open_bytes = kSize) {
    return VersionLeases(
        VersionLeases::Parts{kChunk, parts_.index.get(), parts_.store.get(), &parts_.resident,
                             parts_.writer.get(), parts_.reader.get(), parts_.hits.get(),
                             &fetch_.prefetcher, &derived_, &parts_.counters},
        verify_at_open_bytes);
  }
  bool AnyPinned(const ObjectVersion& v) {
    for (uint64_t idx = 0; idx < v.chunks; ++idx) {
      if (parts_.resident.pinned(ChunkKey{v.key.object_id, v.key.version, idx})) return true;
    }
    return false;
  }

  const std::string data_ = Pattern(kSize, 7);
  ChunkParts parts_;
  testing::ControlledOrigin derived_{nullptr};  // only asked about unreadable ranges
  FetchParts fetch_{parts_, &derived_};
  std::shared_ptr<ObjectVersion> v_ = parts_.Version(1, kSize);
  std::shared_ptr<OpenFileState> f_ = testing::OpenOf(v_, nullptr);
};

TEST_F(VersionLeasesTest, RefusedWhileAChunkIsMissingAndLentOnceWhole) {
  VersionLeases leases = Leases();
  for (uint64_t idx : {0, 1, 3}) Store(*v_, idx);
  LeaseRefusal why{};
  auto refused = leases.LeaseWhole(*f_, &why);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), EAGAIN);
  EXPECT_EQ(why, LeaseRefusal::kNotCached);
  EXPECT_FALSE(AnyPinned(*v_)) << "a refusal holds nothing";

  Store(*v_, 2);
  auto lease = leases.LeaseWhole(*f_, &why);
  ASSERT_TRUE(lease.ok()) << LeaseRefusalName(why);
  struct stat st;
  ASSERT_EQ(fstat((*lease)->fd(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), kSize);
  std::string back(kSize, '\0');
  ASSERT_EQ(pread((*lease)->fd(), back.data(), kSize, 0), static_cast<ssize_t>(kSize));
  EXPECT_EQ(back, data_);
  EXPECT_EQ((*lease)->chunks(), 4u);
  for (uint64_t idx = 0; idx < 4; ++idx) {
    EXPECT_TRUE(parts_.resident.pinned(ChunkKey{1, 1, idx})) << idx;
  }
  lease->reset();
  EXPECT_FALSE(AnyPinned(*v_));
}

TEST_F(VersionLeasesTest, ChunksNoReadVerifiedAreCheckedAtTheLeaseUpToTheBound) {
  StoreAll(*v_);
  parts_.resident.ForgetVersion(v_->key);  // as after a restart: nothing verified
  LeaseRefusal why{};
  auto too_large = Leases(kSize - 1).LeaseWhole(*f_, &why);
  ASSERT_FALSE(too_large.ok());
  EXPECT_EQ(why, LeaseRefusal::kNotVerified);
  EXPECT_EQ(parts_.counters.chunks_verified_at_open.load(), 0u);

  // A flipped byte in chunk 2: checked at the lease, dropped, not lent.
  auto file = parts_.store->Get(v_->key, false);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(pwrite((*file)->fd(), "X", 1, 2 * kChunk + 5), 1);
  auto bad = Leases().LeaseWhole(*f_, &why);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(why, LeaseRefusal::kNotVerified);
  EXPECT_EQ(parts_.counters.checksum_failures.load(), 1u);
  EXPECT_FALSE(AnyPinned(*v_));

  Store(*v_, 2);  // fetched again
  parts_.resident.ForgetVersion(v_->key);
  parts_.counters.chunks_verified_at_open = 0;
  auto lease = Leases().LeaseWhole(*f_, &why);
  ASSERT_TRUE(lease.ok()) << LeaseRefusalName(why);
  EXPECT_EQ(parts_.counters.chunks_verified_at_open.load(), 4u);
}

TEST_F(VersionLeasesTest, ASupersededVersionOrAViewWithUnreadableRangesIsNotLent) {
  StoreAll(*v_);
  LeaseRefusal why{};
  auto view = testing::OpenOf(v_, nullptr, /*derived=*/true);
  derived_.RefuseReadsFrom(kChunk);
  EXPECT_FALSE(Leases().LeaseWhole(*view, &why).ok());
  EXPECT_EQ(why, LeaseRefusal::kViewErrors);
  derived_.RefuseReadsFrom(UINT64_MAX);
  EXPECT_TRUE(Leases().LeaseWhole(*view, &why).ok()) << LeaseRefusalName(why);

  v_->superseded = true;
  EXPECT_FALSE(Leases().LeaseWhole(*f_, &why).ok());
  EXPECT_EQ(why, LeaseRefusal::kStale);
  EXPECT_FALSE(AnyPinned(*v_));
}

TEST_F(VersionLeasesTest, HoldVersionPinsWhatIsNotBeingEvicted) {
  StoreAll(*v_);
  const ChunkKey evicting{1, 1, 1};
  ASSERT_TRUE(parts_.resident.TryLatchForEvict(evicting));
  auto held = Leases().HoldVersion(1, 1, 4);
  EXPECT_EQ(held->fd(), -1);
  for (uint64_t idx : {0, 2, 3}) EXPECT_TRUE(parts_.resident.pinned(ChunkKey{1, 1, idx})) << idx;
  EXPECT_FALSE(parts_.resident.pinned(evicting));
  held.reset();
  parts_.resident.Unlatch(evicting);
  EXPECT_FALSE(AnyPinned(*v_));
}

}  // namespace
}  // namespace stoker
