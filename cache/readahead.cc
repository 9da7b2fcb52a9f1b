#include "cache/readahead.h"

namespace stoker {

std::optional<ChunkBytes> Readahead::Get(uint64_t idx) {
  MutexLock l(mu);
  auto it = chunks.find(idx);
  if (it == chunks.end()) return std::nullopt;
  return it->second;
}

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
  MutexLock l(mu);
  checked.Wait(mu, [&]() REQUIRES(mu) { return checking.count(idx) == 0; });
  auto it = chunks.find(idx);
  if (it == chunks.end()) return std::nullopt;
  return it->second;
}

Readahead::~Readahead() {
  for (const auto& [idx, b] : chunks) *budget += static_cast<int64_t>(b.len);
}

void Readahead::Put(uint64_t idx, const ChunkBytes& bytes, size_t max) {
  MutexLock l(mu);
  if (chunks.count(idx)) return;
  while (!chunks.empty() && chunks.size() >= max) {
    *budget += static_cast<int64_t>(chunks.begin()->second.len);
    chunks.erase(chunks.begin());
  }
  // Over budget: the reader fetches again rather than the daemon growing.
  if (budget->fetch_sub(static_cast<int64_t>(bytes.len)) < static_cast<int64_t>(bytes.len)) {
    *budget += static_cast<int64_t>(bytes.len);
    return;
  }
  chunks.emplace(idx, bytes);
}

bool Readahead::Wanted(uint64_t idx) {
  MutexLock l(mu);
  return idx >= passed && chunks.count(idx) == 0;
}

void Readahead::DropBefore(uint64_t idx) {
  MutexLock l(mu);
  passed = idx;
  auto end = chunks.lower_bound(idx);
  for (auto it = chunks.begin(); it != end; ++it) *budget += static_cast<int64_t>(it->second.len);
  chunks.erase(chunks.begin(), end);
}

}  // namespace stoker
