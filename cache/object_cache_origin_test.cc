// ObjectCache and its origin: a changed, deleted, renamed-over or moved
// file, an unreachable or backing-off origin, an open stuck in the origin,
// attributes within the revalidation window.
#include <gtest/gtest.h>

#include "cache/object_cache.h"
#include "cache/object_cache_test_util.h"
#include "util/duration.h"

namespace stoker {
namespace object_cache_test {
namespace {

TEST_F(ObjectCacheTest, OriginChangeServesTheNewVersionAndDropsTheOld) {
  Put("a", Pattern(2 * kCs, 1));
  auto cache = OpenCache();
  auto old_open = cache->Open("a", false).value();
  ASSERT_EQ(ReadRange(*cache, old_open, 0, 2 * kCs), Pattern(2 * kCs, 1));
  Put("a", Pattern(3 * kCs, 2));
  auto now = cache->Open("a", true).value();
  EXPECT_TRUE(now.changed);
  EXPECT_FALSE(now.keep_cache);
  EXPECT_EQ(static_cast<uint64_t>(now.st.st_size), 3 * kCs);
  EXPECT_EQ(cache->counters().origin_changes.load(), 1u);
  EXPECT_EQ(ReadRange(*cache, now, 0, 3 * kCs), Pattern(3 * kCs, 2));
  Status s;
  ReadRange(*cache, old_open, 0, 10, &s);
  EXPECT_EQ(s.code(), ESTALE) << "the old version is never served again";
  EXPECT_TRUE(Eventually([&] { return access(DataFile(1, 1).c_str(), F_OK) != 0; }));
  EXPECT_TRUE(Eventually([&] { return cache->Stats()["chunks"] == 3u; }));
  EXPECT_EQ(cache->Stats()["chunk_bytes"], 3 * kCs);
}

TEST_F(ObjectCacheTest, AChangeUnderAReadIsNeverCachedOrMixed) {
  Put("a", Pattern(2 * kCs, 1));
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  ASSERT_EQ(ReadRange(*cache, o, 0, 10), Pattern(2 * kCs, 1).substr(0, 10));
  // Rewritten in place: the open origin file now reads other content.
  int fd = open(origin_dir_.Sub("a").c_str(), O_WRONLY);
  std::string other = Pattern(2 * kCs, 9);
  ASSERT_EQ(pwrite(fd, other.data(), other.size(), 0), static_cast<ssize_t>(other.size()));
  // The clock may not have ticked since the file was made; make sure it did.
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(futimens(fd, times), 0);
  close(fd);
  Status s;
  EXPECT_EQ(ReadRange(*cache, o, kCs, 10, &s), "");
  EXPECT_EQ(s.code(), ESTALE);
  EXPECT_EQ(cache->counters().chunks_written.load(), 1u);
  // The next open revalidates even inside the interval, and sees the change.
  auto again = cache->Open("a", false).value();
  EXPECT_TRUE(again.changed);
  EXPECT_EQ(ReadRange(*cache, again, 0, 2 * kCs), other);
}

TEST_F(ObjectCacheTest, DeletedAtTheOriginIsENOENTAndForgotten) {
  Put("a", "data");
  auto cache = OpenCache();
  ASSERT_EQ(ReadAll(*cache, "a"), "data");
  ASSERT_EQ(unlink(origin_dir_.Sub("a").c_str()), 0);
  auto o = cache->Open("a", true);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), ENOENT);
  EXPECT_TRUE(Eventually([&] { return cache->Stats()["chunks"] == 0u; }));
  EXPECT_EQ(cache->Stats()["objects"], 0u);
  EXPECT_EQ(cache->Open("nope", false).status().code(), ENOENT);
}

TEST_F(ObjectCacheTest, UnreachableOriginKeepsServingCachedChunks) {
  std::string data = Pattern(3 * kCs, 2);
  Put("a", data);
  options_.revalidate_seconds = 0;
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  ASSERT_EQ(ReadRange(*cache, o, 0, kCs), data.substr(0, kCs));
  origin_->SetFailure(ETIMEDOUT);
  auto again = cache->Open("a", false);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(ReadRange(*cache, *again, 0, kCs), data.substr(0, kCs));
  Status s;
  ReadRange(*cache, *again, 2 * kCs, 10, &s);
  EXPECT_EQ(s.code(), ETIMEDOUT);
  EXPECT_GE(cache->counters().origin_errors.load(), 2u);
  origin_->SetFailure(0);
  EXPECT_EQ(ReadRange(*cache, *again, 2 * kCs, 10), data.substr(2 * kCs, 10));
}

TEST_F(ObjectCacheTest, BackingOffOriginIsNotAskedAboutCachedFiles) {
  const std::string data = Pattern(3 * kCs, 2);
  Put("a", data);
  Put("b", Pattern(kCs, 3));
  const std::string part = Pattern(3 * kCs, 5);
  Put("part", part);
  int64_t now = 0;
  constexpr int64_t kBackoff = 5000000000;
  origin_->UseBackoff(kBackoff, [&] { return now; });
  options_.revalidate_seconds = 0;
  options_.dir_prefetch_files = 0;  // no background Stat of b
  auto cache = OpenCache();
  ASSERT_EQ(ReadAll(*cache, "a"), data);
  auto held_in_part = cache->Open("part", false);
  ASSERT_TRUE(held_in_part.ok());
  ASSERT_EQ(ReadRange(*cache, *held_in_part, 0, kCs), part.substr(0, kCs));

  origin_->SetFailure(ETIMEDOUT);
  int asked = origin_->stat_calls();
  ASSERT_EQ(ReadAll(*cache, "a"), data);  // asks, fails, serves the cached version
  EXPECT_EQ(origin_->stat_calls(), ++asked);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(ReadAll(*cache, "a"), data);
    std::optional<struct stat> st = cache->HeldAttr("a", false);
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->st_size, static_cast<off_t>(data.size()));
  }
  EXPECT_EQ(origin_->stat_calls(), asked);
  EXPECT_EQ(cache->counters().revalidations_skipped.load(), 20u);
  EXPECT_EQ(cache->Stats()["origin_unreachable"], true);

  // Held in part: asked (the rest needs the origin), then served as held.
  EXPECT_FALSE(cache->HeldAttr("part", false).has_value());
  auto o_part = cache->Open("part", false);
  ASSERT_TRUE(o_part.ok()) << o_part.status().message();
  EXPECT_EQ(ReadRange(*cache, *o_part, 0, kCs), part.substr(0, kCs));
  EXPECT_EQ(origin_->stat_calls(), ++asked);

  // Nothing held: still asked, and the failure is the reader's.
  EXPECT_FALSE(cache->HeldAttr("b", false).has_value());
  EXPECT_EQ(cache->Open("b", false).status().code(), ETIMEDOUT);
  EXPECT_EQ(origin_->stat_calls(), ++asked);

  // Once the back-off has passed, one open asks again (and is served).
  now += kBackoff;
  ASSERT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(origin_->stat_calls(), ++asked);
  ASSERT_EQ(ReadAll(*cache, "a"), data);
  EXPECT_EQ(origin_->stat_calls(), asked);

  // Back, with a changed file: the first answer ends the back-off, and the
  // next open of the changed file gets its new version, never a mix.
  const std::string v2 = Pattern(2 * kCs + 5, 4);
  Put("a", v2);
  origin_->SetFailure(0);
  ASSERT_TRUE(cache->Open("b", false).ok());
  EXPECT_EQ(cache->Stats()["origin_unreachable"], false);
  auto o = cache->Open("a", false);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->changed);
  EXPECT_EQ(ReadAll(*cache, "a"), v2);
  EXPECT_EQ(cache->Stats()["origin_unreachable_episodes"], 1u);
}

