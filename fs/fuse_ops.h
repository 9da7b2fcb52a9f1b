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
// the cache see is a ViewNamespace (decode/view/view_namespace.h), so ".NAME/..."
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
// Under --supervise (fs/supervisor.h) a daemon may inherit a session whose
// kernel still holds the handles of the daemon that crashed before it. So
// fi->fh carries the daemon's generation in its top 16 bits (handle_tag;
// user-space addresses use 47), and an fh of another generation is
// "adopted": made again, once, from the node the request names (a file is
// opened again, at the version its node is bound to, or the read fails; a
// directory is listed again), and released with the kernel's RELEASE.
//
// Thread-safety: the ops run on libfuse's worker threads, many at once;
// FsContext's members are thread-safe or set before the session starts.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse3/fuse_lowlevel.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/object_cache.h"
#include "cache/origin/origin.h"
#include "fs/control_files.h"
#include "fs/handle_set.h"
#include "fs/inode_table.h"
#include "fs/inval_notifier.h"
#include "fs/metrics.h"
#include "fs/node_files.h"
#include "fs/opens_policy.h"
#include "fs/passthrough.h"
#include "util/mutex.h"

namespace stoker {

struct FileHandle : CountedHandle {
  std::shared_ptr<OpenFileState> file;  // origin files
  // Virtual files: the snapshot taken at open. A read holds its own
  // reference while it replies, so the reply's bytes never depend on the
  // handle (see HandleSet for why a handle outlives its requests).
  std::shared_ptr<const std::string> content;
  bool is_virtual = false;
  // Counted in FsContext::passthrough (origin files only): released there.
  uint64_t node = 0;
  bool counted = false;
  bool passthrough = false;  // the kernel reads it; no READ comes here
  // The attributes of the version opened (origin files).
  struct stat version_st {};
  // Its version has a data file of its own (ObjectCache::Opened).
  bool own_data_file = false;
};

struct DirHandle : CountedHandle {
  uint64_t dir_id = 0;
  bool is_virtual = false;
  // Made at opendir, or, for an open that let the kernel keep its cached
  // listing (see FsContext::listings), at the first readdir, if one comes.
  Mutex mu;
  bool listed GUARDED_BY(mu) = false;
  std::vector<OriginDirEntry> entries GUARDED_BY(mu);  // "." and ".." first, then the snapshot
};

struct FsContext {
  FsContext(ObjectCache* cache, Origin* origin, ControlFiles* control, double timeout,
            unsigned max_read)
      : cache(cache), origin(origin), control(control), timeout(timeout), max_read(max_read) {}

