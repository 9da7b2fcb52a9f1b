#include "cache/recent_bytes.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace stoker {
namespace {

using Kind = RecentBytes::Kind;
using Key = RecentBytes::Key;

ChunkBytes Bytes(size_t len, char fill) {
  std::shared_ptr<char> data(new char[len], std::default_delete<char[]>());
  std::fill(data.get(), data.get() + len, fill);
  return ChunkBytes{data, len, false};
}

RecentBytes::Limits Limits(uint64_t total, uint64_t readahead, uint64_t unstored) {
  RecentBytes::Limits l;
  l.total = total;
  l.readahead = readahead;
  l.unstored = unstored;
  return l;
}

TEST(RecentBytesTest, HeldBytesAreServedUntilDropped) {
  RecentBytes r(Limits(1000, 1000, 1000));
  const Key a{Kind::kUnstored, 1, 1, 0};
  ASSERT_TRUE(r.Hold(a, Bytes(5, 'h')));
  EXPECT_FALSE(r.Hold(a, Bytes(5, 'x'))) << "taken";
  auto got = r.Get(a);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->data.get()[0], 'h');
  EXPECT_FALSE(r.Get(Key{Kind::kUnstored, 1, 2, 0}).has_value()) << "another version";
  EXPECT_FALSE(r.Get(Key{Kind::kReadahead, 1, 1, 0}).has_value()) << "another kind";
  EXPECT_EQ(r.bytes(), 5u);
  r.Drop(a);
  EXPECT_FALSE(r.Contains(a));
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_EQ(got->data.get()[0], 'h') << "bytes taken out outlive their entry";
}

TEST(RecentBytesTest, AHoldPastTheBoundOrItsKindsShareHoldsNothing) {
  RecentBytes r(Limits(1000, 600, 300));
  const uint64_t g = r.NewGroup();
  ASSERT_TRUE(r.Hold(Key{Kind::kReadahead, g, 0, 0}, Bytes(500, 'a')));
  EXPECT_FALSE(r.Hold(Key{Kind::kReadahead, g, 0, 1}, Bytes(200, 'b'))) << "past readahead's 600";
  ASSERT_TRUE(r.Hold(Key{Kind::kUnstored, 7, 1, 0}, Bytes(300, 'c')));
  EXPECT_FALSE(r.Hold(Key{Kind::kUnstored, 7, 1, 1}, Bytes(1, 'd'))) << "past unstored's 300";
  ASSERT_TRUE(r.Hold(Key{Kind::kReadahead, g, 0, 2}, Bytes(100, 'e')));
  EXPECT_EQ(r.bytes(), 900u);
  EXPECT_EQ(r.bytes(Kind::kReadahead), 600u);
  EXPECT_EQ(r.bytes(Kind::kUnstored), 300u);
}

TEST(RecentBytesTest, AFullGroupDropsItsLowestEntry) {
  RecentBytes r(Limits(1 << 20, 1 << 20, 1 << 20));
  const uint64_t g = r.NewGroup(), h = r.NewGroup();
  ASSERT_NE(g, h);
  ASSERT_TRUE(r.Hold(Key{Kind::kReadahead, h, 0, 0}, Bytes(10, 'o')));
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_TRUE(r.Hold(Key{Kind::kReadahead, g, 0, i}, Bytes(10, 'x'), 2));
  EXPECT_FALSE(r.Contains(Key{Kind::kReadahead, g, 0, 0}));
  EXPECT_TRUE(r.Contains(Key{Kind::kReadahead, g, 0, 1}));
  EXPECT_TRUE(r.Contains(Key{Kind::kReadahead, g, 0, 2}));
  EXPECT_TRUE(r.Contains(Key{Kind::kReadahead, h, 0, 0})) << "another group is not counted";
  r.DropBelow(Kind::kReadahead, g, 0, 2);
  EXPECT_FALSE(r.Contains(Key{Kind::kReadahead, g, 0, 1}));
  EXPECT_TRUE(r.Contains(Key{Kind::kReadahead, g, 0, 2}));
  r.DropBelow(Kind::kReadahead, g, 0, UINT64_MAX);
  EXPECT_EQ(r.bytes(), 10u);
}

