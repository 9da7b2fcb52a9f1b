// StallWatch: notices a local origin that stopped answering (a hard-mounted
// NFS whose server is gone, a hung disk, a stopped FUSE filesystem) and
// turns it into an OriginBackoff episode, so that cached files keep being
// served while the origin hangs.
//
// A remote origin's requests time out; a local origin's syscalls do not:
// a stat on a hard NFS mount waits for as long as the server is away, and
// so did every lookup, open and revalidation of a cached file behind it.
// A call cannot be taken back once it is in the kernel, so the watch does
// not try: it keeps a list of the calls in flight, and a watchdog thread
// that finds one older than the stall timeout records the origin
// unreachable in the backoff (callers that hold an answer then give it
// without asking: cache/origin/origin_backoff.h). The stalled call itself stays
// where it is until the origin answers it.
//
// Contract:
// - Begin() admits every call while the origin is reachable, and refuses
//   every call while it is not: the caller fails at once with ETIMEDOUT
//   instead of joining the stalled ones (each would hold a FUSE worker
//   thread for as long as the origin hangs). A refusal extends the episode.
// - No caller's call is ever a probe. The owner asks ProbeDue() after a
//   refusal and, when it says yes, runs one probe call of its own in the
//   background (BeginProbe/End); at most one probe is in flight, at most one
//   starts per probe interval. A probe that stalls is found like any call.
// - A call that was found stalled, and every probe, report their outcome
//   when they return (End): an answer (0, ENOENT, EACCES...) ends the
//   episode at once, an error IsOriginUnavailable() accepts extends it.
// - Other calls report nothing: the watch costs a list insert and erase per
//   call while the origin answers.
// - stall_ns 0: no watchdog, every call admitted, nothing recorded.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <thread>

#include "cache/origin/origin_backoff.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class StallWatch {
 public:
  struct Options {
    // A call in flight for longer than this is stalled. 0 = off.
    // Default: 30 s.
    int64_t stall_ns = 30'000'000'000;
    // Least time between two probes while the origin is unreachable.
    // Default: 5 s.
    int64_t probe_interval_ns = 5'000'000'000;
    // How often the watchdog looks; < 0: no watchdog thread (tests call
    // Check). Default: 0 = a quarter of stall_ns, between 10 ms and 1 s.
    int64_t tick_ns = 0;
  };

  // backoff must outlive the watch. clock: as OriginBackoff's.
  StallWatch(Options options, OriginBackoff* backoff, OriginBackoff::Clock clock = MonotonicNs);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  struct Entry {
    const char* op;
    const std::string* path;  // the caller's, valid while the call is in flight
    int64_t start_ns;
    bool stalled = false;
    bool probe = false;
  };
  using Token = std::list<Entry>::iterator;

  // A call of op on path begins: true and *token set if it may go to the
  // origin, false if it must fail at once (RefusedStatus). path must stay
  // valid until End. REQUIRES: End(*token, ...) after a true return.
  bool Begin(const char* op, const std::string& path, Token* token);
  // Whether the owner should start a probe now (then it must: BeginProbe
  // and End, or CancelProbe if it cannot).
  bool ProbeDue();
  void BeginProbe(const char* op, const std::string& path, Token* token);
  void CancelProbe();
  // The call returned with code (0 or an errno).
  void End(Token token, int code);
  // What a refused call fails with: ETIMEDOUT naming the stalled call.
  Status RefusedStatus(const char* op, const std::string& path);

  // Checks the calls in flight now (the watchdog's work; tests call it
  // with their own clock).
  void Check();

  // Calls in flight that were found stalled; calls refused so far.
  uint64_t stalled_now() const;
  uint64_t refused() const;

 private:
  void Run();

  const Options options_;
  OriginBackoff* const backoff_;
  const OriginBackoff::Clock clock_;
  mutable Mutex mu_;
  CondVar cv_;
  std::list<Entry> calls_ GUARDED_BY(mu_);
  uint64_t stalled_now_ GUARDED_BY(mu_) = 0;
  uint64_t refused_ GUARDED_BY(mu_) = 0;
  int64_t next_probe_ns_ GUARDED_BY(mu_) = 0;
  bool probing_ GUARDED_BY(mu_) = false;      // a probe is in flight
  std::string last_stalled_ GUARDED_BY(mu_);  // "stat of 'a/b'", for messages
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace stoker
