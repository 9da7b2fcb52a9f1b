// Node operations (lookup, forget, attributes, links, xattrs, statfs), the
// connection setup and the operation table.
#include "fs/fuse_ops.h"

#include <malloc.h>
#include <sys/statvfs.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/errno_map.h"
#include "fs/fs_path.h"
#include "fs/fuse_ops_internal.h"
#include "fs/fuse_reply.h"
#include "fs/posix_rules.h"
#include "util/log.h"

namespace stoker::fuse_ops {

namespace {

constexpr unsigned kMaxWrite = 1u << 20;  // also sets max_pages (256)
constexpr unsigned kMaxBackground = 64;   // readahead requests in flight

void Init(void* userdata, fuse_conn_info* conn) {
  auto* fs = static_cast<FsContext*>(userdata);
  // Zero-copy replies: fd buffers are spliced into /dev/fuse.
  if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
  // Splicing requests in only helps WRITE, which we refuse; for everything
  // else it costs an extra copy out of the pipe. Page stealing (MOVE) has
  // been a no-op in the kernel for years and only adds risk.
  conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_MOVE);
  // We invalidate explicitly (keep_cache at open, notify when the origin
  // changed). Auto-invalidation would add a GETATTR per read() once the
  // attribute timeout has passed, and with --revalidate 0 on every read.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  // With --opens kernel there is no open to say keep_cache at, and a
  // control file's new content shows as a new mtime (fs/control_files.h).
  // --opens auto may move there at any time.
  if ((fs->kernel_opens || fs->opens_policy != nullptr) &&
      (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)) {
    conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  }
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  // Every listing is a READDIRPLUS. With the kernel's "auto" mode only the
  // first buffer of a directory is (about 200 entries), unless something
  // stat'ed an entry before the walk went on; a loader that lists its files
  // and then opens them paid a LOOKUP round trip per file past that.
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  conn->max_write = kMaxWrite;
  conn->max_read = fs->max_read;
  // libfuse already lowered this to what the kernel offers; RunMount raises
  // the bdi's read_ahead_kb after mounting.
  conn->max_readahead = UINT_MAX;
  conn->max_background = kMaxBackground;
  conn->congestion_threshold = kMaxBackground * 3 / 4;
  fs->splice_write = (conn->want & FUSE_CAP_SPLICE_WRITE) != 0;
  LOG_INFO("FUSE protocol {}.{}, splice_write={}, readdirplus={}, max_read={}, opens={}",
           conn->proto_major, conn->proto_minor, fs->splice_write.load(),
           (conn->want & FUSE_CAP_READDIRPLUS) != 0, conn->max_read,
           fs->kernel_opens   ? "kernel"
           : fs->opens_policy ? "auto"
                              : "daemon");
}

// A control file's attributes; with --opens kernel, those of its latest
// content (fs/control_files.h).
struct stat ControlAttr(FsContext& fs, uint64_t id) {
  if (!fs.kernel_opens || fs.control->IsDir(id)) return fs.control->Attr(id);
  return fs.control->AttrOf(id, fs.control->Refresh(id));
}

void Retire(FsContext& fs, uint64_t id) {
  if (Result<bool> retired = fs.inodes.Retire(id); retired.ok() && *retired) {
    fs.nodes_retired++;
    LOG_DEBUG("node {}: the origin's file changed since it was read; retired", id);
  }
}

fuse_entry_param EntryFor(uint64_t id, const struct stat& st, double timeout) {
  fuse_entry_param e{};
  e.ino = id;
  e.attr = st;
  e.attr_timeout = timeout;
  e.entry_timeout = timeout;
  return e;
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Reply reply(req, "lookup");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    const std::string_view n(name);
    if (auto id = fs.control->Lookup(parent, n)) {
      fuse_entry_param e = EntryFor(*id, ControlAttr(fs, *id), fs.timeout);
      e.attr_timeout = AttrTimeoutOf(fs, *id);
      reply.Entry(e);
      return;
    }
    if (ControlFiles::IsVirtual(parent) || !IsValidComponent(n)) {
      reply.Err(ENOENT);
      return;
    }
    Result<std::string> dir = fs.inodes.Path(parent);
    if (!dir.ok()) {
      reply.Err(ErrnoFor(dir.status()));
      return;
    }
    Result<struct stat> st = AttrOf(fs, JoinPath(*dir, n));
    if (!st.ok()) {
      if (st.status().code() == ENOENT) {
        // A negative entry: the kernel remembers the miss for the timeout.
        reply.Entry(EntryFor(0, {}, fs.negative_timeout()));
      } else {
        reply.Err(ErrnoFor(st.status()));
      }
      return;
    }
    Result<uint64_t> id = BoundedNodeOf(fs, parent, n, *st);
    if (!id.ok()) {
      reply.Err(ErrnoFor(id.status()));
      return;
    }
    if (!reply.Entry(EntryFor(*id, *st, fs.timeout))) fs.inodes.Forget(*id, 1);
    MaybeShedNodes(fs);
  });
}

