// Readahead: the chunks one open file fetched (ahead, or on demand), kept in
// memory for its next reads whether or not the cache kept them. Without it a
// full cache (which refuses new chunks, or evicts the newest first) would
// make prefetch read chunks from the origin twice, and a reader going
// through an uncached chunk in small requests fetch it once per request.
// The bytes are a group of the daemon's RecentBytes (kReadahead), under its
// bound: a Put past it keeps nothing (the reader fetches again rather than
// the daemon growing), and a Readahead drops what it holds when it goes.
//
// It also collapses checks: a cached chunk being read back (and checked)
// for this file, by its prefetch or a read, is claimed (ClaimCheck) so that
// the others wait for it (AwaitCheck) instead of reading it twice.
//
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "cache/recent_bytes.h"
#include "util/mutex.h"

namespace stoker {

struct Readahead {
  explicit Readahead(std::shared_ptr<RecentBytes> recent)
      : recent(std::move(recent)), group(this->recent->NewGroup()) {}
  ~Readahead();
  const std::shared_ptr<RecentBytes> recent;  // holds the chunks
  const uint64_t group;                       // this file's kReadahead group there
  Mutex mu;
  uint64_t passed GUARDED_BY(mu) = 0;  // a sequential reader is past chunks below it
  // Cached chunks being read back (and checked, if not verified yet) for
  // this file, by its prefetch or a read: one read per chunk, the others
  // wait for it.
  std::unordered_set<uint64_t> checking GUARDED_BY(mu);
  CondVar checked;
  std::optional<ChunkBytes> Get(uint64_t idx);
  // Claims the check of cached chunk idx; false if another holds the claim.
  bool ClaimCheck(uint64_t idx);
  // Whether another holds the claim on chunk idx.
  bool Claimed(uint64_t idx);
  // Ends the claims on idx (after the good chunks were Put) and wakes who
  // waits for them.
  void EndChecks(const std::vector<uint64_t>& idx);
  // Waits until nobody checks chunk idx, then returns what is held for it
  // (nothing if the check failed or the chunk was not held).
  std::optional<ChunkBytes> AwaitCheck(uint64_t idx);
  // Holds chunk idx; past max held, the lowest-numbered one goes.
  void Put(uint64_t idx, const ChunkBytes& bytes, size_t max);
  // Whether fetching chunk idx ahead still helps: not held, reader not past it.
  bool Wanted(uint64_t idx);
  // The sequential reader is at chunk idx: drop what lies before it.
  void DropBefore(uint64_t idx);
};

}  // namespace stoker
