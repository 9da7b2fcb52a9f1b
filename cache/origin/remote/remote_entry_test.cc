#include "cache/origin/remote/remote_entry.h"

#include <gtest/gtest.h>

#include "cache/origin/origin.h"

namespace stoker {
namespace {

TEST(RemoteEntryTest, IdentityCarriesEtagSizeAndMtime) {
  RemoteEntry e{"f", false, 100, 1796299200, "\"abc\""};
  OriginIdentity id = IdentityFromStat(RemoteStat("d/f", e, 0));
  EXPECT_EQ(id, IdentityFromStat(RemoteStat("d/f", e, 0)));
  RemoteEntry etag = e;
  etag.etag = "\"abd\"";
  EXPECT_NE(id, IdentityFromStat(RemoteStat("d/f", etag, 0)));
  RemoteEntry size = e;
  size.size = 101;
  EXPECT_NE(id, IdentityFromStat(RemoteStat("d/f", size, 0)));
  RemoteEntry mtime = e;
  mtime.mtime++;
  EXPECT_NE(id, IdentityFromStat(RemoteStat("d/f", mtime, 0)));
}

TEST(RemoteEntryTest, Attributes) {
  RemoteEntry f{"f", false, 1000, 1796299200, "\"x\""};
  struct stat st = RemoteStat("d/f", f, 5);
  EXPECT_EQ(st.st_mode, S_IFREG | 0444);
  EXPECT_EQ(st.st_size, 1000);
  EXPECT_EQ(st.st_mtim.tv_sec, 1796299200);
  EXPECT_EQ(st.st_mtim.tv_nsec, 0);
  EXPECT_EQ(st.st_ctim.tv_sec, 1796299200);
  EXPECT_NE(st.st_ino, 0u);
  EXPECT_EQ(st.st_ino & (ino_t{1} << 62), 0u);
  EXPECT_NE(RemoteStat("d/g", f, 5).st_ino, st.st_ino);
  RemoteEntry d;
  d.name = "d";
  d.is_dir = true;
  struct stat ds = RemoteStat("d", d, 5);
  EXPECT_EQ(ds.st_mode, S_IFDIR | 0555);
  EXPECT_EQ(ds.st_mtim.tv_sec, 5);
}

TEST(RemoteEntryTest, Paths) {
  EXPECT_TRUE(IsPlainRelativePath(""));
  EXPECT_TRUE(IsPlainRelativePath("a/b c/d"));
  for (const char* bad : {"/a", "a/", "a//b", "./a", "a/..", "."}) {
    EXPECT_FALSE(IsPlainRelativePath(bad)) << bad;
  }
}

TEST(ListingCacheTest, KeepsForTtlAndBounds) {
  auto l = std::make_shared<const std::vector<RemoteEntry>>();
  ListingCache off(0, 10);
  off.Put("d", l);
  EXPECT_EQ(off.Get("d"), nullptr);
  EXPECT_EQ(off.Get("d", /*stale=*/true), l);  // for when the server is down
  EXPECT_FALSE(off.KnownDir("x/y"));
  off.NoteDir("x/y");
  EXPECT_TRUE(off.KnownDir("x/y"));
  ListingCache on(3600, 2);
  on.Put("a", l);
  on.Put("b", l);
  EXPECT_EQ(on.Get("a"), l);
  on.Put("c", l);  // "a" was stored first: it goes
  EXPECT_EQ(on.Get("a"), nullptr);
  EXPECT_EQ(on.Get("b"), l);
  EXPECT_EQ(on.Get("c"), l);
}

}  // namespace
}  // namespace stoker
