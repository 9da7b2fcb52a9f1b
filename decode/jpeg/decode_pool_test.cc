#include "decode/jpeg/decode_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/decode_pool_test_util.h"

namespace stoker {
namespace {

std::shared_ptr<JpegDecoder> Decoder() { return std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()); }

TEST(DecodePoolTest, ThreadsDefaultToTheCoreCount) {
  DecodePool pool(Decoder());
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(pool.threads(), cores > 0 ? cores : 1);
}

// The pool's threads are told apart from the FUSE and fetch threads in
// top -H, perf and /proc/PID/task/*/comm by their name.
TEST(DecodePoolTest, ThreadsAreNamed) {
  DecodePool pool(Decoder(), DecodePoolOptions{2});
  std::vector<std::string> names(4);
  std::vector<DecodePool::Job> jobs;
  for (size_t i = 0; i < names.size(); ++i) {
    jobs.push_back([&names, i] {
      char name[16] = {};
      if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) {
        return Status::Error(errno, "pthread_getname_np");
      }
      names[i] = name;
      return Status::OK();
    });
  }
  for (const Status& s : pool.RunAll(DecodePriority::kReader, std::move(jobs))) {
    EXPECT_TRUE(s.ok()) << s.message();
  }
  for (const std::string& n : names) EXPECT_EQ(n, "stoker-decode");
}

TEST(DecodePoolTest, RunAllReturnsEveryStatusInOrder) {
  DecodePool pool(Decoder(), DecodePoolOptions{3});
  std::vector<DecodePool::Job> jobs;
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) {
    jobs.push_back([i, &ran] {
      ran++;
      return i % 7 == 0 ? Status::Corruption("job " + std::to_string(i)) : Status::OK();
    });
  }
  std::vector<Status> st = pool.RunAll(DecodePriority::kReader, std::move(jobs));
  ASSERT_EQ(st.size(), 50u);
  EXPECT_EQ(ran.load(), 50);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(st[i].ok(), i % 7 != 0) << i;
    if (!st[i].ok()) {
      EXPECT_EQ(st[i].message(), "job " + std::to_string(i));
    }
  }
  EXPECT_TRUE(pool.RunAll(DecodePriority::kWarm, {}).empty());
  EXPECT_EQ(pool.queued(), 0u);
}

// With the one thread busy, queued work runs reader first, then readahead,
// then warm, whatever the order it was queued in.
TEST(DecodePoolTest, HigherPriorityRunsFirst) {
  DecodePool pool(Decoder(), DecodePoolOptions{1});
  std::mutex mu;
  std::vector<std::string> order;
  PoolGate gate(pool);
  auto submit = [&](DecodePriority p, const char* name) {
    return std::thread([&pool, &mu, &order, p, name] {
      std::vector<DecodePool::Job> jobs;
      jobs.push_back([&mu, &order, name] {
        std::lock_guard<std::mutex> l(mu);
        order.push_back(name);
        return Status::OK();
      });
      (void)pool.RunAll(p, std::move(jobs));
    });
  };
  std::thread warm = submit(DecodePriority::kWarm, "warm");
  while (pool.queued() < 1) std::this_thread::yield();
  std::thread ahead = submit(DecodePriority::kReadahead, "readahead");
  while (pool.queued() < 2) std::this_thread::yield();
  std::thread reader = submit(DecodePriority::kReader, "reader");
  while (pool.queued() < 3) std::this_thread::yield();
  gate.Open();
  for (std::thread* t : {&warm, &ahead, &reader}) t->join();
  EXPECT_EQ(order, (std::vector<std::string>{"reader", "readahead", "warm"}));
}

