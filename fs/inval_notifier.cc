#include "fs/inval_notifier.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/log.h"

namespace stoker {

InvalNotifier::InvalNotifier(NotifyFn notify, NotifyEntryFn notify_entry)
    : notify_(std::move(notify)),
      notify_entry_(std::move(notify_entry)),
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

size_t InvalNotifier::entries_pending() const {
  MutexLock lock(mu_);
  return entries_.size();
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
    cv_.Wait(mu_,
             [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty() || !entries_.empty(); });
    if (stopping_) return;
    int rc = 0;
    if (!queue_.empty()) {
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

}  // namespace stoker
