#include "cache/direct_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

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
