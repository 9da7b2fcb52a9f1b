#include "cache/order_window.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stoker {
namespace {

std::vector<std::string> Files(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back("d/f" + std::to_string(i));
  return out;
}

// Every position Next hands out now, in order.
std::vector<size_t> Drain(OrderWindow& w) {
  std::vector<size_t> out;
  while (auto p = w.Next()) out.push_back(*p);
  return out;
}

TEST(OrderWindowTest, HandsOutTheFirstWindowThenMovesWithTheReader) {
  OrderWindow w({/*ahead=*/3, /*ahead_bytes=*/1u << 30});
  w.Append(Files(10));
  EXPECT_EQ(Drain(w), (std::vector<size_t>{0, 1, 2}));
  for (size_t p : {0, 1, 2}) w.Fetched(p, 100, true);
  OrderWindow::Open o = w.Opened("d/f0");
  EXPECT_TRUE(o.in_order);
  EXPECT_TRUE(o.fetched);
  EXPECT_EQ(w.position(), 1u);
  EXPECT_EQ(Drain(w), (std::vector<size_t>{3}));
  w.Opened("d/f1");
  w.Opened("d/f2");
  EXPECT_EQ(Drain(w), (std::vector<size_t>{4, 5}));
  EXPECT_EQ(w.path(5), "d/f5");
}

TEST(OrderWindowTest, FilesTheReaderOpenedAreNotFetched) {
  OrderWindow w({3, 1u << 30});
  w.Append(Files(10));
  w.Opened("d/f1");  // before anything was handed out
  w.Opened("d/f2");
  EXPECT_EQ(Drain(w), (std::vector<size_t>{0, 3, 4, 5}));
}

TEST(OrderWindowTest, AFileOpenedWhileBeingFetchedIsNoLongerWantedNorAHit) {
  OrderWindow w({2, 1u << 30});
  w.Append(Files(5));
  ASSERT_EQ(Drain(w), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(w.Wanted(0));
  OrderWindow::Open o = w.Opened("d/f0");
  EXPECT_TRUE(o.in_order);
  EXPECT_FALSE(o.fetched);
  EXPECT_FALSE(w.Wanted(0));
  w.Fetched(0, 100, true);  // ends after the open: not counted ahead
  EXPECT_EQ(w.bytes_ahead(), 0u);
}

TEST(OrderWindowTest, FilesFarBehindTheReaderArePassedOver) {
  OrderWindow w({2, 1u << 30});
  w.Append(Files(20));
  ASSERT_EQ(Drain(w), (std::vector<size_t>{0, 1}));
  w.Fetched(0, 100, true);
  EXPECT_EQ(w.bytes_ahead(), 100u);
  w.Opened("d/f10");  // the reader jumped: 0..7 are behind the window
  EXPECT_EQ(w.position(), 11u);
  EXPECT_EQ(w.bytes_ahead(), 0u);  // f0 was skipped: no longer ahead
  EXPECT_FALSE(w.Wanted(1));
  EXPECT_EQ(Drain(w), (std::vector<size_t>{9, 11, 12}));
}

TEST(OrderWindowTest, FilesJustBehindTheFurthestOpenAreStillFetched) {
  // Loader workers open their batches out of step.
  OrderWindow w({4, 1u << 30});
  w.Append(Files(20));
  w.Opened("d/f3");
  EXPECT_EQ(Drain(w), (std::vector<size_t>{0, 1, 2, 4, 5, 6, 7}));
}

TEST(OrderWindowTest, StopsAtTheBytesBoundUntilTheReaderOpensWhatWasFetched) {
  OrderWindow w({10, /*ahead_bytes=*/250});
  w.Append(Files(10));
  std::vector<size_t> first;
  for (int i = 0; i < 3; ++i) {
    auto p = w.Next();
    ASSERT_TRUE(p);
    w.Fetched(*p, 100, true);
    first.push_back(*p);
  }
  EXPECT_EQ(w.bytes_ahead(), 300u);
  EXPECT_FALSE(w.Next());
  w.Opened("d/f0");
  w.Opened("d/f1");
  EXPECT_EQ(w.bytes_ahead(), 100u);
  EXPECT_EQ(w.Next(), std::optional<size_t>(3));
}

TEST(OrderWindowTest, AFailedFetchCountsNothingAheadAndIsNoHit) {
  OrderWindow w({2, 1u << 30});
  w.Append(Files(3));
  ASSERT_EQ(Drain(w), (std::vector<size_t>{0, 1}));
  w.Fetched(0, 100, false);
  EXPECT_EQ(w.bytes_ahead(), 0u);
  EXPECT_FALSE(w.Opened("d/f0").fetched);
}

TEST(OrderWindowTest, PathsOutsideTheOrderChangeNothing) {
  OrderWindow w({2, 1u << 30});
  w.Append(Files(3));
  EXPECT_FALSE(w.Opened("other").in_order);
  EXPECT_FALSE(w.Opened("d/f").in_order);
  EXPECT_EQ(w.position(), 0u);
}

TEST(OrderWindowTest, ARepeatedPathTakesItsNextOccurrence) {
  OrderWindow w({1, 1u << 30});
  w.Append({"a", "b", "a", "c"});
  EXPECT_TRUE(w.Opened("a").in_order);
  EXPECT_EQ(w.position(), 1u);
  w.Opened("b");
  EXPECT_TRUE(w.Opened("a").in_order);
  EXPECT_EQ(w.position(), 3u);
  EXPECT_FALSE(w.Opened("a").in_order);  // both occurrences opened
}

TEST(OrderWindowTest, AppendExtendsTheOrder) {
  OrderWindow w({5, 1u << 30});
  w.Append({"a", "b"});
  EXPECT_EQ(Drain(w), (std::vector<size_t>{0, 1}));
  w.Append({"c"});
  EXPECT_EQ(Drain(w), (std::vector<size_t>{2}));
  EXPECT_EQ(w.path(2), "c");
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(w.memory_bytes(), 3 * OrderWindow::MemoryPerPath(1));
}

}  // namespace
}  // namespace stoker
