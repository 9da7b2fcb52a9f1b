// ReadPath: a read of an open file (ObjectCache::Read), served from what the
// cache holds and what it fetches. A read is planned, then each case is
// served by a step of its own:
// - PlanRead sorts each chunk of the span by where its bytes come from: the
//   open's Readahead (memory), a verified range of the data file (pinned),
//   a stored chunk not checked yet (its check claimed), another's check
//   (awaited), or nowhere yet (missing);
// - CheckUnverified reads the claimed chunks back and checks them (serving
//   the bytes it read); AwaitChecks takes what the others checked;
//   FetchMissing takes the rest from the Readahead or ChunkFetch;
// - Assemble appends the reply's segments in order and counts the hits.
// A derived file's range is checked with its DerivedSource before and after.
//
// Owns nothing between reads: what a read holds (pins, the data file,
// fetched buffers, stores put off) goes with its ReadReply, which may
// outlive the ReadPath but not the other parts (ResidentChunks excepted).
//
// Thread-safety: all methods are thread-safe; reads of one open may run at
// once. No lock of its own. A read ends its own claims on checks before it
// waits for others' (Readahead::AwaitCheck), so two reads never wait on
// each other; it waits on no open (fs/ holds ObjectVersion::serving
// shared around it: ObjectCache::HoldServe).
#pragma once

#include <cstdint>
#include <memory>

#include "cache/cache_stats.h"
#include "cache/chunk.h"
#include "cache/chunk_fetch.h"
#include "cache/chunk_index.h"
#include "cache/chunk_reader.h"
#include "cache/chunk_store.h"
#include "cache/chunk_writer.h"
#include "cache/derived_source.h"
#include "cache/hit_log.h"
#include "cache/open_file_state.h"
#include "cache/prefetcher.h"
#include "cache/raw_reader.h"
#include "cache/resident_chunks.h"

namespace stoker {

class ReadPath {
 public:
  // The parts it reads with; all outlive it and every reply it filled,
  // except resident, which those replies share (their pins).
  struct Parts {
    uint64_t chunk_size = 0;
    ChunkIndex* index = nullptr;
    ChunkStore* store = nullptr;
    std::shared_ptr<ResidentChunks> resident;
    ChunkWriter* writer = nullptr;      // drops chunks found bad, or without a data file
    ChunkReader* reader = nullptr;      // checks chunks not verified yet
    ChunkFetch* fetch = nullptr;        // misses
    HitLog* hits = nullptr;             // each chunk served from the cache
    Prefetcher* prefetcher = nullptr;   // told of each read served
    DerivedSource* derived = nullptr;   // a derived file's ranges that read as EIO
    CacheCounters* counters = nullptr;  // bytes_read, cache_hit_bytes, errors, ...
  };
  explicit ReadPath(Parts parts) : p_(std::move(parts)) {}

  // ObjectCache::Read: [off, off + len) of f, clipped to its size, into out.
  // ESTALE for a superseded version; a derived file's EIO where its source
  // says so; an origin error for a chunk that had to be fetched.
  Status Read(OpenFileState& f, uint64_t off, size_t len, ReadReply* out);

 private:
  struct ReadPlan;
  // Read without a derived file's check of its ranges.
  Status ReadVersion(OpenFileState& f, uint64_t off, size_t len, ReadReply* out);
  // Pins what is cached and verified (served from the data file), takes
  // what the read-ahead holds, claims the checks of stored chunks not yet
  // verified, and lists what others are checking and what is missing.
  ReadPlan PlanRead(OpenFileState& f, const ChunkSpan& span);
  // Checks the claimed chunks against their records (reading them once, and
  // serving those bytes); a bad one, or a data file gone, becomes missing.
  void CheckUnverified(const ObjectVersion& v, ReadPlan& plan);
  // The data file of plan's pinned and claimed chunks, kept in the reply;
  // if it is gone, those chunks are dropped and become missing.
  void KeepDataFile(const ObjectVersion& v, ReadPlan& plan, std::vector<ChunkToCheck>& to_check);
  // Waits for the checks others hold; what they did not keep becomes missing.
  void AwaitChecks(OpenFileState& f, ReadPlan& plan);
  // Takes missing chunks from the read-ahead, else fetches them from the
  // origin (their stores put off into deferred).
  Status FetchMissing(OpenFileState& f, ReadPlan& plan, ChunkFetch::DeferredStores* deferred);
  // Appends the span's segments to out, counting hits; returns the bytes
  // served from the cache.
  uint64_t Assemble(const ObjectVersion& v, ReadPlan& plan, ReadReply* out);

  const Parts p_;
};

}  // namespace stoker
