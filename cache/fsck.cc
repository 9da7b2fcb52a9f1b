// CheckCache: see cache/fsck.h. Opens (or salvages) the index and runs one
// FsckPass (cache/fsck_pass.h) over it.
#include "cache/fsck.h"

#include <sys/stat.h>

#include <filesystem>

#include "cache/cache_dir_lock.h"
#include "cache/chunk_index.h"
#include "cache/chunk_store.h"
#include "cache/fsck_pass.h"

namespace stoker {

nlohmann::json FsckReport::ToJson() const {
  return nlohmann::json{{"clean", clean()},
                        {"objects", objects},
                        {"chunks", chunks},
                        {"bytes_checked", bytes_checked},
                        {"bad_checksums", bad_checksums},
                        {"missing_data", missing_data},
                        {"orphan_files", orphan_files},
                        {"leaked_slots", leaked_slots},
                        {"pending_writes", pending_writes},
                        {"bad_records", bad_records},
                        {"usage_mismatch", usage_mismatch},
                        {"index_damage", index_damage},
                        {"index_repair", index_repair},
                        {"repaired", repaired},
                        {"problems", problems}};
}

namespace {

// True if no regular file is under path (or there is no path).
bool NoRegularFiles(const std::string& path) {
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(path, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) return false;
  }
  return true;
}

}  // namespace

Result<FsckReport> CheckCache(const std::string& dir, bool repair) {
  STOKER_ASSIGN_OR_RETURN(auto lock, CacheDirLock::Acquire(dir, false));
  struct stat st;
  std::string index_path = dir + "/index";
  if (::stat(index_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Invalid("'" + dir + "' is not a stoker cache directory (no index/)");
  }
  // An empty index/ and no data file (left by a reset below, or by a mount
  // that stopped before RocksDB made its files): nothing is cached, nothing
  // to check.
  std::error_code empty_ec;
  if (std::filesystem::is_empty(index_path, empty_ec) && !empty_ec &&
      NoRegularFiles(dir + "/data")) {
    return FsckReport{};
  }
  ChunkIndex::Options o;
  o.path = index_path;
  o.create_if_missing = false;
  // A check alone writes nothing: it can look at a cache whose disk is full.
  o.read_only = !repair;
  o.write_buffer_bytes = 4ull << 20;
  o.block_cache_bytes = 8ull << 20;
  auto check = [&]() -> Result<FsckReport> {
    STOKER_ASSIGN_OR_RETURN(auto index, ChunkIndex::Open(o));
    STOKER_ASSIGN_OR_RETURN(auto store, ChunkStore::Open(dir + "/data", 64));
    FsckPass fsck(dir, repair, index.get(), store.get());
    STOKER_RETURN_IF_ERROR(fsck.Run());
    return std::move(fsck.report());
  };
  // EBADMSG: RocksDB found its files damaged, at open or in a walk.
  Result<FsckReport> checked = check();
  if (checked.ok() || checked.status().code() != EBADMSG) return checked;
  FsckReport damage;
  damage.index_damage = checked.status().message();
  if (damage.index_damage.find("is damaged") == std::string::npos) {
    damage.index_damage = "index '" + index_path + "' is damaged: " + damage.index_damage;
  }
  damage.problems.push_back(damage.index_damage);
  if (!repair) return damage;
  Status salvaged = ChunkIndex::Salvage(index_path);
  if (salvaged.ok()) checked = check();
  if (!salvaged.ok() || !checked.ok()) {
    damage.problems.push_back("could not salvage it (" +
                              (salvaged.ok() ? checked.status() : salvaged).message() +
                              "): removed the index and every data file");
    damage.index_repair = "reset";
    for (const char* sub : {"/index", "/data"}) {
      std::error_code ec;
      std::filesystem::remove_all(dir + sub, ec);
      if (ec) return Status::Error(ec.value(), "remove '" + dir + sub + "': " + ec.message());
    }
    // An empty index directory: a cache directory still, which the next
    // mount fills.
    ::mkdir(index_path.c_str(), 0700);
    damage.repaired++;
    return damage;
  }
  FsckReport r = std::move(checked).value();
  r.index_damage = damage.index_damage;
  r.index_repair = "salvaged";
  r.repaired++;
  r.problems.insert(r.problems.begin(),
                    {damage.index_damage, "salvaged what RocksDB could still read; checked below"});
  return r;
}

}  // namespace stoker
