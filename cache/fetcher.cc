#include "cache/fetcher.h"

namespace stoker {

std::shared_ptr<Fetcher::Flight> Fetcher::Join(const ChunkKey& key, bool* leader) {
  MutexLock l(mu_);
  auto [it, inserted] = flights_.try_emplace(key);
  if (inserted) it->second = std::make_shared<Flight>();
  *leader = inserted;
  return it->second;
}

void Fetcher::Complete(const ChunkKey& key, const std::shared_ptr<Flight>& flight,
                       Result<ChunkBytes> result) {
  {
    MutexLock l(mu_);
    auto it = flights_.find(key);
    STOKER_CHECK(it != flights_.end() && it->second == flight, "Complete by a non-leader");
    flights_.erase(it);
  }
  MutexLock l(flight->mu);
  flight->result = std::move(result);
  flight->done = true;
  flight->cv.notify_all();
}

Result<ChunkBytes> Fetcher::Wait(const std::shared_ptr<Flight>& flight) {
  MutexLock l(flight->mu);
  flight->cv.Wait(flight->mu, [&]() REQUIRES(flight->mu) { return flight->done; });
  return flight->result;
}

size_t Fetcher::in_flight() const {
  MutexLock l(mu_);
  return flights_.size();
}

}  // namespace stoker
