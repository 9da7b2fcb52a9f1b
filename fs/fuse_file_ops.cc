// File operations: open, read, release. Data comes from ObjectCache only; a
// read is answered with the segments of its ReadReply (cache-file descriptors
// spliced zero-copy, or memory), and the ReadReply is destroyed only after
// the reply was sent, so no segment can be evicted from under it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "cache/io/direct_io.h"
#include "fs/errno_map.h"
#include "fs/fuse_ops_internal.h"
#include "fs/fuse_reply.h"
#include "fs/posix_rules.h"
#include "util/log.h"

namespace stoker::fuse_ops {

namespace {

// A fuse_bufvec with room for n buffers (the struct declares one).
struct BufVec {
  explicit BufVec(size_t n)
      : storage(sizeof(fuse_bufvec) + (n > 0 ? n - 1 : 0) * sizeof(fuse_buf)) {
    bufv = reinterpret_cast<fuse_bufvec*>(storage.data());
    bufv->count = n;
    bufv->idx = 0;
    bufv->off = 0;
  }
  std::vector<unsigned char> storage;
  fuse_bufvec* bufv;
};

// libfuse splices a reply with descriptor segments only when header and
// data fit one pipe, and a pipe grows no larger than fs.pipe-max-size (1 MiB
// unless raised; root is held to it too). A full-size read does not fit:
// libfuse then reads it into a freshly allocated buffer, whose new pages
// cost more to fault in and zero than the copy itself. Such replies are read
// here, into a buffer each thread keeps.
size_t PipeMaxSize() {
  size_t v = 1u << 20;
  if (FILE* f = std::fopen("/proc/sys/fs/pipe-max-size", "re")) {
    unsigned long n = 0;
    if (std::fscanf(f, "%lu", &n) == 1 && n >= 4096) v = n;
    std::fclose(f);
  }
  return v;
}

bool FitsSplicePipe(size_t len, size_t segments) {
  static const size_t max = PipeMaxSize();
  // libfuse's own estimate: a page per segment, the header's and one spare.
  return 4096 * (segments + 2) + 16 + len <= max;  // 16: fuse_out_header
}

// Reads the reply's segments into this thread's buffer; nullptr when a
// descriptor gave fewer bytes than the cache said it holds.
const char* Gather(const std::vector<ReadSegment>& segs, size_t total) {
  thread_local std::shared_ptr<char[]> buf;
  thread_local size_t cap = 0;
  if (cap < total) {
    buf = AllocAligned(total);
    cap = total;
  }
  char* p = buf.get();
  for (const ReadSegment& s : segs) {
    if (s.fd < 0) {
      std::memcpy(p, s.mem, s.len);
    } else {
      size_t done = 0;
      while (done < s.len) {
        ssize_t n = ::pread(s.fd, p + done, s.len - done, s.off + static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return nullptr;
        done += static_cast<size_t>(n);
      }
    }
    p += s.len;
  }
  return buf.get();
}

// A new handle on node ino. ESTALE if the node serves another version than
// the origin's now (see Open).
Result<std::unique_ptr<FileHandle>> OpenNode(FsContext& fs, fuse_ino_t ino, bool* keep_cache) {
  auto h = std::make_unique<FileHandle>();
  *keep_cache = false;
  if (ControlFiles::IsVirtual(ino)) {
    if (fs.control->IsDir(ino)) return Status::Error(EISDIR, "is a directory");
    h->is_virtual = true;
    h->content = std::make_shared<const std::string>(fs.control->Snapshot(ino));
    return h;
  }
  STOKER_ASSIGN_OR_RETURN(const std::string path, fs.inodes.Path(ino));
  STOKER_ASSIGN_OR_RETURN(ObjectCache::Opened opened, fs.cache->Open(path, false));
  // One version per kernel inode (see InodeTable): a node that served
  // another version is retired, and ESTALE makes the kernel look the name
  // up again, which gives it a new node for this version.
  Result<bool> bound = fs.inodes.BindVersion(ino, opened.content_tag);
  if (!bound.ok() || !*bound) {
    LOG_DEBUG("open of node {} ('{}'): its version changed; ESTALE for a new node", ino, path);
    return Status::Error(ESTALE, "the node's version changed");
  }
  h->file = std::move(opened.file);
  h->version_st = opened.st;
  h->own_data_file = opened.own_data_file;
  *keep_cache = opened.keep_cache;
  // Attributes and other opens' pages of this inode are stale. Not from
  // here: the kernel may hold the inode's locks until we reply.
  if (opened.changed && fs.notifier != nullptr) fs.notifier->Invalidate(ino);
  return h;
}

// The handle of a read: ours, or (after a restart under --supervise) the
// node opened again for a predecessor's fh. That must be the version the
// node served: if it is gone, the read fails rather than mix versions.
Result<FileHandle*> FileOf(FsContext& fs, fuse_ino_t ino, uint64_t fh) {
  return HandleOf(fs, fs.files, fh, [&]() -> Result<std::unique_ptr<FileHandle>> {
    bool keep_cache = false;
    Result<std::unique_ptr<FileHandle>> h = OpenNode(fs, ino, &keep_cache);
    if (!h.ok() && h.status().code() == ESTALE) {
      return Status::Error(EIO, "the version a restarted handle read is gone");
    }
    if (h.ok()) LOG_INFO("adopted a file handle of node {} after a restart", ino);
    return h;
  });
}

// Decides whether the kernel reads the open directly (fs/passthrough.h).
PassthroughNodes::Grant CountOpen(FsContext& fs, fuse_ino_t ino, FileHandle& h) {
  if (fs.passthrough == nullptr || h.is_virtual) return {};
  h.node = ino;
  h.counted = true;
  PassthroughNodes::Grant grant = fs.passthrough->Open(ino, [&](std::string* why) {
    LeaseRefusal refusal{};
    Result<std::unique_ptr<WholeFileLease>> lease = fs.cache->LeaseWhole(*h.file, &refusal);
    if (!lease.ok()) *why = LeaseRefusalName(refusal);
    return lease;
  });
  h.passthrough = grant.passthrough;
  return grant;
}

// The kernel is done with an open of ours: the node's passthrough count.
void UncountOpen(FsContext& fs, FileHandle* h) {
  if (h->counted) fs.passthrough->Release(h->node, h->passthrough);
}

// --opens auto decided for kernel opens (fs/opens_policy.h): journaled
// first, so that a daemon restarted after the first ENOSYS knows it.
void MoveToKernelOpens(FsContext& fs, const OpensPolicy::Decision& d) {
  fs.inodes.JournalKernelOpens();
  fs.kernel_opens = true;
  if (fs.passthrough != nullptr) fs.passthrough->Disable("opens_kernel");
  // The kernel keeps each file's pages itself from now on.
  fs.cache->SetDataFilesInPageCache(false);
  // The control files' attributes were given with the entry timeout: from
  // now on each read must ask for them (AttrTimeoutOf).
  if (fs.notifier != nullptr) {
    fs.notifier->Invalidate(ControlFiles::kStatsId);
    fs.notifier->Invalidate(ControlFiles::kErrorsId);
  }
  LOG_INFO("--opens auto: the kernel opens files by itself from now on ({}, after {} opens)", d.why,
           d.after_opens);
}

}  // namespace

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Reply reply(req, "open");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    fs.fuse_opens++;
    if (fs.kernel_opens) {
      // The kernel opens every file of this connection by itself from now
      // on (fs/node_files.h); this open goes on as such an open. Writes
      // are refused by the read-only mount before they get here.
      reply.Err(ENOSYS);
      return;
    }
    if (WantsWrite(fi->flags)) {
      reply.Err(EROFS);
      return;
    }
    bool keep_cache = false;
    Result<std::unique_ptr<FileHandle>> h = OpenNode(fs, ino, &keep_cache);
    if (!h.ok()) {
      reply.Err(ErrnoFor(h.status()));
      return;
    }
    if ((*h)->is_virtual) fi->direct_io = 1;  // getattr says size 0; reads must still reach us
    if (fs.opens_policy != nullptr && !(*h)->is_virtual &&
        fs.opens_policy->Note(!(*h)->own_data_file)) {
      MoveToKernelOpens(fs, *fs.opens_policy->decision());  // this open goes on as it is
    }
    PassthroughNodes::Grant grant = CountOpen(fs, ino, **h);
    fi->keep_cache = keep_cache ? 1 : 0;
    if (!grant.passthrough && (*h)->own_data_file && fs.passthrough != nullptr &&
        fs.passthrough->enabled()) {
      // A file a later open may pass through: its bytes stay in memory as
      // the cache's data file's pages (CacheOptions::data_files_in_page_cache),
      // which that open reads. Pages of this open would be a second copy,
      // and the passthrough open drops them anyway: it keeps none.
      fi->direct_io = 1;
      fi->keep_cache = 0;
    }
    fi->noflush = 1;  // nothing to flush on close
    FileHandle* raw = fs.files.Add(std::move(h).value());
    fi->fh = FhOf(fs, raw);
    const bool sent =
        grant.passthrough
            ? reply.OpenPassthrough(fi->fh, fuse_ext::kOpenPassthrough | fuse_ext::kOpenNoFlush,
                                    grant.backing_id)
            : reply.Open(*fi);
    if (!sent) {  // no release will come
      UncountOpen(fs, raw);
      fs.files.Release(raw);
    }
  });
}

