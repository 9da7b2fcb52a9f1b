// The FUSE low-level operations of a stoker mount and the state they share.
// The adapters are thin: decode the request, call the inode table, the origin
// (metadata) or the object cache (file data), map a failure through
// ErrnoFor, make exactly one reply.
//
// Metadata (lookup, getattr, readdir, readlink, xattrs) comes from the origin,
// so the mount shows the origin's tree exactly; entry and attribute timeouts
// are the cache's revalidate interval. If the origin is unreachable, a file's
// attributes fall back to what the cache knows of it (ObjectCache::Open), so
// cached files stay readable. File data comes only from ObjectCache: reads
// are answered with the descriptors it returns, spliced, never copied here.
// Everything that would change the tree or a file fails with EROFS.
//
// Decoded views need nothing special here: with --view, the origin fs/ and
// the cache see is a ViewNamespace (decode/view_namespace.h), so ".NAME/..."
// paths are ordinary entries and cached files. The one difference: a view
// file whose size is not known yet is listed without attributes
// (OriginDirEntry::attrs_complete), and readdirplus hands it out without a
// node id, so the kernel looks it up (which lays it out) when it is stat'ed.
//
// Ownership: FsContext is owned by RunMount and outlives the session. Open
// file and directory handles are heap objects whose address is fi->fh; they
// are also tracked here so that handles the kernel never released (a lazy
// unmount) are freed before the cache is closed.
//
// Thread-safety: the ops run on libfuse's worker threads, many at once;
// FsContext's members are thread-safe or set before the session starts.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse3/fuse_lowlevel.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "cache/object_cache.h"
#include "cache/origin.h"
#include "fs/control_files.h"
#include "fs/inode_table.h"
#include "fs/inval_notifier.h"

namespace stoker {

// What every handle carries for HandleSet: one reference for the kernel (the
// handle is open) and one for each request being served on it.
struct CountedHandle {
  std::atomic<int> refs{1};
};

struct FileHandle : CountedHandle {
  std::shared_ptr<OpenFileState> file;  // origin files
  std::string derived_path;             // set for derived files: Origin::CheckRead each read
  // Virtual files: the snapshot taken at open. Shared, so that a read's
  // reply never points into a handle: once the kernel has the reply, the
  // reader may close and RELEASE free the handle on another thread while
  // this one is still returning from the write to /dev/fuse.
  std::shared_ptr<const std::string> content;
  bool is_virtual = false;
};

struct DirHandle : CountedHandle {
  uint64_t dir_id = 0;
  bool is_virtual = false;
  std::vector<OriginDirEntry> entries;  // "." and ".." first, then the snapshot
};

// Handles given to the kernel and not yet released.
//
// The kernel sends a handle's RELEASE only once every request on it has been
// answered, so a request never outlives its handle. But that order is kept
// by the kernel, through /dev/fuse, where neither a reviewer nor TSan can see
// it: a request that touched the handle (its file state, its readahead) before
// replying and the RELEASE that frees it run on two threads with nothing
// between them in user space. So each request pins the handle (Use) and the
// handle is deleted by whichever comes last, Release or the last unpin: an
// atomic count makes the order explicit, and costs two atomic operations.
template <typename T>
class HandleSet {
 public:
  static_assert(std::is_base_of_v<CountedHandle, T>);

  T* Add(std::unique_ptr<T> h) {
    std::lock_guard<std::mutex> lock(mu_);
    return *live_.insert(h.release()).first;
  }

  // A request's pin on a handle: h stays valid while the Use lives.
  class Use {
   public:
    explicit Use(T* h) : h_(h) { h_->refs.fetch_add(1, std::memory_order_relaxed); }
    ~Use() { Unref(h_); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    T* operator->() const { return h_; }

   private:
    T* h_;
  };

  // The kernel is done with h: it goes when its last request does.
  void Release(T* h) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      STOKER_CHECK(live_.erase(h) == 1, "release of an unknown handle");
    }
    Unref(h);
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }
  // Frees every handle. REQUIRES: no request is being served.
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (T* h : live_) delete h;
    live_.clear();
  }
  ~HandleSet() { Clear(); }

 private:
  static void Unref(T* h) {
    const int before = h->refs.fetch_sub(1, std::memory_order_acq_rel);
    STOKER_CHECK(before >= 1, "handle reference count below zero");
    if (before == 1) delete h;
  }

  mutable std::mutex mu_;
  std::unordered_set<T*> live_;  // GUARDED_BY(mu_)
};

struct FsContext {
  FsContext(ObjectCache* cache, Origin* origin, ControlFiles* control, double timeout,
            unsigned max_read)
      : cache(cache), origin(origin), control(control), timeout(timeout), max_read(max_read) {}

  ObjectCache* const cache;
  Origin* const origin;
  ControlFiles* const control;
  const double timeout;     // entry and attribute timeout, seconds
  const unsigned max_read;  // must match -o max_read
  // Set before the session loop starts; may stay null (no invalidations).
  InvalNotifier* notifier = nullptr;

  InodeTable inodes{ControlFiles::kFirstDynamicId};
  HandleSet<FileHandle> files;
  HandleSet<DirHandle> dirs;
  // What init() negotiated, for logs and stats.
  std::atomic<unsigned> max_readahead{0};
  std::atomic<bool> splice_write{false};
};

// The operation table; its userdata must be an FsContext*.
const fuse_lowlevel_ops& StokerLowlevelOps();

}  // namespace stoker