// An open stuck in a hung origin holds its path's stripe; another open of
// the same file (or of any file whose path hashes to that stripe) must not
// wait behind it once the origin is known to be unreachable.
TEST_F(ObjectCacheTest, AnOpenStuckInTheOriginDoesNotHoldUpOpensOfHeldFiles) {
  const std::string data = Pattern(2 * kCs + 7, 6);
  Put("a", data);
  Put("b", Pattern(kCs, 7));
  origin_->UseBackoff(5000000000, [] { return int64_t{0}; });
  options_.revalidate_seconds = 0;
  options_.dir_prefetch_files = 0;
  auto cache = OpenCache();
  ASSERT_EQ(ReadAll(*cache, "a"), data);

  origin_->GateStats(true);
  origin_->CloseGate();
  std::thread stuck([&] { (void)cache->Open("a", false); });
  ASSERT_TRUE(Eventually([&] { return origin_->waiting() == 1; }));
  // The stall watch finds it (cache/origin/stall_watch.h) and says so.
  origin_->backoff()->Record(Status::Error(ETIMEDOUT, "stat of 'a' stalled (test)"));

  std::atomic<bool> done{false};
  Result<ObjectCache::Opened> again = Status::Error(EINPROGRESS, "not yet");
  std::thread second([&] {
    again = cache->Open("a", false);
    done = true;
  });
  const bool answered = Eventually([&] { return done.load(); });
  origin_->OpenGate();
  stuck.join();
  second.join();
  ASSERT_TRUE(answered) << "the second open waited for the stuck one";
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ReadRange(*cache, *again, 0, data.size()), data);
  EXPECT_FALSE(again->keep_cache);
  EXPECT_EQ(origin_->waiting(), 0);
}

