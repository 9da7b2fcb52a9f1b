#include "fs/mountpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fs/kernel_mounts.h"
#include "util/files.h"
#include "util/log.h"

namespace stoker {

namespace {

Status Fail(const std::string& mp, int code, const std::string& why) {
  return Status::Error(code, "mountpoint '" + mp + "' " + why);
}

Status ClearStaleMount(const std::string& mp) {
  LOG_WARN("mountpoint '{}' holds a stale FUSE mount (its daemon is gone); detaching it", mp);
  if (DetachMount(mp)) return Status::OK();
  return Fail(mp, ENOTCONN, "holds a stale FUSE mount that could not be detached");
}

// Lexically normalized absolute form of p, without resolving anything.
std::filesystem::path Lexical(const std::string& p) {
  return std::filesystem::absolute(p).lexically_normal();
}

bool IsWithin(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  auto o = outer.begin();
  auto i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId&) const = default;
};

std::optional<FileId> IdOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// The identities of path (if it exists) and of every directory above it,
// nearest first: from the deepest part of path that resolves, resolved, so
// that a symlink or a bind mount on the way leads to the directories it
// shows. *exists: whether path itself resolved.
std::vector<FileId> AncestorIds(const std::string& path, bool* exists) {
  std::filesystem::path p = Lexical(path);
  *exists = true;
  char resolved[PATH_MAX];
  while (realpath(p.c_str(), resolved) == nullptr) {
    if (p == p.root_path()) return {};
    p = p.parent_path();
    *exists = false;
  }
  std::vector<FileId> ids;
  for (std::filesystem::path q = resolved;; q = q.parent_path()) {
    if (std::optional<FileId> id = IdOf(q)) ids.push_back(*id);
    if (q == q.root_path() || q.empty()) break;
  }
  return ids;
}

// Where path (or, for a path not made yet, the deepest part of it that
// exists, with the rest appended) lies in its file system: the mount's device
// and the path from that file system's root. A bind mount of a directory
// shows that directory's place, wherever it is mounted.
struct FsPlace {
  dev_t dev;
  std::filesystem::path path;
};

std::optional<FsPlace> PlaceOf(const std::string& path, bool* exists) {
  std::filesystem::path p = Lexical(path);
  std::filesystem::path rest;
  *exists = true;
  char resolved[PATH_MAX];
  while (realpath(p.c_str(), resolved) == nullptr) {
    if (p == p.root_path()) return std::nullopt;
    rest = p.filename() / rest;
    p = p.parent_path();
    *exists = false;
  }
  Result<std::vector<MountInfoEntry>> mounts = ReadMountInfo();
  if (!mounts.ok()) return std::nullopt;
  const std::string abs = resolved;
  std::optional<MountInfoEntry> m = MountContaining(*mounts, abs);
  if (!m) return std::nullopt;
  // The part below the mount point, under the directory the mount shows.
  const std::string below = m->mount_point == "/" ? abs : abs.substr(m->mount_point.size());
  std::filesystem::path in_fs = (m->root == "/" ? "" : m->root) + below;
  if (in_fs.empty()) in_fs = "/";
  return FsPlace{m->dev, (in_fs / rest).lexically_normal()};
}

enum class Nesting { kApart, kSame, kInside };

// Where inner is relative to outer: by identity up inner's ancestors, and by
// path (outer may not be reachable: a stale mount).
Nesting Locate(const std::string& inner, const std::string& outer) {
  const std::filesystem::path li = Lexical(inner);
  const std::filesystem::path lo = Lexical(outer);
  if (IsWithin(li, lo)) return li == lo ? Nesting::kSame : Nesting::kInside;
  const std::optional<FileId> outer_id = IdOf(outer);
  if (!outer_id) return Nesting::kApart;
  bool exists = false;
  const std::vector<FileId> ids = AncestorIds(inner, &exists);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == *outer_id) return i == 0 && exists ? Nesting::kSame : Nesting::kInside;
  }
  // Reached through a bind mount of a directory below outer: the same file
  // system, at a place below outer's.
  bool outer_exists = false;
  const std::optional<FsPlace> in = PlaceOf(inner, &exists);
  const std::optional<FsPlace> out = PlaceOf(outer, &outer_exists);
  if (in && out && outer_exists && in->dev == out->dev && IsWithin(in->path, out->path)) {
    return in->path == out->path && exists ? Nesting::kSame : Nesting::kInside;
  }
  return Nesting::kApart;
}

// "cache dir 'C' is inside the origin 'O'" where inner is in outer.
Status RefuseNesting(const std::string& inner_what, const std::string& inner,
                     const std::string& outer_what, const std::string& outer) {
  const Nesting n = Locate(inner, outer);
  if (n == Nesting::kApart) return Status::OK();
  return Status::Invalid(inner_what + " '" + inner + "' is " +
                         (n == Nesting::kSame ? "" : "inside ") + "the " + outer_what + " '" +
                         outer + "'");
}

