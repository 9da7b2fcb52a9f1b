#include "cache/readahead.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace stoker {
namespace {

ChunkBytes Bytes(size_t len, char fill) {
  std::shared_ptr<char> data(new char[len], std::default_delete<char[]>());
  std::fill(data.get(), data.get() + len, fill);
  return ChunkBytes{data, len, false};
}

std::shared_ptr<RecentBytes> Store(uint64_t readahead_bytes) {
  return std::make_shared<RecentBytes>(
      RecentBytes::Limits{2 * readahead_bytes, readahead_bytes, readahead_bytes});
}

TEST(ReadaheadTest, HoldsWhatItWasGivenWithinTheSharedBound) {
  auto recent = Store(1000);
  {
    Readahead r(recent);
    r.Put(0, Bytes(300, 'a'), 8);
    ASSERT_TRUE(r.Get(0).has_value());
    EXPECT_EQ(r.Get(0)->data.get()[0], 'a');
    EXPECT_EQ(recent->bytes(), 300u);
    r.Put(1, Bytes(800, 'b'), 8);  // past readahead's share: not held
    EXPECT_FALSE(r.Get(1).has_value());
    EXPECT_EQ(recent->bytes(), 300u);
    Readahead other(recent);  // another open file shares the bound
    other.Put(0, Bytes(700, 'c'), 8);
    EXPECT_EQ(other.Get(0)->data.get()[0], 'c');
    EXPECT_EQ(r.Get(0)->data.get()[0], 'a') << "each file's chunks are its own";
    EXPECT_EQ(recent->bytes(RecentBytes::Kind::kReadahead), 1000u);
    r.Put(2, Bytes(1, 'd'), 8);
    EXPECT_FALSE(r.Get(2).has_value());
  }
  EXPECT_EQ(recent->bytes(), 0u) << "what they held goes when they go";
}

TEST(ReadaheadTest, PastItsMostTheLowestChunkGoes) {
  auto recent = Store(1 << 20);
  Readahead r(recent);
  for (uint64_t i = 0; i < 3; ++i) r.Put(i, Bytes(100, 'x'), 2);
  EXPECT_FALSE(r.Get(0).has_value());
  EXPECT_TRUE(r.Get(1).has_value());
  EXPECT_TRUE(r.Get(2).has_value());
  EXPECT_EQ(recent->bytes(), 200u);
}

TEST(ReadaheadTest, ASequentialReaderDropsWhatItPassed) {
  auto recent = Store(1 << 20);
  Readahead r(recent);
  for (uint64_t i = 0; i < 4; ++i) r.Put(i, Bytes(10, 'x'), 8);
  r.DropBefore(2);
  EXPECT_FALSE(r.Get(0).has_value());
  EXPECT_FALSE(r.Get(1).has_value());
  EXPECT_TRUE(r.Get(2).has_value());
  EXPECT_EQ(recent->bytes(), 20u);
  EXPECT_FALSE(r.Wanted(1)) << "the reader is past it";
  EXPECT_FALSE(r.Wanted(3)) << "held already";
  EXPECT_TRUE(r.Wanted(5));
}

TEST(ReadaheadTest, OneCheckPerChunkTheOthersWaitForIt) {
  Readahead r(Store(1 << 20));
  ASSERT_TRUE(r.ClaimCheck(3));
  EXPECT_FALSE(r.ClaimCheck(3));
  EXPECT_TRUE(r.Claimed(3));
  EXPECT_FALSE(r.Claimed(4));
  std::promise<void> waiting;
  auto got = std::async(std::launch::async, [&] {
    waiting.set_value();
    return r.AwaitCheck(3);
  });
  waiting.get_future().wait();
  r.Put(3, Bytes(5, 'k'), 8);  // the checked bytes
  r.EndChecks({3});
  std::optional<ChunkBytes> b = got.get();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->data.get()[0], 'k');
  EXPECT_FALSE(r.Claimed(3));

  // A failed check holds nothing: the waiter gets nothing and fetches.
  ASSERT_TRUE(r.ClaimCheck(7));
  auto failed = std::async(std::launch::async, [&] { return r.AwaitCheck(7); });
  r.EndChecks({7});
  EXPECT_FALSE(failed.get().has_value());
  EXPECT_FALSE(r.AwaitCheck(9).has_value()) << "nobody checks it: no wait";
}

}  // namespace
}  // namespace stoker