// An origin reached through a symlink that can be pointed at a copy of it on
// another filesystem (as cp -a to a tmpfs mounted in its place would give:
// same bytes and mtimes, new st_dev, st_ino and ctime).
class MovingOriginTest : public ObjectCacheTest {
 protected:
  void SetUp() override {
    ObjectCacheTest::SetUp();
    char tmpl[] = "/dev/shm/stoker-moved-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) GTEST_SKIP() << "no /dev/shm";
    elsewhere_ = tmpl;
    struct stat a, b;
    ASSERT_EQ(stat(origin_dir_.path().c_str(), &a), 0);
    ASSERT_EQ(stat(elsewhere_.c_str(), &b), 0);
    if (a.st_dev == b.st_dev) GTEST_SKIP() << "/dev/shm is on the same filesystem as /tmp";
    real_ = origin_dir_.Sub("real");
    link_ = origin_dir_.Sub("link");
    ASSERT_EQ(mkdir(real_.c_str(), 0755), 0);
    ASSERT_EQ(symlink("real", link_.c_str()), 0);
    origin_ = MakeOrigin();
    options_.revalidate_seconds = 3600;
  }
  void TearDown() override {
    if (!elsewhere_.empty()) std::filesystem::remove_all(elsewhere_);
  }
  std::shared_ptr<testing::ControlledOrigin> MakeOrigin() {
    auto io = MakeIoBackend(IoBackendKind::kSyscall);
    STOKER_CHECK(io.ok(), "io backend");
    LocalOrigin::Options o;
    o.reopen_interval_ms = 0;
    auto local = LocalOrigin::Create(link_, std::shared_ptr<IoBackend>(std::move(*io)), o);
    STOKER_CHECK(local.ok(), local.status().message().c_str());
    return std::make_shared<testing::ControlledOrigin>(*local);
  }
  // Copies the origin's files with their mtimes, points the link at the
  // copy and deletes the original: the old root is dead.
  void MoveOrigin() {
    for (const auto& e : std::filesystem::directory_iterator(real_)) {
      std::string name = e.path().filename();
      std::filesystem::copy_file(e.path(), elsewhere_ + "/" + name);
      struct stat st;
      ASSERT_EQ(stat(e.path().c_str(), &st), 0);
      struct timespec times[2] = {st.st_atim, st.st_mtim};
      ASSERT_EQ(utimensat(AT_FDCWD, (elsewhere_ + "/" + name).c_str(), times, 0), 0);
    }
    ASSERT_EQ(unlink(link_.c_str()), 0);
    ASSERT_EQ(symlink(elsewhere_.c_str(), link_.c_str()), 0);
    std::filesystem::remove_all(real_);
  }

  std::string real_, link_, elsewhere_;
};

// Bug (issue 6, dead-origin): after a remount, the first read of a partly
// cached file gave ESTALE when the origin had come back on another device
// with the same bytes and mtimes: the new daemon trusted the last
// validation (inside --revalidate) and the fetch compared st_dev/st_ino.
TEST_F(MovingOriginTest, EstaleOnFirstReadAfterRemountOnAnotherDevice) {
  std::string data = Pattern(4 * kCs + 5, 3);
  WriteFile(real_ + "/a", data);
  {
    auto cache = OpenCache();
    auto o = cache->Open("a", false).value();
    ASSERT_EQ(ReadRange(*cache, o, 0, kCs), data.substr(0, kCs));
  }
  MoveOrigin();
  origin_ = MakeOrigin();  // the new daemon
  auto cache = OpenCache();
  Status s;
  EXPECT_EQ(ReadAll(*cache, "a", &s), data) << s.message();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cache->counters().origin_changes.load(), 0u);
  EXPECT_GE(cache->counters().cache_hit_bytes.load(), kCs) << "chunk 0 still served from cache";
  EXPECT_EQ(cache->counters().origin_bytes_read.load(), data.size() - kCs);
  // Revalidated later, the moved file is still the same version.
  auto again = cache->Open("a", true);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(cache->counters().origin_changes.load(), 0u);
}

