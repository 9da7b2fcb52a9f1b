// Reply: the one fuse_reply_* call a FUSE request gets, made and checked in
// one place. Every adapter builds a Reply first and runs its body through
// RunOp, which turns an exception into EIO so that none crosses into libfuse.
// A Reply destroyed without having replied (and not a forget, which gets
// fuse_reply_none) is a broken invariant: the kernel would wait forever.
//
// A failed reply (the request was interrupted or the connection went away)
// is logged at debug; the caller learns of it from the bool so that it can
// undo what the kernel will never hear of (a lookup count, a handle).
//
// Thread-safety: one Reply per request, used by the thread serving it.
#pragma once

#define FUSE_USE_VERSION 314
#include <cxxabi.h>
#include <fuse3/fuse_lowlevel.h>
#include <sys/statvfs.h>

#include <cstring>
#include <exception>
#include <string>

#include "fs/fuse_kernel_ext.h"
#include "util/log.h"
#include "util/status.h"

namespace stoker {

class Reply {
 public:
  Reply(fuse_req_t req, const char* op) : req_(req), op_(op) {}
  ~Reply() { STOKER_CHECK(done_, op_); }
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;

  bool done() const { return done_; }
  fuse_req_t req() const { return req_; }

  bool Err(int err) { return Check(fuse_reply_err(req_, err)); }
  void None() {
    Mark();
    fuse_reply_none(req_);
  }
  bool Entry(const fuse_entry_param& e) { return Check(fuse_reply_entry(req_, &e)); }
  bool Attr(const struct stat& st, double timeout) {
    return Check(fuse_reply_attr(req_, &st, timeout));
  }
  bool Readlink(const std::string& target) {
    return Check(fuse_reply_readlink(req_, target.c_str()));
  }
  bool Open(const fuse_file_info& fi) { return Check(fuse_reply_open(req_, &fi)); }
  bool Buf(const char* buf, size_t size) { return Check(fuse_reply_buf(req_, buf, size)); }
  // An OPEN answered with FOPEN_PASSTHROUGH and a backing id, which
  // fuse_reply_open cannot say (fs/fuse_kernel_ext.h).
  bool OpenPassthrough(uint64_t fh, uint32_t open_flags, int32_t backing_id) {
    const fuse_ext::OpenOut out{fh, open_flags, backing_id};
    return Check(fuse_reply_buf(req_, reinterpret_cast<const char*>(&out), sizeof(out)));
  }
  bool Data(fuse_bufvec* bufv) {
    return Check(fuse_reply_data(req_, bufv, static_cast<fuse_buf_copy_flags>(0)));
  }
  bool Statfs(const struct statvfs& st) { return Check(fuse_reply_statfs(req_, &st)); }
  bool Xattr(size_t size) { return Check(fuse_reply_xattr(req_, size)); }

 private:
  void Mark() {
    STOKER_CHECK(!done_, "second reply to one FUSE request");
    done_ = true;
  }
  bool Check(int rc) {
    Mark();
    if (rc != 0) {
      LOG_DEBUG("{}: reply not delivered: {}", op_, std::strerror(-rc));
      return false;
    }
    return true;
  }

  const fuse_req_t req_;
  const char* const op_;
  bool done_ = false;
};

// Runs body; an exception (bad_alloc, a bug) becomes EIO if no reply was made.
// Thread cancellation's forced unwind is let through: swallowing it aborts.
template <typename Body>
void RunOp(Reply& reply, Body&& body) {
  try {
    body();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (const std::exception& e) {
    LOG_ERROR("FUSE handler threw: {}", e.what());
    if (!reply.done()) reply.Err(EIO);
  } catch (...) {
    LOG_ERROR("FUSE handler threw a non-standard exception");
    if (!reply.done()) reply.Err(EIO);
  }
}

}  // namespace stoker
