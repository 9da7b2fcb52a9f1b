// Directory operations. A directory handle holds a snapshot of the entries
// taken at opendir, so readdir offsets (an entry's index + 1) stay stable
// however the origin changes while the directory is open. The kernel caches
// the listings it reads (FOPEN_CACHE_DIR), and keeps them across opendirs
// within --revalidate while the directory's attributes stay the same
// (KeepListing); such an opendir lists nothing unless a readdir comes.
#include <cstring>
#include <string>
#include <vector>

#include "fs/errno_map.h"
#include "fs/fuse_ops_internal.h"
#include "fs/fuse_reply.h"
#include "util/mutex.h"

namespace stoker::fuse_ops {

namespace {

OriginDirEntry DotEntry(const char* name, uint64_t origin_ino) {
  OriginDirEntry e{name, {}};
  e.st.st_ino = origin_ino;
  e.st.st_mode = S_IFDIR;
  return e;
}

// Fills h->entries from the origin (or the control files).
Status ListLocked(FsContext& fs, DirHandle* h) REQUIRES(h->mu) {
  const uint64_t ino = h->dir_id;
  h->listed = true;
  if (h->is_virtual) {
    h->entries.push_back(DotEntry(".", fs.control->Attr(ino).st_ino));
    h->entries.push_back(DotEntry("..", fs.inodes.Info(InodeTable::kRootId)->origin_ino));
    for (OriginDirEntry& e : fs.control->List(ino)) h->entries.push_back(std::move(e));
    return Status::OK();
  }
  STOKER_ASSIGN_OR_RETURN(InodeTable::NodeInfo info, fs.inodes.Info(ino));
  h->entries.push_back(DotEntry(".", info.origin_ino));
  h->entries.push_back(DotEntry("..", info.parent_origin_ino));
  const bool root = ino == InodeTable::kRootId;
  return fs.origin->ReadDir(info.path, [&](const OriginDirEntry& e) REQUIRES(h->mu) {
    // Ours wins over an origin entry of the same name (control_files.h).
    if (!(root && e.name == ControlFiles::kDirName)) h->entries.push_back(e);
    return true;
  });
}

Result<std::unique_ptr<DirHandle>> Snapshot(FsContext& fs, fuse_ino_t ino) {
  auto h = std::make_unique<DirHandle>();
  h->dir_id = ino;
  if (ControlFiles::IsVirtual(ino)) {
    if (!fs.control->IsDir(ino)) return Status::Error(ENOTDIR, "not a directory");
    h->is_virtual = true;
  }
  MutexLock lock(h->mu);
  STOKER_RETURN_IF_ERROR(ListLocked(fs, h.get()));
  return h;
}

// Whether the kernel may keep the listing it cached of directory ino (see
// FsContext::listings); if not, this opendir's snapshot is recorded as the
// node's listing.
bool KeepListing(FsContext& fs, fuse_ino_t ino) {
  if (ControlFiles::IsVirtual(ino) || fs.timeout <= 0) return false;
  Result<std::string> path = fs.inodes.Path(ino);
  if (!path.ok()) return false;
  Result<struct stat> st = AttrOf(fs, *path);
  if (!st.ok() || !S_ISDIR(st->st_mode)) return false;
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(fs.listings_mu);
  auto [it, fresh] = fs.listings.try_emplace(ino);
  FsContext::Listing& l = it->second;
  if (!fresh && now - l.at < std::chrono::duration<double>(fs.timeout) && SameVersion(l.st, *st)) {
    fs.listings_kept++;
    return true;
  }
  l.at = now;
  l.st = *st;
  return false;
}

// What readdirplus says of h's entry i. "." and ".." go without a node id:
// the kernel skips them. Any other origin entry whose attributes are complete
// takes a lookup on its node (NodeOf), within the bound on nodes, which is
// the caller's to give back if the kernel does not get the entry.
Result<fuse_entry_param> PlusEntryLocked(FsContext& fs, DirHandle* h, size_t i) REQUIRES(h->mu) {
  const OriginDirEntry& e = h->entries[i];
  fuse_entry_param ep{};
  ep.attr = e.st;
  if (i < 2) return ep;
  ep.attr_timeout = ep.entry_timeout = fs.timeout;
  if (h->is_virtual) {
    ep.ino = *fs.control->Lookup(h->dir_id, e.name);
    ep.attr_timeout = AttrTimeoutOf(fs, ep.ino);
    return ep;
  }
  if (e.attrs_complete) {
    // Past the bound on nodes, none (below): a listing never waits for forgets.
    const size_t cap = fs.max_nodes != 0 ? fs.max_nodes : InodeTable::kNoCap;
    Result<uint64_t> id = NodeOf(fs, h->dir_id, e.name, e.st, cap);
    if (id.ok()) {
      ep.ino = *id;
      return ep;
    }
    if (id.status().code() != ENFILE) return id.status();
  }
  // No node id: the kernel keeps only the name and looks the entry up
  // (which computes a view file's size) when it is stat'ed.
  ep.attr_timeout = ep.entry_timeout = 0;
  return ep;
}

// Fills buf with h's entries from off on, as many as fit, and returns the
// bytes used. counted gets the node of each readdirplus entry in buf that
// took a lookup; an error before any entry is in buf is replied.
size_t FillListingLocked(fuse_req_t req, FsContext& fs, DirHandle* h, size_t off, bool plus,
                         std::vector<char>& buf, std::vector<uint64_t>& counted, Reply& reply)
    REQUIRES(h->mu) {
  size_t used = 0;
  for (size_t i = off; i < h->entries.size(); ++i) {
    const OriginDirEntry& e = h->entries[i];
    char* const at = buf.data() + used;
    const size_t room = buf.size() - used;
    const off_t next = static_cast<off_t>(i + 1);
    size_t need;
    if (!plus) {
      need = fuse_add_direntry(req, at, room, e.name.c_str(), &e.st, next);
      if (need > room) break;
    } else {
      Result<fuse_entry_param> ep = PlusEntryLocked(fs, h, i);
      if (!ep.ok()) {
        if (used == 0) reply.Err(ErrnoFor(ep.status()));
        break;
      }
      const bool looked_up = !h->is_virtual && ep->ino != 0;
      if (looked_up) counted.push_back(ep->ino);
      need = fuse_add_direntry_plus(req, at, room, e.name.c_str(), &*ep, next);
      if (need > room) {
        // Did not fit: the kernel will not see this entry, so it holds no
        // lookup on it.
        if (looked_up) {
          fs.inodes.Forget(counted.back(), 1);
          counted.pop_back();
        }
        break;
      }
    }
    used += need;
  }
  return used;
}

void ReadDirCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi,
                   bool plus) {
  Reply reply(req, plus ? "readdirplus" : "readdir");
  // Taken now: libfuse frees req with its reply, which RunOp may have sent
  // (an error) by the time the lookups below are undone.
  FsContext& ctx = Ctx(req);
  std::vector<uint64_t> counted;  // lookups taken for entries in this reply
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    // A predecessor's handle (--supervise) is listed again: its offsets
    // hold as long as the directory did not change meanwhile.
    Result<DirHandle*> handle = HandleOf(fs, fs.dirs, fi->fh, [&] { return Snapshot(fs, ino); });
    if (!handle.ok()) {
      reply.Err(ErrnoFor(handle.status()));
      return;
    }
    HandleSet<DirHandle>::Use in_use(*handle);  // keeps h alive
    DirHandle* const h = *handle;
    if (off < 0) {
      reply.Err(EINVAL);
      return;
    }
    MutexLock listed(h->mu);
    if (!h->listed) {
      // The kernel was told to keep its listing, but has none (any more).
      if (Status st = ListLocked(fs, h); !st.ok()) {
        reply.Err(ErrnoFor(st));
        return;
      }
    }
    std::vector<char> buf(size);
    const size_t used =
        FillListingLocked(req, fs, h, static_cast<size_t>(off), plus, buf, counted, reply);
    if (reply.done()) return;
    if (!reply.Buf(buf.data(), used)) {
      for (uint64_t id : counted) fs.inodes.Forget(id, 1);
    }
    counted.clear();
  });
  // An exception after lookups were taken: the error reply carried none.
  for (uint64_t id : counted) ctx.inodes.Forget(id, 1);
  if (plus) MaybeShedNodes(ctx);
}

}  // namespace

void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Reply reply(req, "opendir");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    std::unique_ptr<DirHandle> h;
    if (KeepListing(fs, ino)) {
      h = std::make_unique<DirHandle>();  // listed at the first readdir, if one comes
      h->dir_id = ino;
      fi->keep_cache = 1;
    } else {
      Result<std::unique_ptr<DirHandle>> made = Snapshot(fs, ino);
      if (!made.ok()) {
        reply.Err(ErrnoFor(made.status()));
        return;
      }
      h = std::move(made).value();
    }
    // The kernel keeps what it reads of an origin directory, for the next
    // opendir to reuse if KeepListing allows.
    fi->cache_readdir = h->is_virtual ? 0 : 1;
    DirHandle* raw = fs.dirs.Add(std::move(h));
    fi->fh = FhOf(fs, raw);
    if (!reply.Open(*fi)) fs.dirs.Release(raw);  // no releasedir will come
  });
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, false);
}

void ReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, true);
}

void ReleaseDir(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  Reply reply(req, "releasedir");
  RunOp(reply, [&] {
    FsContext& fs = Ctx(req);
    ReleaseHandle(fs, fs.dirs, fi->fh);
    reply.Err(0);
  });
}

}  // namespace stoker::fuse_ops
