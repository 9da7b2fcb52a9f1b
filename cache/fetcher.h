// Fetcher: collapses concurrent misses of the same chunk into one origin
// read. The first caller to Join a chunk becomes its leader and must fetch
// it and Complete it exactly once; everyone who joins before that waits and
// gets the leader's bytes (or its error). A chunk completed with an error is
// not remembered: the next Join leads a new fetch.
//
// Leaders must Complete all the chunks they lead before waiting on others,
// which makes waiting deadlock-free (a wait only ever depends on a fetch that
// is already running).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>

#include "cache/chunk.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class Fetcher {
 public:
  class Flight {
   public:
    Result<ChunkBytes> result{Status::IOError("fetch not completed")};

   private:
    friend class Fetcher;
    Mutex mu;
    CondVar cv;
    bool done GUARDED_BY(mu) = false;
  };

  // *leader = true: the caller fetches key and calls Complete. Otherwise it
  // calls Wait on the returned flight.
  std::shared_ptr<Flight> Join(const ChunkKey& key, bool* leader);
  void Complete(const ChunkKey& key, const std::shared_ptr<Flight>& flight,
                Result<ChunkBytes> result);
  static Result<ChunkBytes> Wait(const std::shared_ptr<Flight>& flight);

  size_t in_flight() const;

 private:
  mutable Mutex mu_;
  std::unordered_map<ChunkKey, std::shared_ptr<Flight>, ChunkKeyHash> flights_ GUARDED_BY(mu_);
};

}  // namespace stoker
