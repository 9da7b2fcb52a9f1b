// VersionTable: which version of each origin path this process serves. An
// entry is the path's index record as last validated and the ObjectVersion
// every open of it shares, so that an open within --revalidate needs neither
// the index nor the origin. Bounded: past max_entries, entries no open file
// uses go (down to 3/4 of it), and the next open of their path reads its
// record from the index again (a million-file dataset must not keep a
// million versions in memory). Nothing here is persistent: the index holds
// the records.
//
// Thread-safety: all methods are thread-safe. Entries are copies; the
// ObjectVersion they point to is shared (see object_version.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/index_format.h"
#include "cache/object_version.h"
#include "util/mutex.h"

namespace stoker {

class VersionTable {
 public:
  struct Entry {
    ObjectRecord rec;
    std::shared_ptr<ObjectVersion> version;
    bool seen = false;  // an open of this version was returned to fs/ in this process
    // A background open (warm, prefetch) found the origin file changed: the
    // next open for fs/ reports it, so the kernel's pages get invalidated.
    bool change_unannounced = false;
  };

  VersionTable(uint64_t chunk_size, size_t max_entries)
      : chunk_size_(chunk_size), max_entries_(max_entries) {}

  std::optional<Entry> Find(const std::string& path) const;
  // Keeps entry as path's (replacing what was there), trimming past the bound.
  void Put(const std::string& path, Entry entry);
  void Forget(const std::string& path);
  // The paths held at or below prefix ("" is the root: all of them).
  std::vector<std::string> PathsUnder(const std::string& prefix) const;
  size_t size() const;

  // The version a record stands for: its key, identity, chunk count and the
  // attributes a stat returns.
  std::shared_ptr<ObjectVersion> MakeVersion(const std::string& path,
                                             const ObjectRecord& rec) const;
  // An entry for rec that the index does not hold (recording it failed,
  // e.g. with ENOSPC): a version of this process's own, never written to
  // the index (ObjectVersion::uncached; object ids with kUncachedObjectIds).
  Entry Uncached(const std::string& path, ObjectRecord rec);

 private:
  void TrimLocked() REQUIRES(mu_);

  const uint64_t chunk_size_;
  const size_t max_entries_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ GUARDED_BY(mu_);
  std::atomic<uint64_t> uncached_{0};
};

}  // namespace stoker
