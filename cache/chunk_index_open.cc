// Opening (and salvaging) the RocksDB index, checking first that the disk
// has room for what RocksDB writes while it opens.
#include <dirent.h>
#include <fcntl.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "cache/chunk_index.h"
#include "cache/chunk_index_rocks.h"
#include "util/mutex.h"
#include "util/size.h"

namespace stoker {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  int code = EIO;
  if (s.IsCorruption()) code = EBADMSG;
  if (s.IsNoSpace()) code = ENOSPC;
  if (s.IsBusy() || s.IsTryAgain()) code = EBUSY;
  if (s.IsInvalidArgument()) code = EINVAL;
  if (s.IsNotSupported()) code = ENOTSUP;
  return Status::Error(code, what + ": " + s.ToString());
}

namespace {

// What RocksDB says when a file it needs is corrupt or gone.
bool IsDamage(const rocksdb::Status& s) { return s.IsCorruption() || s.IsPathNotFound(); }

Status Damaged(const std::string& path, const std::string& what) {
  return Status::Error(EBADMSG, "index '" + path + "' is damaged: " + what);
}

// The files of a RocksDB directory that only an index that was there makes:
// without CURRENT, RocksDB would start an empty index beside them.
bool HasIndexFiles(const std::string& path) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir);
  if (!d) return false;
  while (struct dirent* de = ::readdir(d.get())) {
    std::string_view n(de->d_name);
    if (n.rfind("MANIFEST-", 0) == 0 ||
        (n.size() > 4 && (n.substr(n.size() - 4) == ".sst" || n.substr(n.size() - 4) == ".log"))) {
      return true;
    }
  }
  return false;
}

// RocksDB writes while it opens (a new MANIFEST and WAL, the replayed WAL
// flushed to a table file, OPTIONS, its LOG), and a write failing for want of
// space there aborts the process in Debian's build (an assertion in
// WritableFileWriter). So the room it needs is checked first: what it may
// rewrite, plus a margin for its small files (OPTIONS, LOG, a block each).
// Only a disk with next to nothing free is refused. A check (fsck without
// --repair) opens read-only and needs no room at all.
constexpr uint64_t kOpenMarginBytes = 256ull << 10;

// A read-only open writes no LOG either: RocksDB's info log goes here.
class SilentLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

Status RoomToOpen(const std::string& path) {
  uint64_t rewritten = 0;
  if (std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir); d) {
    while (struct dirent* de = ::readdir(d.get())) {
      std::string_view n(de->d_name);
      if (n.rfind("MANIFEST-", 0) != 0 && !(n.size() > 4 && n.substr(n.size() - 4) == ".log")) {
        continue;
      }
      struct stat st;
      if (::fstatat(::dirfd(d.get()), de->d_name, &st, 0) == 0) {
        rewritten += static_cast<uint64_t>(st.st_size);
      }
    }
  }
  // A new index's directory is not there yet: its filesystem is its parent's.
  std::string where = path;
  struct statvfs vfs;
  while (::statvfs(where.c_str(), &vfs) != 0) {
    const size_t slash = where.find_last_of('/');
    if (errno != ENOENT || slash == std::string::npos || slash == 0) return Status::OK();
    where.resize(slash);
  }
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t need = rewritten + kOpenMarginBytes;
  if (avail >= need) return Status::OK();
  return Status::Error(ENOSPC, "no room to open the index '" + path + "': its filesystem has " +
                                   FormatSize(avail) + " free and opening it needs about " +
                                   FormatSize(need) + "; free some space there");
}

rocksdb::Options RocksOptions(const ChunkIndex::Options& options) {
  rocksdb::Options o;
  o.create_if_missing = options.create_if_missing;
  o.write_buffer_size = options.write_buffer_bytes;
  o.max_write_buffer_number = 2;
  o.max_total_wal_size = 2 * options.write_buffer_bytes;
  o.max_background_jobs = 2;
  o.max_open_files = 512;
  o.keep_log_file_num = 2;
  o.max_log_file_size = 1 << 20;
  o.recycle_log_file_num = 0;
  // Preallocation (4 MiB of MANIFEST, a WAL's worth of blocks) would count
  // against the cache bound for nothing.
  o.allow_fallocate = false;
  // The info log lives in index/ and counts against the bound too.
  o.info_log_level = rocksdb::WARN_LEVEL;
  o.manifest_preallocation_size = 0;
  // Evicting from the head of a queue leaves tombstones where the next
  // cursor starts; compact files dense with deletions instead of scanning them.
  o.table_properties_collector_factories.push_back(
      rocksdb::NewCompactOnDeletionCollectorFactory(1024, 256));
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

}  // namespace

