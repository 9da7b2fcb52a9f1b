// FsckPass over data/: data files and slab files against the records kept
// (orphans, space no chunk accounts for, leaked slab slots).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "cache/fsck_pass.h"

namespace stoker {
namespace {

// Data extents of fd not covered by any of ranges (sorted by start).
std::vector<std::pair<off_t, off_t>> Uncovered(int fd,
                                               std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<off_t, off_t>> out;
  off_t pos = 0;
  for (;;) {
    off_t d = ::lseek(fd, pos, SEEK_DATA);
    if (d < 0) break;
    off_t h = ::lseek(fd, d, SEEK_HOLE);
    if (h <= d) break;
    off_t cur = d;
    for (const auto& [a, b] : ranges) {
      if (static_cast<off_t>(b) <= cur) continue;
      if (static_cast<off_t>(a) >= h) break;
      if (static_cast<off_t>(a) > cur) out.emplace_back(cur, static_cast<off_t>(a));
      cur = std::max(cur, static_cast<off_t>(b));
      if (cur >= h) break;
    }
    if (cur < h) out.emplace_back(cur, h);
    pos = h;
  }
  return out;
}

}  // namespace

Status FsckPass::CheckDataFiles() {
  std::string data = dir_ + "/data";
  DIR* top = ::opendir(data.c_str());
  if (!top) return errno == ENOENT ? Status::OK() : Status::FromErrno("open '" + data + "'");
  std::vector<std::string> subs;
  while (struct dirent* e = ::readdir(top)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") subs.push_back(n);
  }
  ::closedir(top);
  for (const auto& sub : subs) CheckSubdir(data, sub);
  return Status::OK();
}

void FsckPass::Orphan(const std::string& path, const std::string& why, bool is_dir) {
  r_.orphan_files++;
  Problem("orphan " + path + ": " + why);
  if (!repair_) return;
  if (::unlink(path.c_str()) != 0 && !(is_dir && ::rmdir(path.c_str()) == 0)) {
    Repaired(Status::FromErrno("remove '" + path + "'"));
  } else {
    r_.repaired++;
  }
}

void FsckPass::CheckSubdir(const std::string& data, const std::string& sub) {
  std::string path = data + "/" + sub;
  DIR* d = ::opendir(path.c_str());
  if (!d) return Orphan(path, "not a data directory", false);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  if (sub == "slab") return CheckSlabFiles(path, names);
  for (const auto& n : names) {
    std::string file = path + "/" + n;
    auto v = ChunkStore::ParseFileName(n);
    if (!v || ChunkStore::RelativePath(*v) != sub + "/" + n) {
      Orphan(file, "not a data file name", true);
      continue;
    }
    if (drops_.count(*v) && !repair_) continue;
    auto it = files_.find(*v);
    if (it == files_.end()) {
      Orphan(file, "no chunk record refers to it", false);
      continue;
    }
    CheckFileSpace(file, it->second);
  }
}

// Slab files: one with no bitmap record is an orphan; in the others, data
// outside the kept chunks' slots is.
void FsckPass::CheckSlabFiles(const std::string& path, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    std::string file = path + "/" + n;
    auto v = ChunkStore::ParseSlabFileName(n);
    if (!v) {
      Orphan(file, "not a slab file name", true);
      continue;
    }
    if (!slabs_.count(*v) && !files_.count(*v)) {
      Orphan(file, "no slab record refers to it", false);
      continue;
    }
    CheckFileSpace(file, files_[*v]);
  }
}

// Slab bitmaps: a slot taken by no kept record and no pending intent is
// leaked (a lost write: space the quota does not see); repair punches it
// and frees it. An undecodable bitmap is rebuilt from the records.
Status FsckPass::CheckSlabs() {
  std::vector<SlotRef> leaked;
  std::vector<std::pair<std::string, std::pair<uint32_t, uint32_t>>> bad;
  STOKER_RETURN_IF_ERROR(index_->ForEach(kSlabPrefix, [&](std::string_view k, std::string_view v) {
    auto key = DecodeSlabKey(k);
    auto bitmap = key.ok() ? DecodeSlabBitmap(v) : Result<SlabBitmap>(key.status());
    if (!bitmap.ok()) {
      r_.bad_records++;
      Problem("slab record: " + bitmap.status().message());
      if (key.ok()) slabs_.insert(SlabFileKey(key->first, key->second));
      bad.emplace_back(std::string(k), key.ok() ? *key : std::make_pair(0u, 0u));
      return true;
    }
    slabs_.insert(SlabFileKey(key->first, key->second));
    for (uint32_t i = 0; i < kSlotsPerSlab; ++i) {
      SlotRef slot{key->first, key->second, i};
      if (!bitmap->Get(i) || kept_slots_.count(IdOf(slot)) || intent_slots_.count(IdOf(slot))) {
        continue;
      }
      r_.leaked_slots++;
      Problem(FsckName(slot) + " is taken, but no chunk record or write intent holds it");
      leaked.push_back(slot);
    }
    return true;
  }));
  if (!repair_) return Status::OK();
  for (const auto& [k, where] : bad) {
    if (where.first == 0) {
      Repaired(index_->DeleteRaw(k));
      continue;
    }
    SlabBitmap rebuilt;
    for (const SlotId& id : kept_slots_) {
      if (std::get<0>(id) == where.first && std::get<1>(id) == where.second) {
        rebuilt.Set(std::get<2>(id), true);
      }
    }
    Repaired(index_->WriteSlab(where.first, where.second, rebuilt));
  }
  for (const SlotRef& slot : leaked) {
    Punch(ChunkKey{}, slot);
    Repaired(index_->SetSlotTaken(slot, false));
  }
  return Status::OK();
}

void FsckPass::CheckFileSpace(const std::string& file,
                              const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  for (const auto& [a, b] : Uncovered(fd, ranges)) {
    r_.orphan_files++;
    Problem("orphan data in " + file + " at [" + std::to_string(a) + ", " + std::to_string(b) +
            ")");
    // Whole blocks: a punched partial block at EOF would stay allocated.
    if (repair_) Repaired(ChunkStore::Punch(fd, a, AllocatedBytes(b - a)));
  }
  ::close(fd);
}

}  // namespace stoker
