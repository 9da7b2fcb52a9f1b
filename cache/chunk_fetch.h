// ChunkFetch: every fetch of chunks the cache does not hold, for a reader, a
// prefetch or a warm. Concurrent misses of one chunk collapse into one origin
// read (a Fetcher flight: the first to join leads, the others wait);
// consecutive chunks a call leads are read as one run (OriginReader); what
// was read is stored (ChunkWriter), or its store put off (DeferredStores) and
// the bytes held meanwhile in RecentBytes (kUnstored), where the next fetch
// of the same chunk finds them instead of reading the origin again.
//
// A fetch goes in rounds: join a flight per chunk not done; for the flights
// it leads, take what another fetch finished meanwhile (stored, held for the
// file, or unstored), else read the runs from the origin; then wait for the
// flights it follows. A prefetch that gives up a chunk its reader has passed
// (EAGAIN) leaves its followers to lead it in their next round.
//
// Leaders complete every flight they lead before they wait on others, which
// makes waiting deadlock-free (fetcher.h).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/chunk_reader.h"
#include "cache/chunk_writer.h"
#include "cache/derived_source.h"
#include "cache/fetcher.h"
#include "cache/object_version.h"
#include "cache/origin/origin.h"
#include "cache/origin_reader.h"
#include "cache/raw_reader.h"
#include "cache/readahead.h"
#include "cache/recent_bytes.h"

namespace stoker {

// Chunks and bytes a fetch read from the origin itself (not waited for).
struct FetchTally {
  uint64_t chunks = 0;
  uint64_t bytes = 0;
};

class ChunkFetch {
 public:
  // The parts it fetches with; all outlive it.
  struct Parts {
    uint64_t chunk_size = 0;
    OriginReader* origin_reader = nullptr;
    ChunkWriter* writer = nullptr;
    ChunkReader* reader = nullptr;      // chunks stored by a fetch that just finished
    DerivedSource* derived = nullptr;   // asked to expedite what a follower waits on
    CacheCounters* counters = nullptr;  // collapsed_misses
    // Holds chunks while their stores are put off, within its kUnstored
    // share (CacheOptions::deferred_store_bytes).
    RecentBytes* recent = nullptr;
  };
  // readahead_limit: the most chunks a Readahead holds.
  ChunkFetch(Parts parts, size_t readahead_limit) : p_(parts), readahead_limit_(readahead_limit) {}

  // Chunks a fetch put off storing, held in RecentBytes until stored when
  // this goes: a reader's, when its ReadReply lets go of it (fs/: after the
  // reply was sent); a prefetch's or warm's, when its range is fetched and
  // every reader waiting on it answered.
  class DeferredStores : public ReadReply::Keepalive {
   public:
    DeferredStores(ChunkFetch* fetch, std::shared_ptr<ObjectVersion> v)
        : fetch_(fetch), v_(std::move(v)) {}
    ~DeferredStores() override;
    // True if chunk idx's store was put off (it is held unstored now).
    bool Defer(uint64_t idx, const ChunkBytes& bytes);
    bool empty() const { return chunks_.empty(); }

   private:
    ChunkFetch* const fetch_;
    const std::shared_ptr<ObjectVersion> v_;
    std::vector<std::pair<uint64_t, ChunkBytes>> chunks_;
  };

  // How one fetch goes.
  struct Request {
    Urgency urgency = Urgency::kReader;  // whom it reads for (the origin orders its work by it)
    Readahead* readahead = nullptr;      // also holds what this fetch read (may be null)
    // A prefetch: gives up chunks its reader has gone past (their bytes
    // stay empty).
    bool ahead = false;
    DeferredStores* defer = nullptr;  // where stores may be put off (null: stored now)
  };

  // Fetches the listed chunks of v (ascending, not held) and stores them;
  // (*out)[i] is chunk idx[i]'s bytes. The first error of any chunk, after
  // every chunk is done.
  Status Fetch(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin,
               const std::vector<uint64_t>& idx, const Request& request,
               std::vector<ChunkBytes>* out, FetchTally* tally);

  // Bytes held while their stores are put off.
  uint64_t unstored_bytes() const { return p_.recent->bytes(RecentBytes::Kind::kUnstored); }

 private:
  struct Job;
  bool JoinFlights(Job& job);
  void TakeHeld(Job& job);
  void LeadRuns(Job& job);
  void AwaitFollowed(Job& job);

  const Parts p_;
  Fetcher fetcher_;
  const size_t readahead_limit_;
};

}  // namespace stoker
