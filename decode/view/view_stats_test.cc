// ViewErrorList: listed once, the newest kept, and kept in a file across
// daemons (Persist).
#include "decode/view/view_stats.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cache/cache_test_util.h"

namespace stoker {
namespace {

using testing::ScratchDir;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ViewErrorList, ListsEachErrorOnceAndKeepsTheNewest) {
  ViewErrorList l;
  EXPECT_TRUE(l.Add("f", 1, "bad\ncrc"));
  EXPECT_FALSE(l.Add("f", 1, "bad\ncrc"));
  EXPECT_EQ(l.Text(), "f: offset 1: bad crc\n");
  for (size_t i = 0; i < ViewErrorList::kMaxErrors + 5; ++i) l.Add("g", i, "x");
  EXPECT_EQ(l.size(), ViewErrorList::kMaxErrors);
  EXPECT_EQ(l.Text().find("f: offset 1"), std::string::npos);
}

TEST(ViewErrorList, ANewDaemonListsWhatTheLastOneFound) {
  ScratchDir dir("view-errors");
  const std::string path = dir.Sub("view-errors");
  {
    ViewErrorList l;
    EXPECT_EQ(l.Persist(path).value(), 0u);
    l.Add(".d/a", 10, "bad CRC");
    l.Add(".d/b", 0, "not a JPEG");
  }
  ViewErrorList l;
  EXPECT_EQ(l.Persist(path).value(), 2u);
  EXPECT_EQ(l.Text(), ".d/a: offset 10: bad CRC\n.d/b: offset 0: not a JPEG\n");
  EXPECT_FALSE(l.Add(".d/a", 10, "bad CRC")) << "listed already";
  // A file laid out anew loses its lines, here and in the file.
  l.ForgetFile(".d/a");
  EXPECT_EQ(l.Text(), ".d/b: offset 0: not a JPEG\n");
  EXPECT_EQ(Slurp(path), ".d/b: offset 0: not a JPEG\n");
  EXPECT_TRUE(l.Add(".d/a", 20, "truncated"));
  ViewErrorList again;
  EXPECT_EQ(again.Persist(path).value(), 2u);
  EXPECT_EQ(again.Text(), ".d/b: offset 0: not a JPEG\n.d/a: offset 20: truncated\n");
}

TEST(ViewErrorList, ALineCutByACrashAndDuplicatesAreDropped) {
  ScratchDir dir("view-errors");
  const std::string path = dir.Sub("view-errors");
  std::ofstream(path) << "x: offset 1: a\nx: offset 1: a\n\ny: offset 2: b\nz: offs";
  ViewErrorList l;
  EXPECT_EQ(l.Persist(path).value(), 2u);
  EXPECT_EQ(l.Text(), "x: offset 1: a\ny: offset 2: b\n");
  EXPECT_EQ(Slurp(path), "x: offset 1: a\ny: offset 2: b\n") << "rewritten as listed";
}

TEST(ViewErrorList, TheFileStaysWithinTwiceTheList) {
  ScratchDir dir("view-errors");
  const std::string path = dir.Sub("view-errors");
  ViewErrorList l;
  ASSERT_TRUE(l.Persist(path).ok());
  for (size_t i = 0; i < 3 * ViewErrorList::kMaxErrors; ++i) l.Add("f", i, "bad");
  EXPECT_EQ(l.size(), ViewErrorList::kMaxErrors);
  std::ifstream in(path);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) lines++;
  EXPECT_LE(lines, 2 * ViewErrorList::kMaxErrors);
  ViewErrorList again;
  EXPECT_EQ(again.Persist(path).value(), ViewErrorList::kMaxErrors);
  EXPECT_EQ(again.Text(), l.Text()) << "the newest are kept";
}

TEST(ViewErrorList, AnUnreadableFileIsAnErrorAndTheListGoesOnInMemory) {
  ScratchDir dir("view-errors");
  ViewErrorList l;
  EXPECT_FALSE(l.Persist(dir.path()).ok()) << "a directory";
  EXPECT_TRUE(l.Add("f", 0, "bad"));
  EXPECT_EQ(l.Text(), "f: offset 0: bad\n");
}

}  // namespace
}  // namespace stoker
