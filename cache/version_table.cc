#include "cache/version_table.h"

#include <ctime>
#include <utility>

#include "util/path.h"

namespace stoker {
namespace {

struct timespec ToTimespec(int64_t ns) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  if (ts.tv_nsec < 0) {
    ts.tv_nsec += 1000000000;
    ts.tv_sec -= 1;
  }
  return ts;
}

}  // namespace

std::optional<VersionTable::Entry> VersionTable::Find(const std::string& path) const {
  MutexLock l(mu_);
  auto it = entries_.find(path);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void VersionTable::Put(const std::string& path, Entry entry) {
  MutexLock l(mu_);
  entries_[path] = std::move(entry);
  if (entries_.size() > max_entries_) TrimLocked();
}

void VersionTable::Forget(const std::string& path) {
  MutexLock l(mu_);
  entries_.erase(path);
}

std::vector<std::string> VersionTable::PathsUnder(const std::string& prefix) const {
  MutexLock l(mu_);
  std::vector<std::string> out;
  for (const auto& [path, entry] : entries_) {
    if (IsAtOrUnder(path, prefix)) out.push_back(path);
  }
  return out;
}

size_t VersionTable::size() const {
  MutexLock l(mu_);
  return entries_.size();
}

void VersionTable::TrimLocked() {
  // Entries nothing else holds: the next open of their path reads its record
  // from the index again, and sets no keep_cache (seen is lost), which only
  // costs the kernel's pages of it. Down to 3/4, so that trims are rare.
  for (auto it = entries_.begin();
       it != entries_.end() && entries_.size() > max_entries_ * 3 / 4;) {
    if (it->second.version.use_count() == 1) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<ObjectVersion> VersionTable::MakeVersion(const std::string& path,
                                                         const ObjectRecord& rec) const {
  auto v = std::make_shared<ObjectVersion>();
  v->path = path;
  v->key = {rec.object_id, rec.version};
  v->identity = rec.identity;
  {
    MutexLock l(v->at_mu);  // not shared yet: for the analysis
    v->at_origin = rec.identity;
  }
  v->chunks = ChunkCount(rec.identity.size, chunk_size_);
  struct stat& st = v->st;
  st.st_mode = rec.attrs.mode;
  st.st_uid = rec.attrs.uid;
  st.st_gid = rec.attrs.gid;
  st.st_nlink = rec.attrs.nlink;
  st.st_size = static_cast<off_t>(rec.identity.size);
  st.st_ino = rec.identity.ino;
  st.st_dev = rec.identity.dev;
  st.st_blksize = 4096;
  st.st_blocks = rec.attrs.blocks >= 0 ? static_cast<blkcnt_t>(rec.attrs.blocks)
                                       : static_cast<blkcnt_t>((rec.identity.size + 511) / 512);
  st.st_atim = ToTimespec(rec.attrs.atime_ns);
  st.st_mtim = ToTimespec(rec.identity.mtime_ns);
  st.st_ctim = ToTimespec(rec.identity.ctime_ns);
  return v;
}

VersionTable::Entry VersionTable::Uncached(const std::string& path, ObjectRecord rec) {
  // Object ids the index hands out count up from 1: these never meet one.
  rec.object_id = kUncachedObjectIds | ++uncached_;
  rec.version = 1;
  auto v = MakeVersion(path, rec);
  v->uncached = true;
  return Entry{rec, std::move(v), false};
}

}  // namespace stoker
