#include "cache/dir_scan.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "util/path.h"

namespace stoker {

DirScan::DirScan(Options options, Lister lister) : options_(options), lister_(std::move(lister)) {}

size_t DirScan::followed() const {
  MutexLock l(mu_);
  return lru_.size();
}

std::shared_ptr<DirScan::Dir> DirScan::Touch(const std::string& dir) {
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if ((*it)->path == dir) {
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front();
    }
  }
  auto d = std::make_shared<Dir>();
  d->path = dir;
  lru_.push_front(d);
  while (lru_.size() > options_.max_dirs) lru_.pop_back();
  return d;
}

void DirScan::Fill(Dir& d, std::vector<std::string> names) {
  d.listed = true;
  d.pos.clear();
  for (Order& o : d.order) o = Order{};
  if (names.size() > options_.max_entries) {
    d.too_big = true;
    d.names.clear();
    return;
  }
  d.names = std::move(names);
  const uint32_t n = static_cast<uint32_t>(d.names.size());
  d.order[0].names.resize(n);
  std::iota(d.order[0].names.begin(), d.order[0].names.end(), 0);
  d.order[1].names = d.order[0].names;
  std::sort(d.order[1].names.begin(), d.order[1].names.end(),
            [&](uint32_t a, uint32_t b) { return d.names[a] < d.names[b]; });
  d.pos.reserve(n);
  for (uint32_t i = 0; i < n; ++i) d.pos[d.names[i]].first = i;
  for (uint32_t i = 0; i < n; ++i) d.pos[d.names[d.order[1].names[i]]].second = i;
}

bool DirScan::Step(Dir& d, const std::string& name, std::vector<std::string>* out,
                   std::string* next) {
  auto it = d.pos.find(name);
  if (it == d.pos.end()) return false;
  std::unordered_set<uint32_t> picked;
  const size_t n = d.names.size();
  const uint32_t at[2] = {it->second.first, it->second.second};
  for (int k = 0; k < 2; ++k) {
    Order& o = d.order[k];
    const size_t p = at[k];
    if (o.last != SIZE_MAX && p == o.last + 1) {
      o.streak++;
    } else if (p != o.last) {
      o.streak = 0;
      o.returned_until = 0;
    }
    o.last = p;
    if (o.streak == 0 || out == nullptr) continue;
    if (next != nullptr && next->empty() && p + 1 < n)
      *next = JoinPath(d.path, d.names[o.names[p + 1]]);
    const size_t until = std::min(n, p + 1 + options_.ahead);
    for (size_t q = std::max(o.returned_until, p + 1); q < until; ++q) {
      const uint32_t idx = o.names[q];
      if (picked.insert(idx).second) out->push_back(JoinPath(d.path, d.names[idx]));
    }
    o.returned_until = std::max(o.returned_until, until);
  }
  return true;
}

std::vector<std::string> DirScan::OnOpen(const std::string& path, std::string* next) {
  std::vector<std::string> out;
  if (next != nullptr) next->clear();
  if (options_.ahead == 0) return out;
  auto [dir, name] = SplitPath(path);
  MutexLock l(mu_);
  const bool consecutive = have_last_ && last_dir_ == dir;
  last_dir_ = dir;
  have_last_ = true;
  std::shared_ptr<Dir> d = Touch(dir);
  if (d->too_big) return out;
  if (!d->listed) {
    if (!consecutive) {
      d->unlisted_last = name;
      return out;
    }
    l.Unlock();
    Result<std::vector<std::string>> names = lister_(dir);
    l.Lock();
    if (!names.ok()) {
      d->too_big = true;  // not followed until it leaves the LRU
      return out;
    }
    if (!d->listed) {
      Fill(*d, std::move(*names));
      if (!d->unlisted_last.empty()) Step(*d, d->unlisted_last, nullptr);
    }
    d->unlisted_last.clear();
    if (d->too_big) return out;
  }
  if (!Step(*d, name, &out, next)) {
    d->listed = false;  // the directory changed since it was listed
    d->unlisted_last = name;
  }
  return out;
}

}  // namespace stoker
