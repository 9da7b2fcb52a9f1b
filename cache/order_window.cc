#include "cache/order_window.h"

#include <functional>

#include "util/status.h"

namespace stoker {

namespace {
uint64_t HashOf(std::string_view path) { return std::hash<std::string_view>{}(path); }
}  // namespace

void OrderWindow::Append(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    STOKER_CHECK(offsets_.size() < kNone, "an order of more than 2^32 files");
    const auto pos = static_cast<uint32_t>(offsets_.size());
    offsets_.push_back(paths_.size());
    paths_ += p;
    state_.push_back(State::kPending);
    next_same_.push_back(kNone);
    auto [it, added] = chains_.try_emplace(HashOf(p), Chain{pos, pos});
    if (!added) {
      next_same_[it->second.last] = pos;
      it->second.last = pos;
    }
  }
}

std::string_view OrderWindow::path(size_t pos) const {
  const uint64_t end = pos + 1 < offsets_.size() ? offsets_[pos + 1] : paths_.size();
  return std::string_view(paths_).substr(offsets_[pos], end - offsets_[pos]);
}

uint64_t OrderWindow::memory_bytes() const {
  return paths_.size() + offsets_.size() * kOverheadPerPath;
}

OrderWindow::Open OrderWindow::Opened(std::string_view p) {
  auto it = chains_.find(HashOf(p));
  if (it == chains_.end()) return {};
  Chain& chain = it->second;
  // Opened occurrences at the head of a path's chain are dropped, so a
  // path read once per epoch costs one step.
  while (chain.first != kNone && state_[chain.first] == State::kOpened && path(chain.first) == p) {
    chain.first = next_same_[chain.first];
  }
  uint32_t pos = chain.first;
  while (pos != kNone && (state_[pos] == State::kOpened || path(pos) != p)) pos = next_same_[pos];
  if (pos == kNone) return {};
  Open open{true, state_[pos] == State::kFetched};
  if (auto f = fetched_bytes_.find(pos); f != fetched_bytes_.end()) {
    bytes_ahead_ -= f->second;
    fetched_bytes_.erase(f);
  }
  state_[pos] = State::kOpened;
  if (pos + 1 > reached_) {
    reached_ = pos + 1;
    ForgetBehind();
  }
  return open;
}

void OrderWindow::ForgetBehind() {
  const size_t behind = Behind();
  while (!fetched_bytes_.empty() && fetched_bytes_.begin()->first < behind) {
    bytes_ahead_ -= fetched_bytes_.begin()->second;
    fetched_bytes_.erase(fetched_bytes_.begin());
  }
}

std::optional<size_t> OrderWindow::Next() {
  if (next_ < Behind()) next_ = Behind();
  const size_t until = std::min(size(), reached_ + options_.ahead);
  while (next_ < until) {
    if (state_[next_] != State::kPending) {
      ++next_;
      continue;
    }
    if (bytes_ahead_ >= options_.ahead_bytes) return std::nullopt;
    state_[next_] = State::kFetching;
    return next_++;
  }
  return std::nullopt;
}

bool OrderWindow::Wanted(size_t pos) const {
  return pos < size() && pos >= Behind() && state_[pos] == State::kFetching;
}

void OrderWindow::Fetched(size_t pos, uint64_t bytes, bool ok) {
  if (pos >= size() || state_[pos] != State::kFetching) return;  // opened meanwhile
  state_[pos] = ok ? State::kFetched : State::kFailed;
  if (!ok || pos < Behind()) return;
  fetched_bytes_[pos] = bytes;
  bytes_ahead_ += bytes;
}

}  // namespace stoker
