#include "cache/chunk_store.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

namespace stoker {

DataFile::~DataFile() { ::close(fd_); }

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(const std::string& data_dir, size_t max_open) {
  if (::mkdir(data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno("create cache data dir '" + data_dir + "'");
  }
  return std::unique_ptr<ChunkStore>(new ChunkStore(data_dir, max_open < 1 ? 1 : max_open));
}

std::string ChunkStore::RelativePath(const VersionKey& v) {
  char buf[64];
  if (IsSlabFileKey(v)) {
    std::snprintf(buf, sizeof buf, "slab/%" PRIu64 "-%" PRIu64,
                  SlotBytes(static_cast<uint32_t>(v.version >> 32)), v.version & 0xffffffffu);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%02x/%" PRIu64 "-%" PRIu64,
                static_cast<unsigned>(v.object_id & 0xff), v.object_id, v.version);
  return buf;
}

namespace {

// A decimal number of at most 20 digits that fits in 64 bits.
bool ParseDecimal(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
  }
  *out = x;
  return true;
}

// "<a>-<b>", both decimal.
bool ParsePair(const std::string& name, uint64_t* a, uint64_t* b) {
  auto dash = name.find('-');
  if (dash == std::string::npos) return false;
  return ParseDecimal(name.substr(0, dash), a) && ParseDecimal(name.substr(dash + 1), b);
}

}  // namespace

std::optional<VersionKey> ChunkStore::ParseFileName(const std::string& name) {
  VersionKey v;
  if (!ParsePair(name, &v.object_id, &v.version)) return std::nullopt;
  if (v.object_id == 0 || v.version == 0) return std::nullopt;
  return v;
}

std::optional<VersionKey> ChunkStore::ParseSlabFileName(const std::string& name) {
  uint64_t slot_bytes = 0, n = 0;
  if (!ParsePair(name, &slot_bytes, &n)) return std::nullopt;
  if (slot_bytes == 0 || slot_bytes % kBlockSize != 0 || slot_bytes / kBlockSize > UINT32_MAX ||
      n > UINT32_MAX) {
    return std::nullopt;
  }
  VersionKey v =
      SlabFileKey(static_cast<uint32_t>(slot_bytes / kBlockSize), static_cast<uint32_t>(n));
  if (RelativePath(v) != "slab/" + name) return std::nullopt;  // leading zeros
  return v;
}

Result<std::shared_ptr<DataFile>> ChunkStore::Get(const VersionKey& v, bool create) {
  MutexLock l(mu_);
  return GetLocked(v, create);
}

Result<std::shared_ptr<DataFile>> ChunkStore::GetLocked(const VersionKey& v, bool create) {
  if (auto file = FindLocked(v)) return file;
  STOKER_ASSIGN_OR_RETURN(int fd, OpenFile(v, create));
  return AdoptLocked(v, fd);
}

std::shared_ptr<DataFile> ChunkStore::FindLocked(const VersionKey& v) {
  auto it = open_.find(v);
  if (it == open_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

Result<int> ChunkStore::OpenFile(const VersionKey& v, bool create) const {
  std::string rel = RelativePath(v);
  std::string path = dir_ + "/" + rel;
  int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0);
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0 && create && errno == ENOENT) {
    std::string sub = dir_ + "/" + rel.substr(0, rel.rfind('/'));
    if (::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno("create cache data dir '" + sub + "'");
    }
    fd = ::open(path.c_str(), flags, 0600);
  }
  if (fd < 0) return Status::FromErrno("open cache data file '" + path + "'");
  return fd;
}

std::shared_ptr<DataFile> ChunkStore::AdoptLocked(const VersionKey& v, int fd) {
  auto file = std::make_shared<DataFile>(fd);
  if (auto other = FindLocked(v)) return other;  // opened meanwhile: ours closes
  lru_.emplace_front(v, file);
  open_[v] = lru_.begin();
  while (lru_.size() > max_open_) {
    open_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return file;
}

Result<std::shared_ptr<DataFile>> ChunkStore::BeginWrite(const VersionKey& v,
                                                         const std::function<bool()>& refuse,
                                                         bool open_file) {
  {
    MutexLock l(mu_);
    if (refuse && refuse()) return Status::Error(ESTALE, "version is being dropped");
    // A writer from here on, so UnlinkIfIdle leaves the file alone while
    // it is created below.
    writers_[v]++;
    if (!open_file) return std::shared_ptr<DataFile>();
    if (auto file = FindLocked(v)) return file;
  }
  // Creating the file (an inode, maybe a directory) is the slow part of a
  // version's first write: other writers and readers do not wait for it.
  Result<int> fd = OpenFile(v, true);
  MutexLock l(mu_);
  if (!fd.ok()) {
    EndWriteLocked(v);
    return fd.status();
  }
  return AdoptLocked(v, *fd);
}

void ChunkStore::EndWrite(const VersionKey& v) {
  MutexLock l(mu_);
  EndWriteLocked(v);
}

void ChunkStore::EndWriteLocked(const VersionKey& v) {
  auto it = writers_.find(v);
  STOKER_CHECK(it != writers_.end() && it->second > 0, "EndWrite without BeginWrite");
  if (--it->second == 0) writers_.erase(it);
}

bool ChunkStore::Writing(const VersionKey& v) {
  MutexLock l(mu_);
  return writers_.count(v) > 0;
}

Result<bool> ChunkStore::UnlinkIfIdle(const VersionKey& v,
                                      const std::function<Result<bool>()>& empty) {
  MutexLock l(mu_);
  if (writers_.count(v)) return false;
  STOKER_ASSIGN_OR_RETURN(bool is_empty, empty());
  if (!is_empty) return false;
  Forget(v);
  std::string path = dir_ + "/" + RelativePath(v);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::FromErrno("unlink cache data file '" + path + "'");
  }
  return true;
}

void ChunkStore::Forget(const VersionKey& v) {
  auto it = open_.find(v);
  if (it == open_.end()) return;
  lru_.erase(it->second);
  open_.erase(it);
}

Status ChunkStore::Punch(int fd, uint64_t off, uint64_t len) {
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                  static_cast<off_t>(len)) != 0) {
    return Status::FromErrno("punch hole in cache data file");
  }
  return Status::OK();
}

}  // namespace stoker
