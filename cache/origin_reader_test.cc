// OriginReader over a real local origin: a run is read in one read and cut
// into chunks; a file changed, replaced or gone under an open version reads
// as ESTALE (never as the other version's bytes, nor short); a copy of the same file
// that still holds the cached bytes is the same version.
#include "cache/origin_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cstdio>

#include "cache/chunk_parts_test_util.h"
#include "cache/origin/local/local_origin.h"

namespace stoker {
namespace {

using testing::ChunkParts;
using testing::Pattern;
using testing::ScratchDir;
using testing::WriteFile;

constexpr uint64_t kChunk = ChunkParts::kChunk;

class OriginReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto io = MakeIoBackend(IoBackendKind::kSyscall);
    ASSERT_TRUE(io.ok());
    auto origin = LocalOrigin::Create(dir_.path(), std::shared_ptr<IoBackend>(std::move(*io)));
    ASSERT_TRUE(origin.ok()) << origin.status().message();
    origin_ = std::move(*origin);
  }
  // A version of path as the origin has it now.
  std::shared_ptr<ObjectVersion> VersionOf(const std::string& path, uint64_t id) {
    return testing::VersionAt(parts_, *origin_, path, id);
  }
  // Sets path's mtime (and so its identity's) to sec.
  void SetMtime(const std::string& path, time_t sec) {
    struct timeval tv[2] = {{sec, 0}, {sec, 0}};
    ASSERT_EQ(::utimes(dir_.Sub(path).c_str(), tv), 0);
  }

  ScratchDir dir_{"origin-reader"};
  std::shared_ptr<Origin> origin_;
  ChunkParts parts_;
  NothingDerived nothing_derived_;
  OriginReader reader_{
      OriginReader::Parts{kChunk, parts_.index.get(), &nothing_derived_, &parts_.counters}};
};

TEST_F(OriginReaderTest, ARunIsOneReadCutIntoChunks) {
  const std::string data = Pattern(3 * kChunk + 5, 1);
  WriteFile(dir_.Sub("f"), data);
  auto v = VersionOf("f", 1);
  OriginHandle handle(origin_, "f");
  auto run = reader_.ReadRun(*v, handle, 1, 3, Urgency::kReader);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->size(), 3u);
  EXPECT_EQ(std::string((*run)[0].data.get(), (*run)[0].len), data.substr(kChunk, kChunk));
  EXPECT_EQ(std::string((*run)[2].data.get(), (*run)[2].len), data.substr(3 * kChunk));
  EXPECT_FALSE((*run)[0].from_cache);
  EXPECT_EQ(parts_.counters.origin_reads.load(), 1u);
  EXPECT_EQ(parts_.counters.origin_bytes_read.load(), 2 * kChunk + 5);
  EXPECT_EQ(parts_.counters.chunks_fetched.load(), 3u);
}

TEST_F(OriginReaderTest, AFileChangedUnderTheVersionIsStale) {
  WriteFile(dir_.Sub("f"), Pattern(2 * kChunk, 2));
  SetMtime("f", 1000000);
  auto v = VersionOf("f", 1);
  WriteFile(dir_.Sub("f"), Pattern(2 * kChunk, 3));
  SetMtime("f", 2000000);
  OriginHandle handle(origin_, "f");
  auto run = reader_.ReadRun(*v, handle, 0, 2, Urgency::kReader);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), ESTALE);
  EXPECT_TRUE(v->changed_at_origin.load());
}

TEST_F(OriginReaderTest, AFileGoneOrShorterThanTheVersionIsStale) {
  WriteFile(dir_.Sub("gone"), Pattern(kChunk, 4));
  auto gone = VersionOf("gone", 1);
  ASSERT_EQ(std::remove(dir_.Sub("gone").c_str()), 0);
  OriginHandle gone_handle(origin_, "gone");
  auto r = reader_.ReadRun(*gone, gone_handle, 0, 1, Urgency::kReader);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ESTALE);
  EXPECT_TRUE(gone->changed_at_origin.load());

  WriteFile(dir_.Sub("short"), Pattern(2 * kChunk, 5));
  auto v = VersionOf("short", 2);
  v->identity.size = 3 * kChunk;  // the version is longer than the file
  v->chunks = 3;
  {
    MutexLock l(v->at_mu);
    v->at_origin.size = 3 * kChunk;
  }
  OriginHandle handle(origin_, "short");
  auto s = reader_.ReadRun(*v, handle, 1, 2, Urgency::kReader);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ESTALE) << "its bytes are not the version's";
}

TEST_F(OriginReaderTest, ACopyThatHoldsTheCachedBytesIsTheSameVersion) {
  const std::string data = Pattern(2 * kChunk, 6);
  WriteFile(dir_.Sub("f"), data);
  SetMtime("f", 1000000);
  auto v = VersionOf("f", 1);
  ASSERT_TRUE(parts_.writer->Store(*v, 0, ChunkParts::Bytes(data.substr(0, kChunk))));
  // Restored from a backup: another inode, same size and times, same bytes.
  ASSERT_EQ(std::rename(dir_.Sub("f").c_str(), dir_.Sub("old").c_str()), 0);
  WriteFile(dir_.Sub("f"), data);
  SetMtime("f", 1000000);
  OriginHandle handle(origin_, "f");
  auto run = reader_.ReadRun(*v, handle, 1, 1, Urgency::kReader);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(std::string((*run)[0].data.get(), (*run)[0].len), data.substr(kChunk));
  EXPECT_FALSE(v->changed_at_origin.load());

  // A rename-over within the same tick with other bytes: stale.
  auto w = VersionOf("f", 2);
  ASSERT_TRUE(parts_.writer->Store(*w, 0, ChunkParts::Bytes(data.substr(0, kChunk))));
  WriteFile(dir_.Sub("g"), Pattern(2 * kChunk, 7));
  SetMtime("g", 1000000);
  ASSERT_EQ(std::rename(dir_.Sub("g").c_str(), dir_.Sub("f").c_str()), 0);
  OriginHandle again(origin_, "f");
  auto other = reader_.ReadRun(*w, again, 1, 1, Urgency::kReader);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ESTALE);
}

}  // namespace
}  // namespace stoker
