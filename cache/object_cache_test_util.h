// What the ObjectCache end-to-end tests share: a fixture over a real
// LocalOrigin in a temp dir (behind a ControlledOrigin that tests can make
// unreachable, slow or derived), with helpers to write origin files, open
// and read through the cache, and reopen it as a new process would.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <thread>

#include "cache/cache_test_util.h"
#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "cache/object_cache.h"
#include "cache/object_cache_test_origin.h"
#include "cache/origin/local/local_origin.h"
#include "cache/slab.h"
#include "util/eventually.h"

namespace stoker {
namespace object_cache_test {

using testing::Eventually;
using testing::Materialize;
using testing::Pattern;
using testing::ScratchDir;
using testing::WriteFile;

inline constexpr uint64_t kCs = 64 << 10;

// o as what the cache caches and what it asks about derived files (every
// file is a plain one until a test says otherwise: ControlledOrigin).
inline ObjectCache::MakeDerived AsDerived(std::shared_ptr<testing::ControlledOrigin> o) {
  return [o](RawReader&) -> Result<ObjectCache::Derived> { return ObjectCache::Derived{o, o}; };
}

class ObjectCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto io = MakeIoBackend(IoBackendKind::kSyscall);
    ASSERT_TRUE(io.ok());
    auto local =
        LocalOrigin::Create(origin_dir_.path(), std::shared_ptr<IoBackend>(std::move(*io)));
    ASSERT_TRUE(local.ok()) << local.status().message();
    origin_ = std::make_shared<testing::ControlledOrigin>(*local);
    options_.dir = cache_dir_.Sub("cache");
    options_.chunk_size = kCs;
    options_.capacity_bytes = 64 << 20;
    options_.prefetch_bytes = 0;
    options_.fetch_threads = 2;
  }

  std::unique_ptr<ObjectCache> OpenCache() {
    auto c = ObjectCache::Open(options_, origin_, AsDerived(origin_));
    STOKER_CHECK(c.ok(), c.status().message().c_str());
    return std::move(c).value();
  }

  void Put(const std::string& name, const std::string& data) {
    WriteFile(origin_dir_.Sub(name), data);
  }

  static std::string ReadRange(ObjectCache& c, const ObjectCache::Opened& o, uint64_t off,
                               size_t len, Status* status = nullptr) {
    ReadReply r;
    Status s = c.Read(*o.file, off, len, &r);
    if (status) *status = s;
    EXPECT_TRUE(s.ok() || status) << s.message();
    return s.ok() ? Materialize(r) : std::string();
  }

  // A read of data (all of it) whose reply the caller keeps, as fs/ keeps
  // it until the reply is sent.
  static std::unique_ptr<ReadReply> HeldRead(ObjectCache& c, const ObjectCache::Opened& o,
                                             const std::string& data) {
    auto r = std::make_unique<ReadReply>();
    Status s = c.Read(*o.file, 0, data.size(), r.get());
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(Materialize(*r), data);
    return r;
  }

  static std::string ReadAll(ObjectCache& c, const std::string& path, Status* status = nullptr) {
    auto o = c.Open(path, false);
    if (!o.ok()) {
      if (status) *status = o.status();
      EXPECT_TRUE(status) << o.status().message();
      return "";
    }
    std::string out;
    for (uint64_t off = 0;; off += 100000) {
      std::string part = ReadRange(c, *o, off, 100000, status);
      if (part.empty()) break;
      out += part;
    }
    return out;
  }

  // Writes data beside name, gives it name's times and renames it over name:
  // another inode with the same size and mtime.
  void RenameOverKeepingTimes(const std::string& name, const std::string& data) {
    const std::string tmp = origin_dir_.Sub(name + ".tmp");
    WriteFile(tmp, data);
    struct stat st;
    ASSERT_EQ(stat(origin_dir_.Sub(name).c_str(), &st), 0);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), times, 0), 0);
    ASSERT_EQ(rename(tmp.c_str(), origin_dir_.Sub(name).c_str()), 0);
  }

  // Four threads read random files (whole, or random ranges) of a cache
  // opened here, each holding its last three replies a while (their pins
  // stay), and check every byte, the bound and that eviction ran.
  void RaceReaders(int files, size_t (*size)(int), int reads, bool whole) {
    for (int i = 0; i < files; ++i) Put("f" + std::to_string(i), Pattern(size(i), i));
    auto cache = OpenCache();
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(t);
        std::deque<std::pair<std::unique_ptr<ReadReply>, std::string>> held;
        for (int k = 0; k < reads; ++k) {
          int f = static_cast<int>(rng() % files);
          std::string want = Pattern(size(f), f);
          auto o = cache->Open("f" + std::to_string(f), false);
          uint64_t off = whole ? 0 : rng() % want.size();
          size_t len = whole ? want.size() : 1 + rng() % (2 * kCs);
          auto reply = std::make_unique<ReadReply>();
          if (!o.ok() || !cache->Read(*o->file, off, len, reply.get()).ok()) {
            bad++;
            continue;
          }
          held.emplace_back(std::move(reply), want.substr(off, len));
          if (held.size() > 3) {
            if (Materialize(*held.front().first) != held.front().second) bad++;
            held.pop_front();
          }
        }
        for (auto& [r, w] : held) {
          if (Materialize(*r) != w) bad++;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(cache->counters().errors.load(), 0u);
    EXPECT_EQ(cache->counters().checksum_failures.load(), 0u);
    EXPECT_LE(cache->Stats()["cache_used_bytes"].get<uint64_t>(), options_.capacity_bytes);
    EXPECT_GT(cache->counters().evicted_chunks.load(), 0u);
  }

  std::string DataFile(uint64_t object_id, uint64_t version) const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/data/%02x/%lu-%lu", static_cast<unsigned>(object_id & 0xff),
                  static_cast<unsigned long>(object_id), static_cast<unsigned long>(version));
    return options_.dir + buf;
  }

  ScratchDir origin_dir_{"origin"};
  ScratchDir cache_dir_{"cachedir"};
  std::shared_ptr<testing::ControlledOrigin> origin_;
  CacheOptions options_;
};

}  // namespace object_cache_test
}  // namespace stoker
