#include "fs/passthrough.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace stoker {
namespace {

// A lease that says when it goes.
class FakeLease : public WholeFileLease {
 public:
  // live: where it says it lives (nullptr: nowhere).
  explicit FakeLease(std::set<int>* live, int fd) : live_(live), fd_(fd) {
    if (live_) live_->insert(fd_);
  }
  ~FakeLease() override {
    if (live_) live_->erase(fd_);
  }
  int fd() const override { return fd_; }
  uint64_t object_id() const override { return 7; }
  uint64_t version() const override { return 1; }
  uint64_t chunks() const override { return 3; }
  uint64_t size() const override { return 3000; }
  void CountOpen() override { opens++; }
  int opens = 0;

 private:
  std::set<int>* live_;
  int fd_;
};

// The kernel's side: backing ids handed out and closed, and the journal.
struct FakeKernel {
  std::map<int32_t, int> backing;  // id -> fd
  int32_t next = 1;
  int refuse = 0;  // errno for the next BACKING_OPEN
  std::vector<std::string> journal;
  std::set<int> leases;
  PassthroughNodes::Hooks Hooks() {
    return {[this](int fd) -> Result<int32_t> {
              if (refuse != 0) return Status::Error(refuse, "refused");
              backing[next] = fd;
              return next++;
            },
            [this](int32_t id) { EXPECT_EQ(backing.erase(id), 1u) << "closed twice: " << id; },
            [this](uint64_t node, int32_t id, const WholeFileLease* lease) {
              journal.push_back(std::to_string(node) + (lease ? " open " : " close ") +
                                std::to_string(id));
            }};
  }
  PassthroughNodes::LeaseMaker Leases(int fd) {
    return [this, fd](std::string*) -> Result<std::unique_ptr<WholeFileLease>> {
      return std::unique_ptr<WholeFileLease>(new FakeLease(&leases, fd));
    };
  }
  static PassthroughNodes::LeaseMaker Refused(const std::string& why) {
    return [why](std::string* out) -> Result<std::unique_ptr<WholeFileLease>> {
      *out = why;
      return Status::Error(EAGAIN, why);
    };
  }
};

TEST(PassthroughNodes, OneBackingIdPerNodeSharedByItsOpensAndClosedAfterTheLast) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks());
  auto a = p.Open(10, k.Leases(100));
  ASSERT_TRUE(a.passthrough);
  auto b = p.Open(10, FakeKernel::Refused("must not be asked"));
  ASSERT_TRUE(b.passthrough);
  EXPECT_EQ(a.backing_id, b.backing_id);
  EXPECT_EQ(k.backing.size(), 1u);
  p.Release(10, true);
  EXPECT_EQ(k.backing.size(), 1u) << "closed while an open still uses it";
  EXPECT_EQ(k.leases.size(), 1u);
  p.Release(10, true);
  EXPECT_TRUE(k.backing.empty());
  EXPECT_TRUE(k.leases.empty()) << "the pins outlived the backing file";
  EXPECT_EQ(p.passthrough_opens(), 2u);
  EXPECT_EQ(p.Stats()["passthrough_bytes"], 6000);
  EXPECT_EQ(k.journal, (std::vector<std::string>{"10 open 1", "10 close 1"}));
}

TEST(PassthroughNodes, ANodeWithNormalOpensStaysNormalUntilTheyAreReleased) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks());
  auto a = p.Open(5, FakeKernel::Refused("not_verified"));
  EXPECT_FALSE(a.passthrough);
  auto b = p.Open(5, k.Leases(1));  // could be leased now, but the node is in use
  EXPECT_FALSE(b.passthrough);
  EXPECT_TRUE(k.backing.empty());
  p.Release(5, false);
  p.Release(5, false);
  auto c = p.Open(5, k.Leases(1));
  EXPECT_TRUE(c.passthrough);
  p.Release(5, true);
  nlohmann::json st = p.Stats();
  EXPECT_EQ(st["passthrough_fallbacks"]["not_verified"], 1);
  EXPECT_EQ(st["passthrough_fallbacks"]["node_open_normally"], 1);
  EXPECT_EQ(st["passthrough_opens"], 1);
  EXPECT_EQ(st["passthrough"], "on");
}

TEST(PassthroughNodes, AKernelThatRefusesTurnsItOffForTheMount) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks());
  k.refuse = EPERM;
  EXPECT_FALSE(p.Open(1, k.Leases(1)).passthrough);
  EXPECT_TRUE(k.leases.empty());
  k.refuse = 0;
  EXPECT_FALSE(p.Open(2, k.Leases(2)).passthrough);
  p.Release(1, false);
  p.Release(2, false);
  nlohmann::json st = p.Stats();
  EXPECT_EQ(st["passthrough"], "off: kernel_refused");
  EXPECT_EQ(st["passthrough_fallbacks"]["kernel_refused"], 2);
}

TEST(PassthroughNodes, DisabledCountsEveryOpenUnderItsReason) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks());
  p.Disable("off");
  EXPECT_FALSE(p.Open(1, k.Leases(1)).passthrough);
  EXPECT_FALSE(p.Open(2, k.Leases(2)).passthrough);
  p.Release(1, false);
  p.Release(2, false);
  EXPECT_EQ(p.Stats()["passthrough_fallbacks"]["off"], 2);
  EXPECT_TRUE(k.leases.empty());
}

