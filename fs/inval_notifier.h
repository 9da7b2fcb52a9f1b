// InvalNotifier: a thread that tells the kernel to drop what it caches of an
// inode (fuse_lowlevel_notify_inval_inode), or a directory entry
// (fuse_lowlevel_notify_inval_entry), off the request path. A request
// handler must never notify about the inode it is serving: the kernel may hold
// that inode's locks while it waits for our reply, and the notification would
// wait on them. So handlers queue, and this thread sends.
//
// A node may also be dropped by its id (FUSE_NOTIFY_PRUNE, Linux 6.18,
// fs/fuse_kernel_ext.h), which takes no directory lock in the kernel: such
// nodes go in batches, and if the kernel does not know the notification
// (EINVAL), by name from then on.
//
// Queued ids are deduplicated until sent; entries are not (each is queued once
// by its caller). Entries go after the inodes queued before them. Stop() sends nothing more; if a
// notification is stuck in the kernel (its inode's pages locked by requests the
// stopped loop will never answer), Stop() waits a moment and then calls the
// unblock function (which aborts the FUSE connection) so that it returns.
//
// Thread-safety: Invalidate() from any thread; Stop() once, from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace stoker {

class InvalNotifier {
 public:
  // notify(ino) returns 0 or a negative errno (-ENOENT: the kernel does not
  // know the inode, which is fine).
  using NotifyFn = std::function<int(uint64_t ino)>;
  // notify_entry(parent, name): the same for the entry `name` of directory
  // node parent.
  using NotifyEntryFn = std::function<int(uint64_t parent, const std::string& name)>;
  // prune(ids): asks the kernel to drop the nodes ids (at most kPruneBatch);
  // 0, or a negative errno (-EINVAL: the kernel does not know how).
  using PruneFn = std::function<int(const std::vector<uint64_t>& ids)>;
  static constexpr size_t kPruneBatch = 256;
  explicit InvalNotifier(NotifyFn notify, NotifyEntryFn notify_entry = nullptr,
                         PruneFn prune = nullptr);
  ~InvalNotifier();  // Stop() without an unblock function
  InvalNotifier(const InvalNotifier&) = delete;
  InvalNotifier& operator=(const InvalNotifier&) = delete;

  void Invalidate(uint64_t ino);
  // Ignored without a notify_entry function.
  void InvalidateEntry(uint64_t parent, std::string name);
  // Node id, the entry `name` of directory node parent, dropped by id while
  // the kernel knows how (can_prune()), else by name. Ignored without a
  // notify_entry function.
  void Prune(uint64_t id, uint64_t parent, std::string name);
  // Whether Prune drops nodes by id (as far as is known yet).
  bool can_prune() const;
  // Entries and nodes queued and not yet sent.
  size_t entries_pending() const;
  // Whether an entry of directory node parent is being sent now (the kernel
  // takes that directory's lock for it, and waits for it if need be).
  bool SendingEntryIn(uint64_t parent) const;
  void Stop(const std::function<void()>& unblock = nullptr);

  uint64_t sent() const;

 private:
  void Run();

  NotifyFn notify_;
  NotifyEntryFn notify_entry_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<uint64_t> queue_ GUARDED_BY(mu_);
  std::deque<std::pair<uint64_t, std::string>> entries_ GUARDED_BY(mu_);
  struct Pruned {
    uint64_t id;
    uint64_t parent;
    std::string name;
  };
  std::deque<Pruned> pruned_ GUARDED_BY(mu_);
  PruneFn prune_;
  std::atomic<bool> can_prune_;
  std::unordered_set<uint64_t> queued_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  bool in_call_ GUARDED_BY(mu_) = false;
  uint64_t sending_parent_ GUARDED_BY(mu_) = 0;  // the entry's, while in_call_
  uint64_t sent_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// Sends FUSE_NOTIFY_PRUNE for ids on the /dev/fuse descriptor fuse_fd: a
// PruneFn for a session. 0 or a negative errno.
int PruneNodes(int fuse_fd, const std::vector<uint64_t>& ids);

}  // namespace stoker
