#include "cache/readahead.h"

namespace stoker {
namespace {

RecentBytes::Key KeyOf(const Readahead& r, uint64_t idx) {
  return RecentBytes::Key{RecentBytes::Kind::kReadahead, r.group, 0, idx};
}

}  // namespace

std::optional<ChunkBytes> Readahead::Get(uint64_t idx) { return recent->Get(KeyOf(*this, idx)); }

bool Readahead::ClaimCheck(uint64_t idx) {
  MutexLock l(mu);
  return checking.insert(idx).second;
}

bool Readahead::Claimed(uint64_t idx) {
  MutexLock l(mu);
  return checking.count(idx) != 0;
}

void Readahead::EndChecks(const std::vector<uint64_t>& idx) {
  if (idx.empty()) return;
  {
    MutexLock l(mu);
    for (uint64_t i : idx) checking.erase(i);
  }
  checked.notify_all();
}

std::optional<ChunkBytes> Readahead::AwaitCheck(uint64_t idx) {
  {
    MutexLock l(mu);
    checked.Wait(mu, [&]() REQUIRES(mu) { return checking.count(idx) == 0; });
  }
  return Get(idx);
}

Readahead::~Readahead() { recent->DropBelow(RecentBytes::Kind::kReadahead, group, 0, UINT64_MAX); }

void Readahead::Put(uint64_t idx, const ChunkBytes& bytes, size_t max) {
  // Past max held, or past the bound: see RecentBytes::Hold.
  recent->Hold(KeyOf(*this, idx), bytes, max);
}

bool Readahead::Wanted(uint64_t idx) {
  {
    MutexLock l(mu);
    if (idx < passed) return false;
  }
  return !recent->Contains(KeyOf(*this, idx));
}

void Readahead::DropBefore(uint64_t idx) {
  {
    MutexLock l(mu);
    passed = idx;
  }
  recent->DropBelow(RecentBytes::Kind::kReadahead, group, 0, idx);
}

}  // namespace stoker
