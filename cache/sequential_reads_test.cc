// SequentialReads: prefetch follows a sequential reader a window ahead in
// batches, tolerates the kernel's out-of-order requests, and starts over
// after a seek.
#include "cache/sequential_reads.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

constexpr uint64_t kChunk = 1 << 20;

TEST(SequentialReadsTest, ASequentialReaderIsPrefetchedAWindowAheadInBatches) {
  SequentialReads r(8 * kChunk, kChunk, 100);
  auto s = r.Next(0, 128 << 10, 0);
  EXPECT_FALSE(s.seek);
  EXPECT_EQ(s.first, 1u);
  EXPECT_EQ(s.end, 9u) << "the window past the end of the read";
  // Reads within what was asked add nothing until half a window is new.
  for (uint64_t off = 128 << 10; off < 4 * kChunk; off += 128 << 10) {
    s = r.Next(off, off + (128 << 10), off / kChunk);
    EXPECT_EQ(s.first, s.end) << "at " << off;
  }
  s = r.Next(4 * kChunk, 4 * kChunk + (128 << 10), 4);
  EXPECT_EQ(s.first, 9u);
  EXPECT_EQ(s.end, 13u);
  EXPECT_EQ(s.drop_before, 0u) << "chunks a window behind the reader may go";
  s = r.Next(10 * kChunk, 10 * kChunk + (128 << 10), 10);
  EXPECT_EQ(s.drop_before, 2u);
}

TEST(SequentialReadsTest, RequestsOutOfOrderWithinTheWindowAreStillSequential) {
  SequentialReads r(8 * kChunk, kChunk, 100);
  r.Next(0, kChunk, 0);
  auto s = r.Next(3 * kChunk, 4 * kChunk, 3);  // ahead of the furthest read, within the window
  EXPECT_FALSE(s.seek);
  s = r.Next(kChunk, 2 * kChunk, 1);  // behind it
  EXPECT_FALSE(s.seek);
  EXPECT_EQ(s.first, s.end) << "nothing new to ask for";
}

TEST(SequentialReadsTest, ASeekStartsOver) {
  SequentialReads r(8 * kChunk, kChunk, 100);
  r.Next(0, kChunk, 0);
  auto s = r.Next(50 * kChunk, 51 * kChunk, 50);
  EXPECT_TRUE(s.seek);
  EXPECT_EQ(s.first, s.end) << "one read after a seek is not a sequence yet";
  s = r.Next(51 * kChunk, 52 * kChunk, 51);
  EXPECT_FALSE(s.seek);
  EXPECT_EQ(s.first, 52u);
  EXPECT_EQ(s.end, 60u);
}

TEST(SequentialReadsTest, TheLastBatchOfAFileGoesWhateverItsSize) {
  SequentialReads r(8 * kChunk, kChunk, 10);
  auto s = r.Next(0, kChunk, 0);
  EXPECT_EQ(s.end, 9u);
  s = r.Next(kChunk, 2 * kChunk, 1);
  EXPECT_EQ(s.first, 9u);
  EXPECT_EQ(s.end, 10u) << "one chunk, but the file's last";
  s = r.Next(2 * kChunk, 3 * kChunk, 2);
  EXPECT_EQ(s.first, s.end) << "nothing past the end";
}

}  // namespace
}  // namespace stoker
