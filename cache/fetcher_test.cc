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

// A cache group member's request (origin only) never waits on a flight
// whose leader may wait on another member: it leads one beside it, which
// later origin-only fetches and readers follow.
TEST(FetcherTest, AnOriginOnlyFetchNeverFollowsAFlightThatAsksMembers) {
  Fetcher f;
  const ChunkKey key{1, 1, 0};
  const Fetcher::Joiner reader{.asks_members = true, .origin_only = false};
  const Fetcher::Joiner member{.asks_members = false, .origin_only = true};
  bool lead = false;
  auto asking = f.Join(key, &lead, reader);
  ASSERT_TRUE(lead);
  auto beside = f.Join(key, &lead, member);
  ASSERT_TRUE(lead) << "followed a flight that asks members";
  EXPECT_NE(beside, asking);
  EXPECT_EQ(f.in_flight(), 2u);
  auto second_member = f.Join(key, &lead, member);
  EXPECT_FALSE(lead);
  EXPECT_EQ(second_member, beside);
  auto local = f.Join(key, &lead, reader);
  EXPECT_FALSE(lead);
  EXPECT_EQ(local, asking);
  f.Complete(key, asking, Bytes("from a member"));
  auto later = f.Join(key, &lead, reader);  // only the origin-only flight is left
  EXPECT_FALSE(lead);
  EXPECT_EQ(later, beside);
  f.Complete(key, beside, Bytes("from the origin"));
  EXPECT_EQ(std::string(Fetcher::Wait(second_member)->data.get(), 15), "from the origin");
  EXPECT_EQ(f.in_flight(), 0u);
  auto next = f.Join(key, &lead, member);
  EXPECT_TRUE(lead);
  f.Complete(key, next, Bytes("x"));
}

// A flight that reads the origin alone is followed by anyone, origin-only
// fetches included: concurrent asks, local or from members, are one read.
TEST(FetcherTest, AnOriginOnlyFetchFollowsAFlightThatReadsTheOrigin) {
  Fetcher f;
  const ChunkKey key{1, 1, 0};
  bool lead = false;
  auto local = f.Join(key, &lead, Fetcher::Joiner{.asks_members = false, .origin_only = false});
  ASSERT_TRUE(lead);
  auto member = f.Join(key, &lead, Fetcher::Joiner{.asks_members = false, .origin_only = true});
  EXPECT_FALSE(lead);
  EXPECT_EQ(member, local);
  // And a member's flight is followed by a reader whose read would ask members.
  f.Complete(key, local, Bytes("x"));
  auto m2 = f.Join(key, &lead, Fetcher::Joiner{.asks_members = false, .origin_only = true});
  ASSERT_TRUE(lead);
  auto r2 = f.Join(key, &lead, Fetcher::Joiner{.asks_members = true, .origin_only = false});
  EXPECT_FALSE(lead);
  EXPECT_EQ(r2, m2);
  f.Complete(key, m2, Bytes("y"));
  EXPECT_EQ(f.in_flight(), 0u);
}

}  // namespace
}  // namespace stoker
