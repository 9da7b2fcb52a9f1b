#include "cache/order_prefetcher.h"

#include <utility>

#include "util/log.h"

namespace stoker {

namespace {

// The memory paths take in an order.
uint64_t MemoryOf(const std::vector<std::string>& paths) {
  uint64_t bytes = 0;
  for (const std::string& p : paths) bytes += OrderWindow::MemoryPerPath(p.size());
  return bytes;
}

Status TooBig(uint64_t limit) {
  return Status::Error(EFBIG, "the order takes more than " + std::to_string(limit >> 20) +
                                  " MiB of memory (too many files); it was dropped");
}

}  // namespace

OrderPrefetcher::OrderPrefetcher(Options options, CacheCounters* counters, FetchFile fetch_file)
    : options_(options),
      counters_(counters),
      fetch_file_(std::move(fetch_file)),
      max_in_flight_(2 * static_cast<size_t>(options.threads)) {}

OrderPrefetcher::~OrderPrefetcher() {
  if (pool_) pool_->Stop();
}

void OrderPrefetcher::Start() { pool_ = std::make_unique<WorkerPool>(options_.threads, 0); }

void OrderPrefetcher::DropLocked() {
  window_.reset();
  id_ = 0;
  in_flight_ = 0;  // the old order's tasks find it gone
}

Result<uint64_t> OrderPrefetcher::Set(const std::vector<std::string>& paths) {
  uint64_t id = 0;
  {
    MutexLock l(mu_);
    DropLocked();
    if (paths.empty()) return Status::Invalid("the order names no files");
    if (MemoryOf(paths) > options_.max_order_bytes) return TooBig(options_.max_order_bytes);
    window_ = std::make_unique<OrderWindow>(options_.window);
    window_->Append(paths);
    id = id_ = ++last_id_;
  }
  counters_->orders_set++;
  Pump();
  return id;
}

Status OrderPrefetcher::Append(uint64_t id, const std::vector<std::string>& paths) {
  {
    MutexLock l(mu_);
    if (id == 0 || id != id_) {
      return Status::Error(ESTALE, "order " + std::to_string(id) + " was replaced or dropped");
    }
    if (window_->memory_bytes() + MemoryOf(paths) > options_.max_order_bytes) {
      DropLocked();
      return TooBig(options_.max_order_bytes);
    }
    window_->Append(paths);
  }
  Pump();
  return Status::OK();
}

void OrderPrefetcher::Clear() {
  MutexLock l(mu_);
  DropLocked();
}

void OrderPrefetcher::Opened(const std::string& path) {
  {
    MutexLock l(mu_);
    if (window_ == nullptr) return;
    OrderWindow::Open open = window_->Opened(path);
    if (!open.in_order) return;
    if (open.fetched) counters_->order_hits++;
  }
  Pump();
}

std::vector<OrderPrefetcher::Task> OrderPrefetcher::TakeLocked() {
  std::vector<Task> tasks;
  while (window_ != nullptr && in_flight_ < max_in_flight_) {
    std::optional<size_t> pos = window_->Next();
    if (!pos) break;
    in_flight_++;
    tasks.push_back(Task{id_, *pos, std::string(window_->path(*pos))});
  }
  return tasks;
}

void OrderPrefetcher::Pump() {
  std::vector<Task> tasks;
  {
    MutexLock l(mu_);
    tasks = TakeLocked();
  }
  for (Task& t : tasks) {
    pool_->Submit(WorkerPool::Priority::kHigh, [this, t = std::move(t)] { Run(t); });
  }
}

void OrderPrefetcher::Run(const Task& task) {
  bool wanted = false;
  {
    MutexLock l(mu_);
    if (task.id != id_) {
      counters_->order_cancelled++;
      return;
    }
    wanted = window_->Wanted(task.pos);
  }
  // Not when the reader got there first, or went far past it.
  Result<uint64_t> bytes = Status::Error(ECANCELED, "no longer wanted");
  if (wanted) {
    bytes = fetch_file_(task.path);
    if (bytes.ok()) {
      counters_->order_prefetched_files++;
    } else {
      counters_->order_not_fetched++;
      LOG_DEBUG("order prefetch of '{}': {}", task.path, bytes.status().message());
    }
  }
  {
    MutexLock l(mu_);
    if (task.id != id_) return;  // replaced meanwhile: its count was reset
    in_flight_--;
    window_->Fetched(task.pos, bytes.ok() ? *bytes : 0, bytes.ok());
  }
  Pump();
}

nlohmann::json OrderPrefetcher::Gauges() const {
  MutexLock l(mu_);
  const bool set = window_ != nullptr;
  return {{"order_id", id_},
          {"order_files", set ? window_->size() : 0},
          {"order_position", set ? window_->position() : 0},
          {"order_bytes_ahead", set ? window_->bytes_ahead() : 0}};
}

}  // namespace stoker
