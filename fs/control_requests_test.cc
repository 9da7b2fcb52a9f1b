// HandleControlRequest against a real ObjectCache over a real local origin.
#include "fs/control_requests.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "cache/cache_test_util.h"
#include "util/eventually.h"

namespace stoker {
namespace {

using stoker::testing::Pattern;
using stoker::testing::ScratchDir;
using stoker::testing::WriteFile;

class ControlRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(origin_dir_.Sub("train/a"), Pattern(100000, 1));
    WriteFile(origin_dir_.Sub("train/b"), Pattern(5000, 2));
    Result<std::shared_ptr<Origin>> origin = MakeOrigin(origin_dir_.path());
    ASSERT_TRUE(origin.ok()) << origin.status().message();
    CacheOptions o;
    o.dir = cache_dir_.Sub("cache");
    o.capacity_bytes = 64ull << 20;
    Result<std::unique_ptr<ObjectCache>> cache = ObjectCache::Open(o, *origin);
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    cache_ = std::move(cache).value();
  }
  nlohmann::json Do(const nlohmann::json& r) {
    return HandleControlRequest(r, *cache_, "/mnt/data", [] { return nlohmann::json{{"x", 1}}; });
  }

  ScratchDir origin_dir_{"ctlreq-origin"};
  ScratchDir cache_dir_{"ctlreq-cache"};
  std::unique_ptr<ObjectCache> cache_;
};

TEST_F(ControlRequestsTest, PingAndStats) {
  nlohmann::json p = Do({{"op", "ping"}});
  EXPECT_EQ(p["ok"], true);
  EXPECT_EQ(p["pid"], getpid());
  EXPECT_EQ(Do({{"op", "stats"}})["stats"]["x"], 1);
}

TEST_F(ControlRequestsTest, WarmQueuesFilesAndDirectories) {
  nlohmann::json a = Do({{"op", "warm"}, {"path", "train/a"}});
  EXPECT_EQ(a["ok"], true) << a.dump();
  EXPECT_EQ(a["queued"], 1);
  nlohmann::json b = Do({{"op", "warm"}, {"paths", {"/mnt/data/train", "train/b"}}});
  EXPECT_EQ(b["ok"], true) << b.dump();
  EXPECT_EQ(b["queued"], 2);
  EXPECT_GE(cache_->counters().warm_files_queued.load(), 1u);
}

TEST_F(ControlRequestsTest, BadRequestsAnswerOneLineErrors) {
  for (const nlohmann::json& r :
       {nlohmann::json{{"op", "warm"}}, nlohmann::json{{"op", "warm"}, {"path", 5}},
        nlohmann::json{{"op", "warm"}, {"path", "../etc"}},
        nlohmann::json{{"op", "warm"}, {"path", "/elsewhere/x"}},
        nlohmann::json{{"op", "warm"}, {"path", ".stoker/stats.json"}},
        nlohmann::json{{"op", "warm"}, {"path", "train/missing"}},
        nlohmann::json{{"op", "explode"}}, nlohmann::json{{"x", 1}}}) {
    nlohmann::json a = Do(r);
    EXPECT_EQ(a["ok"], false) << r.dump();
    ASSERT_TRUE(a["error"].is_string()) << r.dump();
    EXPECT_EQ(a["error"].get<std::string>().find('\n'), std::string::npos);
  }
}

