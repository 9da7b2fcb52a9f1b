#include "cache/origin_reader.h"

#include <string>

#include "cache/io/direct_io.h"
#include "cache/origin/origin_backoff.h"
#include "util/checksum.h"
#include "util/log.h"

namespace stoker {

Result<std::vector<ChunkBytes>> OriginReader::ReadRun(const ObjectVersion& v, OriginHandle& origin,
                                                      uint64_t first, uint64_t n, Urgency who) {
  const uint64_t size = v.identity.size;
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; ++i) total += ChunkLength(size, p_.chunk_size, first + i);
  auto file = origin.Get();
  if (!file.ok()) return OriginError(v, file.status());
  // Aligned, so that the origin can read it direct and the cache write it
  // direct (cache/io/direct_io.h): each chunk of a run starts at a multiple of
  // the chunk size.
  std::shared_ptr<char[]> buf = AllocAligned(total);
  const bool derived = p_.derived->IsDerived(v.path);
  if (!derived) p_.counters->origin_reads++;
  // A file whose origin died keeps failing: let the next read open the path
  // again (through a root the origin may have reopened meanwhile).
  auto file_error = [&](const Status& s) -> Status {
    if (IsOriginUnavailable(s.code())) origin.Forget(file->get());
    return OriginError(v, s);
  };
  auto got = (*file)->ReadAtAligned(buf.get(), total, ChunkOffset(p_.chunk_size, first), who);
  if (!got.ok()) return file_error(got.status());
  (derived ? p_.counters->derived_bytes_produced : p_.counters->origin_bytes_read) += *got;
  // What was read must be the version this file state stands for, or one
  // read could mix old and new content.
  auto id = (*file)->Identity();
  if (!id.ok()) return file_error(id.status());
  // Another inode with the same size and mtime on the same filesystem is
  // either a copy (the origin came back from a backup) or a rename-over
  // within one clock tick: the cached chunks tell which.
  bool same = v.AtOrigin(*id);
  if (!same && SameSizeAndTimes(v.identity, *id) && HoldsCachedBytes(v, **file)) {
    v.MovedTo(*id);
    same = true;
  }
  if (!same) {
    v.changed_at_origin.store(true);
    LOG_WARN("origin file '{}' changed while being read ({}, was {}); not caching", v.path,
             id->ToString(), v.identity.ToString());
    return StaleVersion(v);
  }
  if (*got != total) {
    return Status::IOError("origin file '" + v.path + "' returned " + std::to_string(*got) +
                           " of " + std::to_string(total) + " bytes");
  }
  p_.counters->chunks_fetched += n;
  std::vector<ChunkBytes> chunks;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len = ChunkLength(size, p_.chunk_size, first + i);
    chunks.push_back(ChunkBytes{std::shared_ptr<const char>(buf, buf.get() + pos), len});
    pos += len;
  }
  return chunks;
}

bool OriginReader::HoldsCachedBytes(const ObjectVersion& v, OriginFile& file) {
  bool any = false;
  std::string buf;
  for (uint64_t idx = 0; idx < v.chunks; ++idx) {
    auto rec = p_.index->GetChunk(ChunkKey{v.key.object_id, v.key.version, idx});
    if (!rec.ok() || !*rec) continue;
    buf.resize((*rec)->len);
    auto got = file.ReadAt(buf.data(), buf.size(), ChunkOffset(p_.chunk_size, idx));
    p_.counters->origin_reads++;
    if (got.ok()) p_.counters->origin_bytes_read += *got;
    if (!got.ok() || *got != buf.size() || ChunkChecksum(buf.data(), buf.size()) != (*rec)->xxh3) {
      return false;
    }
    any = true;
  }
  return any;
}

Status OriginReader::OriginError(const ObjectVersion& v, const Status& s) {
  // ESTALE from a remote file: the object changed under it (remote_file.h).
  if (s.code() == ESTALE) {
    v.changed_at_origin.store(true);
    LOG_WARN("{}; not caching", s.message());
    return StaleVersion(v);
  }
  if (IsOriginUnavailable(s.code())) p_.counters->origin_errors++;
  if (s.code() == ENOENT) {
    v.changed_at_origin.store(true);
    return Status::Error(ESTALE, s.message());
  }
  return s;
}

}  // namespace stoker
