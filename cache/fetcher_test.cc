// Fetcher: concurrent misses of one chunk become one fetch; errors are not
// remembered.
#include "cache/fetcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace stoker {
namespace {

ChunkBytes Bytes(const std::string& s) {
  auto buf = std::shared_ptr<char[]>(new char[s.size()]);
  std::copy(s.begin(), s.end(), buf.get());
  return ChunkBytes{std::shared_ptr<const char>(buf, buf.get()), s.size()};
}

TEST(FetcherTest, ConcurrentJoinsShareOneLeader) {
  Fetcher f;
  const ChunkKey key{1, 1, 0};
  bool lead = false;
  auto flight = f.Join(key, &lead);
  ASSERT_TRUE(lead);
  constexpr int kReaders = 8;
  std::atomic<int> joined{0}, leaders{0};
  std::vector<std::string> got(kReaders);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&, i] {
      bool l = false;
      auto fl = f.Join(key, &l);
      leaders += l;
      joined++;
      if (l) return;
      auto r = Fetcher::Wait(fl);
      if (r.ok()) got[i] = std::string(r->data.get(), r->len);
    });
  }
  while (joined.load() < kReaders) std::this_thread::yield();
  f.Complete(key, flight, Bytes("chunk"));
  for (auto& t : threads) t.join();
  EXPECT_EQ(leaders.load(), 0);
  for (const auto& g : got) EXPECT_EQ(g, "chunk");
  EXPECT_EQ(f.in_flight(), 0u);
}

TEST(FetcherTest, ErrorsReachWaitersAndAreNotRemembered) {
  Fetcher f;
  const ChunkKey key{1, 1, 0};
  bool lead = false, lead2 = true;
  auto flight = f.Join(key, &lead);
  auto waiter = f.Join(key, &lead2);
  ASSERT_TRUE(lead);
  ASSERT_FALSE(lead2);
  f.Complete(key, flight, Status::IOError("origin down"));
  auto r = Fetcher::Wait(waiter);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EIO);
  bool again = false;
  auto next = f.Join(key, &again);
  EXPECT_TRUE(again);  // a new fetch, not the old error
  f.Complete(key, next, Bytes("x"));
}

TEST(FetcherTest, DifferentVersionsAreDifferentFetches) {
  Fetcher f;
  bool a = false, b = false;
  auto fa = f.Join({1, 1, 0}, &a);
  auto fb = f.Join({1, 2, 0}, &b);
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  f.Complete({1, 1, 0}, fa, Bytes("a"));
  f.Complete({1, 2, 0}, fb, Bytes("b"));
}

}  // namespace
}  // namespace stoker
