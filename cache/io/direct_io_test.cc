#include "cache/io/direct_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace stoker {
namespace {

TEST(AllocAlignedTest, AlignedAndReusedAfterFree) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{4096}, size_t{100000}, size_t{1} << 20,
                     (size_t{3} << 20) + 7}) {
    std::shared_ptr<char[]> b = AllocAligned(len);
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(IsDirectAligned(b.get())) << len;
    // Every byte of the rounded-up capacity is ours to write.
    std::fill(b.get(), b.get() + (len + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign, 'x');
  }
  char* first = nullptr;
  {
    std::shared_ptr<char[]> b = AllocAligned(2 << 20);
    first = b.get();
  }
  // The pool hands a freed buffer of the same class to the next run.
  std::shared_ptr<char[]> again = AllocAligned((2 << 20) - 4096);
  EXPECT_EQ(again.get(), first);
}

TEST(AlignedBufferPoolTest, ALargerFreeBufferServesASmallerRun) {
  AlignedBufferPool pool(16 << 20);
  char* two = nullptr;
  {
    auto b = pool.Take(2 << 20);
    two = b.get();
  }
  EXPECT_EQ(pool.free_bytes(), size_t{2} << 20);
  {
    auto b = pool.Take(1 << 20);  // another class: the free 2 MiB one serves
    EXPECT_EQ(b.get(), two);
    EXPECT_TRUE(IsDirectAligned(b.get()));
    std::fill(b.get(), b.get() + (1 << 20), 'x');
  }
  EXPECT_EQ(pool.free_bytes(), size_t{2} << 20);  // back with its own capacity
  EXPECT_EQ(pool.reused(), 1u);
  EXPECT_EQ(pool.allocated(), 1u);
  { auto big = pool.Take(8 << 20); }
  auto small = pool.Take(64 << 10);  // neither 2 nor 8 MiB is within 4x of 64 KiB
  EXPECT_EQ(pool.allocated(), 3u);
}

// A pool full of small buffers makes room for a larger one given back, so
// runs of the larger class stop allocating (and faulting in) new ones.
TEST(AlignedBufferPoolTest, AFullPoolKeepsTheLargerBuffers) {
  AlignedBufferPool pool(4 << 20);
  {
    std::vector<std::shared_ptr<char[]>> held;
    for (int i = 0; i < 4; ++i) held.push_back(pool.Take(1 << 20));
  }
  EXPECT_EQ(pool.free_bytes(), size_t{4} << 20);
  char* four = nullptr;
  {
    auto b = pool.Take(4 << 20);  // nothing free is large enough
    four = b.get();
  }
  EXPECT_EQ(pool.free_bytes(), size_t{4} << 20);  // the four small ones went
  EXPECT_EQ(pool.allocated(), 5u);
  for (int i = 0; i < 3; ++i) {
    auto b = pool.Take((4 << 20) - i * 4096);
    EXPECT_EQ(b.get(), four);
  }
  EXPECT_EQ(pool.reused(), 3u);
  {
    // Two held at once: the second is new, and does not fit when given back.
    auto a = pool.Take(4 << 20);
    auto b = pool.Take(4 << 20);
    EXPECT_NE(a.get(), b.get());
  }
  EXPECT_LE(pool.free_bytes(), size_t{4} << 20);
}

class DirectTwinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker-direct-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fd_ = open((dir_ + "/f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    close(fd_);
    SetDirectIoEnabled(true);
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string dir_;
  int fd_ = -1;
};

TEST_F(DirectTwinTest, OpensTheSameFileDirect) {
  DirectTwin twin(O_RDWR);
  int d = twin.Get(fd_);
  if (d < 0) GTEST_SKIP() << "the file system under /tmp refuses O_DIRECT";
  EXPECT_NE(d, fd_);
  EXPECT_EQ(twin.Get(fd_), d) << "opened once";
  EXPECT_NE(fcntl(d, F_GETFL) & O_DIRECT, 0);
  struct stat a, b;
  ASSERT_EQ(fstat(fd_, &a), 0);
  ASSERT_EQ(fstat(d, &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_dev, b.st_dev);
  // Written direct, read buffered through the other descriptor: coherent.
  std::shared_ptr<char[]> buf = AllocAligned(8192);
  std::fill(buf.get(), buf.get() + 8192, 'd');
  ASSERT_EQ(pwrite(d, buf.get(), 8192, 4096), 8192);
  char c = 0;
  ASSERT_EQ(pread(fd_, &c, 1, 4096 + 8191), 1);
  EXPECT_EQ(c, 'd');
  twin.Disable();
  EXPECT_LT(twin.Get(fd_), 0);
}

TEST_F(DirectTwinTest, ProcessWideSwitchKeepsTwinsOff) {
  SetDirectIoEnabled(false);
  DirectTwin twin(O_RDONLY);
  EXPECT_LT(twin.Get(fd_), 0);
}

}  // namespace
}  // namespace stoker