namespace {

// Answers a read of h.
void ServeRead(FsContext& fs, Reply& reply, const FileHandle* h, size_t size, off_t off) {
  if (off < 0) {
    reply.Err(EINVAL);
    return;
  }
  if (h->is_virtual) {
    std::shared_ptr<const std::string> content = h->content;
    const size_t start = std::min(content->size(), static_cast<size_t>(off));
    const size_t n = std::min(size, content->size() - start);
    reply.Buf(content->data() + start, n);
    return;
  }
  // Until the reply is sent: a change found by an open meanwhile waits for
  // it, so this version's bytes never land beside the next one's.
  std::shared_lock<std::shared_mutex> serving = fs.cache->HoldServe(*h->file);
  ReadReply data;
  Status st = fs.cache->Read(*h->file, static_cast<uint64_t>(off), size, &data);
  if (!st.ok()) {
    reply.Err(ErrnoFor(st));
    return;
  }
  const std::vector<ReadSegment>& segs = data.segments();
  if (segs.empty()) {
    reply.Buf(nullptr, 0);  // at or past the end of the file
    return;
  }
  // A segment with neither a descriptor nor memory would be sent as bytes
  // from address 0 (EFAULT) or from whatever it points at: never reply
  // with it. It means the cache broke its contract; say so loudly.
  for (const ReadSegment& s : segs) {
    if (s.len > 0 && s.fd < 0 && s.mem == nullptr) {
      LOG_ERROR("cache returned an empty read segment (off {}, len {}, {} segments); EIO", off,
                s.len, segs.size());
      fs.cache->counters().errors++;
      reply.Err(EIO);
      return;
    }
  }
  size_t total = 0;
  bool has_fd = false;
  for (const ReadSegment& s : segs) {
    total += s.len;
    has_fd = has_fd || s.fd >= 0;
  }
  if (has_fd && fs.splice_write && !FitsSplicePipe(total, segs.size())) {
    const char* gathered = Gather(segs, total);
    if (gathered == nullptr) {
      LOG_ERROR("cache data file gave short data (off {}, len {}); EIO", off, total);
      fs.cache->counters().errors++;
      reply.Err(EIO);
      return;
    }
    reply.Buf(gathered, total);
    return;
  }
  BufVec v(segs.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    fuse_buf& b = v.bufv->buf[i];
    b = fuse_buf{};
    b.size = segs[i].len;
    if (segs[i].fd >= 0) {
      b.flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
      b.fd = segs[i].fd;
      b.pos = segs[i].off;
    } else {
      b.mem = const_cast<char*>(segs[i].mem);
    }
  }
  reply.Data(v.bufv);
  // `data` (and the pins it holds) goes only now, after the splice; it
  // stores what this read fetched, once the reader has its bytes.
}

// With --opens kernel: node ino's handle (fs/node_files.h); for a control
// file, its latest snapshot (fs/control_files.h).
Result<std::shared_ptr<FileHandle>> NodeHandleOf(FsContext& fs, fuse_ino_t ino) {
  if (ControlFiles::IsVirtual(ino)) {
    if (fs.control->IsDir(ino)) return Status::Error(EISDIR, "is a directory");
    auto h = std::make_shared<FileHandle>();
    h->is_virtual = true;
    h->content = fs.control->Latest(ino).bytes;
    return h;
  }
  return fs.node_files.Get(ino, [&]() -> Result<std::shared_ptr<FileHandle>> {
    bool keep_cache = false;
    Result<std::unique_ptr<FileHandle>> h = OpenNode(fs, ino, &keep_cache);
    if (!h.ok()) {
      if (h.status().code() == ESTALE) {
        LOG_WARN("node {}: the version its pages came from is gone; EIO", ino);
        return Status::Error(EIO, "the version the node served is gone");
      }
      return h.status();
    }
    return std::shared_ptr<FileHandle>(std::move(h).value());
  });
}

}  // namespace

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Reply reply(req, "read");
  const auto start = std::chrono::steady_clock::now();
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    if (fs.kernel_opens && fi->fh == 0) {
      Result<std::shared_ptr<FileHandle>> h = NodeHandleOf(fs, ino);
      if (!h.ok()) {
        reply.Err(ErrnoFor(h.status()));
        return;
      }
      ServeRead(fs, reply, h->get(), size, off);
    } else {
      Result<FileHandle*> handle = FileOf(fs, ino, fi->fh);
      if (!handle.ok()) {
        reply.Err(ErrnoFor(handle.status()));
        return;
      }
      HandleSet<FileHandle>::Use h(*handle);
      ServeRead(fs, reply, h.operator->(), size, off);
    }
    fs.read_latency.Add(std::chrono::steady_clock::now() - start);  // the reply is out
  });
}

void Release(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  Reply reply(req, "release");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    ReleaseHandle(fs, fs.files, fi->fh, [&fs](FileHandle* h) { UncountOpen(fs, h); });
    reply.Err(0);
  });
}

}  // namespace stoker::fuse_ops
