// Kept listings: with --revalidate never, the directory listings a mount
// reads are kept in the index ("l" records: the directory's own attributes
// and every entry's), so that neither a listing nor a lookup of a name in a
// listed directory asks the origin again, in this process or after a
// remount (docs/semantics.md, "Static datasets").
//
// ListingStore holds the records: bounded (their encoded bytes at most
// max_bytes, the oldest kept dropped first), and all dropped when a cache is
// opened without --revalidate never (they may be stale by then).
// KeptListingsOrigin wraps the origin the mount reads: Stat and ReadDir are
// answered from kept listings where there are, and what the origin lists is
// kept; everything else passes through. It passes everything through until
// a store is attached (the cache opens after the origin is made).
//
// What a kept listing gives up: a file added, removed or changed at the
// origin is not seen in it (a change to a file seen while reading it still
// makes a new version: cache/file_opener.h).
//
// Thread-safety: both classes are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "cache/index_format.h"
#include "cache/origin/origin.h"
#include "util/mutex.h"

namespace stoker {

class ChunkIndex;

class ListingStore {
 public:
  // keep: false drops every kept listing (a mount without never).
  static Result<std::unique_ptr<ListingStore>> Open(ChunkIndex* index, uint64_t max_bytes,
                                                    bool keep);

  // The listing kept of dir ("" is the root), if any. A record that does not
  // decode is dropped (the origin is asked again).
  Result<std::optional<KeptListing>> Get(const std::string& dir);
  // Keeps dir's listing, dropping the oldest kept ones past the bound. A
  // listing larger than the whole bound is not kept.
  Status Put(const std::string& dir, const KeptListing& listing);

  // Drops dir's listing.
  Status Drop(const std::string& dir);
  // Drops the listings of prefix, of every directory below it, and of
  // prefix's parent (which holds prefix's own entry); "" drops them all.
  Status DropUnder(const std::string& prefix);
  // Whether dir's listing is kept.
  bool Has(const std::string& dir) const;

  uint64_t count() const;
  uint64_t bytes() const;
  uint64_t dropped() const { return dropped_.load(); }

 private:
  ListingStore(ChunkIndex* index, uint64_t max_bytes) : index_(index), max_bytes_(max_bytes) {}

  ChunkIndex* const index_;
  const uint64_t max_bytes_;
  mutable Mutex mu_;
  // Oldest first: dir -> encoded bytes.
  std::list<std::pair<std::string, uint64_t>> order_ GUARDED_BY(mu_);
  std::unordered_map<std::string, std::list<std::pair<std::string, uint64_t>>::iterator> where_
      GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> dropped_{0};
};

class KeptListingsOrigin final : public ForwardingOrigin {
 public:
  explicit KeptListingsOrigin(std::shared_ptr<Origin> inner) : ForwardingOrigin(std::move(inner)) {}

  // From now on, listings are kept in store (which outlives this origin's
  // use: the cache's).
  void Attach(ListingStore* store) { store_.store(store); }

  Result<struct stat> Stat(const std::string& path) override;
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override;
  // Drops the kept listing of path's directory: the next stat and listing
  // ask the origin (and keep what it says).
  void Stale(const std::string& path) override;
  // Drops what is kept of prefix's tree (ListingStore::DropUnder), held
  // decoded too, then passes it on.
  void Refresh(const std::string& prefix) override;

 private:
  // A kept listing, decoded, with its names indexed.
  struct Decoded {
    KeptListing listing;
    std::map<std::string, size_t, std::less<>> by_name;
  };
  static constexpr size_t kDecodedMax = 1024;  // directories held decoded in memory

  // dir's kept listing, or null (none kept, or no store).
  std::shared_ptr<const Decoded> Kept(const std::string& dir);
  std::shared_ptr<const Decoded> Remember(const std::string& dir, KeptListing listing);

  std::atomic<ListingStore*> store_{nullptr};
  Mutex mu_;
  std::list<std::string> lru_ GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string,
                     std::pair<std::shared_ptr<const Decoded>, std::list<std::string>::iterator>>
      decoded_ GUARDED_BY(mu_);
};

}  // namespace stoker
