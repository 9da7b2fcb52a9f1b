// ObjectCache background work: the evictor thread (eviction rounds, batched
// hit records, drops of old versions, index size) and warming.
#include <chrono>
#include <set>

#include "cache/object_cache_impl.h"
#include "util/log.h"
#include "util/mutex.h"
#include "util/path.h"

namespace stoker {
namespace {

constexpr auto kHitFlushInterval = std::chrono::seconds(1);
constexpr auto kIndexMeasureInterval = std::chrono::seconds(2);
constexpr size_t kDropBatch = 1024;
constexpr size_t kMaxVictimsPerRound = 256;
constexpr uint64_t kSameAccessTicks = 128;
constexpr int kMaxRepicks = 64;

}  // namespace

// A hit costs no index write: hits are collected here and applied once per
// flush window, one clock tick per chunk per window (a reader going through a
// chunk in small requests is one access, not many).
//
// The access that inserted a chunk is not a hit on it: its reader's next
// requests for the rest of the chunk, or the first read of a chunk fetched
// ahead, come within a few ticks of the insert. kSameAccessTicks is beyond
// what prefetch (8 chunks ahead per file, 16 files ahead per directory) and
// a few dozen concurrent readers put between them, and well short of an
// epoch. A window of wall time alone is not enough: an epoch over a small
// dataset can take less than one, and its hits would then never promote
// what they hit, leaving the resident subset to go stale (see eviction.h).
void ObjectCacheImpl::RecordHit(const ChunkKey& key) {
  MutexLock l(hits_mu_);
  const uint64_t now = index_->clock();
  for (const auto* inserted : {&inserted_now_, &inserted_prev_}) {
    auto it = inserted->find(key);
    if (it != inserted->end() && now - it->second <= kSameAccessTicks) return;
  }
  auto [it, fresh] = pending_hits_.try_emplace(key, 0);
  if (fresh) it->second = index_->Tick();
}

void ObjectCacheImpl::RecordInsert(const ChunkKey& key, uint64_t tick) {
  MutexLock l(hits_mu_);
  inserted_now_[key] = tick;
}

void ObjectCacheImpl::KickEvictor() {
  {
    MutexLock l(bg_mu_);
    bg_kicked_ = true;
  }
  bg_cv_.notify_one();
}

void ObjectCacheImpl::QueueDrop(const VersionKey& v) {
  {
    MutexLock l(bg_mu_);
    drops_.push_back(v);
    bg_kicked_ = true;
  }
  drops_pending_++;
  bg_cv_.notify_one();
}

void ObjectCacheImpl::EvictorLoop() {
  using Clock = std::chrono::steady_clock;
  auto last_flush = Clock::now();
  auto last_measure = Clock::now();
  for (;;) {
    {
      MutexLock l(bg_mu_);
      bg_cv_.WaitFor(bg_mu_, kHitFlushInterval,
                     [&]() REQUIRES(bg_mu_) { return bg_stop_ || bg_kicked_; });
      if (bg_stop_) break;
      bg_kicked_ = false;
    }
    auto now = Clock::now();
    if (now - last_measure >= kIndexMeasureInterval) {
      MeasureIndex();
      last_measure = now;
    }
    if (now - last_flush >= kHitFlushInterval) {
      FlushHits(/*new_window=*/true);
      last_flush = now;
    }
    ProcessDrops();
    MeasureDisk();
    if (quota_.TakeRefused() || quota_.AboveHigh()) {
      // The policy must see the hits up to now: a chunk hit since the last
      // flush is not a stale one (epochs faster than a flush window would
      // otherwise never promote anything).
      FlushHits(/*new_window=*/false);
      EvictToLow();
      MeasureIndex();
      last_measure = Clock::now();
    }
  }
  FlushHits(/*new_window=*/true);
}

void ObjectCacheImpl::FlushHits(bool new_window) {
  std::unordered_map<ChunkKey, uint64_t, ChunkKeyHash> hits;
  {
    MutexLock l(hits_mu_);
    hits.swap(pending_hits_);
    if (new_window) {
      inserted_prev_.swap(inserted_now_);
      inserted_now_.clear();
    }
  }
  if (hits.empty()) return;
  std::vector<std::pair<ChunkKey, uint64_t>> batch(hits.begin(), hits.end());
  Status s = index_->RecordHits(batch, policy_);
  if (!s.ok()) LOG_WARN("recording cache hits: {}", s.message());
}

void ObjectCacheImpl::ProcessDrops() {
  std::deque<VersionKey> todo;
  {
    MutexLock l(bg_mu_);
    todo.swap(drops_);
  }
  std::deque<VersionKey> later;
  for (const VersionKey& v : todo) {
    // A write that began before the version was superseded may still
    // commit; its record must not outlive the drop.
    if (store_->Writing(v)) {
      later.push_back(v);
      continue;
    }
    bool done = false;
    uint64_t freed = 0;
    Status err;
    // A chunk in a slab slot is punched and its slot freed under its latch
    // (the slot is taken again soon, unlike a version's own file, which
    // goes whole with its last chunk). Only a one-chunk version has one.
    const ChunkKey first{v.object_id, v.version, 0};
    auto rec = index_->GetChunk(first);
    if (rec.ok() && *rec && (*rec)->slot.valid()) {
      if (!resident_->TryLatchForEvict(first)) {
        later.push_back(v);  // still read: next round
        continue;
      }
      auto r = PunchAndDrop(first);
      resident_->ReleaseLatch(first);
      if (r.ok()) freed += *r;
      err = r.status();
    }
    while (!done && err.ok()) {
      auto r = index_->DropVersionChunks(v, kDropBatch, &done);
      if (!r.ok()) {
        err = r.status();
        break;
      }
      freed += *r;
    }
    quota_.Free(freed);
    if (!err.ok()) {
      LOG_WARN("dropping an old cached version: {}", err.message());
      later.push_back(v);
      continue;
    }
    resident_->ForgetVersion(v);
    auto u = store_->UnlinkIfIdle(v, []() -> Result<bool> { return true; });
    if (!u.ok()) LOG_WARN("{}", u.status().message());
    drops_pending_--;
  }
  if (!later.empty()) {
    MutexLock l(bg_mu_);
    for (const auto& v : later) drops_.push_back(v);
  }
}

void ObjectCacheImpl::EvictToLow() {
  uint64_t evicted = 0;
  std::set<VersionKey> touched;
  int repicks = 0;
  for (;;) {
    uint64_t over = quota_.BytesOverLow();
    if (over == 0) break;
    {
      MutexLock l(bg_mu_);
      if (bg_stop_) break;
    }
    // Stale chunks go down to the low watermark, others only to the high
    // one; a victim latched and then left in place costs a reader that
    // meets the latch a fetch from the origin, so no more are taken.
    size_t want =
        static_cast<size_t>(std::min<uint64_t>(kMaxVictimsPerRound, over / chunk_size_ + 1));
    const uint64_t over_high = quota_.CommittedOverHigh();
    size_t want_not_stale = static_cast<size_t>(
        std::min<uint64_t>(want, over_high == 0 ? 0 : (over_high + chunk_size_ - 1) / chunk_size_));
    // Read before the cursors: a chunk committed after them bumps it.
    const uint64_t commits = quota_.commits();
    auto newest = index_->NewEvictCursor(EvictionPolicy::kProbationaryQueue);
    auto oldest = index_->NewEvictCursor(EvictionPolicy::kProbationaryQueue, true);
    auto prot = index_->NewEvictCursor(EvictionPolicy::kProtectedQueue);
    auto victims = policy_.PickVictims(
        *newest, *oldest, *prot, index_->clock(), index_->meta().chunks, want, want_not_stale,
        [&](const ChunkKey& k) { return resident_->TryLatchForEvict(k); });
    newest.reset();
    oldest.reset();
    prot.reset();
    if (victims.empty()) break;  // nothing left that is not pinned
    bool done = false;
    bool repick = false;
    bool failed = false;
    bool dropped = false;
    for (const auto& victim : victims) {
      // Fresh probationary chunks only make room for more fresh ones, and
      // a protected chunk that is not stale is part of the resident subset:
      // when either is next, stop at the high watermark (see eviction.h).
      // Only stale chunks go down to the low one. Victims come in policy
      // order, so nothing after them goes either.
      done =
          done || quota_.BytesOverLow() == 0 || (!victim.stale() && !quota_.CommittedAboveHigh());
      // A chunk committed since the pick is fresh and newer than any fresh
      // victim here, so it goes before them and before every protected
      // one: pick again (a bounded number of times, so a steady stream of
      // commits cannot stall the round). Stale victims go regardless.
      repick = repick || (!victim.stale() && repicks < kMaxRepicks && quota_.commits() != commits);
      if (done || repick) {
        resident_->Unlatch(victim.key);
        continue;
      }
      const ChunkKey& key = victim.key;
      bool in_slot = false;
      auto freed = PunchAndDrop(key, victim.rank, &in_slot);
      resident_->ReleaseLatch(key);
      if (!freed.ok()) {
        // Punched, but its record stays (read as a checksum failure and
        // fetched again). The index refuses writes, as RocksDB does after
        // its disk was full until it finds room: what the rest of the batch
        // frees by its punches is that room.
        if (!failed) LOG_WARN("evicting: {}", freed.status().message());
        failed = true;
        continue;
      }
      dropped = true;
      quota_.Free(*freed);
      if (*freed) {
        counters_.evicted_bytes += *freed;
        counters_.evicted_chunks++;
        evicted += *freed;
      }
      if (!in_slot) touched.insert(key.version_key());  // its file may be empty now
    }
    if (done) break;
    // No drop went through: picking again would pick the same victims.
    if (failed && !dropped) break;
    if (repick) repicks++;
  }
  for (const VersionKey& v : touched) {
    auto u = store_->UnlinkIfIdle(v, [&]() -> Result<bool> {
      STOKER_ASSIGN_OR_RETURN(bool has, index_->HasChunks(v));
      return !has;
    });
    if (!u.ok()) LOG_WARN("{}", u.status().message());
  }
  if (evicted) {
    LOG_DEBUG("evicted {} bytes", evicted);
    evicted_once_ = true;
    evicted_at_ = std::chrono::steady_clock::now();
  }
}

Status ObjectCacheImpl::Warm(const std::string& path) { return StartWarm({path}).status(); }

Result<uint64_t> ObjectCacheImpl::StartWarm(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::Invalid("nothing to warm");
  // Each path checked before any is queued: a job is all of them or none.
  std::vector<bool> files;
  for (const std::string& path : paths) {
    auto st = origin_->Stat(path);
    if (!st.ok()) return st.status();
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
      return Status::Invalid("cannot warm '" + path + "': not a file or directory");
    }
    files.push_back(S_ISREG(st->st_mode));
  }
  uint64_t id = 0;
  {
    MutexLock l(warm_mu_);
    id = next_warm_job_++;
    auto job = std::make_shared<WarmJob>(id, paths);
    warm_jobs_.push_back(job);
    if (warm_jobs_.size() > kMaxWarmJobs) warm_jobs_.pop_front();
    for (size_t i = 0; i < paths.size(); ++i) {
      // A file counts as queued now, so stat shows it at once; a
      // directory's files count as the walk finds them.
      if (files[i]) counters_.warm_files_queued++;
      warm_queue_.push_back({paths[i], files[i], job});
    }
  }
  warm_cv_.notify_one();
  return id;
}