Result<std::unique_ptr<ChunkIndex>> ChunkIndex::Open(const Options& options) {
  struct stat st;
  if (::stat((options.path + "/CURRENT").c_str(), &st) != 0 && errno == ENOENT &&
      HasIndexFiles(options.path)) {
    return Damaged(options.path, "its CURRENT file is missing");
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status opened;
  if (options.read_only) {
    rocksdb::Options o = RocksOptions(options);
    o.create_if_missing = false;
    o.info_log = std::make_shared<SilentLogger>();
    opened = rocksdb::DB::OpenForReadOnly(o, options.path, &db);
  } else {
    STOKER_RETURN_IF_ERROR(RoomToOpen(options.path));
    opened = rocksdb::DB::Open(RocksOptions(options), options.path, &db);
  }
  if (IsDamage(opened)) return Damaged(options.path, opened.ToString());
  STOKER_RETURN_IF_ERROR(FromRocks(opened, "open index '" + options.path + "'"));
  std::unique_ptr<rocksdb::DB> owned(db);

  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), kMetaKey, &value);
  IndexMeta meta;
  if (s.IsNotFound()) {
    // A new index, or one cut by a power loss between RocksDB's create and
    // the synced Put below: either holds no record at all and is started
    // with its meta record. One with records but no meta record is damaged
    // (its usage and clock are lost).
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    if (it->Valid()) return Damaged(options.path, "it has records but no meta record");
    if (IsDamage(it->status())) return Damaged(options.path, it->status().ToString());
    STOKER_RETURN_IF_ERROR(FromRocks(it->status(), "read index"));
    it.reset();
    if (options.chunk_size_if_new == 0 || options.read_only) {
      return Damaged(options.path, "it has no meta record");
    }
    meta.chunk_size = options.chunk_size_if_new;
    // Synced, unlike every later write: an index that exists without its
    // meta record after a power cut could not be told from a damaged one.
    rocksdb::WriteOptions wo;
    wo.sync = true;
    STOKER_RETURN_IF_ERROR(
        FromRocks(db->Put(wo, kMetaKey, EncodeMeta(meta)), "write index meta record"));
  } else {
    if (IsDamage(s)) return Damaged(options.path, "meta record: " + s.ToString());
    STOKER_RETURN_IF_ERROR(FromRocks(s, "read index meta record"));
    Result<IndexMeta> decoded = DecodeMeta(value);
    if (!decoded.ok()) return Damaged(options.path, "meta record: " + decoded.status().message());
    meta = *decoded;
    if (meta.chunk_size == 0 || meta.chunk_size % kBlockSize != 0) {
      return Damaged(options.path, "meta record has chunk size " + std::to_string(meta.chunk_size));
    }
  }
  return std::unique_ptr<ChunkIndex>(
      new ChunkIndex(owned.release(), meta, s.IsNotFound(), options.read_only));
}

Status ChunkIndex::Salvage(const std::string& path) {
  Options defaults;
  defaults.path = path;
  rocksdb::Status s = rocksdb::RepairDB(path, RocksOptions(defaults));
  if (!s.ok()) return Status::Error(EBADMSG, "repair of index '" + path + "': " + s.ToString());
  // What RepairDB could not read it keeps in lost/: space for nothing.
  std::error_code ec;
  std::filesystem::remove_all(path + "/lost", ec);
  return Status::OK();
}

ChunkIndex::ChunkIndex(rocksdb::DB* db, IndexMeta meta, bool created, bool read_only)
    : db_(db), created_(created), read_only_(read_only), clock_(meta.clock), meta_(meta) {}

ChunkIndex::~ChunkIndex() {
  if (!read_only_) {
    // Persist the clock so that eviction order survives a clean restart.
    MutexLock l(mu_);
    IndexMeta m = meta_;
    Batch b;
    (void)Write(b, &m);
  }
  (void)db_->Close();
  delete db_;
}

uint64_t ChunkIndex::DiskBytes(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (!d) return 0;
  uint64_t total = 0;
  while (struct dirent* e = readdir(d)) {
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  closedir(d);
  return total;
}

}  // namespace stoker
