// ObjectVersion: one cached version of one origin path, shared by every
// open of it; OriginHandle: the origin file behind one open, opened on its
// first miss. Private to cache/ (the ObjectCache's parts).
//
// Thread-safety: ObjectVersion's atomics and at_origin (under at_mu) may be
// used from any thread; its other fields are set before it is shared.
// OriginHandle is thread-safe.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>

#include "cache/chunk.h"
#include "cache/origin/origin.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

// One cached version of one path, shared by every open of it.
struct ObjectVersion {
  std::string path;
  VersionKey key;
  OriginIdentity identity;  // as first cached (its size is the version's)
  struct stat st {};
  uint64_t chunks = 0;
  // A newer version replaced this one (or the path is gone): its chunks are
  // being dropped and must be neither served nor written.
  std::atomic<bool> superseded{false};
  // Shared by each fs read of this version until its reply is sent;
  // Supersede takes it exclusively once (see ObjectCache::HoldServe).
  mutable std::shared_mutex serving;
  // A read saw the origin file change under this version: the next open
  // revalidates whatever the revalidation interval says.
  mutable std::atomic<bool> changed_at_origin{false};
  // The index could not record this version (the cache's disk is full): it
  // is served from the origin, its key is this process's own
  // (kUncachedObjectIds), and nothing about it is ever written to the index.
  // Set before the version is shared.
  bool uncached = false;

  // True if now is this version's content (SameContent with where the
  // origin last had it); a move to another filesystem is remembered, so
  // that the next check is against the file it moved to.
  bool AtOrigin(const OriginIdentity& now) const;
  // The origin holds this version's bytes at now (checked by the caller).
  void MovedTo(const OriginIdentity& now) const;

  mutable Mutex at_mu;
  mutable OriginIdentity at_origin GUARDED_BY(at_mu);  // identity, or where it moved
};

// Object ids of uncached versions (ObjectVersion::uncached): the index's own
// count up from 1 and never reach this bit.
inline constexpr uint64_t kUncachedObjectIds = uint64_t{1} << 63;

// ESTALE: the version a file state stands for is no longer the origin's.
inline Status StaleVersion(const ObjectVersion& v) {
  return Status::Error(ESTALE, "origin file '" + v.path + "' changed; reopen it");
}

// The origin file behind one OpenFileState, opened on first miss.
class OriginHandle {
 public:
  // Opens path for the version whose identity is version (Origin::OpenVersion;
  // tests may leave it out).
  OriginHandle(std::shared_ptr<Origin> origin, std::string path, OriginIdentity version = {},
               Via via = Via::kAnywhere)
      : origin_(std::move(origin)),
        path_(std::move(path)),
        version_(std::move(version)),
        via_(via) {}
  // Failures are not remembered: an origin that comes back is used again.
  Result<std::shared_ptr<OriginFile>> Get();
  // file (from Get) failed because the origin could not be reached: the
  // next Get opens the path again (a recovered origin, a fresh descriptor)
  // instead of reusing it. Readers still using file keep it alive.
  void Forget(const OriginFile* file);
  // Whether this handle reads the origin alone (a cache group member's
  // request), never asking members.
  bool origin_only() const { return via_ == Via::kOriginOnly; }
  // Whether a read of [off, off + len) may wait on another member
  // (Origin::AsksMembers).
  bool AsksMembers(uint64_t off, uint64_t len) const {
    return !origin_only() && origin_->AsksMembers(path_, version_, off, len);
  }

 private:
  const std::shared_ptr<Origin> origin_;
  const std::string path_;
  const OriginIdentity version_;
  const Via via_;
  Mutex mu_;
  std::shared_ptr<OriginFile> file_ GUARDED_BY(mu_);
};

}  // namespace stoker
