#include "cache/chunk_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_test_util.h"

namespace stoker {
namespace {

using testing::ScratchDir;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(ChunkStoreTest, FirstWriteCreatesTheFileAndUnlinkWaitsForTheWriter) {
  ScratchDir dir;
  auto store = ChunkStore::Open(dir.Sub("data"), 8);
  ASSERT_TRUE(store.ok()) << store.status().message();
  const VersionKey v{0x1234, 2};
  const std::string path = dir.Sub("data/") + ChunkStore::RelativePath(v);
  EXPECT_EQ((*store)->Get(v, false).status().code(), ENOENT);

  auto file = (*store)->BeginWrite(v, nullptr);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_TRUE(Exists(path));
  EXPECT_TRUE((*store)->Writing(v));
  auto again = (*store)->Get(v, false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), file->get()) << "one cached descriptor per version";
  auto u = (*store)->UnlinkIfIdle(v, []() -> Result<bool> { return true; });
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(*u) << "a file being written is not unlinked";
  EXPECT_TRUE(Exists(path));

  (*store)->EndWrite(v);
  EXPECT_FALSE((*store)->Writing(v));
  u = (*store)->UnlinkIfIdle(v, []() -> Result<bool> { return true; });
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(*u);
  EXPECT_FALSE(Exists(path));
}

TEST(ChunkStoreTest, ConcurrentFirstWritesOfOneVersionShareOneFile) {
  ScratchDir dir;
  auto store = ChunkStore::Open(dir.Sub("data"), 8);
  ASSERT_TRUE(store.ok());
  for (uint64_t id = 1; id <= 20; ++id) {
    const VersionKey v{id, 1};
    std::vector<std::future<std::shared_ptr<DataFile>>> writers;
    for (int t = 0; t < 6; ++t) {
      writers.push_back(std::async(std::launch::async, [&] {
        auto f = (*store)->BeginWrite(v, nullptr);
        return f.ok() ? *f : nullptr;
      }));
    }
    std::vector<std::shared_ptr<DataFile>> got;
    for (auto& w : writers) got.push_back(w.get());
    for (const auto& f : got) {
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(f.get(), got[0].get()) << "version " << id;
    }
    for (size_t i = 0; i < got.size(); ++i) (*store)->EndWrite(v);
    EXPECT_FALSE((*store)->Writing(v));
  }
}

TEST(ChunkStoreTest, AFailedCreateIsNoWriter) {
  ScratchDir dir;
  auto store = ChunkStore::Open(dir.Sub("data"), 8);
  ASSERT_TRUE(store.ok());
  const VersionKey v{0x34, 1};
  // The version's directory is taken by a regular file: no file can go there.
  testing::WriteFile(dir.Sub("data/34"), "x");
  auto file = (*store)->BeginWrite(v, nullptr);
  EXPECT_FALSE(file.ok());
  EXPECT_FALSE((*store)->Writing(v)) << "a drop of the version must not wait for a failed write";
}

TEST(ChunkStoreTest, RefusedWriteIsNoWriter) {
  ScratchDir dir;
  auto store = ChunkStore::Open(dir.Sub("data"), 8);
  ASSERT_TRUE(store.ok());
  const VersionKey v{7, 1};
  auto file = (*store)->BeginWrite(v, [] { return true; });
  EXPECT_EQ(file.status().code(), ESTALE);
  EXPECT_FALSE((*store)->Writing(v));
  EXPECT_FALSE(Exists(dir.Sub("data/") + ChunkStore::RelativePath(v)));
}

// An open of a version's file that is slow (here: held up by a read lease
// that must be broken first) does not hold up the store for other versions.
TEST(ChunkStoreTest, OpeningOneVersionsFileDoesNotBlockOthers) {
  ScratchDir dir;
  auto store = ChunkStore::Open(dir.Sub("data"), 8);
  ASSERT_TRUE(store.ok());
  const VersionKey slow{0x10, 1}, other{0x20, 1};
  const std::string slow_path = dir.Sub("data/") + ChunkStore::RelativePath(slow);
  testing::WriteFile(slow_path, "");
  testing::WriteFile(dir.Sub("data/") + ChunkStore::RelativePath(other), "");

  // A read lease: the store's read-write open waits until it is given up.
  // The break notice is a signal this test ignores.
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGURG, &ignore, &old), 0);
  int lease_fd = ::open(slow_path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lease_fd, 0);
  ASSERT_EQ(::fcntl(lease_fd, F_SETSIG, SIGURG), 0);
  if (::fcntl(lease_fd, F_SETLEASE, F_RDLCK) != 0) {
    ::close(lease_fd);
    ::sigaction(SIGURG, &old, nullptr);
    GTEST_SKIP() << "no file leases here: " << std::strerror(errno);
  }
  auto writer = std::async(std::launch::async, [&] { return (*store)->BeginWrite(slow, nullptr); });
  // The lease is being broken once the writer's open waits on it.
  while (::fcntl(lease_fd, F_GETLEASE) == F_RDLCK) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto reader = std::async(std::launch::async, [&] { return (*store)->Get(other, false); });
  // Generous: the reader needs only the store lock and one open. With the
  // lock held over the writer's open it would wait for the lease instead.
  const bool reader_done = reader.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  ::close(lease_fd);  // gives the lease up: the writer goes on
  ::sigaction(SIGURG, &old, nullptr);
  EXPECT_TRUE(reader_done) << "Get of another version waited for a slow open";
  auto r = reader.get();
  EXPECT_TRUE(r.ok()) << r.status().message();
  auto w = writer.get();
  ASSERT_TRUE(w.ok()) << w.status().message();
  (*store)->EndWrite(slow);
}

}  // namespace
}  // namespace stoker
