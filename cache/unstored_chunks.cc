#include "cache/unstored_chunks.h"

namespace stoker {

bool UnstoredChunks::Add(const ChunkKey& key, const ChunkBytes& bytes) {
  MutexLock l(mu_);
  if (bytes_ + bytes.len > max_bytes_ || chunks_.count(key)) return false;
  chunks_.emplace(key, bytes);
  bytes_ += bytes.len;
  return true;
}

std::optional<ChunkBytes> UnstoredChunks::Get(const ChunkKey& key) const {
  MutexLock l(mu_);
  auto it = chunks_.find(key);
  if (it == chunks_.end()) return std::nullopt;
  return it->second;
}

void UnstoredChunks::Remove(const ChunkKey& key) {
  MutexLock l(mu_);
  auto it = chunks_.find(key);
  if (it == chunks_.end()) return;
  bytes_ -= it->second.len;
  chunks_.erase(it);
}

uint64_t UnstoredChunks::bytes() const {
  MutexLock l(mu_);
  return bytes_;
}

}  // namespace stoker
