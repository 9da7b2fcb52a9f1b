// VersionTable: a record becomes the version a stat describes; entries are
// kept per path up to the bound, and only those no open file uses go.
#include "cache/version_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace stoker {
namespace {

ObjectRecord Record(uint64_t id, uint64_t size) {
  ObjectRecord r;
  r.object_id = id;
  r.version = 2;
  r.identity.size = size;
  r.identity.mtime_ns = -1500000000;  // before the epoch: a negative second
  r.identity.ctime_ns = 7000000001;
  r.identity.ino = 42;
  r.identity.dev = 9;
  r.attrs.mode = S_IFREG | 0640;
  r.attrs.uid = 1000;
  r.attrs.gid = 100;
  r.attrs.nlink = 2;
  r.attrs.blocks = -1;  // not known: from the size
  return r;
}

TEST(VersionTableTest, AVersionCarriesWhatItsRecordSays) {
  VersionTable t(1 << 20, 16);
  auto v = t.MakeVersion("a/b", Record(5, (3 << 20) + 1));
  EXPECT_EQ(v->path, "a/b");
  EXPECT_EQ(v->key, (VersionKey{5, 2}));
  EXPECT_EQ(v->chunks, 4u);
  EXPECT_EQ(v->st.st_size, (3 << 20) + 1);
  EXPECT_EQ(v->st.st_mode, S_IFREG | 0640);
  EXPECT_EQ(v->st.st_uid, 1000u);
  EXPECT_EQ(v->st.st_nlink, 2u);
  EXPECT_EQ(v->st.st_ino, 42u);
  EXPECT_EQ(v->st.st_blocks, ((3 << 20) + 1 + 511) / 512);
  EXPECT_EQ(v->st.st_mtim.tv_sec, -2);
  EXPECT_EQ(v->st.st_mtim.tv_nsec, 500000000);
  EXPECT_EQ(v->st.st_ctim.tv_sec, 7);
  EXPECT_EQ(v->st.st_ctim.tv_nsec, 1);
  EXPECT_TRUE(v->AtOrigin(v->identity));
  EXPECT_FALSE(v->uncached);
}

TEST(VersionTableTest, EntriesAreKeptPerPathAndForgotten) {
  VersionTable t(1 << 20, 16);
  EXPECT_FALSE(t.Find("x").has_value());
  const ObjectRecord r = Record(1, 10);
  t.Put("x", {r, t.MakeVersion("x", r), true});
  auto e = t.Find("x");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rec, r);
  EXPECT_TRUE(e->seen);
  const ObjectRecord r2 = Record(2, 20);
  t.Put("x", {r2, t.MakeVersion("x", r2), false});
  EXPECT_EQ(t.Find("x")->rec.object_id, 2u);
  EXPECT_EQ(t.size(), 1u);
  t.Forget("x");
  EXPECT_FALSE(t.Find("x").has_value());
}

TEST(VersionTableTest, PastItsBoundOnlyEntriesNoOpenFileUsesGo) {
  VersionTable t(1 << 20, 8);
  std::vector<std::shared_ptr<ObjectVersion>> open;  // as open files hold them
  for (uint64_t i = 0; i < 8; ++i) {
    const ObjectRecord r = Record(i + 1, 10);
    auto v = t.MakeVersion("f" + std::to_string(i), r);
    if (i < 4) open.push_back(v);
    t.Put("f" + std::to_string(i), {r, v, false});
  }
  EXPECT_EQ(t.size(), 8u);
  const ObjectRecord r = Record(100, 10);
  t.Put("new", {r, t.MakeVersion("new", r), false});
  EXPECT_LE(t.size(), 6u) << "trimmed to 3/4 of the bound";
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(t.Find("f" + std::to_string(i)).has_value()) << "f" << i << " is open";
  }
}

TEST(VersionTableTest, AnUncachedVersionHasAnIdTheIndexNeverGives) {
  VersionTable t(1 << 20, 8);
  auto a = t.Uncached("p", Record(3, 10));
  auto b = t.Uncached("p", Record(3, 10));
  EXPECT_TRUE(a.version->uncached);
  EXPECT_NE(a.rec.object_id & kUncachedObjectIds, 0u);
  EXPECT_NE(a.version->key, b.version->key);
  EXPECT_EQ(a.version->key, (VersionKey{a.rec.object_id, 1}));
}

}  // namespace
}  // namespace stoker