// The same move under a running cache: its origin's root died and was
// reopened, and the open file reads on without a remount.
TEST_F(MovingOriginTest, ARunningCacheFollowsTheOriginToAnotherDevice) {
  std::string data = Pattern(4 * kCs + 5, 4);
  WriteFile(real_ + "/a", data);
  WriteFile(real_ + "/b", "bee");
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  ASSERT_EQ(ReadRange(*cache, o, 0, kCs), data.substr(0, kCs));
  MoveOrigin();
  auto fresh = cache->Open("a", false).value();
  EXPECT_EQ(ReadRange(*cache, fresh, kCs, 3 * kCs + 5), data.substr(kCs));
  EXPECT_EQ(ReadAll(*cache, "b"), "bee");
  EXPECT_EQ(cache->counters().origin_changes.load(), 0u);
}

// What the moved-device rule must not loosen: on one filesystem, a file
// renamed over another with the same size and mtime is a new file.
TEST_F(ObjectCacheTest, ARenameOverWithTheSameSizeAndMtimeIsStillAChange) {
  std::string old_data = Pattern(2 * kCs, 5), new_data = Pattern(2 * kCs, 6);
  Put("a", old_data);
  options_.revalidate_seconds = 3600;
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  ASSERT_EQ(ReadRange(*cache, o, 0, 10), old_data.substr(0, 10));
  RenameOverKeepingTimes("a", new_data);
  auto inside_window = cache->Open("a", false).value();
  Status s;
  EXPECT_EQ(ReadRange(*cache, inside_window, kCs, 10, &s), "");
  EXPECT_EQ(s.code(), ESTALE) << "never old chunk 0 with new chunk 1";
  auto again = cache->Open("a", false).value();
  EXPECT_TRUE(again.changed);
  EXPECT_EQ(ReadRange(*cache, again, 0, 2 * kCs), new_data);
}

// The origin restored from a copy on the same filesystem: another inode,
// the same size, mtime and bytes. The cached chunks show it is the same.
TEST_F(ObjectCacheTest, ACopyRenamedOverWithTheSameBytesIsNotStale) {
  std::string data = Pattern(3 * kCs, 7);
  Put("a", data);
  options_.revalidate_seconds = 3600;
  auto cache = OpenCache();
  auto o = cache->Open("a", false).value();
  ASSERT_EQ(ReadRange(*cache, o, 0, 10), data.substr(0, 10));
  RenameOverKeepingTimes("a", data);
  auto again = cache->Open("a", false).value();
  Status s;
  EXPECT_EQ(ReadRange(*cache, again, kCs, 2 * kCs, &s), data.substr(kCs)) << s.message();
  EXPECT_EQ(ReadRange(*cache, o, 0, 3 * kCs), data) << "the open file reads on, too";
  EXPECT_EQ(cache->counters().origin_changes.load(), 0u);
}

// Within --revalidate of the origin's last answer about a file, a lookup
// is answered from the cache, as the kernel's own entry would be; with 0,
// or once a read found the file changed, the origin is asked.
TEST_F(ObjectCacheTest, AttrsWithinTheRevalidationWindowComeFromTheCache) {
  const std::string data = Pattern(2 * kCs, 9);
  Put("a", data);
  Put("b", Pattern(kCs, 10));
  Put("c", Pattern(2 * kCs, 11));
  options_.revalidate_seconds = 3600;
  options_.dir_prefetch_files = 0;  // no background Stat
  {
    auto cache = OpenCache();
    EXPECT_FALSE(cache->HeldAttr("a", false).has_value());  // never asked about
    ASSERT_EQ(ReadAll(*cache, "a"), data);
    const int asked = origin_->stat_calls();
    for (int i = 0; i < 5; ++i) {
      std::optional<struct stat> st = cache->HeldAttr("a", false);
      ASSERT_TRUE(st.has_value());
      EXPECT_EQ(st->st_size, static_cast<off_t>(data.size()));
    }
    EXPECT_EQ(origin_->stat_calls(), asked);
    EXPECT_EQ(cache->counters().attrs_from_cache.load(), 5u);
    EXPECT_EQ(cache->counters().revalidations_skipped.load(), 0u);
    EXPECT_FALSE(cache->HeldAttr("b", false).has_value());

    auto c = cache->Open("c", false).value();
    ASSERT_EQ(ReadRange(*cache, c, 0, 10), Pattern(2 * kCs, 11).substr(0, 10));
    EXPECT_TRUE(cache->HeldAttr("c", false).has_value());
    RenameOverKeepingTimes("c", Pattern(2 * kCs, 12));
    auto inside_window = cache->Open("c", false).value();
    Status s;
    EXPECT_EQ(ReadRange(*cache, inside_window, kCs, 10, &s), "");
    ASSERT_EQ(s.code(), ESTALE);
    EXPECT_FALSE(cache->HeldAttr("c", false).has_value()) << "found changed: the origin is asked";
  }
  {  // The next process trusts the index's record of when the origin was asked.
    auto cache = OpenCache();
    EXPECT_TRUE(cache->HeldAttr("a", false).has_value());
  }
  options_.revalidate_seconds = 0;
  auto cache = OpenCache();
  EXPECT_FALSE(cache->HeldAttr("a", false).has_value());
  EXPECT_EQ(cache->counters().attrs_from_cache.load(), 0u);
}

