// FileOpener over a real index, version table and evictor, and a real local
// origin behind test controls: an open revalidates a changed file and gets
// a new version (the old one superseded); a change a background open found
// is reported to the next reader's open; within --revalidate an open asks
// the origin nothing, in this process or the next; an unreachable origin
// gets the version held, and a deleted file is forgotten.
#include "cache/file_opener.h"

#include <gtest/gtest.h>

#include "cache/chunk_parts_test_util.h"
#include "cache/object_cache_test_origin.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::ControlledOrigin;
using testing::Pattern;
using testing::ScratchDir;
using testing::WriteFile;

constexpr uint64_t kChunk = ChunkParts::kChunk;

class FileOpenerTest : public ::testing::Test {
 protected:
  FileOpenerTest() { parts_.StartEvictor(); }

  // A FileOpener as a process would have it, over its own VersionTable.
  std::unique_ptr<FileOpener> MakeOpener(uint64_t revalidate_seconds) {
    CacheOptions o;
    o.chunk_size = kChunk;
    o.revalidate_seconds = revalidate_seconds;
    versions_.push_back(std::make_unique<VersionTable>(kChunk, 1000));
    return std::make_unique<FileOpener>(
        o, FileOpener::Parts{kChunk, origin_, origin_.get(), parts_.index.get(),
                             versions_.back().get(), parts_.writer.get(), parts_.evictor.get(),
                             &parts_.counters, [] { return testing::NewReadahead(); }});
  }
  void Write(uint64_t size) {
    WriteFile(dir_.Sub("f"), Pattern(size, static_cast<uint32_t>(size)));
  }
  static uint64_t VersionOf(const Result<FileOpener::Opened>& o) {
    return o->file->version->key.version;
  }

  ScratchDir dir_{"file-opener"};
  std::shared_ptr<ControlledOrigin> origin_ =
      std::make_shared<ControlledOrigin>(testing::LocalOriginAt(dir_.path()));
  ChunkParts parts_;
  std::vector<std::unique_ptr<VersionTable>> versions_;
};

TEST_F(FileOpenerTest, AnOpenRevalidatesAChangedFileAndGetsANewVersion) {
  auto opener = MakeOpener(/*revalidate_seconds=*/0);
  Write(100);
  auto first = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(VersionOf(first), 1u);
  EXPECT_FALSE(first->changed);
  EXPECT_FALSE(first->keep_cache) << "fs/ was never given this version";
  auto same = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->file->version, first->file->version);
  EXPECT_TRUE(same->keep_cache);
  EXPECT_EQ(same->content_tag, first->content_tag);
  EXPECT_EQ(origin_->stat_calls(), 2) << "revalidated at each open";

  Write(200);
  auto changed = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(VersionOf(changed), 2u);
  EXPECT_EQ(changed->file->version->key.object_id, first->file->version->key.object_id);
  EXPECT_TRUE(changed->changed);
  EXPECT_FALSE(changed->keep_cache);
  EXPECT_NE(changed->content_tag, first->content_tag);
  EXPECT_EQ(changed->st.st_size, 200);
  EXPECT_TRUE(first->file->version->superseded);
  EXPECT_EQ(parts_.counters.origin_changes.load(), 1u);
  auto rec = parts_.index->GetObject("f");
  ASSERT_TRUE(rec.ok() && rec->has_value());
  EXPECT_EQ((*rec)->version, 2u);
}

TEST_F(FileOpenerTest, AChangeABackgroundOpenFoundIsReportedToTheNextReadersOpen) {
  auto opener = MakeOpener(/*revalidate_seconds=*/0);
  Write(100);
  ASSERT_TRUE(opener->Open("f", false, Opener::kFs).ok());
  Write(300);
  auto warm = opener->Open("f", false, Opener::kWarm);
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ(VersionOf(warm), 2u);
  EXPECT_FALSE(warm->changed) << "a background open reports nothing";
  auto reader = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(VersionOf(reader), 2u);
  EXPECT_TRUE(reader->changed);
  auto again = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed) << "reported once";
}

TEST_F(FileOpenerTest, WithinTheRevalidateWindowAnOpenDoesNotAskTheOrigin) {
  auto opener = MakeOpener(/*revalidate_seconds=*/3600);
  Write(100);
  ASSERT_TRUE(opener->Open("f", false, Opener::kFs).ok());
  EXPECT_EQ(origin_->stat_calls(), 1);
  Write(200);
  auto trusted = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(trusted.ok());
  EXPECT_EQ(origin_->stat_calls(), 1);
  EXPECT_EQ(VersionOf(trusted), 1u) << "the change is not seen within the window";
  auto forced = opener->Open("f", /*force_revalidate=*/true, Opener::kFs);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(origin_->stat_calls(), 2);
  EXPECT_EQ(VersionOf(forced), 2u);

  // The next process trusts the index's record as long.
  auto next = MakeOpener(/*revalidate_seconds=*/3600);
  auto attr = next->HeldAttr("f", /*origin_failed=*/false);
  ASSERT_TRUE(attr.has_value());
  EXPECT_EQ(attr->st_size, 200);
  EXPECT_EQ(parts_.counters.attrs_from_cache.load(), 1u);
  auto reopened = next->Open("f", false, Opener::kFs);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(VersionOf(reopened), 2u);
  EXPECT_EQ(origin_->stat_calls(), 2);
  EXPECT_FALSE(next->HeldAttr("g", false).has_value()) << "nothing held for g";
}

TEST_F(FileOpenerTest, AnUnreachableOriginGetsTheVersionHeldAndADeletedFileIsForgotten) {
  auto opener = MakeOpener(/*revalidate_seconds=*/0);
  Write(100);
  auto held = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(held.ok());
  origin_->SetFailure(ETIMEDOUT);
  auto down = opener->Open("f", false, Opener::kFs);
  ASSERT_TRUE(down.ok()) << down.status().message();
  EXPECT_EQ(down->file->version, held->file->version);
  EXPECT_EQ(parts_.counters.origin_errors.load(), 1u);
  EXPECT_EQ(opener->Open("g", false, Opener::kFs).status().code(), ETIMEDOUT);

  origin_->SetFailure(0);
  ASSERT_EQ(::unlink(dir_.Sub("f").c_str()), 0);
  EXPECT_EQ(opener->Open("f", false, Opener::kFs).status().code(), ENOENT);
  EXPECT_TRUE(held->file->version->superseded);
  EXPECT_FALSE(versions_.back()->Find("f").has_value());
  auto rec = parts_.index->GetObject("f");
  ASSERT_TRUE(rec.ok());
  EXPECT_FALSE(rec->has_value());
  EXPECT_EQ(parts_.counters.errors.load(), 2u) << "g's open, and f's after its deletion";
}

}  // namespace
}  // namespace stoker
