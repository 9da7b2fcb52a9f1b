#include "decode/jpeg/output_buffers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(OutputBuffersTest, ClassesAreAtMostAnEighthOver) {
  EXPECT_EQ(OutputBuffers::ClassOf(0), 4096u);
  EXPECT_EQ(OutputBuffers::ClassOf(4096), 4096u);
  for (size_t len : {size_t{4097}, size_t{100000}, size_t{562516}, size_t{1} << 20,
                     (size_t{1} << 20) + 1, size_t{37} << 20}) {
    const size_t c = OutputBuffers::ClassOf(len);
    EXPECT_GE(c, len);
    EXPECT_LE(c, len + len / 8 + 1) << len;
    EXPECT_EQ(OutputBuffers::ClassOf(c), c) << len;
  }
  // 500x375x3 and 375x500x3 plus a record's framing share a class.
  EXPECT_EQ(OutputBuffers::ClassOf(562500 + 300), OutputBuffers::ClassOf(562500 + 900));
}

TEST(OutputBuffersTest, AReleasedBufferIsReusedWithoutBeingCleared) {
  OutputBuffers pool;
  char* first = nullptr;
  {
    auto b = pool.Take(562800);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->size(), 562800u);
    std::memset(b->data(), 'x', b->size());
    first = b->data();
  }
  EXPECT_EQ(pool.free_bytes(), OutputBuffers::ClassOf(562800));
  auto again = pool.Take(562500);  // same class
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(again->size(), 562500u);
  EXPECT_EQ(again->data()[562499], 'x');  // not zeroed: the producer writes every byte
  EXPECT_EQ(pool.reused(), 1u);
  EXPECT_EQ(pool.allocated(), 1u);
  EXPECT_EQ(pool.free_bytes(), 0u);
  // Held buffers are never handed out twice.
  auto other = pool.Take(562500);
  EXPECT_NE(other->data(), again->data());
  EXPECT_EQ(pool.allocated(), 2u);
}

TEST(OutputBuffersTest, FreeBytesStayWithinTheBound) {
  const size_t cls = OutputBuffers::ClassOf(100000);
  OutputBuffers pool(3 * cls);
  {
    std::vector<std::shared_ptr<OutputBuffers::Buffer>> held;
    for (int i = 0; i < 10; ++i) held.push_back(pool.Take(100000));
  }
  EXPECT_EQ(pool.free_bytes(), 3 * cls);  // the other seven were freed
  std::set<char*> got;
  for (int i = 0; i < 5; ++i) got.insert(pool.Take(100000)->data());
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(pool.reused(), 5u);  // each released before the next Take
}

TEST(OutputBuffersTest, BuffersMayOutliveThePool) {
  std::shared_ptr<OutputBuffers::Buffer> b;
  {
    OutputBuffers pool;
    b = pool.Take(5000);
  }
  std::memset(b->data(), 1, b->size());
  b.reset();  // gives back to the state it kept alive; no crash, no leak under ASan
}

TEST(OutputBuffersTest, ConcurrentTakesNeverShareABuffer) {
  OutputBuffers pool(8 << 20);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        auto b = pool.Take(50000 + 1000 * (i % 7));
        std::memset(b->data(), t, b->size());
        for (size_t k = 0; k < b->size(); k += 997) bad += b->data()[k] != static_cast<char>(t);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(pool.reused() + pool.allocated(), 2000u);
  EXPECT_GT(pool.reused(), 1000u);
}

}  // namespace
}  // namespace stoker
