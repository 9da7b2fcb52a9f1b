// NodeFiles: the handles reads use when opens do not reach the daemon.
//
// With --opens kernel the daemon answers the first OPEN with ENOSYS, and the
// kernel then opens every file of the connection by itself (FUSE's no_open):
// no OPEN or RELEASE round trip per file, pages kept across opens, and every
// READ arrives with fh 0. Such reads use one handle per node, made at the
// node's first read (bound to the version it opened, as an open would bind
// it: fs/inode_table.h), shared by all its readers, and dropped when the
// kernel forgets the node. At most `max` are held; past that the oldest goes
// and is made again at its node's next read, bound to the same version.
//
// Thread-safety: all methods are thread-safe. make() runs without the lock
// held; two first reads of one node may both make a handle, and the first
// stored wins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <utility>

#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

template <typename T>
class NodeFiles {
 public:
  explicit NodeFiles(size_t max) : max_(max) {}

  // id's handle, made by make() (a Result<std::shared_ptr<T>>) if none is held.
  template <typename Make>
  Result<std::shared_ptr<T>> Get(uint64_t id, const Make& make) {
    if (std::shared_ptr<T> held = Find(id)) return held;
    Result<std::shared_ptr<T>> made = make();
    if (!made.ok()) return made.status();
    MutexLock lock(mu_);
    auto [it, fresh] = map_.try_emplace(id);
    if (!fresh) return it->second.handle;
    order_.push_back(id);
    it->second = Entry{*made, std::prev(order_.end())};
    while (map_.size() > max_) {
      map_.erase(order_.front());
      order_.pop_front();
    }
    return *made;
  }

  // id's handle if one is held.
  std::shared_ptr<T> Find(uint64_t id) const {
    MutexLock lock(mu_);
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second.handle;
  }

  // The kernel forgot id: its handle goes (reads holding it finish first).
  void Drop(uint64_t id) {
    MutexLock lock(mu_);
    auto it = map_.find(id);
    if (it == map_.end()) return;
    order_.erase(it->second.at);
    map_.erase(it);
  }

  // Drops every handle (the session is over).
  void Clear() {
    MutexLock lock(mu_);
    map_.clear();
    order_.clear();
  }

  size_t size() const {
    MutexLock lock(mu_);
    return map_.size();
  }

 private:
  struct Entry {
    std::shared_ptr<T> handle;
    std::list<uint64_t>::iterator at;  // in order_
  };
  const size_t max_;
  mutable Mutex mu_;
  std::unordered_map<uint64_t, Entry> map_ GUARDED_BY(mu_);
  std::list<uint64_t> order_ GUARDED_BY(mu_);  // oldest first
};

}  // namespace stoker
