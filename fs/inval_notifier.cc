#include "fs/inval_notifier.h"

#include <linux/fuse.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "fs/fuse_kernel_ext.h"
#include "util/log.h"

namespace stoker {

InvalNotifier::InvalNotifier(NotifyFn notify, NotifyEntryFn notify_entry, PruneFn prune)
    : notify_(std::move(notify)),
      notify_entry_(std::move(notify_entry)),
      prune_(std::move(prune)),
      can_prune_(prune_ != nullptr && notify_entry_ != nullptr),
      thread_([this] { Run(); }) {}

InvalNotifier::~InvalNotifier() { Stop(); }

void InvalNotifier::Invalidate(uint64_t ino) {
  MutexLock lock(mu_);
  if (stopping_ || !queued_.insert(ino).second) return;
  queue_.push_back(ino);
  cv_.notify_all();
}

void InvalNotifier::InvalidateEntry(uint64_t parent, std::string name) {
  if (!notify_entry_) return;
  MutexLock lock(mu_);
  if (stopping_) return;
  entries_.emplace_back(parent, std::move(name));
  cv_.notify_all();
}

void InvalNotifier::Prune(uint64_t id, uint64_t parent, std::string name) {
  if (!notify_entry_) return;
  MutexLock lock(mu_);
  if (stopping_) return;
  if (can_prune_) {
    pruned_.push_back(Pruned{id, parent, std::move(name)});
  } else {
    entries_.emplace_back(parent, std::move(name));
  }
  cv_.notify_all();
}

bool InvalNotifier::can_prune() const { return can_prune_; }

size_t InvalNotifier::entries_pending() const {
  MutexLock lock(mu_);
  return entries_.size() + pruned_.size();
}

bool InvalNotifier::SendingEntryIn(uint64_t parent) const {
  MutexLock lock(mu_);
  return in_call_ && sending_parent_ == parent;
}

void InvalNotifier::Stop(const std::function<void()>& unblock) {
  {
    MutexLock lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    queue_.clear();
    queued_.clear();
    entries_.clear();
    pruned_.clear();
    cv_.notify_all();
    if (!cv_.WaitFor(mu_, std::chrono::seconds(2), [this]() REQUIRES(mu_) { return !in_call_; }) &&
        unblock) {
      LOG_WARN("inode invalidation is stuck in the kernel; aborting the FUSE connection");
      lock.Unlock();
      unblock();
    }
  }
  thread_.join();
}

uint64_t InvalNotifier::sent() const {
  MutexLock lock(mu_);
  return sent_;
}

void InvalNotifier::Run() {
  MutexLock lock(mu_);
  for (;;) {
    cv_.Wait(mu_, [this]() REQUIRES(mu_) {
      return stopping_ || !queue_.empty() || !entries_.empty() || !pruned_.empty();
    });
    if (stopping_) return;
    int rc = 0;
    if (!pruned_.empty() && queue_.empty()) {
      const size_t n = std::min(pruned_.size(), kPruneBatch);
      std::vector<Pruned> batch(std::make_move_iterator(pruned_.begin()),
                                std::make_move_iterator(pruned_.begin() + n));
      pruned_.erase(pruned_.begin(), pruned_.begin() + n);
      std::vector<uint64_t> ids;
      ids.reserve(n);
      for (const Pruned& p : batch) ids.push_back(p.id);
      in_call_ = true;
      lock.Unlock();
      rc = prune_(ids);
      lock.Lock();
      if (rc == -EINVAL && can_prune_) {
        LOG_INFO(
            "the kernel cannot drop nodes by id (FUSE_NOTIFY_PRUNE, Linux 6.18); by name then");
        can_prune_ = false;
      } else if (rc < 0) {
        LOG_WARN("dropping {} nodes in the kernel failed: {}", n, std::strerror(-rc));
      }
      if (!can_prune_) {  // these by name, first
        for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
          entries_.emplace_front(it->parent, std::move(it->name));
        }
        for (Pruned& p : pruned_) entries_.emplace_back(p.parent, std::move(p.name));
        pruned_.clear();
      }
      lock.Unlock();
    } else if (!queue_.empty()) {
      const uint64_t ino = queue_.front();
      queue_.pop_front();
      queued_.erase(ino);
      in_call_ = true;
      lock.Unlock();
      rc = notify_(ino);
      if (rc < 0 && rc != -ENOENT) {
        LOG_WARN("invalidating inode {} in the kernel failed: {}", ino, std::strerror(-rc));
      }
    } else {
      std::pair<uint64_t, std::string> e = std::move(entries_.front());
      entries_.pop_front();
      sending_parent_ = e.first;
      in_call_ = true;
      lock.Unlock();
      rc = notify_entry_(e.first, e.second);
      if (rc < 0 && rc != -ENOENT) {
        LOG_DEBUG("dropping entry '{}' of node {} in the kernel failed: {}", e.second, e.first,
                  std::strerror(-rc));
      }
    }
    lock.Lock();
    in_call_ = false;
    sending_parent_ = 0;
    sent_++;
    cv_.notify_all();
  }
}

int PruneNodes(int fuse_fd, const std::vector<uint64_t>& ids) {
  fuse_ext::NotifyPruneOut out{};
  out.count = static_cast<uint32_t>(ids.size());
  fuse_out_header h{};
  h.len = static_cast<uint32_t>(sizeof(h) + sizeof(out) + ids.size() * sizeof(uint64_t));
  h.error = fuse_ext::kNotifyPrune;
  h.unique = 0;
  iovec iov[3] = {{&h, sizeof(h)},
                  {&out, sizeof(out)},
                  {const_cast<uint64_t*>(ids.data()), ids.size() * sizeof(uint64_t)}};
  return writev(fuse_fd, iov, 3) < 0 ? -errno : 0;
}

}  // namespace stoker