// "a stoker mount of '/data' (pid 42)" for a live stoker mount at abs_path;
// nullopt for anything else. The pid is the supervisor's where there is one:
// it lives as long as the mount.
std::optional<std::string> DescribeStokerMount(const std::string& abs_path) {
  Result<std::vector<MountInfoEntry>> mounts = ReadMountInfo();
  if (!mounts.ok()) return std::nullopt;
  std::optional<MountInfoEntry> m = FindMountAt(*mounts, abs_path);
  std::optional<std::string> origin = m ? StokerMountOrigin(*m) : std::nullopt;
  if (!origin) return std::nullopt;
  std::string text = "a stoker mount of '" + *origin + "'";
  Result<std::string> stats = ReadWholeFile(abs_path + "/.stoker/stats.json");
  if (!stats.ok()) return text;
  const nlohmann::json j = nlohmann::json::parse(*stats, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return text;
  const nlohmann::json* pid = j.contains("pid") ? &j["pid"] : nullptr;
  if (j.contains("supervisor") && j["supervisor"].is_object() && j["supervisor"].contains("pid")) {
    pid = &j["supervisor"]["pid"];
  }
  if (pid != nullptr && pid->is_number_integer()) text += " (pid " + pid->dump() + ")";
  return text;
}

// Checks mountpoint as it is now. ENOTCONN (with that code) from any step
// means a stale FUSE mount: stat alone may still succeed from the kernel's
// attribute cache of the dead mount, opendir never does.
Result<std::string> CheckMountpoint(const std::string& mountpoint) {
  const std::string what = "mountpoint '" + mountpoint + "'";
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) return Status::FromErrno(what);
  if (!S_ISDIR(st.st_mode)) return Fail(mountpoint, ENOTDIR, "is not a directory");
  char resolved[PATH_MAX];
  if (realpath(mountpoint.c_str(), resolved) == nullptr) return Status::FromErrno(what);
  DIR* d = opendir(resolved);
  if (d == nullptr) return Status::FromErrno(what);
  bool empty = true;
  errno = 0;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  const int read_errno = errno;
  closedir(d);
  if (empty && read_errno != 0) return Status::FromErrno(read_errno, what);
  // A stoker mount that answered the listing is alive (a dead one is stale).
  if (std::optional<std::string> mount = DescribeStokerMount(resolved)) {
    return Fail(mountpoint, EBUSY, "is already " + *mount + "; unmount it first");
  }
  if (!empty) return Fail(mountpoint, ENOTEMPTY, "is not empty");
  return std::string(resolved);
}

}  // namespace

Result<std::string> PrepareMountpoint(const std::string& mountpoint) {
  if (mountpoint.empty()) return Status::Invalid("no mountpoint given");
  Result<std::string> checked = CheckMountpoint(mountpoint);
  if (checked.ok() || checked.status().code() != ENOTCONN) return checked;
  STOKER_RETURN_IF_ERROR(ClearStaleMount(mountpoint));
  return CheckMountpoint(mountpoint);
}

Status CheckNesting(const std::string& origin, const std::string& mountpoint,
                    const std::string& cache_dir) {
  // An origin URL (s3://, http://) has no place in the local tree.
  if (origin.find("://") == std::string::npos) {
    STOKER_RETURN_IF_ERROR(RefuseNesting("mountpoint", mountpoint, "origin", origin));
    STOKER_RETURN_IF_ERROR(RefuseNesting("origin", origin, "mountpoint", mountpoint));
    if (!cache_dir.empty()) {
      STOKER_RETURN_IF_ERROR(RefuseNesting("cache dir", cache_dir, "origin", origin));
    }
  }
  if (cache_dir.empty()) return Status::OK();
  STOKER_RETURN_IF_ERROR(RefuseNesting("cache dir", cache_dir, "mountpoint", mountpoint));
  return RefuseNesting("mountpoint", mountpoint, "cache dir", cache_dir);
}

Result<dev_t> DevOfMount(const std::string& mountpoint) {
  STOKER_ASSIGN_OR_RETURN(std::vector<MountInfoEntry> mounts, ReadMountInfo());
  std::optional<MountInfoEntry> m = FindMountAt(mounts, mountpoint);
  if (!m) return Status::NotFound("nothing is mounted at '" + mountpoint + "'");
  return m->dev;
}

bool DetachMount(const std::string& mountpoint) {
  return UnmountFuse(mountpoint, /*lazy=*/true).ok();
}

bool RaiseReadahead(dev_t dev, unsigned kb) {
  const std::string path = "/sys/class/bdi/" + std::to_string(major(dev)) + ":" +
                           std::to_string(minor(dev)) + "/read_ahead_kb";
  return WriteSmallFile(path, std::to_string(kb)).ok();
}

bool AbortFuseConnection(dev_t dev) {
  return WriteSmallFile("/sys/fs/fuse/connections/" + std::to_string(minor(dev)) + "/abort", "1")
      .ok();
}

}  // namespace stoker
