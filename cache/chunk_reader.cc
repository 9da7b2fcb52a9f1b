#include "cache/chunk_reader.h"

#include <algorithm>

#include "cache/io/direct_io.h"
#include "util/checksum.h"
#include "util/log.h"

namespace stoker {

std::vector<ChunkRead> ChunkReader::Read(const ObjectVersion& v, DataFile& file,
                                         const std::vector<ChunkToCheck>& chunks, bool direct) {
  const uint64_t size = v.identity.size;
  std::vector<ReadOp> ops;
  std::vector<ChunkRead> out;
  // A chunk of whole blocks never meets the end of the data file mid-block.
  // A data file kept in the page cache is read through it: its pages are
  // the copy passthrough reads (CacheOptions::data_files_in_page_cache).
  const int dfd = direct && p_.writer->Direct(v) ? file.direct_fd() : -1;
  for (const ChunkToCheck& c : chunks) {
    uint64_t expect = ChunkLength(size, p_.chunk_size, c.idx);
    out.push_back({AllocAligned(expect), expect, 0, Status::OK()});  // pooled: no fresh pages
    ReadOp op;
    op.fd = dfd >= 0 && expect >= kMinDirectBytes && RoundDownToDirect(expect) == expect
                ? dfd
                : file.fd();
    op.buf = out.back().buf.get();
    op.len = expect;
    op.off = static_cast<off_t>(
        PlaceOf(ChunkKey{v.key.object_id, v.key.version, c.idx}, c.slot, p_.chunk_size).off);
    ops.push_back(std::move(op));
  }
  p_.io->ReadBatch(ops);
  for (size_t i = 0; i < ops.size(); ++i) {
    ReadOp& op = ops[i];
    if (op.fd == dfd && op.status.code() == EINVAL) {
      file.DisableDirect();  // the file system takes O_DIRECT opens, not reads
      auto got = p_.io->Read(file.fd(), op.buf, op.len, op.off);
      op.status = got.ok() ? Status::OK() : got.status();
      op.done = got.ok() ? *got : 0;
    }
    out[i].status = op.status;
    out[i].done = op.done;
  }
  return out;
}

std::vector<char> ChunkReader::Check(const ObjectVersion& v, DataFile& file,
                                     const std::vector<ChunkToCheck>& to_check,
                                     std::vector<ChunkBytes>* bytes) {
  // Read direct only what the caller keeps: the page cache would otherwise
  // be the only copy left for the reader.
  std::vector<ChunkRead> reads = Read(v, file, to_check, bytes != nullptr);
  if (bytes) bytes->assign(reads.size(), ChunkBytes{});
  std::vector<char> good(reads.size(), 0);
  for (size_t i = 0; i < reads.size(); ++i) {
    const uint64_t idx = to_check[i].idx;
    ChunkKey key{v.key.object_id, v.key.version, idx};
    good[i] =
        reads[i].whole() && ChunkChecksum(reads[i].buf.get(), reads[i].len) == to_check[i].sum;
    if (good[i]) {
      p_.resident->MarkVerified(key, to_check[i].slot);
      p_.counters->chunks_verified++;
      if (bytes) (*bytes)[i] = reads[i].bytes();
      continue;
    }
    if (reads[i].status.ok()) {
      p_.counters->checksum_failures++;
      LOG_WARN("cached chunk {} of '{}' fails its checksum; re-fetching", idx, v.path);
    } else {
      LOG_WARN("reading cached chunk {} of '{}': {}; re-fetching", idx, v.path,
               reads[i].status.message());
    }
    p_.resident->Unpin(key);
    p_.writer->DropBad(key);
  }
  return good;
}

std::vector<char> ChunkReader::CheckInBatches(const ObjectVersion& v, DataFile& file,
                                              const std::vector<ChunkToCheck>& to_check) {
  // A few chunks at a time (a buffer each), not the whole file at once.
  std::vector<char> good;
  good.reserve(to_check.size());
  for (size_t from = 0; from < to_check.size(); from += kCheckBatch) {
    const auto first = to_check.begin() + static_cast<std::ptrdiff_t>(from);
    const std::vector<ChunkToCheck> batch(
        first, first + static_cast<std::ptrdiff_t>(std::min(kCheckBatch, to_check.size() - from)));
    std::vector<char> got = Check(v, file, batch);
    good.insert(good.end(), got.begin(), got.end());
  }
  return good;
}

std::optional<ChunkBytes> ChunkReader::LoadStored(const ObjectVersion& v, uint64_t idx) {
  // Pinned before the record is read: a slot freed and taken by another
  // chunk meanwhile would hold that chunk's bytes.
  const ChunkKey key{v.key.object_id, v.key.version, idx};
  bool verified = false;
  if (!p_.resident->TryPin(key, &verified)) return std::nullopt;
  std::optional<ChunkBytes> out;
  auto rec = p_.index->GetChunk(key);
  if (rec.ok() && *rec && (*rec)->len == ChunkLength(v.identity.size, p_.chunk_size, idx) &&
      SlotFits(v, (*rec)->slot)) {
    const ChunkPlace place = PlaceOf(key, (*rec)->slot, p_.chunk_size);
    auto file = p_.store->Get(place.file, false);
    if (file.ok()) {
      std::shared_ptr<char[]> buf = AllocAligned((*rec)->len);
      auto got = p_.io->Read((*file)->fd(), buf.get(), (*rec)->len, static_cast<off_t>(place.off));
      if (got.ok() && *got == (*rec)->len && ChunkChecksum(buf.get(), *got) == (*rec)->xxh3) {
        out = ChunkBytes{std::shared_ptr<const char>(buf, buf.get()), *got, true};
      }
    }
  }
  p_.resident->Unpin(key);
  return out;
}

bool ChunkReader::IsCached(const ChunkKey& key) {
  bool verified = false;
  if (p_.resident->TryPin(key, &verified)) {
    p_.resident->Unpin(key);
    if (verified) return true;
  }
  auto rec = p_.index->GetChunk(key);
  return rec.ok() && rec->has_value();
}

}  // namespace stoker