// Idle nodes keep their backing file for their next open, within bounds;
// the oldest goes first, and one opened again is not closed under it.
TEST(PassthroughNodes, IdleNodesKeepTheirBackingFileWithinTheBounds) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks(), /*linger_files=*/2, /*linger_bytes=*/3 * 3000);
  const int32_t id1 = p.Open(1, k.Leases(1)).backing_id;
  p.Release(1, true);
  EXPECT_EQ(k.backing.size(), 1u) << "closed although it may linger";
  EXPECT_EQ(p.Stats()["passthrough_idle"], 1);
  // Opened again: the same id, no new lease asked for.
  auto again = p.Open(1, FakeKernel::Refused("must not be asked"));
  EXPECT_TRUE(again.passthrough);
  EXPECT_EQ(again.backing_id, id1);
  EXPECT_EQ(p.Stats()["passthrough_idle"], 0);
  p.Release(1, true);
  p.Open(2, k.Leases(2));
  p.Release(2, true);
  p.Open(3, k.Leases(3));
  p.Release(3, true);  // three idle: node 1, the oldest, goes
  EXPECT_EQ(k.backing.size(), 2u);
  EXPECT_EQ(k.backing.count(id1), 0u);
  EXPECT_EQ(k.leases.count(1), 0u) << "a displaced node kept its pins";
  EXPECT_FALSE(p.Open(1, FakeKernel::Refused("not_cached")).passthrough);
  p.Release(1, false);
  // A file larger than the bytes allowed never lingers.
  PassthroughNodes small(k.Hooks(), 2, 1000);
  small.Open(9, k.Leases(9));
  small.Release(9, true);
  EXPECT_EQ(k.leases.count(9), 0u);
  p.Clear();
  EXPECT_TRUE(k.leases.empty());
  EXPECT_TRUE(k.backing.empty());
}

TEST(PassthroughNodes, InheritedNodesKeepTheirIdForEverAndRestoredOnesStayNormal) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks());
  p.Inherit(3, 42, std::make_unique<FakeLease>(&k.leases, 9));
  p.MarkRestored(4);
  auto a = p.Open(3, FakeKernel::Refused("must not be asked"));
  EXPECT_TRUE(a.passthrough);
  EXPECT_EQ(a.backing_id, 42);
  p.Release(3, true);
  EXPECT_EQ(k.leases.size(), 1u) << "an inherited node's pins went with an open of ours";
  EXPECT_FALSE(p.Open(4, k.Leases(1)).passthrough);
  p.Release(4, false);
  EXPECT_EQ(p.Stats()["passthrough_fallbacks"]["opened_before_restart"], 1);
  p.Clear();
  EXPECT_TRUE(k.leases.empty());
}

TEST(PassthroughNodes, ConcurrentOpensOfOneNodeShareOneId) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks());
  std::mutex mu;
  std::set<int32_t> ids;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto g = p.Open(77, [&](std::string*) -> Result<std::unique_ptr<WholeFileLease>> {
          return std::unique_ptr<WholeFileLease>(new FakeLease(nullptr, 5));
        });
        ASSERT_TRUE(g.passthrough);
        {
          std::lock_guard<std::mutex> l(mu);
          ids.insert(g.backing_id);
        }
        p.Release(77, true);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(k.backing.empty());
}

// Many nodes, few idle places: opens, releases and displacements race; the
// kernel never sees an id closed under an open, nor one left behind.
TEST(PassthroughNodes, ConcurrentOpensAndDisplacementsOfIdleNodes) {
  std::mutex mu;
  std::map<int32_t, int> open_ids;  // id -> opens the "kernel" holds on it
  int32_t next = 1;
  PassthroughNodes::Hooks hooks{[&](int) -> Result<int32_t> {
                                  std::lock_guard<std::mutex> l(mu);
                                  open_ids[next] = 0;
                                  return next++;
                                },
                                [&](int32_t id) {
                                  std::lock_guard<std::mutex> l(mu);
                                  auto it = open_ids.find(id);
                                  ASSERT_NE(it, open_ids.end()) << "closed twice: " << id;
                                  EXPECT_EQ(it->second, 0) << "closed under an open: " << id;
                                  open_ids.erase(it);
                                },
                                nullptr};
  PassthroughNodes p(hooks, /*linger_files=*/2, /*linger_bytes=*/1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const uint64_t node = 1 + (t * 7 + i) % 5;
        auto g = p.Open(node, [](std::string*) -> Result<std::unique_ptr<WholeFileLease>> {
          return std::unique_ptr<WholeFileLease>(new FakeLease(nullptr, 5));
        });
        ASSERT_TRUE(g.passthrough);
        {
          std::lock_guard<std::mutex> l(mu);
          ASSERT_EQ(open_ids.count(g.backing_id), 1u) << "an open got a closed id";
          open_ids[g.backing_id]++;
        }
        {
          std::lock_guard<std::mutex> l(mu);
          open_ids[g.backing_id]--;
        }
        p.Release(node, true);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(open_ids.size(), 2u) << "more idle backing files than allowed";
  p.Clear();
  EXPECT_TRUE(open_ids.empty());
}

TEST(PassthroughNodesDeathTest, MoreReleasesThanOpensAbort) {
  FakeKernel k;
  PassthroughNodes p(k.Hooks());
  EXPECT_FALSE(p.Open(1, FakeKernel::Refused("slab")).passthrough);
  p.Release(1, false);
  EXPECT_DEATH(p.Release(1, false), "never saw|more releases");
}

}  // namespace
}  // namespace stoker
