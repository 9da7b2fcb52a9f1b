// Declarations shared by the fuse_*_ops.cc files; not for use outside fs/.
#pragma once

#include "fs/fuse_ops.h"
#include "util/status.h"

namespace stoker::fuse_ops {

inline FsContext& Ctx(fuse_req_t req) { return *static_cast<FsContext*>(fuse_req_userdata(req)); }

// Attributes of an origin path: Origin::Stat, or, when the origin cannot be
// reached, the attributes of the cached version (so cached data stays
// reachable by lookup).
Result<struct stat> AttrOf(FsContext& fs, const std::string& path);

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
