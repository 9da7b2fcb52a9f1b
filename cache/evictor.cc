#include "cache/evictor.h"

#include <chrono>
#include <set>

#include "util/log.h"

namespace stoker {
namespace {

constexpr auto kHitFlushInterval = std::chrono::seconds(1);
constexpr auto kIndexMeasureInterval = std::chrono::seconds(2);
constexpr size_t kDropBatch = 1024;
constexpr size_t kMaxVictimsPerRound = 256;
constexpr int kMaxRepicks = 64;

}  // namespace

Evictor::~Evictor() { Stop(); }

void Evictor::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Evictor::Stop() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Evictor::Kick() {
  {
    MutexLock l(mu_);
    kicked_ = true;
  }
  cv_.notify_one();
}

void Evictor::QueueDrop(const VersionKey& v) {
  {
    MutexLock l(mu_);
    drops_.push_back(v);
    kicked_ = true;
  }
  drops_pending_++;
  cv_.notify_one();
}

bool Evictor::Stopping() {
  MutexLock l(mu_);
  return stop_;
}

void Evictor::Loop() {
  using Clock = std::chrono::steady_clock;
  auto last_flush = Clock::now();
  auto last_measure = Clock::now();
  for (;;) {
    {
      MutexLock l(mu_);
      cv_.WaitFor(mu_, kHitFlushInterval, [&]() REQUIRES(mu_) { return stop_ || kicked_; });
      if (stop_) break;
      kicked_ = false;
    }
    auto now = Clock::now();
    if (now - last_measure >= kIndexMeasureInterval) {
      p_.index_size->Measure();
      last_measure = now;
    }
    if (now - last_flush >= kHitFlushInterval) {
      p_.hits->Flush(/*new_window=*/true);
      last_flush = now;
    }
    ProcessDrops();
    p_.writer->MeasureDisk();
    if (p_.quota->TakeRefused() || p_.quota->AboveHigh()) {
      // The policy must see the hits up to now: a chunk hit since the last
      // flush is not a stale one (epochs faster than a flush window would
      // otherwise never promote anything).
      p_.hits->Flush(/*new_window=*/false);
      EvictToLow();
      p_.index_size->Measure();
      last_measure = Clock::now();
    }
  }
  p_.hits->Flush(/*new_window=*/true);
}

void Evictor::ProcessDrops() {
  std::deque<VersionKey> todo;
  {
    MutexLock l(mu_);
    todo.swap(drops_);
  }
  std::deque<VersionKey> later;
  for (const VersionKey& v : todo) {
    if (DropVersion(v)) {
      drops_pending_--;
    } else {
      later.push_back(v);
    }
  }
  if (!later.empty()) {
    MutexLock l(mu_);
    for (const auto& v : later) drops_.push_back(v);
  }
}

bool Evictor::DropVersion(const VersionKey& v) {
  // A write that began before the version was superseded may still
  // commit; its record must not outlive the drop.
  if (p_.store->Writing(v)) return false;
  bool done = false;
  uint64_t freed = 0;
  Status err;
  // A chunk in a slab slot is punched and its slot freed under its latch
  // (the slot is taken again soon, unlike a version's own file, which
  // goes whole with its last chunk). Only a one-chunk version has one.
  const ChunkKey first{v.object_id, v.version, 0};
  auto rec = p_.index->GetChunk(first);
  if (rec.ok() && *rec && (*rec)->slot.valid()) {
    if (!p_.resident->TryLatchForEvict(first)) return false;  // still read: next round
    auto r = p_.writer->PunchAndDrop(first);
    p_.resident->ReleaseLatch(first);
    if (r.ok()) freed += *r;
    err = r.status();
  }
  while (!done && err.ok()) {
    auto r = p_.index->DropVersionChunks(v, kDropBatch, &done);
    if (!r.ok()) {
      err = r.status();
      break;
    }
    freed += *r;
  }
  p_.quota->Free(freed);
  if (!err.ok()) {
    LOG_WARN("dropping an old cached version: {}", err.message());
    return false;
  }
  p_.resident->ForgetVersion(v);
  auto u = p_.store->UnlinkIfIdle(v, []() -> Result<bool> { return true; });
  if (!u.ok()) LOG_WARN("{}", u.status().message());
  return true;
}

std::vector<EvictionPolicy::Victim> Evictor::PickVictims(uint64_t over, uint64_t* commits) {
  const uint64_t chunk_size = p_.chunk_size;
  // Stale chunks go down to the low watermark, others only to the high
  // one; a victim latched and then left in place costs a reader that
  // meets the latch a fetch from the origin, so no more are taken.
  const size_t want =
      static_cast<size_t>(std::min<uint64_t>(kMaxVictimsPerRound, over / chunk_size + 1));
  const uint64_t over_high = p_.quota->CommittedOverHigh();
  const size_t want_not_stale = static_cast<size_t>(
      std::min<uint64_t>(want, over_high == 0 ? 0 : (over_high + chunk_size - 1) / chunk_size));
  // Read before the cursors: a chunk committed after them bumps it.
  *commits = p_.quota->commits();
  auto newest = p_.index->NewEvictCursor(EvictionPolicy::kProbationaryQueue);
  auto oldest = p_.index->NewEvictCursor(EvictionPolicy::kProbationaryQueue, true);
  auto prot = p_.index->NewEvictCursor(EvictionPolicy::kProtectedQueue);
  return p_.policy->PickVictims(
      *newest, *oldest, *prot, p_.index->clock(), p_.index->meta().chunks, want, want_not_stale,
      [&](const ChunkKey& k) { return p_.resident->TryLatchForEvict(k); });
}

Evictor::Round Evictor::EvictVictims(const std::vector<EvictionPolicy::Victim>& victims,
                                     uint64_t commits, bool may_repick,
                                     std::set<VersionKey>* touched) {
  Quota& quota = *p_.quota;
  Round r;
  for (const auto& victim : victims) {
    // Fresh probationary chunks only make room for more fresh ones, and
    // a protected chunk that is not stale is part of the resident subset:
    // when either is next, stop at the high watermark (see eviction.h).
    // Only stale chunks go down to the low one. Victims come in policy
    // order, so nothing after them goes either.
    r.done =
        r.done || quota.BytesOverLow() == 0 || (!victim.stale() && !quota.CommittedAboveHigh());
    // A chunk committed since the pick is fresh and newer than any fresh
    // victim here, so it goes before them and before every protected
    // one: pick again (a bounded number of times, so a steady stream of
    // commits cannot stall the round). Stale victims go regardless.
    r.repick = r.repick || (!victim.stale() && may_repick && quota.commits() != commits);
    if (r.done || r.repick) {
      p_.resident->Unlatch(victim.key);
      continue;
    }
    const ChunkKey& key = victim.key;
    bool in_slot = false;
    auto freed = p_.writer->PunchAndDrop(key, victim.rank, &in_slot);
    p_.resident->ReleaseLatch(key);
    if (!freed.ok()) {
      // Punched, but its record stays (read as a checksum failure and
      // fetched again). The index refuses writes, as RocksDB does after
      // its disk was full until it finds room: what the rest of the batch
      // frees by its punches is that room.
      if (!r.failed) LOG_WARN("evicting: {}", freed.status().message());
      r.failed = true;
      continue;
    }
    r.dropped = true;
    quota.Free(*freed);
    if (*freed) {
      p_.counters->evicted_bytes += *freed;
      p_.counters->evicted_chunks++;
      r.evicted += *freed;
    }
    if (!in_slot) touched->insert(key.version_key());  // its file may be empty now
  }
  return r;
}

void Evictor::EvictToLow() {
  uint64_t evicted = 0;
  std::set<VersionKey> touched;
  int repicks = 0;
  for (;;) {
    const uint64_t over = p_.quota->BytesOverLow();
    if (over == 0 || Stopping()) break;
    uint64_t commits = 0;
    const std::vector<EvictionPolicy::Victim> victims = PickVictims(over, &commits);
    if (victims.empty()) break;  // nothing left that is not pinned
    const Round r = EvictVictims(victims, commits, repicks < kMaxRepicks, &touched);
    evicted += r.evicted;
    if (r.done) break;
    // No drop went through: picking again would pick the same victims.
    if (r.failed && !r.dropped) break;
    if (r.repick) repicks++;
  }
  for (const VersionKey& v : touched) {
    auto u = p_.store->UnlinkIfIdle(v, [&]() -> Result<bool> {
      STOKER_ASSIGN_OR_RETURN(bool has, p_.index->HasChunks(v));
      return !has;
    });
    if (!u.ok()) LOG_WARN("{}", u.status().message());
  }
  if (evicted) {
    LOG_DEBUG("evicted {} bytes", evicted);
    p_.writer->NoteEvicted();
  }
}

}  // namespace stoker
