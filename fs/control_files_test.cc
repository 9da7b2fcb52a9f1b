#include "fs/control_files.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(ControlFilesTest, ReachableByNameOnly) {
  ControlFiles c([] { return nlohmann::json{{"bytes_read", 5}}; });
  EXPECT_EQ(c.Lookup(1, ".stoker"), ControlFiles::kDirId);
  EXPECT_EQ(c.Lookup(ControlFiles::kDirId, "stats.json"), ControlFiles::kStatsId);
  EXPECT_FALSE(c.Lookup(1, "stats.json").has_value());
  EXPECT_FALSE(c.Lookup(ControlFiles::kDirId, "other").has_value());
  EXPECT_FALSE(c.Lookup(ControlFiles::kFirstDynamicId, ".stoker").has_value())
      << "only the root holds .stoker";
}

TEST(ControlFilesTest, AttributesAreReadOnly) {
  ControlFiles c(nullptr);
  struct stat d = c.Attr(ControlFiles::kDirId);
  struct stat f = c.Attr(ControlFiles::kStatsId);
  EXPECT_TRUE(S_ISDIR(d.st_mode));
  EXPECT_EQ(d.st_mode & 0777, 0555u);
  EXPECT_TRUE(S_ISREG(f.st_mode));
  EXPECT_EQ(f.st_mode & 0777, 0444u);
  EXPECT_NE(d.st_ino, f.st_ino);
  ASSERT_EQ(c.List(ControlFiles::kDirId).size(), 2u);
  EXPECT_EQ(c.List(ControlFiles::kDirId)[0].name, "stats.json");
  EXPECT_EQ(c.List(ControlFiles::kDirId)[1].name, "errors");
}

TEST(ControlFilesTest, SnapshotIsTheStatsJson) {
  int calls = 0;
  ControlFiles c([&] { return nlohmann::json{{"bytes_read", ++calls}, {"path", "a\xff"}}; });
  nlohmann::json first = nlohmann::json::parse(c.Snapshot(ControlFiles::kStatsId));
  nlohmann::json second = nlohmann::json::parse(c.Snapshot(ControlFiles::kStatsId));
  EXPECT_EQ(first["bytes_read"], 1);
  EXPECT_EQ(second["bytes_read"], 2) << "each open takes a fresh snapshot";
  EXPECT_TRUE(first["path"].is_string()) << "invalid UTF-8 is replaced, not thrown";
}

TEST(ControlFilesTest, VirtualIdRange) {
  EXPECT_FALSE(ControlFiles::IsVirtual(1));
  EXPECT_TRUE(ControlFiles::IsVirtual(ControlFiles::kDirId));
  EXPECT_TRUE(ControlFiles::IsVirtual(ControlFiles::kStatsId));
  EXPECT_FALSE(ControlFiles::IsVirtual(ControlFiles::kFirstDynamicId));
}

TEST(ControlFilesTest, HeldSnapshotsChangeOnlyWithTheContent) {
  int value = 1;
  ControlFiles c([&] { return nlohmann::json{{"bytes_read", value}}; });
  ControlFiles::Held a = c.Refresh(ControlFiles::kStatsId);
  ControlFiles::Held b = c.Refresh(ControlFiles::kStatsId);
  EXPECT_EQ(a.bytes, b.bytes) << "same content: same snapshot, same mtime";
  EXPECT_EQ(c.Latest(ControlFiles::kStatsId).bytes, a.bytes);
  value = 22222;
  ControlFiles::Held d = c.Refresh(ControlFiles::kStatsId);
  EXPECT_NE(d.bytes, a.bytes);
  EXPECT_TRUE(d.mtime.tv_sec > a.mtime.tv_sec ||
              (d.mtime.tv_sec == a.mtime.tv_sec && d.mtime.tv_nsec > a.mtime.tv_nsec))
      << "new content shows as a later mtime";
  EXPECT_EQ(nlohmann::json::parse(*d.bytes)["bytes_read"], 22222);
  struct stat st = c.AttrOf(ControlFiles::kStatsId, d);
  EXPECT_EQ(static_cast<size_t>(st.st_size), d.bytes->size());
}

TEST(ControlFilesTest, HeldStatsKeepTheirSizeAndEndInANewline) {
  std::string pad = "x";
  ControlFiles c([&] { return nlohmann::json{{"p", pad}}; });
  ControlFiles::Held a = c.Refresh(ControlFiles::kStatsId);
  ASSERT_EQ(a.bytes->size() % 4096, 0u);
  EXPECT_EQ(a.bytes->back(), '\n');
  EXPECT_EQ(nlohmann::json::parse(*a.bytes)["p"], "x") << "the padding is JSON whitespace";
  pad = std::string(6000, 'y');  // outgrows it
  ControlFiles::Held b = c.Refresh(ControlFiles::kStatsId);
  EXPECT_GT(b.bytes->size(), a.bytes->size());
  EXPECT_EQ(b.bytes->size() % 4096, 0u);
  pad = "z";  // shrinks back: the size stays
  ControlFiles::Held d = c.Refresh(ControlFiles::kStatsId);
  EXPECT_EQ(d.bytes->size(), b.bytes->size());
  EXPECT_EQ(nlohmann::json::parse(*d.bytes)["p"], "z");
}

}  // namespace
}  // namespace stoker