// A batch raised while it waits runs as if queued at its new priority
// (behind what was queued there already, before what is queued below);
// raising it down changes nothing.
TEST(DecodePoolTest, ARaisedBatchRunsAtItsNewPriority) {
  DecodePool pool(Decoder(), DecodePoolOptions{1});
  std::mutex mu;
  std::vector<std::string> order;
  PoolGate gate(pool);
  auto submit = [&](std::shared_ptr<DecodePool::Batch> batch, DecodePriority p, const char* name,
                    int n) {
    return std::thread([&pool, &mu, &order, batch, p, name, n] {
      std::vector<DecodePool::Job> jobs;
      for (int i = 0; i < n; ++i) {
        jobs.push_back([&mu, &order, name] {
          std::lock_guard<std::mutex> l(mu);
          order.push_back(name);
          return Status::OK();
        });
      }
      for (const Status& s : pool.RunAll(batch, p, std::move(jobs))) EXPECT_TRUE(s.ok());
    });
  };
  auto warm_batch = DecodePool::NewBatch();
  auto ahead_batch = DecodePool::NewBatch();
  std::thread warm = submit(warm_batch, DecodePriority::kWarm, "warm", 3);
  while (pool.queued() < 3) std::this_thread::yield();
  std::thread ahead = submit(ahead_batch, DecodePriority::kReadahead, "readahead", 2);
  while (pool.queued() < 5) std::this_thread::yield();
  pool.Raise(*ahead_batch, DecodePriority::kWarm);  // down: nothing moves
  EXPECT_EQ(pool.jobs_raised(), 0u);
  pool.Raise(*warm_batch, DecodePriority::kReader);
  EXPECT_EQ(pool.jobs_raised(), 3u);
  pool.Raise(*warm_batch, DecodePriority::kReadahead);  // down from reader: nothing moves
  EXPECT_EQ(pool.jobs_raised(), 3u);
  EXPECT_EQ(pool.queued(), 5u);
  gate.Open();
  for (std::thread* t : {&warm, &ahead}) t->join();
  EXPECT_EQ(order, (std::vector<std::string>{"warm", "warm", "warm", "readahead", "readahead"}));
}

// Raised before it is run, a batch is queued at the raised priority, and
// stays raised for its next runs; RunAll(priority, jobs) is such a run of
// a fresh batch.
TEST(DecodePoolTest, ABatchRaisedBeforeItIsRunIsQueuedRaised) {
  DecodePool pool(Decoder(), DecodePoolOptions{1});
  auto batch = DecodePool::NewBatch();
  pool.Raise(*batch, DecodePriority::kReadahead);
  EXPECT_EQ(pool.jobs_raised(), 0u);
  for (int run = 0; run < 2; ++run) {
    std::vector<DecodePool::Job> jobs(2, [] { return Status::OK(); });
    for (const Status& s : pool.RunAll(batch, DecodePriority::kWarm, std::move(jobs))) {
      EXPECT_TRUE(s.ok());
    }
  }
  EXPECT_EQ(pool.jobs_raised(), 4u);
  std::vector<DecodePool::Job> jobs(2, [] { return Status::OK(); });
  (void)pool.RunAll(batch, DecodePriority::kReader, std::move(jobs));  // not lower: not raised
  (void)pool.RunAll(DecodePriority::kWarm, {[] { return Status::OK(); }});
  EXPECT_EQ(pool.jobs_raised(), 4u);
}

TEST(DecodePoolTest, StopCancelsWhatIsQueued) {
  auto pool = std::make_unique<DecodePool>(Decoder(), DecodePoolOptions{1});
  pool->Stop();
  std::vector<DecodePool::Job> jobs;
  jobs.push_back([] { return Status::OK(); });
  std::vector<Status> st = pool->RunAll(DecodePriority::kReader, std::move(jobs));
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].code(), ECANCELED);
}

TEST(DecodePoolTest, AJobThatRunsOutOfMemoryFailsAlone) {
  DecodePool pool(Decoder(), DecodePoolOptions{2});
  std::vector<DecodePool::Job> jobs;
  jobs.push_back([]() -> Status { throw std::bad_alloc(); });
  jobs.push_back([] { return Status::OK(); });
  std::vector<Status> st = pool.RunAll(DecodePriority::kReader, std::move(jobs));
  EXPECT_EQ(st[0].code(), ENOMEM);
  EXPECT_TRUE(st[1].ok());
}

}  // namespace
}  // namespace stoker
