#include "cache/read_path.h"

#include <algorithm>
#include <vector>

#include "util/log.h"

namespace stoker {
namespace {

// What a ReadReply holds on to: chunk pins (so eviction cannot punch its fd
// ranges), the data file, and fetched buffers.
struct PinKeepalive : ReadReply::Keepalive {
  std::shared_ptr<ResidentChunks> resident;
  std::vector<ChunkKey> pins;
  std::shared_ptr<DataFile> file;
  std::vector<ChunkBytes> buffers;
  ~PinKeepalive() override {
    for (const auto& k : pins) resident->Unpin(k);
  }
};

// Accumulates segments, merging neighbours in one descriptor or buffer.
class SegmentBuilder {
 public:
  explicit SegmentBuilder(ReadReply* out) : out_(out) {}
  void Fd(int fd, uint64_t off, size_t len) {
    if (cur_.fd == fd && cur_.mem == nullptr && static_cast<uint64_t>(cur_.off) + cur_.len == off) {
      cur_.len += len;
      return;
    }
    Flush();
    cur_ = {fd, static_cast<off_t>(off), nullptr, len};
  }
  void Mem(const char* p, size_t len) {
    if (cur_.mem != nullptr && cur_.mem + cur_.len == p) {
      cur_.len += len;
      return;
    }
    Flush();
    cur_ = {-1, 0, p, len};
  }
  void Flush() {
    if (cur_.len == 0) return;
    if (cur_.mem) {
      out_->AddMem(cur_.mem, cur_.len);
    } else {
      out_->AddFd(cur_.fd, cur_.off, cur_.len);
    }
    cur_ = {};
  }

