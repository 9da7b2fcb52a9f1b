// Serve: a mount's FUSE session served, from the moment fuse_session_new has
// succeeded until the loop ends (fusermount3 -u, `stoker unmount`, a
// signal). It starts the session (or takes over a crashed daemon's), the
// control socket and the readiness check that tells the CLI, runs the loop,
// and stops what can send to the session before it ends. RunMount
// (fs/mount.cc) owns everything Serve is handed and takes it down after.
//
// Thread-safety: Serve is called once, from the daemon's main thread;
// ReadyLine is thread-safe.
#pragma once

#include <unistd.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "cache/object_cache.h"
#include "fs/fuse_ops.h"
#include "fs/fuse_session.h"
#include "fs/mount.h"
#include "fs/supervisor.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

// The one line RunMount owes the CLI on ready_fd: "ok", "error: why", or
// "usage: why" for a refusal of what the user asked (the CLI exits 2). Any
// number of "warning: what" lines may come before it.
class ReadyLine {
 public:
  explicit ReadyLine(int fd) : fd_(fd) {}
  ~ReadyLine() { Send("error: stoker exited before the mount was ready"); }
  void Warn(const std::string& what) {
    MutexLock lock(mu_);
    if (fd_ < 0) return;
    const std::string text = "warning: " + what + "\n";
    (void)!write(fd_, text.data(), text.size());
  }
  void Send(const std::string& line) {
    MutexLock lock(mu_);
    if (fd_ < 0) return;
    const std::string text = line + "\n";
    (void)!write(fd_, text.data(), text.size());
    close(fd_);
    fd_ = -1;
  }

 private:
  Mutex mu_;
  int fd_ GUARDED_BY(mu_);
};

// Everything after fuse_session_new succeeded: start the session, the
// control socket and the readiness check, run the loop, then stop what can
// send to the session before it ends. early: the early mount, null for a
// restarted daemon. Returns the loop's status.
Status Serve(const MountOptions& options, const std::string& mountpoint, fuse_session* se,
             EarlyMount* early, FsContext& fs, ObjectCache& cache, ReadyLine& ready,
             const std::function<nlohmann::json()>& stats, SupervisorLink* link);

}  // namespace stoker
