// Everything that would change the tree or a file: EROFS. The mount is also
// made with -o ro, so the kernel refuses most of these before they get here;
// these adapters answer whatever still arrives.
#include "fs/fuse_ops_internal.h"
#include "fs/fuse_reply.h"

namespace stoker::fuse_ops {

namespace {

void Refuse(fuse_req_t req, const char* op) {
  Reply reply(req, op);
  reply.Err(EROFS);
}

}  // namespace

void SetReadOnlyOps(fuse_lowlevel_ops* ops) {
  ops->setattr = [](fuse_req_t req, fuse_ino_t, struct stat*, int, fuse_file_info*) {
    Refuse(req, "setattr");
  };
  ops->mknod = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { Refuse(req, "mknod"); };
  ops->mkdir = [](fuse_req_t req, fuse_ino_t, const char*, mode_t) { Refuse(req, "mkdir"); };
  ops->unlink = [](fuse_req_t req, fuse_ino_t, const char*) { Refuse(req, "unlink"); };
  ops->rmdir = [](fuse_req_t req, fuse_ino_t, const char*) { Refuse(req, "rmdir"); };
  ops->symlink = [](fuse_req_t req, const char*, fuse_ino_t, const char*) {
    Refuse(req, "symlink");
  };
  ops->rename = [](fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned int) {
    Refuse(req, "rename");
  };
  ops->link = [](fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { Refuse(req, "link"); };
  ops->write = [](fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) {
    Refuse(req, "write");
  };
  ops->create = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) {
    Refuse(req, "create");
  };
  ops->setxattr = [](fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) {
    Refuse(req, "setxattr");
  };
  ops->removexattr = [](fuse_req_t req, fuse_ino_t, const char*) { Refuse(req, "removexattr"); };
  ops->fallocate = [](fuse_req_t req, fuse_ino_t, int, off_t, off_t, fuse_file_info*) {
    Refuse(req, "fallocate");
  };
  ops->copy_file_range = [](fuse_req_t req, fuse_ino_t, off_t, fuse_file_info*, fuse_ino_t, off_t,
                            fuse_file_info*, size_t, int) { Refuse(req, "copy_file_range"); };
}

}  // namespace stoker::fuse_ops