nlohmann::json ObjectCacheImpl::WarmStatus(uint64_t id) {
  MutexLock l(warm_mu_);
  if (id == 0) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& job : warm_jobs_) all.push_back(job->Json());
    return all;
  }
  for (const auto& job : warm_jobs_) {
    if (job->id() == id) return job->Json();
  }
  return nullptr;
}

void ObjectCacheImpl::WarmLoop() {
  // The walk is warm work: what it causes (a decoded view's listing lays
  // out files) queues behind readers and prefetch.
  WorkerPool::AsPriority warm(WorkerPool::Priority::kLow);
  for (;;) {
    WarmEntry entry;
    {
      MutexLock l(warm_mu_);
      warm_cv_.Wait(warm_mu_,
                    [&]() REQUIRES(warm_mu_) { return warm_stop_ || !warm_queue_.empty(); });
      if (warm_stop_) return;
      entry = std::move(warm_queue_.front());
      warm_queue_.pop_front();
    }
    const std::shared_ptr<WarmJob>& job = entry.job;
    bool counted = entry.counted;
    auto queue_file = [&](const std::string& p, uint64_t size) {
      if (!counted) counters_.warm_files_queued++;
      counted = false;
      job->Found(size);
      if (!pool_->Submit(WorkerPool::Priority::kLow,
                         [this, p, size, job] { WarmFile(p, size, job); })) {
        counters_.warm_files_queued--;
        job->Failed(p, "the daemon is stopping");
      }
    };
    const std::string& root = entry.path;
    auto st = origin_->Stat(root);
    if (!st.ok()) {
      LOG_WARN("warm '{}': {}", root, st.status().message());
      if (counted) counters_.warm_files_done++;
      job->Found(0);
      job->Failed(root, st.status().message());
      job->RootWalked();
      continue;
    }
    if (S_ISREG(st->st_mode)) {
      queue_file(root, static_cast<uint64_t>(st->st_size));
      job->RootWalked();
      continue;
    }
    if (counted) {
      counters_.warm_files_done++;  // it was a file when queued; it is not one now
      counted = false;
    }
    std::vector<std::string> dirs{root};
    while (!dirs.empty()) {
      {
        MutexLock l(warm_mu_);
        if (warm_stop_) return;
      }
      std::string dir = std::move(dirs.back());
      dirs.pop_back();
      std::vector<std::pair<std::string, uint64_t>> files;
      Status s = origin_->ReadDir(dir, [&](const OriginDirEntry& e) {
        if (S_ISDIR(e.st.st_mode)) dirs.push_back(JoinPath(dir, e.name));
        if (S_ISREG(e.st.st_mode)) {
          files.emplace_back(JoinPath(dir, e.name), static_cast<uint64_t>(e.st.st_size));
        }
        return true;
      });
      if (!s.ok()) {
        LOG_WARN("warm: {}", s.message());
        job->Found(0);
        job->Failed(dir, s.message());
      }
      for (const auto& [f, size] : files) queue_file(f, size);
    }
    job->RootWalked();
  }
}

void ObjectCacheImpl::WarmFile(const std::string& path, uint64_t size,
                               const std::shared_ptr<WarmJob>& job) {
  auto opened = OpenAs(path, false, Opener::kBackground);
  if (!opened.ok()) {
    LOG_WARN("warm '{}': {}", path, opened.status().message());
    counters_.warm_files_done++;
    job->Failed(path, opened.status().message());
    return;
  }
  const auto& file = opened->file;
  const uint64_t step = std::max<uint64_t>(1, (8ull << 20) / chunk_size_);
  Status failed;
  for (uint64_t first = 0; first < file->version->chunks; first += step) {
    FetchTally tally;
    Status s = FillRange(file->version, *file->origin, first, first + step, &tally);
    counters_.warm_bytes += tally.bytes;
    if (!s.ok()) {
      LOG_WARN("warm '{}': {}", path, s.message());
      failed = s;
      break;
    }
  }
  counters_.warm_files_done++;
  if (failed.ok()) {
    job->Done(size);
  } else {
    job->Failed(path, failed.message());
  }
}

}  // namespace stoker
