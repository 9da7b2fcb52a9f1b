#include "cache/chunk_fetch.h"

#include <algorithm>
#include <string>

namespace stoker {
namespace {

// One origin read covers at most this many bytes of consecutive misses.
constexpr uint64_t kMaxRunBytes = 8ull << 20;

RecentBytes::Key UnstoredKey(const ChunkKey& k) {
  return RecentBytes::Key{RecentBytes::Kind::kUnstored, k.object_id, k.version, k.index};
}

}  // namespace

ChunkFetch::DeferredStores::~DeferredStores() {
  for (const auto& [idx, bytes] : chunks_) {
    fetch_->p_.writer->Store(*v_, idx, bytes);
    fetch_->p_.recent->Drop(UnstoredKey(ChunkKey{v_->key.object_id, v_->key.version, idx}));
  }
}

bool ChunkFetch::DeferredStores::Defer(uint64_t idx, const ChunkBytes& bytes) {
  if (!fetch_->p_.recent->Hold(UnstoredKey(ChunkKey{v_->key.object_id, v_->key.version, idx}),
                               bytes)) {
    return false;
  }
  chunks_.emplace_back(idx, bytes);
  return true;
}

// One Fetch call: what it was asked, what it has, and this round's flights.
struct ChunkFetch::Job {
  const std::shared_ptr<ObjectVersion>& v;
  OriginHandle& origin;
  const std::vector<uint64_t>& idx;
  const Request& request;
  std::vector<ChunkBytes>* out;
  FetchTally* tally;
  std::vector<char> done;  // per chunk: has its bytes or its error
  Status first_error;
  bool expedited = false;
  Fetcher::Joiner joiner;
  std::vector<std::shared_ptr<Fetcher::Flight>> flights;
  std::vector<char> leader;  // per chunk: this call leads its flight
  ChunkKey Key(size_t i) const { return ChunkKey{v->key.object_id, v->key.version, idx[i]}; }
};

Status ChunkFetch::Fetch(const std::shared_ptr<ObjectVersion>& v, OriginHandle& origin,
                         const std::vector<uint64_t>& idx, const Request& request,
                         std::vector<ChunkBytes>* out, FetchTally* tally) {
  Job job{v, origin, idx, request, out, tally, {}, Status::OK(), false, {}, {}, {}};
  if (!idx.empty()) {
    // Whether the runs this call may lead wait on members (fetcher.h).
    const uint64_t first = idx.front() * p_.chunk_size;
    job.joiner.origin_only = origin.origin_only();
    job.joiner.asks_members = origin.AsksMembers(first, (idx.back() + 1) * p_.chunk_size - first);
  }
  out->assign(idx.size(), ChunkBytes{});
  job.done.assign(idx.size(), 0);
  for (int round = 0; round < 8; ++round) {
    if (!JoinFlights(job)) return job.first_error;
    TakeHeld(job);
    // Lead first, wait after: see fetcher.h.
    LeadRuns(job);
    AwaitFollowed(job);
  }
  return job.first_error.ok() ? Status::IOError("fetch of '" + v->path + "' kept being abandoned")
                              : job.first_error;
}

bool ChunkFetch::JoinFlights(Job& job) {
  const size_t n = job.idx.size();
  job.flights.assign(n, nullptr);
  job.leader.assign(n, 0);
  bool pending = false;
  for (size_t i = 0; i < n; ++i) {
    if (job.done[i]) continue;
    pending = true;
    bool lead = false;
    job.flights[i] = fetcher_.Join(job.Key(i), &lead, job.joiner);
    job.leader[i] = lead;
  }
  return pending;
}

void ChunkFetch::TakeHeld(Job& job) {
  // A fetch that completed between our miss and our Join has stored the
  // chunk already, or left it in this file's readahead or unstored (leaders
  // do that before completing): use that, not the origin. A prefetch whose
  // reader went past the chunk meanwhile gives it up.
  Readahead* readahead = job.request.readahead;
  for (size_t i = 0; i < job.idx.size(); ++i) {
    if (!job.leader[i]) continue;
    const ChunkKey key = job.Key(i);
    std::optional<ChunkBytes> stored;
    if (readahead) stored = readahead->Get(job.idx[i]);
    if (!stored) stored = p_.recent->Get(UnstoredKey(key));
    if (!stored) stored = p_.reader->LoadStored(*job.v, job.idx[i]);
    if (stored) {
      (*job.out)[i] = *stored;
      fetcher_.Complete(key, job.flights[i], *stored);
    } else if (job.request.ahead && readahead && !readahead->Wanted(job.idx[i])) {
      fetcher_.Complete(key, job.flights[i], Status::Error(EAGAIN, "prefetch no longer needed"));
    } else {
      continue;
    }
    job.leader[i] = 0;
    job.done[i] = 1;
  }
}

void ChunkFetch::LeadRuns(Job& job) {
  // Consecutive chunks this call leads are read from the origin as one run.
  const size_t n = job.idx.size();
  const uint64_t max_run = std::max<uint64_t>(1, kMaxRunBytes / p_.chunk_size);
  for (size_t i = 0; i < n;) {
    if (!job.leader[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < n && job.leader[j + 1] && job.idx[j + 1] == job.idx[j] + 1 &&
           j + 1 - i < max_run) {
      ++j;
    }
    auto run =
        p_.origin_reader->ReadRun(*job.v, job.origin, job.idx[i], j - i + 1, job.request.urgency);
    for (size_t k = i; k <= j; ++k) {
      const ChunkKey key = job.Key(k);
      job.done[k] = 1;
      if (!run.ok()) {
        fetcher_.Complete(key, job.flights[k], run.status());
        continue;
      }
      const ChunkBytes& bytes = (*run)[k - i];
      if (job.request.defer == nullptr || !job.request.defer->Defer(job.idx[k], bytes)) {
        p_.writer->Store(*job.v, job.idx[k], bytes);
      }
      // Held even when cached: eviction takes the newest chunks first,
      // which are just the ones fetched ahead of their reader.
      if (job.request.readahead) job.request.readahead->Put(job.idx[k], bytes, readahead_limit_);
      (*job.out)[k] = bytes;
      job.tally->chunks++;
      job.tally->bytes += bytes.len;
      fetcher_.Complete(key, job.flights[k], bytes);
    }
    if (!run.ok() && job.first_error.ok()) job.first_error = run.status();
    i = j + 1;
  }
}

void ChunkFetch::AwaitFollowed(Job& job) {
  for (size_t i = 0; i < job.idx.size(); ++i) {
    if (job.done[i]) continue;
    if (!job.expedited) {
      // Who leads the fetch may produce it for a lower urgency (a
      // prefetch, a warm): a derived origin moves that work up to ours.
      p_.derived->Expedite(job.v->path, job.request.urgency);
      job.expedited = true;
    }
    p_.counters->collapsed_misses++;
    auto r = Fetcher::Wait(job.flights[i]);
    if (r.ok()) {
      (*job.out)[i] = *r;
      job.done[i] = 1;
    } else if (r.status().code() != EAGAIN) {
      job.done[i] = 1;
      if (job.first_error.ok()) job.first_error = r.status();
    }
  }
}

}  // namespace stoker