// A cache group's member is given files of the origin's tree only: a view's
// file is made by each member from raw bytes.
TEST_F(ObjectCacheTest, APeerIsNeverGivenADerivedFile) {
  Put("a", Pattern(kCs, 1));
  auto cache = OpenCache();
  ASSERT_TRUE(cache->OpenForPeer("a").ok());
  origin_->DeriveAs(kDerivedDevBit | 1);
  Result<ObjectCache::Opened> derived = cache->OpenForPeer("a");
  ASSERT_FALSE(derived.ok());
  EXPECT_EQ(derived.status().code(), ENOENT);
}

// --revalidate never: a file once checked is not asked about again, also
// in the next process, until a refresh of it or of a directory above it;
// then its next open sees the change (a new version), and an open from
// before keeps reading the old one or fails, never mixes them.
TEST_F(ObjectCacheTest, NeverAsksAgainUntilARefresh) {
  Put("d/a", Pattern(2 * kCs, 1));
  Put("d/b", Pattern(kCs, 2));
  Put("e/c", Pattern(kCs, 3));
  options_.revalidate_seconds = kNeverSeconds;
  options_.dir_prefetch_files = 0;
  {
    auto cache = OpenCache();
    for (const char* p : {"d/a", "d/b", "e/c"}) ASSERT_FALSE(ReadAll(*cache, p).empty());
  }
  RenameOverKeepingTimes("d/a", Pattern(2 * kCs, 7));
  RenameOverKeepingTimes("e/c", Pattern(kCs, 8));
  auto cache = OpenCache();
  const int asked = origin_->stat_calls();
  auto before = cache->Open("d/a", false).value();
  EXPECT_FALSE(before.changed);
  EXPECT_EQ(ReadRange(*cache, before, 0, 2 * kCs), Pattern(2 * kCs, 1)) << "held, not asked";
  EXPECT_TRUE(cache->HeldAttr("e/c", false).has_value());
  EXPECT_EQ(origin_->stat_calls(), asked);

  Result<uint64_t> marked = cache->Refresh("d");
  ASSERT_TRUE(marked.ok()) << marked.status().message();
  EXPECT_EQ(*marked, 2u) << "d/a and d/b, not e/c";
  EXPECT_FALSE(cache->HeldAttr("d/a", false).has_value()) << "the origin is to be asked";
  EXPECT_TRUE(cache->HeldAttr("e/c", false).has_value());
  auto after = cache->Open("d/a", false).value();
  EXPECT_TRUE(after.changed);
  EXPECT_EQ(ReadRange(*cache, after, 0, 2 * kCs), Pattern(2 * kCs, 7));
  Status s;
  const std::string old = ReadRange(*cache, before, 0, 2 * kCs, &s);
  EXPECT_TRUE(old == Pattern(2 * kCs, 1) || s.code() == ESTALE) << "mixed or wrong bytes";
  // Asked once, then held again.
  const int asked_after = origin_->stat_calls();
  ASSERT_FALSE(ReadAll(*cache, "d/a").empty());
  EXPECT_TRUE(cache->HeldAttr("d/a", false).has_value());
  EXPECT_EQ(origin_->stat_calls(), asked_after);
  // A refresh outlives the process that was asked for it.
  ASSERT_EQ(*cache->Refresh("e/c"), 1u);
  cache.reset();
  cache = OpenCache();
  EXPECT_FALSE(cache->HeldAttr("e/c", false).has_value());
  EXPECT_EQ(ReadAll(*cache, "e/c"), Pattern(kCs, 8));
  EXPECT_EQ(*cache->Refresh("nothing/here"), 0u);
}

}  // namespace
}  // namespace object_cache_test
}  // namespace stoker
