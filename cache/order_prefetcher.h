// OrderPrefetcher: prefetch in a sampler's order. A data loader knows each
// epoch's file order before it starts (a shuffled one too, which no other
// prefetch can guess); given that order, the daemon fetches the next files
// of it into the cache, and keeps a window ahead of the reader as it opens
// them (cache/order_window.h says where the window lies and what it skips).
//
// - One order per cache: Set replaces the order, and the fetches of the old
//   one still queued are dropped (counted in order_cancelled; a file being
//   fetched finishes).
// - The fetches run on threads of its own (a WorkerPool of `threads`), at
//   most twice that many queued or running: a shuffled epoch of small files
//   is bound by the origin's latency, so what makes it fast is how many
//   files are on their way at once, more than the readers themselves keep,
//   and without taking the cache's pool from readers' read-ahead.
//   fetch_file fetches one file whole, and refuses what the cache has no
//   room for (its quota's "near its bound" rule: a prefetch never evicts to
//   make room).
// - Bounded: an order holds at most max_order_bytes of memory (EFBIG past
//   it, and the order is dropped); the window holds at most ahead files and
//   ahead_bytes of fetched files not yet opened.
//
// Thread-safety: all methods are thread-safe; fetch_file runs on its
// threads without locks held. Start before the first Set; destruction stops
// the threads (what runs finishes; what is queued is dropped).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/order_window.h"
#include "cache/worker_pool.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class OrderPrefetcher {
 public:
  struct Options {
    OrderWindow::Options window;
    // Memory an order may take (paths and bookkeeping). Default: 256 MiB
    // (some 2.5 million ImageNet paths).
    uint64_t max_order_bytes = 256ull << 20;
    // Threads that fetch. Default: 16.
    int threads = 16;
  };
  // Fetches path whole into the cache; its size in bytes, or why not (no
  // room in the cache, gone from the origin, ...).
  using FetchFile = std::function<Result<uint64_t>(const std::string& path)>;

  // counters outlive it.
  OrderPrefetcher(Options options, CacheCounters* counters, FetchFile fetch_file);

  ~OrderPrefetcher();
  OrderPrefetcher(const OrderPrefetcher&) = delete;
  OrderPrefetcher& operator=(const OrderPrefetcher&) = delete;

  // Starts the threads.
  void Start();

  // Replaces the order with paths (origin paths), cancelling the old one's
  // fetches, and starts fetching the first window. Returns the order's id
  // (from 1). EINVAL for no paths, EFBIG past max_order_bytes (the old order
  // is dropped either way).
  Result<uint64_t> Set(const std::vector<std::string>& paths);
  // Adds paths at the end of order id (an order sent in parts). ESTALE if
  // another order replaced it; EFBIG past max_order_bytes (the order is
  // dropped).
  Status Append(uint64_t id, const std::vector<std::string>& paths);
  // Drops the order (no order: nothing is fetched ahead).
  void Clear();

  // A reader opened path: the window moves on if it is a file of the order.
  void Opened(const std::string& path);

  // {"order_id": id (0 if none), "order_files", "order_position",
  //  "order_bytes_ahead"}: how the order stands now.
  nlohmann::json Gauges() const;

 private:
  struct Task {
    uint64_t id;
    size_t pos;
    std::string path;
  };
  // Hands what the window now allows to the pool.
  void Pump();
  // Takes what the window now allows, up to twice the threads in all.
  std::vector<Task> TakeLocked() REQUIRES(mu_);
  void Run(const Task& task);
  // Drops the order, counting what it had queued as cancelled.
  void DropLocked() REQUIRES(mu_);

  const Options options_;
  CacheCounters* const counters_;
  const FetchFile fetch_file_;
  const size_t max_in_flight_;

  mutable Mutex mu_;
  std::unique_ptr<OrderWindow> window_ GUARDED_BY(mu_);  // null: no order
  uint64_t id_ GUARDED_BY(mu_) = 0;                      // the current order's
  uint64_t last_id_ GUARDED_BY(mu_) = 0;
  size_t in_flight_ GUARDED_BY(mu_) = 0;  // the current order's tasks not yet ended
  // Declared last: stopped first, while what its tasks use is still there.
  std::unique_ptr<WorkerPool> pool_;  // made by Start
};

}  // namespace stoker