 private:
  ReadReply* out_;
  ReadSegment cur_;
};

}  // namespace

Status ReadPath::Read(OpenFileState& f, uint64_t off, size_t len, ReadReply* out) {
  if (!f.derived) return ReadVersion(f, off, len, out);
  // A decoded view's bytes that did not decode are zeros in the cache: the
  // view says which ranges read as EIO, before the read and again after it
  // (this very read may have found, and zeroed, such a record).
  const std::string& path = f.version->path;
  STOKER_RETURN_IF_ERROR(p_.derived->CheckRead(path, off, len));
  STOKER_RETURN_IF_ERROR(ReadVersion(f, off, len, out));
  return p_.derived->CheckRead(path, off, len);
}

// A read, planned: each chunk of the span sorted by where its bytes will come
// from. The steps below take chunks from one list to another until every
// chunk is either served from the data file (from_fd) or held in memory.
struct ReadPath::ReadPlan {
  ChunkSpan span;
  // Pins of the chunks served as ranges of the data file, and that file,
  // released once the reply is out.
  std::unique_ptr<PinKeepalive> keep = std::make_unique<PinKeepalive>();
  std::vector<char> from_fd;         // per chunk: a verified range of the data file
  std::vector<SlotRef> slots;        // per chunk: its slot (a one-chunk version's)
  std::vector<ChunkBytes> mem;       // per chunk: bytes held in memory
  std::vector<uint64_t> missing;     // to take from the read-ahead or fetch
  std::vector<uint64_t> unverified;  // stored, not checked yet: checked here (claimed)
  std::vector<uint64_t> awaited;     // being checked by another: waited for
};

Status ReadPath::ReadVersion(OpenFileState& f, uint64_t off, size_t len, ReadReply* out) {
  const std::shared_ptr<ObjectVersion>& v = f.version;
  if (v->superseded) {
    p_.counters->errors++;
    return StaleVersion(*v);
  }
  const ChunkSpan span = SpanOf(v->identity.size, p_.chunk_size, off, len);
  if (span.count == 0) return Status::OK();
  ReadPlan plan = PlanRead(f, span);
  {
    // Whatever happens to them, the claims end here: own claims end before
    // waiting on others' (two reads must not wait on each other).
    struct Claims {
      Readahead* readahead;
      std::vector<uint64_t> idx;
      ~Claims() { readahead->EndChecks(idx); }
    } claims{f.readahead.get(), plan.unverified};
    CheckUnverified(*v, plan);
  }
  AwaitChecks(f, plan);
  // What this read fetches is stored once the reply is out (or at once on
  // a failed read, when this goes).
  auto deferred = std::make_unique<ChunkFetch::DeferredStores>(p_.fetch, v);
  if (Status s = FetchMissing(f, plan, deferred.get()); !s.ok()) {
    p_.counters->errors++;
    return s;
  }
  const uint64_t hit_bytes = Assemble(*v, plan, out);
  out->Keep(std::move(plan.keep));
  if (!deferred->empty()) out->Keep(std::move(deferred));
  p_.counters->bytes_read += span.len;
  p_.counters->read_requests++;
  p_.counters->cache_hit_bytes += hit_bytes;
  p_.prefetcher->AfterRead(f, span.off, span.off + span.len, span.first + span.count - 1);
  return Status::OK();
}

ReadPath::ReadPlan ReadPath::PlanRead(OpenFileState& f, const ChunkSpan& span) {
  const ObjectVersion& v = *f.version;
  ReadPlan p;
  p.span = span;
  p.keep->resident = p_.resident;
  p.from_fd.assign(span.count, 0);
  p.slots.resize(span.count);
  p.mem.resize(span.count);
  for (uint64_t c = 0; c < span.count; ++c) {
    const uint64_t idx = span.first + c;
    // Fetched ahead of us and still in memory: the data file may not have
    // it in the page cache (it is written direct), so memory is cheaper.
    if (auto held = f.readahead->Get(idx)) {
      p.mem[c] = *held;
      continue;
    }
    const ChunkKey key{v.key.object_id, v.key.version, idx};
    bool verified = false;
    if (!p_.resident->TryPin(key, &verified, &p.slots[c])) {
      p.missing.push_back(idx);
    } else if (verified && !f.readahead->Claimed(idx)) {
      p.from_fd[c] = 1;
      p.keep->pins.push_back(key);
    } else if (verified) {
      p.awaited.push_back(idx);  // its prefetch is reading it into memory
    } else if (f.readahead->ClaimCheck(idx)) {
      p.unverified.push_back(idx);
    } else {
      p.awaited.push_back(idx);
    }
  }
  return p;
}

void ReadPath::CheckUnverified(const ObjectVersion& v, ReadPlan& p) {
  // First serve of a chunk in this process: find its record, read it back
  // and check it. A data file gone under its records means those records
  // are wrong: they are dropped and the chunks fetched.
  const uint64_t size = v.identity.size;
  const uint64_t first_idx = p.span.first;
  std::vector<ChunkToCheck> to_check;
  for (uint64_t idx : p.unverified) {
    const ChunkKey key{v.key.object_id, v.key.version, idx};
    auto rec = p_.index->GetChunk(key);
    if (rec.ok() && *rec && (*rec)->len == ChunkLength(size, p_.chunk_size, idx) &&
        SlotFits(v, (*rec)->slot)) {
      to_check.push_back({idx, (*rec)->xxh3, (*rec)->slot});
      p.slots[idx - first_idx] = (*rec)->slot;
      continue;
    }
    p_.resident->Unpin(key);
    if (!rec.ok() || *rec) p_.writer->DropBad(key);
    p.missing.push_back(idx);
  }
  KeepDataFile(v, p, to_check);
  if (to_check.empty()) return;
  // Checked chunks are answered from the bytes just checked: the data file
  // need not be read twice.
  std::vector<ChunkBytes> checked;
  std::vector<char> good = p_.reader->Check(v, *p.keep->file, to_check, &checked);
  for (size_t i = 0; i < good.size(); ++i) {
    const uint64_t idx = to_check[i].idx;
    if (good[i]) {
      p_.counters->chunks_verified_by_readers++;
      p_.resident->Unpin(ChunkKey{v.key.object_id, v.key.version, idx});
      p.mem[idx - first_idx] = checked[i];
    } else {
      p.missing.push_back(idx);
    }
  }
}

void ReadPath::KeepDataFile(const ObjectVersion& v, ReadPlan& p,
                            std::vector<ChunkToCheck>& to_check) {
  PinKeepalive& keep = *p.keep;
  if ((keep.pins.empty() && to_check.empty()) || keep.file) return;
  const uint64_t first_idx = p.span.first;
  const uint64_t first = keep.pins.empty() ? to_check[0].idx : keep.pins[0].index;
  const ChunkKey any{v.key.object_id, v.key.version, first};
  auto file = p_.store->Get(PlaceOf(any, p.slots[first - first_idx], p_.chunk_size).file, false);
  if (file.ok()) {
    keep.file = *file;
    return;
  }
  LOG_WARN("cache data file of '{}' is missing; re-fetching", v.path);
  for (const ChunkKey& k : keep.pins) {
    p.from_fd[k.index - first_idx] = 0;
    to_check.push_back({k.index, 0, {}});
  }
  keep.pins.clear();
  for (const ChunkToCheck& c : to_check) {
    const ChunkKey k{v.key.object_id, v.key.version, c.idx};
    p_.resident->Unpin(k);
    p_.writer->DropBad(k, /*force=*/true);
    p.missing.push_back(c.idx);
  }
  to_check.clear();
}

void ReadPath::AwaitChecks(OpenFileState& f, ReadPlan& p) {
  // Chunks this file's prefetch (or another read) is checking right now:
  // its bytes, once checked, rather than a second read and check. Nothing
  // held after the wait (a failed check, a chunk another read checked for
  // itself, a full readahead budget): a miss, which loads the stored chunk
  // (checked) or fetches it.
  const ObjectVersion& v = *f.version;
  for (uint64_t idx : p.awaited) {
    p_.resident->Unpin(ChunkKey{v.key.object_id, v.key.version, idx});
    p_.counters->collapsed_checks++;
    if (auto held = f.readahead->AwaitCheck(idx)) {
      p.mem[idx - p.span.first] = *held;
    } else {
      p.missing.push_back(idx);
    }
  }
}

Status ReadPath::FetchMissing(OpenFileState& f, ReadPlan& p, ChunkFetch::DeferredStores* deferred) {
  // Misses: what this file fetched meanwhile, then the origin.
  if (p.missing.empty()) return Status::OK();
  std::sort(p.missing.begin(), p.missing.end());
  std::vector<uint64_t> to_fetch;
  for (uint64_t idx : p.missing) {
    if (auto held = f.readahead->Get(idx)) {
      p.mem[idx - p.span.first] = *held;
    } else {
      to_fetch.push_back(idx);
    }
  }
  std::vector<ChunkBytes> fetched;
  FetchTally tally;
  ChunkFetch::Request request;
  request.urgency = Urgency::kReader;
  request.readahead = f.readahead.get();
  request.defer = deferred;
  STOKER_RETURN_IF_ERROR(
      p_.fetch->Fetch(f.version, *f.origin, to_fetch, request, &fetched, &tally));
  for (size_t i = 0; i < to_fetch.size(); ++i) p.mem[to_fetch[i] - p.span.first] = fetched[i];
  return Status::OK();
}

uint64_t ReadPath::Assemble(const ObjectVersion& v, ReadPlan& p, ReadReply* out) {
  SegmentBuilder seg(out);
  uint64_t hit_bytes = 0;
  const uint64_t size = v.identity.size;
  const uint64_t end = p.span.off + p.span.len;
  for (uint64_t c = 0; c < p.span.count; ++c) {
    const uint64_t idx = p.span.first + c;
    const ChunkKey key{v.key.object_id, v.key.version, idx};
    const uint64_t start = ChunkOffset(p_.chunk_size, idx);
    const uint64_t a = std::max(p.span.off, start);
    const uint64_t b = std::min(end, start + ChunkLength(size, p_.chunk_size, idx));
    if (p.from_fd[c]) {
      seg.Fd(p.keep->file->fd(), PlaceOf(key, p.slots[c], p_.chunk_size).off + (a - start), b - a);
      hit_bytes += b - a;
      p_.hits->RecordHit(key);
      continue;
    }
    const ChunkBytes& bytes = p.mem[c];
    STOKER_CHECK(bytes.data != nullptr, "a missed chunk was neither fetched nor held");
    seg.Mem(bytes.data.get() + (a - start), b - a);
    if (bytes.from_cache) {
      hit_bytes += b - a;
      p_.hits->RecordHit(key);
    }
    p.keep->buffers.push_back(bytes);
  }
  seg.Flush();
  return hit_bytes;
}

}  // namespace stoker
