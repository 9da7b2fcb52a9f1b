#include "cache/dir_scan.h"

#include <gtest/gtest.h>

#include <map>

namespace stoker {
namespace {

// A fake listing: directories and their files in "origin order".
class Listing {
 public:
  std::map<std::string, std::vector<std::string>> dirs;
  int calls = 0;
  DirScan::Lister lister() {
    return [this](const std::string& dir) -> Result<std::vector<std::string>> {
      calls++;
      auto it = dirs.find(dir);
      if (it == dirs.end()) return Status::Error(ENOENT, "no such directory");
      return it->second;
    };
  }
};

std::vector<std::string> Names(const std::string& dir, std::vector<std::string> names) {
  for (auto& n : names) n = dir.empty() ? n : dir + "/" + n;
  return names;
}

TEST(DirScanTest, SequentialOpensInOriginOrderFetchAhead) {
  Listing ls;
  ls.dirs["d"] = {"e", "c", "a", "f", "b", "d"};  // origin order is not name order
  DirScan::Options o;
  o.ahead = 2;
  DirScan scan(o, ls.lister());
  EXPECT_TRUE(scan.OnOpen("d/e").empty());  // one open says nothing
  EXPECT_EQ(scan.OnOpen("d/c"), Names("d", {"a", "f"}));
  EXPECT_EQ(scan.OnOpen("d/a"), Names("d", {"b"}));  // f was returned already
  EXPECT_EQ(scan.OnOpen("d/f"), Names("d", {"d"}));
  EXPECT_TRUE(scan.OnOpen("d/b").empty());  // the end of the directory
  EXPECT_EQ(ls.calls, 1);
}

TEST(DirScanTest, NamesTheFileAScanningReaderOpensNext) {
  Listing ls;
  ls.dirs["d"] = {"e", "c", "a", "f", "b"};
  DirScan::Options o;
  o.ahead = 2;
  DirScan scan(o, ls.lister());
  std::string next = "stale";
  scan.OnOpen("d/e", &next);
  EXPECT_EQ(next, "");  // one open is no scan
  scan.OnOpen("d/c", &next);
  EXPECT_EQ(next, "d/a");  // origin order
  scan.OnOpen("d/a", &next);
  EXPECT_EQ(next, "d/f");  // the one after, returned to fetch long ago
  scan.OnOpen("d/f", &next);
  EXPECT_EQ(next, "d/b");
  scan.OnOpen("d/b", &next);
  EXPECT_EQ(next, "");  // the last in origin order
  scan.OnOpen("d/c", &next);
  EXPECT_EQ(next, "d/e");  // b then c: name order (a, b, c, e, f)
  scan.OnOpen("d/b", &next);
  EXPECT_EQ(next, "");  // a jump in both orders
}

TEST(DirScanTest, SequentialOpensInNameOrderFetchAhead) {
  Listing ls;
  ls.dirs["x/y"] = {"03", "01", "04", "00", "02"};
  DirScan::Options o;
  o.ahead = 3;
  DirScan scan(o, ls.lister());
  EXPECT_TRUE(scan.OnOpen("x/y/00").empty());
  EXPECT_EQ(scan.OnOpen("x/y/01"), Names("x/y", {"02", "03", "04"}));
  EXPECT_TRUE(scan.OnOpen("x/y/02").empty());
}

TEST(DirScanTest, RootDirectoryUsesPlainNames) {
  Listing ls;
  ls.dirs[""] = {"a", "b", "c"};
  DirScan scan(DirScan::Options{}, ls.lister());
  scan.OnOpen("a");
  EXPECT_EQ(scan.OnOpen("b"), std::vector<std::string>{"c"});
}

TEST(DirScanTest, ShuffledReaderAcrossDirectoriesNeverLists) {
  Listing ls;
  for (int d = 0; d < 8; ++d) {
    for (int f = 0; f < 8; ++f) ls.dirs["d" + std::to_string(d)].push_back(std::to_string(f));
  }
  DirScan scan(DirScan::Options{}, ls.lister());
  for (int i = 0; i < 64; ++i) {
    int d = i % 8, f = (i * 5) % 8;  // never two opens in a row in one directory
    EXPECT_TRUE(scan.OnOpen("d" + std::to_string(d) + "/" + std::to_string(f)).empty());
  }
  EXPECT_EQ(ls.calls, 0);
}

TEST(DirScanTest, ABrokenScanStopsAndANewOneStartsOver) {
  Listing ls;
  for (int f = 0; f < 20; ++f) ls.dirs["d"].push_back(std::to_string(100 + f));
  DirScan::Options o;
  o.ahead = 2;
  DirScan scan(o, ls.lister());
  scan.OnOpen("d/100");
  EXPECT_EQ(scan.OnOpen("d/101"), Names("d", {"102", "103"}));
  EXPECT_TRUE(scan.OnOpen("d/110").empty());  // a jump: no scan
  EXPECT_EQ(scan.OnOpen("d/111"), Names("d", {"112", "113"}));
  EXPECT_TRUE(scan.OnOpen("d/111").empty());  // the same file again keeps the scan
  EXPECT_EQ(scan.OnOpen("d/112"), Names("d", {"114"}));
}

TEST(DirScanTest, FollowsABoundedNumberOfDirectories) {
  Listing ls;
  DirScan::Options o;
  o.max_dirs = 3;
  for (int d = 0; d < 10; ++d) ls.dirs["d" + std::to_string(d)] = {"a", "b", "c"};
  DirScan scan(o, ls.lister());
  for (int d = 0; d < 10; ++d) {
    scan.OnOpen("d" + std::to_string(d) + "/a");
    EXPECT_EQ(scan.OnOpen("d" + std::to_string(d) + "/b"),
              std::vector<std::string>{"d" + std::to_string(d) + "/c"});
    EXPECT_LE(scan.followed(), 3u);
  }
}

TEST(DirScanTest, HugeDirectoriesAndListingErrorsAreNotFollowed) {
  Listing ls;
  DirScan::Options o;
  o.max_entries = 4;
  ls.dirs["big"] = {"0", "1", "2", "3", "4"};
  DirScan scan(o, ls.lister());
  scan.OnOpen("big/0");
  EXPECT_TRUE(scan.OnOpen("big/1").empty());
  EXPECT_TRUE(scan.OnOpen("big/2").empty());
  scan.OnOpen("gone/0");
  EXPECT_TRUE(scan.OnOpen("gone/1").empty());
  EXPECT_TRUE(scan.OnOpen("gone/2").empty());
  EXPECT_EQ(ls.calls, 2);  // each listed once, then left alone
}

TEST(DirScanTest, ANameMissingFromTheListingRelistsTheDirectory) {
  Listing ls;
  ls.dirs["d"] = {"a", "b"};
  DirScan scan(DirScan::Options{}, ls.lister());
  scan.OnOpen("d/a");
  scan.OnOpen("d/b");
  ls.dirs["d"] = {"a", "b", "c", "d"};
  EXPECT_TRUE(scan.OnOpen("d/c").empty());  // not in the old listing
  EXPECT_TRUE(scan.OnOpen("d/c").empty());  // relisted; the scan starts again
  EXPECT_EQ(ls.calls, 2);
  EXPECT_EQ(scan.OnOpen("d/d"), std::vector<std::string>{});
  scan.OnOpen("d/a");
  EXPECT_EQ(scan.OnOpen("d/b"), Names("d", {"c", "d"}));
}

TEST(DirScanTest, ZeroAheadIsOff) {
  Listing ls;
  ls.dirs["d"] = {"a", "b", "c"};
  DirScan::Options o;
  o.ahead = 0;
  DirScan scan(o, ls.lister());
  scan.OnOpen("d/a");
  EXPECT_TRUE(scan.OnOpen("d/b").empty());
  EXPECT_EQ(ls.calls, 0);
}

}  // namespace
}  // namespace stoker