  ObjectCache* const cache;
  Origin* const origin;
  ControlFiles* const control;
  const double timeout;  // entry and attribute timeout, seconds
  // How long the kernel may remember a name the origin does not have: the
  // timeout, but at most kMaxNegativeTimeout, so that a file added at the
  // origin shows within that long even with --revalidate never.
  static constexpr double kMaxNegativeTimeout = 60;
  double negative_timeout() const {
    return timeout < kMaxNegativeTimeout ? timeout : kMaxNegativeTimeout;
  }
  const unsigned max_read;  // must match -o max_read
  // Set before the session loop starts; may stay null (no invalidations).
  InvalNotifier* notifier = nullptr;
  // Which opens the kernel reads directly (fs/passthrough.h). Set before
  // the session loop starts; null: none, and nothing counted.
  PassthroughNodes* passthrough = nullptr;
  // --opens kernel: the kernel opens files without asking us, and reads use
  // node_files (fs/node_files.h). Set before the session loop starts, and
  // by --opens auto once (MoveToKernelOpens), never back.
  std::atomic<bool> kernel_opens{false};
  // --opens auto: decides when to move to kernel opens. Null otherwise.
  std::unique_ptr<OpensPolicy> opens_policy;
  static constexpr size_t kMaxNodeFiles = 4096;
  NodeFiles<FileHandle> node_files{kMaxNodeFiles};
  // When each directory node was last listed for the kernel, and what its
  // attributes were: an opendir within --revalidate of that listing, of a
  // directory whose attributes did not change, lets the kernel keep the
  // listing it cached (FOPEN_CACHE_DIR + FOPEN_KEEP_CACHE), and no READDIR
  // comes. Dropped when the kernel forgets the node.
  struct Listing {
    std::chrono::steady_clock::time_point at;
    struct stat st {};
  };
  Mutex listings_mu;
  std::unordered_map<uint64_t, Listing> listings GUARDED_BY(listings_mu);
  LatencyHistogram read_latency;           // READs, from the request to the reply
  std::atomic<uint64_t> listings_kept{0};  // opendirs that let the kernel keep one
  // The bound on the nodes the kernel holds (0: none). Set before the
  // session loop starts. The kernel forgets a node only after it was asked
  // to drop it, and lookups go on meanwhile; so:
  // - past shed_mark() nodes (7/8 of the bound), the oldest are shed
  //   (InodeTable::Overflow, MaybeShedNodes), ahead of the bound: by node
  //   id (FUSE_NOTIFY_PRUNE, Linux 6.18) where the kernel can, else by
  //   name (FUSE_NOTIFY_INVAL_ENTRY); one the kernel kept when asked by id
  //   (open) is asked for again by name a while later;
  // - a LOOKUP that would make a node past max_nodes waits for forgets
  //   (InodeTable::WaitForRoom), up to kLookupWait; a readdirplus entry
  //   goes without a node instead (the kernel looks it up when it is used);
  // - a waiting LOOKUP holds its directory's lock in the kernel, which
  //   dropping an entry of that directory by name needs (by id needs none):
  //   a LOOKUP whose directory such a drop is waiting to lock (see
  //   WaitForRoom), or that finds kMaxWaiting lookups waiting already
  //   (each takes a FUSE worker; forgets need one), cannot wait: it may
  //   take one of kNodeSlack nodes past the bound; past those too, it goes
  //   on, counted in nodes_over_bound.
  // So nodes stay within max_nodes + kNodeSlack, unless the kernel keeps
  // what it was asked to drop (open files) longer than kLookupWait, or,
  // dropping by name only, the oldest nodes share the directory several
  // readers look files up in (a directory of more than about
  // max_nodes / 8 files read at once): each entry dropped there then waits
  // for the lookups in flight in it, which cannot wait for that drop.
  size_t max_nodes = 0;
  static constexpr size_t kNodeSlack = 64;
  static constexpr size_t kMaxWaiting = 16;
  static constexpr std::chrono::milliseconds kLookupWait{1000};
  size_t shed_mark() const { return max_nodes - max_nodes / 8; }
  std::atomic<uint64_t> nodes_shed{0};
  std::atomic<uint64_t> nodes_over_bound{0};
  std::atomic<size_t> lookups_waiting{0};
  // OPEN requests received (with kernel_opens: the one answered ENOSYS).
  std::atomic<uint64_t> fuse_opens{0};
  // Nodes given up because the origin's file changed under them while the
  // kernel opened them by itself (see Lookup).
  std::atomic<uint64_t> nodes_retired{0};

  InodeTable inodes{ControlFiles::kFirstDynamicId};
  HandleSet<FileHandle> files;
  HandleSet<DirHandle> dirs;
  // This daemon's generation << 48 (0 without a supervisor). Set before
  // the session loop starts.
  uint64_t handle_tag = 0;
  // Handles of a crashed predecessor, by its fh, made again on first use.
  Mutex adopt_mu;
  std::unordered_map<uint64_t, FileHandle*> adopted_files GUARDED_BY(adopt_mu);
  std::unordered_map<uint64_t, DirHandle*> adopted_dirs GUARDED_BY(adopt_mu);
  // The most nodes the kernel held since memory was last returned
  // (fuse_ops.cc, MaybeReturnMemory).
  std::atomic<size_t> nodes_high{0};
  // What init() negotiated, for logs and stats.
  std::atomic<unsigned> max_readahead{0};
  std::atomic<bool> splice_write{false};
};

// The operation table; its userdata must be an FsContext*.
const fuse_lowlevel_ops& StokerLowlevelOps();

// `stoker refresh` (fs/control_requests.h): tells the kernel to drop what
// it holds of the nodes at or below origin path prefix (each one's
// attributes and pages, a directory's cached listing among them, and the
// entry that names it), and of prefix's directory's listing, so that the
// next lookups and listings come here; and forgets when those directories
// were last listed (FsContext::listings). Open files keep their version.
// Returns how many nodes were named.
uint64_t ForgetSubtree(FsContext& fs, const std::string& prefix);

}  // namespace stoker