void ForgetOne(FsContext& fs, fuse_ino_t ino, uint64_t nlookup) {
  if (ControlFiles::IsVirtual(ino)) return;
  fs.inodes.Forget(ino, nlookup);
  if (fs.inodes.LookupCount(ino) != 0) return;
  if (fs.kernel_opens) fs.node_files.Drop(ino);
  MutexLock lock(fs.listings_mu);
  fs.listings.erase(ino);
}

// When the kernel has forgotten most of the nodes it held (memory pressure,
// drop_caches), the memory they took is free but kept by the allocator's
// per-thread arenas: hand it back to the system, once per such fall.
void MaybeReturnMemory(FsContext& fs) {
  constexpr size_t kMinFall = 20000;  // nodes; about 3 MiB
  const size_t now = fs.inodes.size();
  size_t high = fs.nodes_high.load(std::memory_order_relaxed);
  while (now > high && !fs.nodes_high.compare_exchange_weak(high, now)) {
  }
  if (high < now + kMinFall || now > high / 2) return;
  if (!fs.nodes_high.compare_exchange_strong(high, now)) return;  // another thread trims
  malloc_trim(0);
  LOG_DEBUG("the kernel forgot {} of {} nodes; free memory returned", high - now, high);
}

// Forgets get no reply but fuse_reply_none, so they bypass RunOp (whose
// fallback is an error reply). Nothing in them allocates or throws.
void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Reply reply(req, "forget");
  FsContext& fs = Ctx(req);  // not from req once it is answered (freed)
  ForgetOne(fs, ino, nlookup);
  reply.None();
  MaybeReturnMemory(fs);
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  Reply reply(req, "forget_multi");
  FsContext& fs = Ctx(req);
  for (size_t i = 0; i < count; ++i) ForgetOne(fs, forgets[i].ino, forgets[i].nlookup);
  reply.None();
  MaybeReturnMemory(fs);
}

// The attributes of node ino: a control file's, or its origin path's (AttrOf).
Result<struct stat> NodeAttr(FsContext& fs, fuse_ino_t ino) {
  if (ControlFiles::IsVirtual(ino)) return ControlAttr(fs, ino);
  Result<std::string> path = fs.inodes.Path(ino);
  if (!path.ok()) return path.status();
  return AttrOf(fs, *path);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  Reply reply(req, "getattr");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    if (ControlFiles::IsVirtual(ino)) {
      reply.Attr(ControlAttr(fs, ino), AttrTimeoutOf(fs, ino));
      return;
    }
    Result<struct stat> st = NodeAttr(fs, ino);
    if (!st.ok()) {
      reply.Err(ErrnoFor(st.status()));
      return;
    }
    if (fs.kernel_opens) {
      // A node keeps the attributes of the version its pages came from; a
      // change retires it (see NodeOf), for the next lookup to see.
      if (std::shared_ptr<FileHandle> h = fs.node_files.Find(ino)) {
        if (!SameVersion(h->version_st, *st)) {
          Retire(fs, ino);
          reply.Attr(h->version_st, fs.timeout);
          return;
        }
      }
    }
    reply.Attr(*st, fs.timeout);
  });
}

void ReadLink(fuse_req_t req, fuse_ino_t ino) {
  Reply reply(req, "readlink");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    if (ControlFiles::IsVirtual(ino)) {
      reply.Err(EINVAL);
      return;
    }
    Result<std::string> path = fs.inodes.Path(ino);
    if (!path.ok()) {
      reply.Err(ErrnoFor(path.status()));
      return;
    }
    Result<std::string> target = fs.origin->ReadLink(*path);
    if (!target.ok()) {
      reply.Err(ErrnoFor(target.status()));
      return;
    }
    reply.Readlink(*target);
  });
}

