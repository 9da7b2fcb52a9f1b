#include "cache/hit_log.h"

#include <utility>
#include <vector>

#include "util/log.h"

namespace stoker {

void HitLog::RecordHit(const ChunkKey& key) {
  MutexLock l(mu_);
  const uint64_t now = index_->clock();
  for (const auto* inserted : {&inserted_now_, &inserted_prev_}) {
    auto it = inserted->find(key);
    if (it != inserted->end() && now - it->second <= kSameAccessTicks) return;
  }
  auto [it, fresh] = pending_.try_emplace(key, 0);
  if (fresh) it->second = index_->Tick();
}

void HitLog::RecordInsert(const ChunkKey& key, uint64_t tick) {
  MutexLock l(mu_);
  inserted_now_[key] = tick;
}

void HitLog::Flush(bool new_window) {
  std::unordered_map<ChunkKey, uint64_t, ChunkKeyHash> hits;
  {
    MutexLock l(mu_);
    hits.swap(pending_);
    if (new_window) {
      inserted_prev_.swap(inserted_now_);
      inserted_now_.clear();
    }
  }
  if (hits.empty()) return;
  std::vector<std::pair<ChunkKey, uint64_t>> batch(hits.begin(), hits.end());
  Status s = index_->RecordHits(batch, *policy_);
  if (!s.ok()) LOG_WARN("recording cache hits: {}", s.message());
}

size_t HitLog::pending() const {
  MutexLock l(mu_);
  return pending_.size();
}

}  // namespace stoker
