// ViewOrigin and ViewNamespace over a real ObjectCache and local origin:
// what a view lists, what the cache serves of a view file is what the
// producer makes of the raw file, sizes are known from the first stat,
// layouts persist in the index, and a changed raw file changes the view.
#include "decode/view/view_origin.h"

#include <gtest/gtest.h>

#include "decode/view/view_origin_test_util.h"

namespace stoker {
namespace view_test {
namespace {

TEST_F(ViewOriginTest, ListsOnlyWhatTheViewUnderstands) {
  Mount({"decoded"});
  std::set<std::string> names;
  std::vector<OriginDirEntry> entries;
  ASSERT_TRUE(views_.origin
                  ->ReadDir(".decoded/train",
                            [&](const OriginDirEntry& e) {
                              entries.push_back(e);
                              return true;
                            })
                  .ok());
  for (const auto& e : entries) {
    names.insert(e.name);
    EXPECT_FALSE(e.attrs_complete) << e.name;  // nothing laid out yet
  }
  EXPECT_EQ(names, (std::set<std::string>{"a.jpg.npy", "shard-0"}));
  // The root hides nothing of the origin and lists no view.
  std::set<std::string> root;
  ASSERT_TRUE(views_.origin
                  ->ReadDir("",
                            [&](const OriginDirEntry& e) {
                              root.insert(e.name);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(root, (std::set<std::string>{"train"}));
  EXPECT_EQ(views_.origin->Stat(".decoded/train/notes.txt").status().code(), ENOENT);
  EXPECT_EQ(views_.origin->Stat(".decoded/train/a.jpg").status().code(), ENOENT);
  auto dir = views_.origin->Stat(".decoded/train");
  ASSERT_TRUE(dir.ok());
  EXPECT_TRUE(S_ISDIR(dir->st_mode));
  EXPECT_TRUE(views_.derived->IsDerived(".decoded/train/shard-0"));
  EXPECT_FALSE(views_.derived->IsDerived("train/shard-0"));
}

TEST_F(ViewOriginTest, BigDirectoriesAreRecognisedInParallel) {
  const std::string small = Jpeg(8, 8, 3);
  std::set<std::string> want;
  for (int i = 0; i < 300; ++i) {
    const std::string name = "f" + std::to_string(i);
    WriteFile(dir_.Sub("origin/big/" + name), i % 3 == 0 ? small : "text " + name);
    if (i % 3 == 0) want.insert(name + ".npy");
  }
  Mount({"decoded"});
  for (int round = 0; round < 2; ++round) {  // the second from memory
    std::set<std::string> got;
    ASSERT_TRUE(views_.origin
                    ->ReadDir(".decoded/big",
                              [&](const OriginDirEntry& e) {
                                got.insert(e.name);
                                return true;
                              })
                    .ok());
    EXPECT_EQ(got, want);
  }
}

// on_error=skip: a JPEG whose header is fine but whose scan is cut short is
// not listed at all (a listed name must stat: glob then np.load), and what
// is listed comes laid out, with its size. A fail view still lists it by its
// head, without a size, scanning nothing.
TEST_F(ViewOriginTest, ASkipListingLeavesOutAJpegThatDoesNotDecode) {
  WriteFile(dir_.Sub("origin/train/cut.jpg"), Jpeg(120, 80, 8).substr(0, 900));
  Mount({"skip:on_error=skip", "fail:on_error=fail"});
  std::map<std::string, OriginDirEntry> skip;
  for (const auto& e : List(*views_.origin, ".skip/train")) skip[e.name] = e;
  EXPECT_EQ(counters().layouts_computed.load(), 1u);  // a.jpg; the TFRecord by its head
  EXPECT_EQ(skip.count("cut.jpg.npy"), 0u);
  ASSERT_EQ(skip.count("a.jpg.npy"), 1u);
  ASSERT_EQ(skip.count("shard-0"), 1u);
  EXPECT_TRUE(skip["a.jpg.npy"].attrs_complete);
  EXPECT_EQ(static_cast<uint64_t>(skip["a.jpg.npy"].st.st_size),
            Expected(jpeg_, true, ViewOptions{}).size());
  for (const auto& [name, e] : skip) {
    auto st = views_.origin->Stat(".skip/train/" + name);
    ASSERT_TRUE(st.ok()) << name << ": " << st.status().message();
    if (e.attrs_complete) {
      EXPECT_EQ(st->st_size, e.st.st_size) << name;
    }
  }
  EXPECT_EQ(views_.origin->Stat(".skip/train/cut.jpg.npy").status().code(), ENOENT);
  EXPECT_NE(views_.stats->errors.Text().find(".skip/train/cut.jpg.npy: offset 0: "),
            std::string::npos)
      << views_.stats->errors.Text();

  const uint64_t computed = counters().layouts_computed.load();
  std::map<std::string, OriginDirEntry> fail;
  for (const auto& e : List(*views_.origin, ".fail/train")) fail[e.name] = e;
  ASSERT_EQ(fail.count("cut.jpg.npy"), 1u);
  for (const auto& [name, e] : fail) EXPECT_FALSE(e.attrs_complete) << name;
  EXPECT_EQ(counters().layouts_computed.load(), computed) << "a fail listing scans nothing";
  // Its header is fine: a fail view lays it out (and reads it as EIO).
  EXPECT_TRUE(views_.origin->Stat(".fail/train/cut.jpg.npy").ok());

  // Listed again (from memory), the same.
  std::set<std::string> again;
  for (const auto& e : List(*views_.origin, ".skip/train")) again.insert(e.name);
  EXPECT_EQ(again, (std::set<std::string>{"a.jpg.npy", "shard-0"}));
}

using testing::Eventually;

// A reader whose chunk a warm is producing (the cache collapses its miss
// into the warm's fetch) raises the warm's decode jobs to its own priority:
// they run before readahead work that was queued before the reader came,
// not behind it.

TEST_F(ViewOriginTest, ServesWhatTheProducerMakesWithExactSizes) {
  Mount({"decoded", "acc:dct=accurate,channels=3"});
  for (const char* view : {"decoded", "acc"}) {
    ViewOptions o =
        ParseViewSpec(view == std::string("acc") ? "acc:dct=accurate,channels=3" : "decoded")
            ->options;
    for (bool npy : {false, true}) {
      const std::string path =
          std::string(".") + view + (npy ? "/train/a.jpg.npy" : "/train/shard-0");
      const std::string want = Expected(npy ? jpeg_ : shard_, npy, o);
      auto st = views_.origin->Stat(path);
      ASSERT_TRUE(st.ok()) << st.status().message();
      EXPECT_EQ(static_cast<uint64_t>(st->st_size), want.size()) << path;
      EXPECT_EQ(st->st_mode & 0222, 0u);
      auto got = ReadAll(path);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(*got, want) << path;
    }
  }
  // Listed with sizes once laid out.
  std::vector<OriginDirEntry> entries;
  ASSERT_TRUE(views_.origin
                  ->ReadDir(".decoded/train",
                            [&](const OriginDirEntry& e) {
                              entries.push_back(e);
                              return true;
                            })
                  .ok());
  for (const auto& e : entries) EXPECT_TRUE(e.attrs_complete) << e.name;
  EXPECT_EQ(counters().records_decoded.load() >= 6, true);
  EXPECT_EQ(counters().errors.load(), 0u);
  // Views of one raw file under other options are other devices (inodes),
  // and no view file has its raw file's inode number.
  EXPECT_NE(views_.views[0]->device(), views_.views[1]->device());
  auto raw = views_.origin->Stat("train/shard-0");
  auto v0 = views_.origin->Stat(".decoded/train/shard-0");
  auto v1 = views_.origin->Stat(".acc/train/shard-0");
  ASSERT_TRUE(raw.ok() && v0.ok() && v1.ok());
  EXPECT_NE(v0->st_ino, raw->st_ino);
  EXPECT_NE(v0->st_ino, v1->st_ino);
  EXPECT_EQ(v0->st_ino, views_.origin->Stat(".decoded/train/shard-0")->st_ino);  // stable
  EXPECT_NE(views_.origin->Stat(".decoded/train")->st_ino, views_.origin->Stat("train")->st_ino);
}

TEST_F(ViewOriginTest, LayoutsAndDecodedBytesSurviveReopen) {
  Mount({"decoded"});
  auto first = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(counters().layouts_computed.load(), 1u);
  Mount({"decoded"});
  auto again = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(counters().layouts_computed.load(), 0u);
  EXPECT_EQ(counters().layouts_loaded.load(), 1u);
  EXPECT_EQ(counters().records_decoded.load(), 0u);  // served from the SSD tier
}

// A record cut by the end of what one open read (a directory prefetch
// reads only a file's first chunks) is handed to the next open of the file,
// not decoded again: each record of an epoch is decoded once.
TEST_F(ViewOriginTest, ARecordCutByAnEarlierOpenIsNotDecodedAgain) {
  prefetch_bytes_ = 0;
  Mount({"decoded"});
  const std::string path = ".decoded/train/shard-0";
  const std::string want = Expected(shard_, false, ParseViewSpec("decoded")->options);
  ASSERT_GT(want.size(), 2u * 16 << 10);
  std::string got;
  {
    auto o = cache_->Open(path, false);
    ASSERT_TRUE(o.ok()) << o.status().message();
    ReadReply r;
    ASSERT_TRUE(cache_->Read(*o->file, 0, 16 << 10, &r).ok());  // one chunk: record 0 is cut
    got = Materialize(r);
  }
  EXPECT_EQ(counters().records_decoded.load(), 1u);
  auto rest = ReadAll(path);
  ASSERT_TRUE(rest.ok()) << rest.status().message();
  EXPECT_EQ(*rest, want);
  EXPECT_EQ(got, want.substr(0, got.size()));
  EXPECT_EQ(counters().records_decoded.load(), 3u) << "each record decoded once";
}

TEST_F(ViewOriginTest, ChangedRawFileChangesTheView) {
  Mount({"decoded"});
  auto before = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(before.ok());
  const std::string changed = Shard({Record(Jpeg(40, 30, 9), 7)});
  WriteFile(dir_.Sub("origin/train/shard-0"), changed);
  auto after = ReadAll(".decoded/train/shard-0");
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(*after, Expected(changed, false, ViewOptions{}));
  // The old decoded chunks (and the old raw ones) are dropped, not kept
  // beside the new: once the drops ran, the cache holds the new raw file's
  // chunks and the new view's, nothing else.
  const uint64_t chunk = 16 << 10;  // the fixture's chunk size
  const uint64_t want = (changed.size() + chunk - 1) / chunk + (after->size() + chunk - 1) / chunk;
  EXPECT_TRUE(Eventually([&] {
    nlohmann::json j = cache_->Stats();
    return j["pending_drops"] == 0 && j["chunks"] == want;
  })) << cache_->Stats().dump();
}

}  // namespace
}  // namespace view_test
}  // namespace stoker
