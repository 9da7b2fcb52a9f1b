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
// In a cache group (group/) a leader's read may wait on another member, whose
// own fetch for us may wait on a flight of its readers that waits on us: two
// members each waiting on the other. So a fetch says how it joins (Joiner): a
// leader whose read may ask members marks its flights so, and a fetch that
// reads the origin only (a member's request) never follows such a flight: it
// leads its own beside it (set aside, joined by other such fetches and by
// readers), which depends on the origin alone. A wait then never closes a
// loop through another member.
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
    bool asks_members = false;  // its leader's read may wait on another member
    bool aside = false;         // held in aside_, beside a flight that asks members
    Mutex mu;
    CondVar cv;
    bool done GUARDED_BY(mu) = false;
  };

  // How a fetch joins.
  struct Joiner {
    bool asks_members = false;  // a flight it leads may wait on another member
    bool origin_only = false;   // it must never wait on a flight that asks members
  };

  // *leader = true: the caller fetches key and calls Complete. Otherwise it
  // calls Wait on the returned flight.
  std::shared_ptr<Flight> Join(const ChunkKey& key, bool* leader, Joiner who);
  std::shared_ptr<Flight> Join(const ChunkKey& key, bool* leader) {
    return Join(key, leader, Joiner());
  }
  void Complete(const ChunkKey& key, const std::shared_ptr<Flight>& flight,
                Result<ChunkBytes> result);
  static Result<ChunkBytes> Wait(const std::shared_ptr<Flight>& flight);

  size_t in_flight() const;

 private:
  mutable Mutex mu_;
  using Flights = std::unordered_map<ChunkKey, std::shared_ptr<Flight>, ChunkKeyHash>;
  Flights flights_ GUARDED_BY(mu_);
  Flights aside_ GUARDED_BY(mu_);  // origin-only flights beside one in flights_ that asks members
};

}  // namespace stoker