TEST_F(ControlRequestsTest, RefreshMarksTheSubtreeAndAsksTheKernelToForgetIt) {
  ASSERT_EQ(Do({{"op", "warm"}, {"path", "train"}})["ok"], true);
  ASSERT_TRUE(testing::Eventually([&] { return cache_->counters().warm_files_done.load() == 2u; }));
  std::vector<std::string> forgotten;
  auto refresh = [&](const nlohmann::json& r) {
    return HandleControlRequest(
        r, *cache_, "/mnt/data", [] { return nlohmann::json(); },
        [&](const std::string& path) {
          forgotten.push_back(path);
          return uint64_t{3};
        });
  };
  nlohmann::json a = refresh({{"op", "refresh"}, {"path", "/mnt/data/train"}});
  ASSERT_EQ(a["ok"], true) << a.dump();
  EXPECT_EQ(a["files"], 2);
  EXPECT_EQ(a["nodes"], 3);
  EXPECT_EQ(forgotten, std::vector<std::string>{"train"});
  EXPECT_EQ(refresh({{"op", "refresh"}, {"path", "/mnt/data"}})["ok"], true);
  EXPECT_EQ(forgotten.back(), "");
  nlohmann::json missing = refresh({{"op", "refresh"}, {"path", "train/not-yet"}});
  EXPECT_EQ(missing["ok"], true) << "a path the mount does not show yet";
  EXPECT_EQ(missing["files"], 0);
  for (const nlohmann::json& r :
       {nlohmann::json{{"op", "refresh"}}, nlohmann::json{{"op", "refresh"}, {"path", 1}},
        nlohmann::json{{"op", "refresh"}, {"path", "../x"}},
        nlohmann::json{{"op", "refresh"}, {"path", ".stoker"}}}) {
    nlohmann::json e = refresh(r);
    EXPECT_EQ(e["ok"], false) << r.dump();
  }
  EXPECT_EQ(forgotten.size(), 3u) << "a refused refresh forgot something";
}

TEST_F(ControlRequestsTest, OrderSetsAddsToAndClearsTheOrder) {
  nlohmann::json a = Do({{"op", "order"}, {"paths", {"train/a", "/mnt/data/train/b"}}});
  ASSERT_EQ(a["ok"], true) << a.dump();
  EXPECT_EQ(a["files"], 2);
  const uint64_t id = a["order"].get<uint64_t>();
  nlohmann::json b = Do({{"op", "order"}, {"order", id}, {"paths", {"train/a"}}});
  ASSERT_EQ(b["ok"], true) << b.dump();
  EXPECT_EQ(cache_->Stats()["order_files"], 3);
  EXPECT_EQ(cache_->counters().orders_set.load(), 1u);
  EXPECT_EQ(Do({{"op", "order"}, {"clear", true}})["ok"], true);
  EXPECT_EQ(cache_->Stats()["order_files"], 0);
  nlohmann::json stale = Do({{"op", "order"}, {"order", id}, {"paths", {"train/a"}}});
  EXPECT_EQ(stale["ok"], false);
}

TEST_F(ControlRequestsTest, ABadOrderIsRefusedInOneLineAndDropsTheOldOne) {
  ASSERT_EQ(Do({{"op", "order"}, {"paths", {"train/a"}}})["ok"], true);
  for (const nlohmann::json& r :
       {nlohmann::json{{"op", "order"}}, nlohmann::json{{"op", "order"}, {"paths", "train/a"}},
        nlohmann::json{{"op", "order"}, {"paths", nlohmann::json::array()}},
        nlohmann::json{{"op", "order"}, {"paths", {"../etc/passwd"}}},
        nlohmann::json{{"op", "order"}, {"paths", {"/elsewhere/x"}}},
        nlohmann::json{{"op", "order"}, {"paths", {".stoker/stats.json"}}},
        nlohmann::json{{"op", "order"}, {"paths", {"train/missing"}}},
        nlohmann::json{{"op", "order"}, {"paths", {"train"}}},
        nlohmann::json{{"op", "order"}, {"order", "x"}, {"paths", {"train/a"}}}}) {
    nlohmann::json a = Do(r);
    EXPECT_EQ(a["ok"], false) << r.dump();
    ASSERT_TRUE(a["error"].is_string()) << r.dump();
    EXPECT_EQ(a["error"].get<std::string>().find('\n'), std::string::npos);
    EXPECT_EQ(cache_->Stats()["order_files"], 0) << r.dump();
  }
}

}  // namespace
}  // namespace stoker
