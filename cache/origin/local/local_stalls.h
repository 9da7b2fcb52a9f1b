// What the local origin and its open files share (private to
// cache/origin/local/): the watch over calls into a filesystem that may
// stall (a dead NFS server), and making an open file.
#pragma once

#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

#include "cache/io/io_backend.h"
#include "cache/origin/local/local_origin.h"
#include "cache/origin/origin_backoff.h"
#include "cache/origin/stall_watch.h"

namespace stoker {

struct LocalOrigin::Stalls : std::enable_shared_from_this<LocalOrigin::Stalls> {
  Stalls(int64_t stall_ms, int64_t backoff_ms)
      : backoff(backoff_ms * 1000000),
        watch(StallWatch::Options{stall_ms * 1000000, backoff_ms * 1000000}, &backoff) {}

  // After a refused call, when the watch says a probe is due: asks the
  // filesystem behind probe_fd (a descriptor of its own, or -1) for its
  // statfs in a thread of its own (an NFS client asks the server for every
  // statfs, a FUSE filesystem its daemon), which reports to the watch: an
  // answer ends the episode. The thread owns what it uses, so a probe that
  // hangs outlives the origin harmlessly.
  void StartProbe(int probe_fd) {
    if (probe_fd < 0) {
      watch.CancelProbe();
      return;
    }
    std::thread([self = shared_from_this(), probe_fd] {
      static const std::string kWhat = ".";
      StallWatch::Token token;
      self->watch.BeginProbe("statfs", kWhat, &token);
      struct statfs sf;
      int code = ::fstatfs(probe_fd, &sf) == 0 ? 0 : errno;
      ::close(probe_fd);
      self->watch.End(token, code);
    }).detach();
  }

  OriginBackoff backoff;
  StallWatch watch;
};

inline int CodeOf(int rc) { return rc < 0 ? -rc : 0; }
inline int CodeOf(const Status& s) { return s.ok() ? 0 : s.code(); }
template <typename T>
int CodeOf(const Result<T>& r) {
  return r.ok() ? 0 : r.status().code();
}

// Runs fn (which gives a Status, a Result or an int that is >= 0 or
// -errno) as a watched call of op on path (relative to the origin). A call
// the watch refuses fails at once with ETIMEDOUT, and may start a probe of
// the filesystem behind dup_fd() (a new descriptor into the origin, or -1).
template <typename G, typename F>
auto Watched(LocalOrigin::Stalls* stalls, const char* op, const std::string& path, G&& dup_fd,
             F&& fn) -> decltype(fn()) {
  if (stalls == nullptr) return fn();
  StallWatch::Token token;
  if (!stalls->watch.Begin(op, path, &token)) {
    if (stalls->watch.ProbeDue()) stalls->StartProbe(dup_fd());
    if constexpr (std::is_same_v<decltype(fn()), int>) {
      return -ETIMEDOUT;
    } else {
      return stalls->watch.RefusedStatus(op, path);
    }
  }
  auto r = fn();
  stalls->watch.End(token, CodeOf(r));
  return r;
}

// The open file fd (a regular file of size bytes at open; owned from now
// on) read through io, its calls watched by stalls (null: not watched) and
// named path in the watch's messages. noatime: fd was opened O_NOATIME.
std::unique_ptr<OriginFile> NewLocalOriginFile(int fd, uint64_t size, std::shared_ptr<IoBackend> io,
                                               std::shared_ptr<LocalOrigin::Stalls> stalls,
                                               std::string path, bool noatime);

}  // namespace stoker
