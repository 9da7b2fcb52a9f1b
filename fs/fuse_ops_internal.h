// Declarations shared by the fuse_*_ops.cc files; not for use outside fs/.
#pragma once

#include "fs/fuse_ops.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker::fuse_ops {

inline FsContext& Ctx(fuse_req_t req) { return *static_cast<FsContext*>(fuse_req_userdata(req)); }

// Handles (see FsContext): the fh given to the kernel for a handle of ours.
inline constexpr uint64_t kHandleTagMask = 0xFFFFull << 48;
inline uint64_t FhOf(const FsContext& fs, const void* h) {
  return reinterpret_cast<uint64_t>(h) | fs.handle_tag;
}

// The handles adopted from a crashed predecessor, of T's kind: fs.adopted_files
// or fs.adopted_dirs (a function, so that the analysis sees each use under adopt_mu).
inline std::unordered_map<uint64_t, FileHandle*>& Adopted(FsContext& fs, const FileHandle*)
    REQUIRES(fs.adopt_mu) {
  return fs.adopted_files;
}
inline std::unordered_map<uint64_t, DirHandle*>& Adopted(FsContext& fs, const DirHandle*)
    REQUIRES(fs.adopt_mu) {
  return fs.adopted_dirs;
}

// The handle an fh names: ours, or one adopted from a crashed predecessor,
// made by make() (a Result<std::unique_ptr<T>>) on first use.
template <typename T, typename Make>
Result<T*> HandleOf(FsContext& fs, HandleSet<T>& set, uint64_t fh, const Make& make) {
  if ((fh & kHandleTagMask) == fs.handle_tag) return reinterpret_cast<T*>(fh & ~kHandleTagMask);
  const T* const kind = nullptr;
  {
    MutexLock lock(fs.adopt_mu);
    std::unordered_map<uint64_t, T*>& adopted = Adopted(fs, kind);
    if (auto it = adopted.find(fh); it != adopted.end()) return it->second;
  }
  Result<std::unique_ptr<T>> made = make();
  if (!made.ok()) return made.status();
  MutexLock lock(fs.adopt_mu);
  std::unordered_map<uint64_t, T*>& adopted = Adopted(fs, kind);
  if (auto it = adopted.find(fh); it != adopted.end()) return it->second;  // raced; ours goes
  T* raw = set.Add(std::move(made).value());
  adopted.emplace(fh, raw);
  return raw;
}

// The kernel's RELEASE of fh. An fh of a predecessor never adopted is a no-op.
// before(h) runs first for a handle of ours or an adopted one.
template <typename T, typename Before = void (*)(T*)>
void ReleaseHandle(
    FsContext& fs, HandleSet<T>& set, uint64_t fh, const Before& before = [](T*) {}) {
  if ((fh & kHandleTagMask) == fs.handle_tag) {
    T* h = reinterpret_cast<T*>(fh & ~kHandleTagMask);
    before(h);
    set.Release(h);
    return;
  }
  T* h = nullptr;
  {
    MutexLock lock(fs.adopt_mu);
    std::unordered_map<uint64_t, T*>& adopted = Adopted(fs, static_cast<const T*>(nullptr));
    auto it = adopted.find(fh);
    if (it == adopted.end()) return;
    h = it->second;
    adopted.erase(it);
  }
  before(h);
  set.Release(h);
}

// Attributes of an origin path: Origin::Stat, or, when the origin cannot be
// reached, the attributes of the cached version (so cached data stays
// reachable by lookup).
Result<struct stat> AttrOf(FsContext& fs, const std::string& path);

// Whether a and b describe one version of a file or directory, as far as
// the attributes tell: size, mtime and ctime (which carries a remote
// object's ETag; a local file's also moves on chmod or link, which costs
// only a new node or listing).
inline bool SameVersion(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec && a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
         a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// InodeTable::Lookup (ENFILE past cap), and with --opens kernel
// (fs/node_files.h) also the check an open would make: a node read from
// another version of the file than st describes is retired, and a new node
// is returned.
Result<uint64_t> NodeOf(FsContext& fs, uint64_t parent, std::string_view name,
                        const struct stat& st, size_t cap = InodeTable::kNoCap);

// NodeOf for a LOOKUP, within the bound on nodes (FsContext::max_nodes):
// past it, waits for the kernel's forgets as FsContext says.
Result<uint64_t> BoundedNodeOf(FsContext& fs, uint64_t parent, std::string_view name,
                               const struct stat& st);

// After a reply that gave the kernel nodes: past FsContext::shed_mark(),
// asks the kernel to drop the oldest entries.
void MaybeShedNodes(FsContext& fs);

// The attribute timeout of node id: 0 for a control file with --opens
// kernel (each read() then asks for its attributes: fs/control_files.h).
inline double AttrTimeoutOf(const FsContext& fs, uint64_t id) {
  return fs.kernel_opens && ControlFiles::IsVirtual(id) && !fs.control->IsDir(id) ? 0 : fs.timeout;
}

// Directories (fuse_dir_ops.cc).
void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void ReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void ReleaseDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);

// Files (fuse_file_ops.cc).
void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);

// Everything that would write (fuse_readonly_ops.cc): EROFS.
void SetReadOnlyOps(fuse_lowlevel_ops* ops);

}  // namespace stoker::fuse_ops
