#include "cache/unstored_chunks.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace stoker {
namespace {

ChunkBytes Bytes(const std::string& s) {
  auto p = std::shared_ptr<char[]>(new char[s.size()]);
  std::copy(s.begin(), s.end(), p.get());
  return ChunkBytes{std::shared_ptr<const char>(p, p.get()), s.size()};
}

TEST(UnstoredChunksTest, HeldBytesAreServedUntilRemoved) {
  UnstoredChunks u(1 << 20);
  ChunkKey a{1, 1, 0}, b{1, 1, 1};
  ASSERT_TRUE(u.Add(a, Bytes("hello")));
  auto got = u.Get(a);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::string(got->data.get(), got->len), "hello");
  EXPECT_FALSE(u.Get(b).has_value());
  EXPECT_FALSE(u.Get(ChunkKey{1, 2, 0}).has_value()) << "another version is another chunk";
  EXPECT_EQ(u.bytes(), 5u);
  u.Remove(a);
  EXPECT_FALSE(u.Get(a).has_value());
  EXPECT_EQ(u.bytes(), 0u);
  u.Remove(a);  // twice: no-op
  EXPECT_EQ(u.bytes(), 0u);
}

TEST(UnstoredChunksTest, RefusesPastItsBoundAndTwiceTheSameChunk) {
  UnstoredChunks u(8);
  ChunkKey a{1, 1, 0}, b{1, 1, 1}, c{1, 1, 2};
  ASSERT_TRUE(u.Add(a, Bytes("12345")));
  EXPECT_FALSE(u.Add(a, Bytes("1"))) << "one store per chunk";
  EXPECT_FALSE(u.Add(b, Bytes("1234"))) << "5 + 4 > 8";
  EXPECT_FALSE(u.Get(b).has_value());
  ASSERT_TRUE(u.Add(c, Bytes("123")));
  EXPECT_EQ(u.bytes(), 8u);
  u.Remove(a);
  EXPECT_TRUE(u.Add(b, Bytes("1234")));
  EXPECT_EQ(u.bytes(), 7u);
}

TEST(UnstoredChunksTest, ABoundOfZeroHoldsNothing) {
  UnstoredChunks u(0);
  EXPECT_FALSE(u.Add(ChunkKey{1, 1, 0}, Bytes("x")));
  EXPECT_EQ(u.bytes(), 0u);
}

}  // namespace
}  // namespace stoker
