// The SSD tier's parts below the ObjectCache, assembled over a scratch
// directory for the unit tests of ChunkWriter and Evictor: a real RocksDB
// index, real data files, the quota and pins (ChunkParts); and the fetch
// parts above them, for the tests of what reads and lends (FetchParts).
// Test code only.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/chunk_fetch.h"
#include "cache/chunk_index.h"
#include "cache/chunk_reader.h"
#include "cache/chunk_store.h"
#include "cache/chunk_writer.h"
#include "cache/eviction.h"
#include "cache/evictor.h"
#include "cache/hit_log.h"
#include "cache/index_format.h"
#include "cache/index_size.h"
#include "cache/io/io_backend.h"
#include "cache/object_version.h"
#include "cache/open_file_state.h"
#include "cache/origin/local/local_origin.h"
#include "cache/origin_reader.h"
#include "cache/prefetcher.h"
#include "cache/resident_chunks.h"
#include "util/test_files.h"

namespace stoker::testing {

// A local origin over dir, read with syscalls.
inline std::shared_ptr<Origin> LocalOriginAt(const std::string& dir) {
  auto io = MakeIoBackend(IoBackendKind::kSyscall);
  STOKER_CHECK(io.ok(), "io backend");
  auto local = LocalOrigin::Create(dir, std::shared_ptr<IoBackend>(std::move(*io)));
  STOKER_CHECK(local.ok(), "local origin");
  return std::move(*local);
}

struct ChunkPartsConfig {
  uint64_t capacity = 64 * (64 << 10);
  double high = 0.9;
  double low = 0.5;
  uint64_t slab_max_bytes = 0;
  std::vector<FaultSpec> faults;  // for the I/O backend's writes and reads
};

struct ChunkParts {
  static constexpr uint64_t kChunk = 64 << 10;

  using Config = ChunkPartsConfig;

  explicit ChunkParts(Config c = {}) : config(std::move(c)) {
    auto io_or = MakeIoBackend(IoBackendKind::kSyscall);
    STOKER_CHECK(io_or.ok(), "io backend");
    io = config.faults.empty() ? std::move(*io_or)
                               : MakeFaultyIoBackend(std::move(*io_or), config.faults);
    ChunkIndex::Options o;
    o.path = dir.Sub("index");
    o.chunk_size_if_new = kChunk;
    o.write_buffer_bytes = 1 << 20;
    auto idx = ChunkIndex::Open(o);
    STOKER_CHECK(idx.ok(), "index");
    index = std::move(*idx);
    auto st = ChunkStore::Open(dir.Sub("data"), 64);
    STOKER_CHECK(st.ok(), "store");
    store = std::move(*st);
    quota = std::make_unique<Quota>(config.capacity, config.high, config.low);
    quota->SetCommitted(index->meta().usage_bytes);
    index_size = std::make_unique<IndexSize>(dir.path(), 0, index.get(), quota.get());
    hits = std::make_unique<HitLog>(index.get(), &policy);
    ChunkWriter::Options wo;
    wo.dir = dir.path();
    wo.chunk_size = kChunk;
    wo.slab_max_bytes = config.slab_max_bytes;
    wo.min_free_bytes = 1;  // the scratch filesystem's own reserve is not under test
    writer = std::make_unique<ChunkWriter>(
        wo, ChunkWriter::Parts{io.get(), index.get(), store.get(), quota.get(), &resident,
                               index_size.get(), hits.get(), &counters, [this] {
                                 evict_asked++;
                                 if (evictor) evictor->Kick();
                               }});
    reader = std::make_unique<ChunkReader>(ChunkReader::Parts{
        kChunk, io.get(), index.get(), store.get(), &resident, writer.get(), &counters});
  }
  ~ChunkParts() { evictor.reset(); }

  // Starts an evictor over the parts.
  void StartEvictor() {
    evictor = std::make_unique<Evictor>(
        Evictor::Parts{kChunk, index.get(), store.get(), quota.get(), &policy, &resident,
                       writer.get(), hits.get(), index_size.get(), &counters});
    evictor->Start();
  }

  // A version of size bytes, as the cache would have recorded it.
  std::shared_ptr<ObjectVersion> Version(uint64_t object_id, uint64_t size) {
    auto v = std::make_shared<ObjectVersion>();
    v->path = "/file" + std::to_string(object_id);
    v->key = VersionKey{object_id, 1};
    v->identity.size = size;
    v->chunks = (size + kChunk - 1) / kChunk;
    return v;
  }

  static ChunkBytes Bytes(const std::string& s) {
    auto buf = std::shared_ptr<char[]>(new char[s.size()]);
    std::copy(s.begin(), s.end(), buf.get());
    return ChunkBytes{std::shared_ptr<const char>(buf, buf.get()), s.size(), false};
  }

