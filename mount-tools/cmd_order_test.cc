// What `stoker order` reads from its file and how it splits what it sends.
#include <gtest/gtest.h>

#include "mount-tools/commands.h"
#include "util/test_files.h"

namespace stoker {
namespace {

TEST(ParseOrderLines, TakesOnePathALineLessBlanksAndComments) {
  EXPECT_EQ(ParseOrderLines("# epoch 3\na/1.jpg\n\nb/2.jpg\r\n/mnt/d/c 3.jpg"),
            (std::vector<std::string>{"a/1.jpg", "b/2.jpg", "/mnt/d/c 3.jpg"}));
  EXPECT_TRUE(ParseOrderLines("").empty());
  EXPECT_TRUE(ParseOrderLines("\n# nothing\n").empty());
}

TEST(SplitOrder, EveryPartFitsAndTheOrderIsKept) {
  std::vector<std::string> paths;
  for (int i = 0; i < 1000; ++i)
    paths.push_back("class" + std::to_string(i % 7) + "/img\"" + std::to_string(i) + ".jpg");
  const size_t max = 2000;
  std::vector<std::vector<std::string>> parts = SplitOrder(paths, max);
  ASSERT_GT(parts.size(), 1u);
  std::vector<std::string> joined;
  for (const auto& part : parts) {
    ASSERT_FALSE(part.empty());
    EXPECT_LE(nlohmann::json(part).dump().size(), max);
    joined.insert(joined.end(), part.begin(), part.end());
  }
  EXPECT_EQ(joined, paths);
  EXPECT_EQ(SplitOrder({"a"}, max).size(), 1u);
}

// `stoker order MOUNTPOINT FILE` (swapped) is told so, with the usage.
TEST(CheckOrderFile, ADirectoryInFilesPlaceIsRefusedWithTheUsage) {
  testing::ScratchDir dir("order");
  testing::WriteFile(dir.Sub("epoch.txt"), "a.jpg\n");
  EXPECT_TRUE(CheckOrderFile(dir.Sub("epoch.txt")).ok());
  EXPECT_TRUE(CheckOrderFile("-").ok());
  EXPECT_TRUE(CheckOrderFile(dir.Sub("missing.txt")).ok()) << "read, and refused, as before";
  Status st = CheckOrderFile(dir.path());
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_NE(st.message().find("'" + dir.path() + "' is a directory"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("usage: stoker order FILE MOUNTPOINT"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace stoker
