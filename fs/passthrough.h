// PassthroughNodes: which opens the kernel reads without us (FUSE
// passthrough, Linux 6.9+), and the rules that keep that safe.
//
// An open of a file whose version the cache holds whole and verified
// (ObjectCache::LeaseWhole) is answered with FOPEN_PASSTHROUGH and the id of
// a backing file (the version's data file, registered with
// FUSE_DEV_IOC_BACKING_OPEN): the kernel then reads the SSD itself and no
// READ reaches the daemon. The kernel's rules, each of which otherwise
// fails the user's open with EIO (shared/notes/fuse-passthrough.md):
// - a node is in one mode at a time: no passthrough open beside a normal
//   one, or the other way round. A node with normal opens gets normal
//   opens until they are all released; a node with passthrough opens gets
//   passthrough opens (even if its version could not be leased again).
// - one backing id per node while it has opens, shared by all of them, and
//   closed only after the last one is released (or later: a few idle nodes
//   keep theirs for their next open, which then costs no new backing file,
//   pins or journal records).
// The lease (the version's chunks pinned, its data file held) lives as long
// as the node's backing id: eviction never punches a byte the kernel reads.
//
// Surviving a daemon crash (--supervise): the kernel keeps the backing ids
// and the open files of a dead daemon. Every backing id opened or closed is
// journaled with the node (InodeTable::JournalBacking), so the next daemon
// inherits it (Inherit): the node stays in passthrough mode with that id
// and its version pinned for the daemon's life (the predecessor's opens
// cannot be counted). A node a predecessor opened normally (bound, no
// backing id) might still have normal opens: it gets no passthrough in this
// daemon (MarkRestored).
//
// Thread-safety: all methods are thread-safe. Lock order: a node shard's
// mutex, then whatever the lease maker, the backing hooks and the journal
// take (the cache, the inode table); none of them calls back in here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cache/object_cache.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

// --passthrough: auto (where the kernel allows it), on (the mount fails if
// it does not), off (every read goes through the daemon).
enum class PassthroughMode { kAuto, kOn, kOff };

class PassthroughNodes {
 public:
  struct Hooks {
    // Registers a backing file with the kernel; its id, or the errno.
    std::function<Result<int32_t>(int fd)> open_backing;
    std::function<void(int32_t id)> close_backing;
    // Journals node's backing id (lease non-null) or its closing (null).
    std::function<void(uint64_t node, int32_t id, const WholeFileLease* lease)> journal;
  };
  // Makes the lease for a node's first open; *why says why not.
  using LeaseMaker = std::function<Result<std::unique_ptr<WholeFileLease>>(std::string* why)>;

  // A node whose last open is released keeps its backing file and lease
  // (idle) for its next open, for at most linger_files files of at most
  // linger_bytes together; the oldest idle one is closed first.
  explicit PassthroughNodes(Hooks hooks, size_t linger_files = 0, uint64_t linger_bytes = 0)
      : hooks_(std::move(hooks)), linger_files_(linger_files), linger_bytes_(linger_bytes) {}
  PassthroughNodes(const PassthroughNodes&) = delete;
  PassthroughNodes& operator=(const PassthroughNodes&) = delete;

  // No passthrough at all from now on, for reason (counted per open).
  void Disable(const std::string& reason);
  // "" if enabled.
  std::string disabled_reason() const;
  bool enabled() const { return enabled_.load(); }

  struct Grant {
    bool passthrough = false;
    int32_t backing_id = 0;
  };
  // Decides an open of node (see the class comment). make is called only
  // when the node has no open, without a lock held (it may verify the
  // file); should another open decide the node's mode meanwhile, this one
  // follows it. A normal open is counted with its reason.
  // REQUIRES: Release(node, grant.passthrough) once the open is released.
  Grant Open(uint64_t node, const LeaseMaker& make);
  void Release(uint64_t node, bool passthrough);

  // After a restart: node has the predecessor's backing id; held pins its
  // version. Before the session serves.
  void Inherit(uint64_t node, int32_t id, std::unique_ptr<WholeFileLease> held);
  // After a restart: node was opened normally by the predecessor.
  void MarkRestored(uint64_t node);

  // Closes every backing id and drops every lease (the session is over).
  // REQUIRES: no request is being served.
  void Clear();

  // {"passthrough": "on"|"off: reason", "passthrough_opens": n,
  //  "passthrough_bytes": the sizes of the files opened so (what the kernel
  //  may read from the cache without us), "passthrough_fallbacks": {reason:
  //  n}, "passthrough_nodes": files with a backing file now (idle ones too),
  //  "passthrough_idle": idle ones}.
  nlohmann::json Stats() const;
  uint64_t passthrough_opens() const { return opens_.load(); }

 private:
  struct NodeState {
    int normal = 0;
    int passthrough = 0;
    int32_t backing_id = 0;
    int opening = 0;         // opens making a lease, outside the lock
    bool inherited = false;  // never closed: the predecessor's opens are unknown
    bool idle = false;       // no open, lease kept: on idle_ (or just displaced)
    std::unique_ptr<WholeFileLease> lease;
  };
  struct Shard {
    Mutex mu;
    std::unordered_map<uint64_t, NodeState> nodes GUARDED_BY(mu);
    std::unordered_set<uint64_t> restored GUARDED_BY(mu);
  };
  Shard& ShardOf(uint64_t node) { return shards_[node % shards_.size()]; }
  // "" counts under the reason passthrough was disabled for.
  void CountFallback(const std::string& reason);
  // REQUIRES: the node's shard lock; the node has a backing id. Another open
  // of it.
  Grant ShareLocked(uint64_t node, NodeState& n);
  // REQUIRES: it has a lease. Closes its backing file, drops the lease, and
  // the node's entry if nothing else is left of it.
  void CloseLocked(Shard& s, std::unordered_map<uint64_t, NodeState>::iterator it) REQUIRES(s.mu);
  // Closes node if it is still idle (it was displaced from idle_).
  void CloseIfIdle(uint64_t node);

  const Hooks hooks_;
  const size_t linger_files_;
  const uint64_t linger_bytes_;
  // Lock order: a shard's mu, then idle_mu_.
  mutable Mutex idle_mu_;
  // Idle nodes and their leases' bytes, oldest first.
  std::deque<std::pair<uint64_t, uint64_t>> idle_ GUARDED_BY(idle_mu_);
  uint64_t idle_bytes_ GUARDED_BY(idle_mu_) = 0;
  std::array<Shard, 16> shards_;
  std::atomic<uint64_t> opens_{0};
  std::atomic<uint64_t> bytes_{0};  // the sizes of the files opened so
  std::atomic<uint64_t> live_nodes_{0};
  mutable Mutex stats_mu_;
  std::string disabled_ GUARDED_BY(stats_mu_);
  std::unordered_map<std::string, uint64_t> fallbacks_ GUARDED_BY(stats_mu_);
  std::atomic<bool> enabled_{true};
};

// The kernel's backing files on one /dev/fuse descriptor.
// Open: EPERM without CAP_SYS_ADMIN in the initial user namespace or when
// the connection did not negotiate passthrough; ENOTTY on kernels before 6.9.
Result<int32_t> OpenBackingFile(int fuse_fd, int fd);
void CloseBackingFile(int fuse_fd, int32_t id);

// Why the kernel refuses passthrough on fuse_fd, or "" if it allows it
// (tries a backing file of probe_fd and closes it).
std::string ProbePassthrough(int fuse_fd, int probe_fd);

}  // namespace stoker