  // What the data file holds at a chunk's place (as the record places it).
  std::string StoredBytes(const ChunkKey& key) {
    auto rec = index->GetChunk(key);
    STOKER_CHECK(rec.ok() && rec->has_value(), "a chunk record");
    const ChunkPlace place = PlaceOf(key, (*rec)->slot, kChunk);
    auto file = store->Get(place.file, false);
    STOKER_CHECK(file.ok(), "the chunk's data file");
    std::string out((*rec)->len, '\0');
    STOKER_CHECK(::pread((*file)->fd(), out.data(), out.size(), place.off) ==
                     static_cast<ssize_t>(out.size()),
                 "read the chunk back");
    return out;
  }

  bool HasRecord(const ChunkKey& key) {
    auto rec = index->GetChunk(key);
    return rec.ok() && rec->has_value();
  }

  size_t Intents() {
    size_t n = 0;
    Status s = index->ForEach(kIntentPrefix, [&](auto, auto) {
      ++n;
      return true;
    });
    STOKER_CHECK(s.ok(), "list intents");
    return n;
  }

  // Bytes allocated to version v's own data file (0 if it has none).
  uint64_t FileBlocks(const VersionKey& v) {
    struct stat st;
    if (::stat((store->dir() + "/" + ChunkStore::RelativePath(v)).c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.st_blocks) * 512;
  }
  bool FileExists(const VersionKey& v) {
    struct stat st;
    return ::stat((store->dir() + "/" + ChunkStore::RelativePath(v)).c_str(), &st) == 0;
  }

  Config config;
  ScratchDir dir{"parts"};
  std::unique_ptr<IoBackend> io;
  std::unique_ptr<ChunkIndex> index;
  std::unique_ptr<ChunkStore> store;
  const EvictionPolicy policy;
  std::unique_ptr<Quota> quota;
  ResidentChunks resident;
  std::unique_ptr<IndexSize> index_size;
  std::unique_ptr<HitLog> hits;
  CacheCounters counters;
  std::atomic<int> evict_asked{0};
  std::unique_ptr<ChunkWriter> writer;
  std::unique_ptr<ChunkReader> reader;
  std::unique_ptr<Evictor> evictor;
};

// A version of origin's file path as the cache would have made it (object
// id id), at the origin as it is now.
inline std::shared_ptr<ObjectVersion> VersionAt(ChunkParts& parts, Origin& origin,
                                                const std::string& path, uint64_t id) {
  auto st = origin.Stat(path);
  STOKER_CHECK(st.ok(), "stat");
  auto v = parts.Version(id, static_cast<uint64_t>(st->st_size));
  v->path = path;
  v->identity = IdentityFromStat(*st);
  MutexLock l(v->at_mu);
  v->at_origin = v->identity;
  return v;
}

// The tests' store of recent bytes (readahead, unstored chunks), shared by
// every part a test makes.
inline std::shared_ptr<RecentBytes> TestRecentBytes() {
  static const auto recent = std::make_shared<RecentBytes>(RecentBytes::Limits{});
  return recent;
}

// A Readahead for an open file, in the tests' shared store.
inline std::shared_ptr<Readahead> NewReadahead() {
  return std::make_shared<Readahead>(TestRecentBytes());
}

// An open of v as the cache makes one, its misses read from origin (null:
// it reads none). derived: a decoded view's file.
inline std::shared_ptr<OpenFileState> OpenOf(std::shared_ptr<ObjectVersion> v,
                                             std::shared_ptr<Origin> origin, bool derived = false) {
  auto handle = std::make_shared<OriginHandle>(std::move(origin), v->path);
  return std::make_shared<OpenFileState>(std::move(v), std::move(handle), NewReadahead(), derived,
                                         /*window=*/0, ChunkParts::kChunk);
}

// The parts above ChunkParts that reads and leases use: an OriginReader and
// a ChunkFetch that read through derived (the origin, or what derives from
// it), and a Prefetcher that reads nothing ahead (prefetch_bytes 0; never
// started).
struct FetchParts {
  static constexpr uint64_t kChunk = ChunkParts::kChunk;

  FetchParts(ChunkParts& parts, DerivedSource* derived)
      : origin_reader(OriginReader::Parts{kChunk, parts.index.get(), derived, &parts.counters}),
        fetch(ChunkFetch::Parts{kChunk, &origin_reader, parts.writer.get(), parts.reader.get(),
                                derived, &parts.counters, TestRecentBytes().get()},
              16),
        prefetcher(NoReadahead(), Prefetcher::Parts{kChunk, parts.index.get(), parts.store.get(),
                                                    parts.quota.get(), &parts.resident,
                                                    parts.writer.get(), parts.reader.get(), &fetch,
                                                    derived, &parts.counters, nullptr, nullptr}) {}

  static CacheOptions NoReadahead() {
    CacheOptions o;
    o.chunk_size = kChunk;
    o.prefetch_bytes = 0;
    o.dir_prefetch_files = 0;
    return o;
  }

  OriginReader origin_reader;
  ChunkFetch fetch;
  Prefetcher prefetcher;
};

}  // namespace stoker::testing
