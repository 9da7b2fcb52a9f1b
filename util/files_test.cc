#include "util/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "util/test_files.h"

namespace stoker {
namespace {

using testing::ScratchDir;
using testing::WriteFile;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(FilesTest, MakeDirsCreatesWhatIsMissingWithItsModes) {
  ScratchDir tmp;
  const mode_t old = umask(0);
  std::vector<std::string> made;
  ASSERT_TRUE(MakeDirs(tmp.path() + "/a/b/c", 0700, 0755, &made).ok());
  umask(old);
  EXPECT_EQ(made, (std::vector<std::string>{tmp.path() + "/a", tmp.path() + "/a/b",
                                            tmp.path() + "/a/b/c"}));
  EXPECT_EQ(ModeOf(tmp.path() + "/a"), 0755u);
  EXPECT_EQ(ModeOf(tmp.path() + "/a/b/c"), 0700u);
  made.clear();
  ASSERT_TRUE(MakeDirs(tmp.path() + "/a/b/c/", 0700, 0755, &made).ok());
  EXPECT_TRUE(made.empty());
}

TEST(FilesTest, MakeDirsRefusesAFileInTheWay) {
  ScratchDir tmp;
  WriteFile(tmp.path() + "/f", "x");
  Status st = MakeDirs(tmp.path() + "/f", 0700, 0755);
  EXPECT_EQ(st.code(), ENOTDIR);
  st = MakeDirs(tmp.path() + "/f/g", 0700, 0755);
  EXPECT_EQ(st.code(), ENOTDIR);
  EXPECT_NE(st.message().find("/f/g"), std::string::npos) << st.message();
}

TEST(FilesTest, ReadAndWriteWholeFiles) {
  ScratchDir tmp;
  const std::string path = tmp.path() + "/f";
  EXPECT_EQ(ReadWholeFile(path).status().code(), ENOENT);
  EXPECT_EQ(WriteSmallFile(path, "x").code(), ENOENT);  // only existing files
  WriteFile(path, "");
  ASSERT_TRUE(WriteSmallFile(path, "hello").ok());
  auto text = ReadWholeFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello");
  auto proc = ReadWholeFile("/proc/self/mountinfo");
  ASSERT_TRUE(proc.ok());
  EXPECT_FALSE(proc->empty());
}

}  // namespace
}  // namespace stoker
