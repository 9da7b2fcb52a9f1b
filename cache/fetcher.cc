#include "cache/fetcher.h"

namespace stoker {

std::shared_ptr<Fetcher::Flight> Fetcher::Join(const ChunkKey& key, bool* leader, Joiner who) {
  MutexLock l(mu_);
  *leader = false;
  auto it = flights_.find(key);
  if (it != flights_.end() && !(who.origin_only && it->second->asks_members)) return it->second;
  if (auto a = aside_.find(key); a != aside_.end()) return a->second;
  auto flight = std::make_shared<Flight>();
  flight->asks_members = who.asks_members && !who.origin_only;
  flight->aside = it != flights_.end();
  (flight->aside ? aside_ : flights_).emplace(key, flight);
  *leader = true;
  return flight;
}

void Fetcher::Complete(const ChunkKey& key, const std::shared_ptr<Flight>& flight,
                       Result<ChunkBytes> result) {
  {
    MutexLock l(mu_);
    Flights& in = flight->aside ? aside_ : flights_;
    auto it = in.find(key);
    STOKER_CHECK(it != in.end() && it->second == flight, "Complete by a non-leader");
    in.erase(it);
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
  return flights_.size() + aside_.size();
}

}  // namespace stoker
