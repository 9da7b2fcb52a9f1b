#include "cache/eviction.h"

#include <algorithm>
#include <limits>

#include "util/status.h"

namespace stoker {

EvictionRank EvictionPolicy::RankOf(const ChunkPolicyState& s) {
  if (s.state == HitState::kProtected) return {kProtectedQueue, s.last_access};
  // Newest first: the order key falls as the insert sequence grows.
  return {kProbationaryQueue, std::numeric_limits<uint64_t>::max() - s.insert_seq};
}

ChunkPolicyState EvictionPolicy::OnInsert(uint64_t now) const {
  return {HitState::kProbationary, now, now};
}

ChunkPolicyState EvictionPolicy::OnHit(const ChunkPolicyState& s, uint64_t now) const {
  return {HitState::kProtected, s.insert_seq, std::max(now, s.last_access)};
}

bool EvictionPolicy::IsStale(uint64_t last_access, uint64_t now, uint64_t resident_chunks) const {
  if (now <= last_access) return false;
  return now - last_access > options_.stale_factor * std::max<uint64_t>(resident_chunks, 1);
}

std::vector<EvictionPolicy::Victim> EvictionPolicy::PickVictims(
    Cursor& probationary_newest, Cursor& probationary_oldest, Cursor& protected_lru, uint64_t now,
    uint64_t resident_chunks, size_t max, size_t max_not_stale,
    const std::function<bool(const ChunkKey&)>& accept) const {
  std::vector<Victim> victims;
  // The two probationary walks meet in the middle; offer each chunk once.
  std::unordered_set<ChunkKey, ChunkKeyHash> offered;
  auto insert_seq = [](const Cursor& c) {
    return std::numeric_limits<uint64_t>::max() - c.rank().order;
  };
  // A fresh chunk refused (pinned: its reply or its store is in progress)
  // is still the next to go, once its pin is gone: the chunks behind it
  // wait for the next round rather than go in its place.
  size_t not_stale = 0;
  while (victims.size() < max) {
    Cursor* from = nullptr;
    VictimKind kind;
    if (protected_lru.Valid() && IsStale(protected_lru.rank().order, now, resident_chunks)) {
      from = &protected_lru;
      kind = VictimKind::kStaleProtected;
    } else if (probationary_oldest.Valid() &&
               IsStale(insert_seq(probationary_oldest), now, resident_chunks)) {
      from = &probationary_oldest;
      kind = VictimKind::kStaleProbationary;
    } else if (probationary_newest.Valid()) {
      from = &probationary_newest;
      kind = VictimKind::kFreshProbationary;
    } else if (protected_lru.Valid()) {
      from = &protected_lru;
      kind = VictimKind::kProtected;
    } else {
      break;
    }
    Victim v{from->rank(), from->key(), kind};
    if (!v.stale() && not_stale == max_not_stale) break;
    from->Next();
    if (!offered.insert(v.key).second) {
      // Seen from the other end: the walks have crossed, probationary is done.
      if (from == &probationary_newest) {
        while (probationary_newest.Valid()) probationary_newest.Next();
      } else {
        while (probationary_oldest.Valid()) probationary_oldest.Next();
      }
      continue;
    }
    if (accept(v.key)) {
      victims.push_back(v);
      if (!v.stale()) not_stale++;
    } else if (kind == VictimKind::kFreshProbationary) {
      break;
    }
  }
  return victims;
}

Quota::Quota(uint64_t capacity, double high_watermark, double low_watermark)
    : capacity_(capacity), high_watermark_(high_watermark), low_watermark_(low_watermark) {
  STOKER_CHECK(low_watermark > 0 && low_watermark <= high_watermark && high_watermark <= 1,
               "watermarks must satisfy 0 < low <= high <= 1");
  SetLimit(capacity);
}

void Quota::SetLimit(uint64_t bytes) {
  MutexLock l(mu_);
  limit_ = std::min(capacity_, bytes);
  high_ = static_cast<uint64_t>(static_cast<long double>(limit_) * high_watermark_);
  low_ = static_cast<uint64_t>(static_cast<long double>(limit_) * low_watermark_);
}

uint64_t Quota::limit() const {
  MutexLock l(mu_);
  return limit_;
}

void Quota::SetCommitted(uint64_t bytes) {
  MutexLock l(mu_);
  committed_ = bytes;
}

void Quota::SetIndexBytes(uint64_t bytes) {
  MutexLock l(mu_);
  index_ = bytes;
}

bool Quota::TryReserve(uint64_t n) {
  MutexLock l(mu_);
  uint64_t used = committed_ + reserved_ + index_;
  if (used > limit_ || n > limit_ - used) {
    refused_ = true;
    return false;
  }
  reserved_ += n;
  return true;
}

void Quota::Commit(uint64_t n) {
  MutexLock l(mu_);
  STOKER_CHECK(reserved_ >= n, "commit of bytes never reserved");
  reserved_ -= n;
  committed_ += n;
  commits_++;
}

void Quota::Release(uint64_t n) {
  MutexLock l(mu_);
  STOKER_CHECK(reserved_ >= n, "release of bytes never reserved");
  reserved_ -= n;
}

void Quota::Free(uint64_t n) {
  MutexLock l(mu_);
  // The index's usage record is the truth and is kept in step with the
  // chunk records; clamping only guards against an index edited behind us.
  committed_ -= std::min(committed_, n);
}

uint64_t Quota::committed() const {
  MutexLock l(mu_);
  return committed_;
}

uint64_t Quota::commits() const {
  MutexLock l(mu_);
  return commits_;
}

uint64_t Quota::index_bytes() const {
  MutexLock l(mu_);
  return index_;
}

uint64_t Quota::used() const {
  MutexLock l(mu_);
  return committed_ + reserved_ + index_;
}

bool Quota::AboveHigh() const {
  MutexLock l(mu_);
  return committed_ + reserved_ + index_ > high_;
}

bool Quota::CommittedAboveHigh() const { return CommittedOverHigh() > 0; }

uint64_t Quota::CommittedOverHigh() const {
  MutexLock l(mu_);
  return committed_ + index_ > high_ ? committed_ + index_ - high_ : 0;
}

bool Quota::TakeRefused() {
  MutexLock l(mu_);
  bool r = refused_;
  refused_ = false;
  return r;
}

bool Quota::RoomBelowLow(uint64_t n) const {
  MutexLock l(mu_);
  return committed_ + reserved_ + index_ + n <= low_;
}

uint64_t Quota::BytesOverLow() const {
  MutexLock l(mu_);
  uint64_t u = committed_ + reserved_ + index_;
  return u > low_ ? u - low_ : 0;
}

}  // namespace stoker
