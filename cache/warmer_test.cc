// Warmer over a real local origin and a real worker pool: a job's paths are
// checked before anything is queued, its directories are walked and each
// file found is handed to the pool once, and only the last jobs are kept.
#include "cache/warmer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <thread>

#include "cache/origin/local/local_origin.h"
#include "util/test_files.h"

namespace stoker {
namespace {

using testing::ScratchDir;
using testing::WriteFile;

class WarmerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_.Sub("data/a"), "1");
    WriteFile(dir_.Sub("data/sub/b"), "22");
    WriteFile(dir_.Sub("data/sub/deeper/c"), "333");
    WriteFile(dir_.Sub("other/d"), "4444");
    ASSERT_EQ(::mkfifo(dir_.Sub("data/fifo").c_str(), 0600), 0);
    auto io = MakeIoBackend(IoBackendKind::kSyscall);
    ASSERT_TRUE(io.ok());
    auto origin = LocalOrigin::Create(dir_.path(), std::shared_ptr<IoBackend>(std::move(*io)));
    ASSERT_TRUE(origin.ok()) << origin.status().message();
    origin_ = std::move(*origin);
  }

  // A warmer whose files are "fetched" by being noted; each is as large as
  // fetched_sizes_ says, else as the origin says.
  std::unique_ptr<Warmer> Make(size_t max_jobs = 8) {
    auto w = std::make_unique<Warmer>(
        origin_.get(), &nothing_derived_, &counters_, max_jobs,
        [this](const std::string& path) -> Result<uint64_t> {
          MutexLock l(mu_);
          warmed_[path] += 1;
          if (path == failing_) return Status::Error(EIO, "origin read failed");
          if (auto it = fetched_sizes_.find(path); it != fetched_sizes_.end()) return it->second;
          STOKER_ASSIGN_OR_RETURN(struct stat st, origin_->Stat(path));
          return static_cast<uint64_t>(st.st_size);
        });
    w->Start(&pool_);
    return w;
  }

  static bool Finished(Warmer& w, uint64_t id) {
    for (int i = 0; i < 1000; ++i) {
      nlohmann::json j = w.JobStatus(id);
      if (j.is_object() && j["finished"].get<bool>()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  ScratchDir dir_{"warmer"};
  std::shared_ptr<Origin> origin_;
  CacheCounters counters_;
  NothingDerived nothing_derived_;
  WorkerPool pool_{2, 16};
  Mutex mu_;
  std::map<std::string, int> warmed_ GUARDED_BY(mu_);
  std::string failing_;  // the file whose fetch fails
  std::map<std::string, uint64_t> fetched_sizes_;
};

TEST_F(WarmerTest, AJobWalksItsDirectoriesAndWarmsEachFileOnce) {
  auto w = Make();
  auto id = w->StartJob({"data", "other/d"});
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(Finished(*w, *id));
  nlohmann::json j = w->JobStatus(*id);
  EXPECT_EQ(j["files_found"], 4);
  EXPECT_EQ(j["files_done"], 4);
  EXPECT_EQ(j["bytes_done"], 1 + 2 + 3 + 4);
  EXPECT_EQ(j["failures"], 0);
  {
    MutexLock l(mu_);
    EXPECT_EQ(warmed_,
              (std::map<std::string, int>{
                  {"data/a", 1}, {"data/sub/b", 1}, {"data/sub/deeper/c", 1}, {"other/d", 1}}));
  }
  EXPECT_EQ(counters_.warm_files_queued.load(), 4u);
  EXPECT_EQ(counters_.warm_files_done.load(), 4u);
}

// A view's file is listed before it is made, without its size: the size it
// has once fetched is what the job counts (issue 30: "0 B of 0 B").
TEST_F(WarmerTest, AJobCountsEachFileAtItsSizeAsFetched) {
  {
    MutexLock l(mu_);
    fetched_sizes_["other/d"] = 1000;
  }
  auto w = Make();
  auto id = w->StartJob({"other"});
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(Finished(*w, *id));
  nlohmann::json j = w->JobStatus(*id);
  EXPECT_EQ(j["bytes_found"], 1000);
  EXPECT_EQ(j["bytes_done"], 1000);
  EXPECT_EQ(j["unsized"], 0);
}

TEST_F(WarmerTest, AFileThatFailsIsCountedAndNamedAndTheOthersAreWarmed) {
  failing_ = "data/sub/b";
  auto w = Make();
  auto id = w->StartJob({"data"});
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(Finished(*w, *id));
  nlohmann::json j = w->JobStatus(*id);
  EXPECT_EQ(j["files_found"], 3);
  EXPECT_EQ(j["files_done"], 2);
  EXPECT_EQ(j["bytes_done"], 1 + 3);
  EXPECT_EQ(j["failures"], 1);
  ASSERT_EQ(j["failed"].size(), 1u);
  EXPECT_EQ(j["failed"][0]["path"], "data/sub/b");
  EXPECT_NE(j["failed"][0]["error"].get<std::string>().find("origin read failed"),
            std::string::npos);
  EXPECT_EQ(counters_.warm_files_done.load(), 3u) << "a failed file is done too";
}

TEST_F(WarmerTest, APathThatIsNotAFileOrDirectoryRefusesTheWholeJob) {
  auto w = Make();
  auto missing = w->StartJob({"data", "nope"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ENOENT);
  auto fifo = w->StartJob({"data/fifo"});
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.status().code(), EINVAL);
  EXPECT_FALSE(w->StartJob({}).ok());
  EXPECT_EQ(w->JobStatus(0), nlohmann::json::array()) << "nothing was queued";
  EXPECT_EQ(counters_.warm_files_queued.load(), 0u);
}

TEST_F(WarmerTest, OnlyTheLastJobsAreKept) {
  auto w = Make(/*max_jobs=*/2);
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto id = w->StartJob({"other/d"});
    ASSERT_TRUE(id.ok());
    last = *id;
  }
  ASSERT_TRUE(Finished(*w, last));
  EXPECT_TRUE(w->JobStatus(1).is_null());
  EXPECT_TRUE(w->JobStatus(2).is_object());
  EXPECT_EQ(w->JobStatus(0).size(), 2u);
}

}  // namespace
}  // namespace stoker