void StatFs(fuse_req_t req, fuse_ino_t /*ino*/) {
  Reply reply(req, "statfs");
  RunOp(reply, [&] {
    // The origin interface has no statfs; a read-only mount has no free space
    // to report anyway. Name length and inode count are what tools look at.
    struct statvfs st {};
    st.f_bsize = 4096;
    st.f_frsize = 4096;
    st.f_namemax = 255;
    st.f_files = Ctx(req).inodes.size();
    reply.Statfs(st);
  });
}

// getxattr/listxattr share the size protocol: size 0 asks for the length.
void ReplyXattrValue(Reply& reply, const std::string& value, size_t size) {
  if (size == 0) {
    reply.Xattr(value.size());
  } else if (value.size() > size) {
    reply.Err(ERANGE);
  } else {
    reply.Buf(value.data(), value.size());
  }
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Reply reply(req, "getxattr");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    if (ControlFiles::IsVirtual(ino)) {
      reply.Err(ENODATA);
      return;
    }
    Result<std::string> path = fs.inodes.Path(ino);
    if (!path.ok()) {
      reply.Err(ErrnoFor(path.status()));
      return;
    }
    Result<std::string> value = fs.origin->GetXattr(*path, name);
    if (!value.ok()) {
      reply.Err(XattrErrnoFor(value.status()));
      return;
    }
    ReplyXattrValue(reply, *value, size);
  });
}

void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Reply reply(req, "listxattr");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    if (ControlFiles::IsVirtual(ino)) {
      ReplyXattrValue(reply, "", size);
      return;
    }
    Result<std::string> path = fs.inodes.Path(ino);
    if (!path.ok()) {
      reply.Err(ErrnoFor(path.status()));
      return;
    }
    Result<std::vector<std::string>> names = fs.origin->ListXattr(*path);
    if (!names.ok()) {
      if (XattrErrnoFor(names.status()) == ENOTSUP) {
        ReplyXattrValue(reply, "", size);  // no xattrs is an empty list
      } else {
        reply.Err(ErrnoFor(names.status()));
      }
      return;
    }
    std::string packed;
    for (const std::string& n : *names) {
      packed.append(n);
      packed.push_back('\0');
    }
    ReplyXattrValue(reply, packed, size);
  });
}

void Access(fuse_req_t req, fuse_ino_t ino, int mask) {
  Reply reply(req, "access");
  // Asked only without default_permissions, where the mount checks no modes
  // (FUSE's own model: its user, or all with allow_other) beyond what every
  // file system says alike: no write to a file, directory or symlink of a
  // read-only one (the kernel answers that before asking), and execute only
  // where an x bit is set, whoever asks (root included; fs/posix_rules.h).
  RunOp(reply, [&] {
    Result<struct stat> st = NodeAttr(Ctx(req), ino);
    reply.Err(st.ok() ? AccessErrno(st->st_mode, mask) : ErrnoFor(st.status()));
  });
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops{};
  ops.init = Init;
  ops.lookup = Lookup;
  ops.forget = Forget;
  ops.forget_multi = ForgetMulti;
  ops.getattr = GetAttr;
  ops.readlink = ReadLink;
  ops.statfs = StatFs;
  ops.getxattr = GetXattr;
  ops.listxattr = ListXattr;
  ops.access = Access;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.readdirplus = ReadDirPlus;
  ops.releasedir = ReleaseDir;
  ops.open = Open;
  ops.read = Read;
  ops.release = Release;
  SetReadOnlyOps(&ops);
  return ops;
}

}  // namespace

Result<uint64_t> NodeOf(FsContext& fs, uint64_t parent, std::string_view name,
                        const struct stat& st, size_t cap) {
  Result<uint64_t> id = fs.inodes.Lookup(parent, name, st, cap);
  if (!id.ok() || !fs.kernel_opens || !S_ISREG(st.st_mode)) return id;
  std::shared_ptr<FileHandle> h = fs.node_files.Find(*id);
  if (h == nullptr || SameVersion(h->version_st, st)) return id;
  // Its open files keep reading the version they began with.
  Retire(fs, *id);
  fs.inodes.Forget(*id, 1);
  return fs.inodes.Lookup(parent, name, st, cap);
}

