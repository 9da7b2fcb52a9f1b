#include "cache/kept_listings.h"

#include <utility>
#include <vector>

#include "cache/chunk_index.h"
#include "util/log.h"
#include "util/path.h"

namespace stoker {

namespace {

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitParent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

Result<std::unique_ptr<ListingStore>> ListingStore::Open(ChunkIndex* index, uint64_t max_bytes,
                                                         bool keep) {
  std::unique_ptr<ListingStore> s(new ListingStore(index, max_bytes));
  std::vector<std::string> stale;
  STOKER_RETURN_IF_ERROR(
      index->ForEach(kListingPrefix, [&](std::string_view k, std::string_view v) {
        if (!keep) {
          stale.emplace_back(k);
          return true;
        }
        MutexLock l(s->mu_);
        s->order_.emplace_back(std::string(k.substr(1)), v.size());
        s->where_[s->order_.back().first] = std::prev(s->order_.end());
        s->bytes_ += v.size();
        return true;
      }));
  for (const std::string& k : stale) STOKER_RETURN_IF_ERROR(index->DeleteRaw(k));
  if (!stale.empty()) {
    LOG_INFO("dropped {} directory listings kept by a mount with --revalidate never", stale.size());
  }
  return s;
}

Result<std::optional<KeptListing>> ListingStore::Get(const std::string& dir) {
  Result<std::optional<std::string>> raw = index_->GetRaw(ListingKey(dir));
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return std::optional<KeptListing>();
  Result<KeptListing> listing = DecodeListing(**raw);
  if (listing.ok()) return std::optional<KeptListing>(std::move(listing).value());
  LOG_WARN("dropping the undecodable kept listing of '{}': {}", dir, listing.status().message());
  (void)index_->DeleteRaw(ListingKey(dir));
  MutexLock l(mu_);
  if (auto it = where_.find(dir); it != where_.end()) {
    bytes_ -= it->second->second;
    order_.erase(it->second);
    where_.erase(it);
  }
  return std::optional<KeptListing>();
}

Status ListingStore::Put(const std::string& dir, const KeptListing& listing) {
  std::string value = EncodeListing(listing);
  if (value.size() > max_bytes_) return Status::OK();
  std::vector<std::string> drop;
  {
    MutexLock l(mu_);
    if (auto it = where_.find(dir); it != where_.end()) {
      bytes_ -= it->second->second;
      order_.erase(it->second);
      where_.erase(it);
    }
    while (!order_.empty() && bytes_ + value.size() > max_bytes_) {
      drop.push_back(order_.front().first);
      bytes_ -= order_.front().second;
      where_.erase(order_.front().first);
      order_.pop_front();
    }
    order_.emplace_back(dir, value.size());
    where_[dir] = std::prev(order_.end());
    bytes_ += value.size();
  }
  for (const std::string& d : drop) STOKER_RETURN_IF_ERROR(index_->DeleteRaw(ListingKey(d)));
  dropped_ += drop.size();
  return index_->PutRaw(ListingKey(dir), value);
}

Status ListingStore::Drop(const std::string& dir) {
  {
    MutexLock l(mu_);
    auto it = where_.find(dir);
    if (it == where_.end()) return Status::OK();
    bytes_ -= it->second->second;
    order_.erase(it->second);
    where_.erase(it);
  }
  return index_->DeleteRaw(ListingKey(dir));
}

Status ListingStore::DropUnder(const std::string& prefix) {
  std::vector<std::string> dirs;
  {
    MutexLock l(mu_);
    for (const auto& [dir, bytes] : order_) {
      if (IsAtOrUnder(dir, prefix) || (!prefix.empty() && dir == ParentOf(prefix))) {
        dirs.push_back(dir);
      }
    }
  }
  for (const std::string& dir : dirs) STOKER_RETURN_IF_ERROR(Drop(dir));
  return Status::OK();
}

bool ListingStore::Has(const std::string& dir) const {
  MutexLock l(mu_);
  return where_.contains(dir);
}

uint64_t ListingStore::count() const {
  MutexLock l(mu_);
  return order_.size();
}

uint64_t ListingStore::bytes() const {
  MutexLock l(mu_);
  return bytes_;
}

std::shared_ptr<const KeptListingsOrigin::Decoded> KeptListingsOrigin::Remember(
    const std::string& dir, KeptListing listing) {
  auto d = std::make_shared<Decoded>();
  d->listing = std::move(listing);
  for (size_t i = 0; i < d->listing.entries.size(); ++i) {
    d->by_name.emplace(d->listing.entries[i].name, i);
  }
  MutexLock l(mu_);
  if (auto it = decoded_.find(dir); it != decoded_.end()) {
    lru_.erase(it->second.second);
    decoded_.erase(it);
  }
  lru_.push_front(dir);
  decoded_[dir] = {d, lru_.begin()};
  while (decoded_.size() > kDecodedMax) {
    decoded_.erase(lru_.back());
    lru_.pop_back();
  }
  return d;
}

std::shared_ptr<const KeptListingsOrigin::Decoded> KeptListingsOrigin::Kept(
    const std::string& dir) {
  ListingStore* store = store_.load();
  if (store == nullptr) return nullptr;
  {
    MutexLock l(mu_);
    if (auto it = decoded_.find(dir); it != decoded_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
  }
  Result<std::optional<KeptListing>> kept = store->Get(dir);
  if (!kept.ok()) {
    LOG_WARN("reading the kept listing of '{}': {}", dir, kept.status().message());
    return nullptr;
  }
  if (!kept->has_value()) return nullptr;
  return Remember(dir, std::move(**kept));
}

void KeptListingsOrigin::Stale(const std::string& path) {
  const std::string dir = SplitParent(path).first;
  {
    MutexLock l(mu_);
    if (auto it = decoded_.find(dir); it != decoded_.end()) {
      lru_.erase(it->second.second);
      decoded_.erase(it);
    }
  }
  if (ListingStore* store = store_.load()) {
    if (Status s = store->Drop(dir); !s.ok()) {
      LOG_WARN("dropping the kept listing of '{}': {}", dir, s.message());
    }
  }
  inner_->Stale(path);
}

void KeptListingsOrigin::Refresh(const std::string& prefix) {
  {
    MutexLock l(mu_);
    for (auto it = decoded_.begin(); it != decoded_.end();) {
      if (IsAtOrUnder(it->first, prefix) || (!prefix.empty() && it->first == ParentOf(prefix))) {
        lru_.erase(it->second.second);
        it = decoded_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (ListingStore* store = store_.load()) {
    if (Status s = store->DropUnder(prefix); !s.ok()) {
      LOG_WARN("dropping the kept listings under '{}': {}", prefix, s.message());
    }
  }
  inner_->Refresh(prefix);
}

Result<struct stat> KeptListingsOrigin::Stat(const std::string& path) {
  if (path.empty()) {
    if (std::shared_ptr<const Decoded> root = Kept("")) return root->listing.self;
    return inner_->Stat(path);
  }
  auto [parent, name] = SplitParent(path);
  if (std::shared_ptr<const Decoded> d = Kept(parent)) {
    auto it = d->by_name.find(name);
    if (it == d->by_name.end()) {
      return Status::Error(ENOENT, "'" + path + "' is not in the kept listing of its directory");
    }
    const OriginDirEntry& e = d->listing.entries[it->second];
    // A view file's size is known only to the view: asked of it.
    if (e.attrs_complete) return e.st;
  }
  return inner_->Stat(path);
}

Status KeptListingsOrigin::ReadDir(const std::string& path,
                                   const std::function<bool(const OriginDirEntry&)>& fn) {
  std::shared_ptr<const Decoded> d = Kept(path);
  if (d == nullptr) {
    KeptListing listing;
    STOKER_RETURN_IF_ERROR(inner_->ReadDir(path, [&](const OriginDirEntry& e) {
      listing.entries.push_back(e);
      return true;
    }));
    ListingStore* store = store_.load();
    if (store != nullptr) {
      Result<struct stat> self = inner_->Stat(path);
      if (self.ok()) {
        listing.self = *self;
        if (Status s = store->Put(path, listing); !s.ok()) {
          LOG_WARN("keeping the listing of '{}': {}", path, s.message());
        }
      }
    }
    d = Remember(path, std::move(listing));
  }
  for (const OriginDirEntry& e : d->listing.entries) {
    if (!fn(e)) break;
  }
  return Status::OK();
}

}  // namespace stoker
