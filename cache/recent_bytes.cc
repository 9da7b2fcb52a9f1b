#include "cache/recent_bytes.h"

#include <iterator>
#include <utility>

#include "util/status.h"

namespace stoker {

RecentBytes::~RecentBytes() = default;

uint64_t RecentBytes::NewGroup() {
  MutexLock l(mu_);
  return next_group_++;
}

void RecentBytes::EraseLocked(Map::iterator it, std::vector<Entry>* gone) {
  const Kind kind = it->first.kind;
  if (kind == Kind::kProduced) kept_order_.erase(it->second.kept);
  bytes_ -= it->second.bytes.len;
  KindBytesLocked(kind) -= it->second.bytes.len;
  gone->push_back(std::move(it->second));
  entries_.erase(it);
}

void RecentBytes::MakeRoomLocked(uint64_t len, bool kept, std::vector<Entry>* gone) {
  while (!kept_order_.empty() &&
         (bytes_ + len > limits_.total ||
          (kept && KindBytesLocked(Kind::kProduced) + len > limits_.produced))) {
    EraseLocked(entries_.find(kept_order_.front()), gone);
  }
}

bool RecentBytes::Hold(const Key& key, const ChunkBytes& bytes, size_t max_in_group) {
  STOKER_CHECK(key.kind != Kind::kProduced, "RecentBytes: produced bytes are kept, not held");
  std::vector<Entry> gone;  // released after the lock
  MutexLock l(mu_);
  if (entries_.count(key)) return false;
  const Key first{key.kind, key.a, key.b, 0};
  auto in_group = [&](Map::iterator it) REQUIRES(mu_) {
    return it != entries_.end() && it->first.kind == key.kind && it->first.a == key.a &&
           it->first.b == key.b;
  };
  size_t n = 0;
  for (auto it = entries_.lower_bound(first); in_group(it) && n < max_in_group; ++it) ++n;
  for (; n >= max_in_group && n > 0; --n) EraseLocked(entries_.lower_bound(first), &gone);
  const uint64_t share = key.kind == Kind::kReadahead ? limits_.readahead : limits_.unstored;
  const uint64_t kept = KindBytesLocked(Kind::kProduced);
  if (KindBytesLocked(key.kind) + bytes.len > share || bytes_ - kept + bytes.len > limits_.total) {
    return false;
  }
  MakeRoomLocked(bytes.len, false, &gone);
  entries_.emplace(key, Entry{bytes, nullptr, {}});
  bytes_ += bytes.len;
  KindBytesLocked(key.kind) += bytes.len;
  return true;
}

void RecentBytes::Keep(const Key& key, const ChunkBytes& bytes, std::shared_ptr<const void> pin) {
  STOKER_CHECK(key.kind == Kind::kProduced, "RecentBytes: only produced bytes are kept");
  std::vector<Entry> gone;
  MutexLock l(mu_);
  if (auto it = entries_.find(key); it != entries_.end()) EraseLocked(it, &gone);
  if (bytes.len > limits_.produced ||
      bytes_ - KindBytesLocked(Kind::kProduced) + bytes.len > limits_.total) {
    return;
  }
  MakeRoomLocked(bytes.len, true, &gone);
  if (bytes_ + bytes.len > limits_.total) return;
  auto it = entries_.emplace(key, Entry{bytes, std::move(pin), {}}).first;
  it->second.kept = kept_order_.insert(kept_order_.end(), key);
  bytes_ += bytes.len;
  KindBytesLocked(key.kind) += bytes.len;
}

std::optional<ChunkBytes> RecentBytes::Get(const Key& key) const {
  MutexLock l(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.bytes;
}

bool RecentBytes::Contains(const Key& key) const {
  MutexLock l(mu_);
  return entries_.count(key) != 0;
}

void RecentBytes::Drop(const Key& key) {
  std::vector<Entry> gone;
  MutexLock l(mu_);
  if (auto it = entries_.find(key); it != entries_.end()) EraseLocked(it, &gone);
}

void RecentBytes::DropBelow(Kind kind, uint64_t a, uint64_t b, uint64_t end) {
  std::vector<Entry> gone;
  MutexLock l(mu_);
  auto it = entries_.lower_bound(Key{kind, a, b, 0});
  while (it != entries_.end() && it->first.kind == kind && it->first.a == a && it->first.b == b &&
         it->first.index < end) {
    auto next = std::next(it);
    EraseLocked(it, &gone);
    it = next;
  }
}

uint64_t RecentBytes::bytes() const {
  MutexLock l(mu_);
  return bytes_;
}

uint64_t RecentBytes::bytes(Kind kind) const {
  MutexLock l(mu_);
  return kind_bytes_[static_cast<size_t>(kind)];
}

}  // namespace stoker