Result<uint64_t> BoundedNodeOf(FsContext& fs, uint64_t parent, std::string_view name,
                               const struct stat& st) {
  if (fs.max_nodes == 0 || fs.notifier == nullptr) return NodeOf(fs, parent, name, st);
  const auto deadline = std::chrono::steady_clock::now() + FsContext::kLookupWait;
  size_t cap = fs.max_nodes;
  for (;;) {
    Result<uint64_t> id = NodeOf(fs, parent, name, st, cap);
    if (id.ok() || id.status().code() != ENFILE) return id;
    MaybeShedNodes(fs);
    const bool may_wait = fs.lookups_waiting.fetch_add(1) < FsContext::kMaxWaiting;
    const bool room = may_wait && fs.inodes.WaitForRoom(cap, parent, deadline, [&] {
      return fs.notifier->SendingEntryIn(parent);
    });
    fs.lookups_waiting--;
    if (room) continue;
    if (cap == fs.max_nodes && std::chrono::steady_clock::now() < deadline) {
      cap = fs.max_nodes + FsContext::kNodeSlack;  // cannot wait for the forgets: see FsContext
      continue;
    }
    if (fs.nodes_over_bound++ == 0) {
      LOG_WARN(
          "the kernel keeps more than --max-nodes {} nodes and does not forget them (files held "
          "open?); lookups go on past the bound",
          fs.max_nodes);
    }
    return NodeOf(fs, parent, name, st);
  }
}

void MaybeShedNodes(FsContext& fs) {
  if (fs.max_nodes == 0 || fs.notifier == nullptr) return;
  // Queued a batch at a time: a node looked up again meanwhile should not
  // have been named.
  constexpr size_t kBatch = 1024;
  if (fs.notifier->entries_pending() >= kBatch) return;
  const InodeTable::Drop how =
      fs.notifier->can_prune() ? InodeTable::Drop::kById : InodeTable::Drop::kByName;
  std::vector<InodeTable::Entry> shed = fs.inodes.Overflow(fs.shed_mark(), kBatch, how);
  for (InodeTable::Entry& e : shed) {
    if (e.how == InodeTable::Drop::kById) {
      fs.notifier->Prune(e.id, e.parent, std::move(e.name));
    } else {
      fs.notifier->InvalidateEntry(e.parent, std::move(e.name));
    }
  }
  fs.nodes_shed += shed.size();
}

Result<struct stat> AttrOf(FsContext& fs, const std::string& path) {
  // While the origin backs off, a cached file is not asked about: each
  // lookup would wait out its timeouts.
  if (std::optional<struct stat> held = fs.cache->HeldAttr(path, false)) return *held;
  Result<struct stat> st = fs.origin->Stat(path);
  if (st.ok() || !IsOriginUnavailable(st.status().code())) return st;
  fs.cache->counters().origin_errors++;
  std::optional<struct stat> held = fs.cache->HeldAttr(path, true);
  if (!held || !S_ISREG(held->st_mode)) return st.status();
  LOG_DEBUG("origin unreachable for '{}'; using the cached version's attributes", path);
  return *held;
}

}  // namespace stoker::fuse_ops

namespace stoker {

const fuse_lowlevel_ops& StokerLowlevelOps() {
  static const fuse_lowlevel_ops ops = fuse_ops::MakeOps();
  return ops;
}

uint64_t ForgetSubtree(FsContext& fs, const std::string& prefix) {
  const std::vector<InodeTable::Entry> nodes = fs.inodes.Under(prefix);
  // The directory whose listing names prefix (a file added or removed there).
  std::optional<uint64_t> dir;
  if (!prefix.empty()) dir = fs.inodes.Find(ParentOf(prefix));
  {
    MutexLock lock(fs.listings_mu);
    for (const InodeTable::Entry& n : nodes) fs.listings.erase(n.id);
    if (dir) fs.listings.erase(*dir);
  }
  if (fs.notifier == nullptr) return 0;
  if (dir) {
    fs.notifier->Invalidate(*dir);
    // Not a node: the kernel may remember that the name was missing.
    if (nodes.empty()) fs.notifier->InvalidateEntry(*dir, BaseName(prefix));
  }
  for (const InodeTable::Entry& n : nodes) {
    fs.notifier->Invalidate(n.id);
    if (n.id != InodeTable::kRootId) fs.notifier->InvalidateEntry(n.parent, n.name);
  }
  return nodes.size();
}

}  // namespace stoker
