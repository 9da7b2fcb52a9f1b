#include "fs/inval_notifier.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/log.h"

namespace stoker {

InvalNotifier::InvalNotifier(NotifyFn notify)
    : notify_(std::move(notify)), thread_([this] { Run(); }) {}

InvalNotifier::~InvalNotifier() { Stop(); }

void InvalNotifier::Invalidate(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || !queued_.insert(ino).second) return;
  queue_.push_back(ino);
  cv_.notify_all();
}

void InvalNotifier::Stop(const std::function<void()>& unblock) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    queue_.clear();
    queued_.clear();
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(2), [this] { return !in_call_; }) && unblock) {
      LOG_WARN("inode invalidation is stuck in the kernel; aborting the FUSE connection");
      lock.unlock();
      unblock();
    }
  }
  thread_.join();
}

uint64_t InvalNotifier::sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

void InvalNotifier::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const uint64_t ino = queue_.front();
    queue_.pop_front();
    queued_.erase(ino);
    in_call_ = true;
    lock.unlock();
    const int rc = notify_(ino);
    if (rc < 0 && rc != -ENOENT) {
      LOG_WARN("invalidating inode {} in the kernel failed: {}", ino, std::strerror(-rc));
    }
    lock.lock();
    in_call_ = false;
    sent_++;
    cv_.notify_all();
  }
}

}  // namespace stoker