TEST(RecentBytesTest, KeptBytesGiveWayOldestFirst) {
  RecentBytes r(Limits(1000, 1000, 1000));
  auto pin = std::make_shared<int>(1);
  const uint64_t file = reinterpret_cast<uintptr_t>(pin.get());
  for (uint64_t i = 0; i < 4; ++i) r.Keep(Key{Kind::kProduced, file, 0, i}, Bytes(250, 'k'), pin);
  EXPECT_EQ(r.bytes(), 1000u);
  EXPECT_EQ(pin.use_count(), 5) << "each entry pins what names its group";
  // A hold takes the room of the oldest kept entry.
  ASSERT_TRUE(r.Hold(Key{Kind::kUnstored, 1, 1, 0}, Bytes(100, 'u')));
  EXPECT_FALSE(r.Contains(Key{Kind::kProduced, file, 0, 0}));
  EXPECT_TRUE(r.Contains(Key{Kind::kProduced, file, 0, 1}));
  // So does a newer kept entry; keeping one again makes it the newest.
  r.Keep(Key{Kind::kProduced, file, 0, 1}, Bytes(250, 'n'), pin);
  r.Keep(Key{Kind::kProduced, file, 0, 9}, Bytes(250, 'k'), pin);
  EXPECT_FALSE(r.Contains(Key{Kind::kProduced, file, 0, 2}));
  EXPECT_TRUE(r.Contains(Key{Kind::kProduced, file, 0, 1}));
  EXPECT_EQ(r.Get(Key{Kind::kProduced, file, 0, 1})->data.get()[0], 'n');
  EXPECT_LE(r.bytes(), 1000u);
  // More than the room beside held entries keeps nothing, and evicts nothing.
  r.Keep(Key{Kind::kProduced, file, 0, 20}, Bytes(950, 'z'), pin);
  EXPECT_FALSE(r.Contains(Key{Kind::kProduced, file, 0, 20}));
  EXPECT_TRUE(r.Contains(Key{Kind::kProduced, file, 0, 9}));
  // A hold that cannot fit even with every kept entry gone evicts none.
  EXPECT_FALSE(r.Hold(Key{Kind::kUnstored, 1, 1, 1}, Bytes(950, 'u')));
  EXPECT_TRUE(r.Contains(Key{Kind::kProduced, file, 0, 9}));
  r.DropBelow(Kind::kProduced, file, 0, UINT64_MAX);
  EXPECT_EQ(r.bytes(), 100u);
  EXPECT_EQ(pin.use_count(), 1);
}

TEST(RecentBytesTest, KeptBytesStayWithinTheirShare) {
  RecentBytes::Limits l = Limits(1000, 1000, 1000);
  l.produced = 300;
  RecentBytes r(l);
  for (uint64_t i = 0; i < 5; ++i) r.Keep(Key{Kind::kProduced, 1, 0, i}, Bytes(100, 'k'));
  EXPECT_EQ(r.bytes(Kind::kProduced), 300u) << "the oldest went, though the bound had room";
  EXPECT_FALSE(r.Contains(Key{Kind::kProduced, 1, 0, 1}));
  EXPECT_TRUE(r.Contains(Key{Kind::kProduced, 1, 0, 2}));
  r.Keep(Key{Kind::kProduced, 1, 0, 9}, Bytes(301, 'z'));
  EXPECT_FALSE(r.Contains(Key{Kind::kProduced, 1, 0, 9})) << "larger than the share";
  EXPECT_TRUE(r.Contains(Key{Kind::kProduced, 1, 0, 4}));
}

}  // namespace
}  // namespace stoker
