#include "fs/handle_set.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace stoker {
namespace {

struct Probe : CountedHandle {
  explicit Probe(int* deleted) : deleted(deleted) {}
  ~Probe() { ++*deleted; }
  int* deleted;
};

TEST(HandleSetTest, ReleaseWithoutRequestsDeletesAtOnce) {
  int deleted = 0;
  HandleSet<Probe> set;
  Probe* h = set.Add(std::make_unique<Probe>(&deleted));
  EXPECT_EQ(set.size(), 1u);
  set.Release(h);
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(set.size(), 0u);
}

// The RELEASE that comes while a request still holds the handle (after its
// reply) leaves the deletion to that request.
TEST(HandleSetTest, ReleaseDuringARequestDeletesWhenTheRequestEnds) {
  int deleted = 0;
  HandleSet<Probe> set;
  Probe* h = set.Add(std::make_unique<Probe>(&deleted));
  {
    HandleSet<Probe>::Use use(h);
    set.Release(h);
    EXPECT_EQ(deleted, 0);
    EXPECT_EQ(set.size(), 0u);
    EXPECT_EQ(use->deleted, &deleted);
  }
  EXPECT_EQ(deleted, 1);
}

TEST(HandleSetTest, ClearFreesWhatTheKernelNeverReleased) {
  int deleted = 0;
  {
    HandleSet<Probe> set;
    set.Add(std::make_unique<Probe>(&deleted));
    set.Add(std::make_unique<Probe>(&deleted));
  }
  EXPECT_EQ(deleted, 2);
}

// Requests on one handle from many threads, the release racing with their
// ends: exactly one deletion, after the last (run under TSan in CI). As the
// kernel guarantees, every request starts before the release.
TEST(HandleSetTest, ConcurrentRequestsAndReleaseDeleteOnce) {
  for (int round = 0; round < 50; ++round) {
    int deleted = 0;
    HandleSet<Probe> set;
    Probe* h = set.Add(std::make_unique<Probe>(&deleted));
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([h, &started] {
        HandleSet<Probe>::Use request(h);
        started.fetch_add(1);
        for (int i = 0; i < 100; ++i) HandleSet<Probe>::Use nested(h);
      });
    }
    while (started.load() < 4) std::this_thread::yield();
    set.Release(h);
    for (auto& t : threads) t.join();
    EXPECT_EQ(deleted, 1);
  }
}

}  // namespace
}  // namespace stoker
